/* Turns (evloop_internal.h, TURN_BYTES): a connection whose turn ended
 * with output or requests left waits for the next round of events, which is
 * fetched without sleeping, and then goes on where it stopped (evloop.c
 * runs the list). An edge-triggered socket raises no new event while it
 * has room, so the loop keeps the list itself, as nginx keeps a 1 ms
 * timer for it. */
#include <stdlib.h>
#include <string.h>

#include "models/evloop_internal.h"

int conn_yield(struct evloop *ev, struct conn *c)
{
    if (ev->nyields == ev->cap_yields) {
        int cap = ev->cap_yields ? ev->cap_yields * 2 : 64;
        struct ev_resume *r = realloc(ev->yields, (size_t)cap * sizeof *r);
        if (!r)
            return -1;
        ev->yields = r;
        ev->cap_yields = cap;
    }
    ev->yields[ev->nyields++] = (struct ev_resume){conn_fd(ev, c), c->gen};
    c->yielding = 1;
    return 0;
}

struct conn *conn_yield_take(struct evloop *ev, int i)
{
    struct ev_resume r = ev->yields[i];
    struct conn *c = &ev->conns[r.fd];
    if (!c->open || c->gen != r.gen || !c->yielding)
        return NULL; /* closed meanwhile (a timeout, a reset) */
    c->yielding = 0;
    conn_turn_start(ev);
    return c;
}

void conn_yields_drop(struct evloop *ev, int n)
{
    ev->nyields -= n;
    memmove(ev->yields, ev->yields + n, (size_t)ev->nyields * sizeof *ev->yields);
}

void conn_yields_free(struct evloop *ev)
{
    free(ev->yields);
    ev->yields = NULL;
    ev->nyields = ev->cap_yields = 0;
}
