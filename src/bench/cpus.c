#include "bench/cpus.h"

#include <errno.h>
#include <sched.h>

static int number(const char **p)
{
    int v = 0, digits = 0;
    while (**p >= '0' && **p <= '9') {
        v = v * 10 + (**p - '0');
        if (v >= CPUS_MAX)
            return -1;
        (*p)++;
        digits++;
    }
    return digits ? v : -1;
}

int cpus_parse(const char *s, int *list, int max)
{
    int n = 0;
    const char *p = s;
    for (;;) {
        int a = number(&p), b = a;
        if (a < 0)
            return -1;
        if (*p == '-') {
            p++;
            b = number(&p);
            if (b < a)
                return -1;
        }
        for (int c = a; c <= b; c++) {
            if (n == max)
                return -1;
            list[n++] = c;
        }
        if (!*p)
            return n;
        if (*p++ != ',')
            return -1;
    }
}

int cpus_pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    /* pid 0 is the calling thread, not the whole process. */
    return sched_setaffinity(0, sizeof set, &set) < 0 ? -errno : 0;
}
