/* --worker-cpus auto, as nginx's worker_cpu_affinity auto: worker i runs
 * on the i-th CPU the master may use (round robin over its affinity mask),
 * so a worker's caches and its connections' kernel work stay on one CPU.
 * With a socket per worker (reuseport, uring) each socket also gets
 * SO_INCOMING_CPU: since Linux 6.1 a reuseport group then gives a new
 * connection to the socket whose CPU took its SYN (Fastsocket's
 * receive-flow idea, without a BPF program), and hashes as before when no
 * socket names that CPU. */
#ifndef HERD_PROC_WORKER_CPU_H
#define HERD_PROC_WORKER_CPU_H

#include <stddef.h>

/* The CPU for worker index (from this process's affinity), or -1. */
int worker_cpu_of(int index);

/* Pins the calling process to cpu and, for each of the nsteer sockets in
 * steer, sets SO_INCOMING_CPU to it. 0, or -1 with err filled. */
int worker_cpu_pin(int cpu, const int *steer, int nsteer, char *err, size_t errlen);

/* Clears SO_INCOMING_CPU on the sockets (errors ignored: a kernel
 * without it never steered them). */
void worker_cpu_unsteer(const int *socks, int n);

#endif
