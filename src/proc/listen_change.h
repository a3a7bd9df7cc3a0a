/* A reload's new listen set (issue 13). Addresses the old and new settings
 * share keep their sockets, so nothing queued on them is lost and port 0
 * keeps its port; new addresses are bound before anything changes, so a
 * port that cannot be bound refuses the reload while the old workers
 * serve on. A removed address's sockets close in the master at commit;
 * the old workers hold their own copies, and each, when it stops, accepts
 * what is queued before closing (models/evloop.c): the last close of a
 * listen socket resets what is still in its queue. */
#ifndef HERD_PROC_LISTEN_CHANGE_H
#define HERD_PROC_LISTEN_CHANGE_H

#include "proc/listeners.h"

struct listen_change {
    struct listeners next;
    int from[CONFIG_MAX_LISTEN];   /* per new address: its old index, or -1 (bound now) */
    int kept[CONFIG_MAX_LISTEN];   /* per old address: 1 when the new set has it */
    int first_new[CONFIG_MAX_LISTEN]; /* kept address: its sockets from here were bound now */
    uint8_t made[CONFIG_MAX_LISTEN]; /* new address: bound now, its unix path (if any) ours */
};

/* Fills ch for next's addresses with nsockets sockets each (a reuseport
 * group per address grows or shrinks with the worker count; a shared
 * socket stays one); next->listen[l] of a kept address takes the bound
 * address of the old one. Returns 0, or -1 with "cannot listen on ADDR:
 * reason" in err (nothing opened stays open). */
int listen_change_prepare(struct listen_change *ch, const struct listeners *cur,
                          const struct serve_config *cur_cfg, struct serve_config *next,
                          int nsockets, char *err, size_t errlen);

/* The reload was refused after prepare: closes what prepare bound, and
 * removes the unix socket files it made (next: the addresses it bound). */
void listen_change_abort(struct listen_change *ch, const struct serve_config *next);

/* The reload goes ahead: logs "listening on" for next's new addresses,
 * closes the master's copies of the removed addresses (unlinking a unix
 * path we made) and of the sockets a smaller reuseport group lost, and
 * makes ch->next current. */
void listen_change_commit(struct listen_change *ch, struct listeners *cur,
                          const struct serve_config *cur_cfg, const struct serve_config *next);

/* 1 when the address set differs (an address added or removed). */
int listen_change_any(const struct listen_change *ch, const struct listeners *cur);

#endif
