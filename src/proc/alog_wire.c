#include "proc/alog_wire.h"

#include <string.h>
#include <sys/socket.h>

#include "proc/config.h"

long alog_decode(const char *p, size_t n, struct alog_entry *e)
{
    if (n < sizeof e->h)
        return -1;
    memcpy(&e->h, p, sizeof e->h); /* p may be unaligned */
    const struct alog_wire *h = &e->h;
    size_t want = sizeof *h;
    for (int k = 0; k < ALOG_NFIELDS; k++)
        want += h->flen[k];
    if (want != h->len || want > n)
        return -1;
    if (h->fmt > ACCESS_LOG_JSON || h->minor > 1 || (h->flags & ~7u) ||
        (h->family != 0 && h->family != AF_INET && h->family != AF_INET6))
        return -1;
    const char *f = p + sizeof *h;
    for (int k = 0; k < ALOG_NFIELDS; k++) {
        e->field[k] = f;
        f += h->flen[k];
    }
    return (long)want;
}
