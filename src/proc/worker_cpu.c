#include "proc/worker_cpu.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

int worker_cpu_of(int index)
{
    cpu_set_t set;
    if (index < 0 || sched_getaffinity(0, sizeof set, &set) < 0)
        return -1;
    int n = CPU_COUNT(&set);
    if (n <= 0)
        return -1;
    int want = index % n;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &set) && want-- == 0)
            return cpu;
    return -1;
}

/* SO_INCOMING_CPU = cpu (-1: none) on each socket, every one tried: 0,
 * or the first failing setsockopt's -errno. */
static int steer_to(const int *socks, int n, int cpu)
{
    int rc = 0;
    for (int i = 0; i < n; i++)
        if (setsockopt(socks[i], SOL_SOCKET, SO_INCOMING_CPU, &cpu, sizeof cpu) < 0 && !rc)
            rc = -errno;
    return rc;
}

int worker_cpu_pin(int cpu, const int *steer, int nsteer, char *err, size_t errlen)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof one, &one) < 0) {
        snprintf(err, errlen, "cannot run on CPU %d: %s", cpu, strerror(errno));
        return -1;
    }
    int rc = steer_to(steer, nsteer, cpu);
    if (rc < 0) {
        snprintf(err, errlen, "SO_INCOMING_CPU %d: %s", cpu, strerror(-rc));
        return -1;
    }
    return 0;
}

void worker_cpu_unsteer(const int *socks, int n)
{
    (void)steer_to(socks, n, -1);
}
