/* CPU lists ("0,2", "0-3", "1,4-5") and pinning the calling thread. */
#ifndef HERD_BENCH_CPUS_H
#define HERD_BENCH_CPUS_H

#define CPUS_MAX 256

/* Fills list with the CPUs of s in the order written. Returns how many,
 * or -1 for a malformed list or a CPU number >= CPUS_MAX. */
int cpus_parse(const char *s, int *list, int max);

/* Pins the calling thread to one CPU. Returns 0 or -errno (EINVAL for a
 * CPU this machine does not have). */
int cpus_pin(int cpu);

#endif
