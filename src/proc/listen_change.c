#include "proc/listen_change.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "net/listen.h"

static int find(const struct serve_config *cfg, int n, const char *text)
{
    for (int j = 0; j < n; j++)
        if (!strcmp(cfg->listen[j].text, text))
            return j;
    return -1;
}

static void close_sockets(struct listeners *ls, int l)
{
    int count = listeners_count(ls, l);
    for (int i = 0; i < count; i++)
        if (ls->fds[l][i] >= 0)
            close(ls->fds[l][i]);
}

/* A kept address: its sockets move over; a reuseport group grows by
 * sockets bound now (the same port) or shrinks (commit closes the rest).
 * Returns 0 or -errno. */
static int keep_address(struct listen_change *ch, const struct listeners *cur, int j,
                        struct serve_config *next, int l)
{
    struct listeners *nx = &ch->next;
    nx->shared[l] = cur->shared[j];
    nx->path_ours[l] = cur->path_ours[j];
    nx->inherited[l] = cur->inherited[j];
    int have = listeners_count(cur, j), want = listeners_count(nx, l);
    for (int i = 0; i < nx->nsockets; i++)
        nx->fds[l][i] = i < have ? cur->fds[j][i] : -1;
    ch->first_new[l] = have;
    for (int i = have; i < want; i++) {
        int fd = listen_open(&next->listen[l], next->backlog, 1);
        if (fd < 0)
            return fd;
        nx->fds[l][i] = fd;
    }
    /* a shared socket: every worker gets fds[l][0] */
    for (int i = want; i < nx->nsockets; i++)
        nx->fds[l][i] = nx->fds[l][0];
    return 0;
}

int listen_change_prepare(struct listen_change *ch, const struct listeners *cur,
                          const struct serve_config *cur_cfg, struct serve_config *next,
                          int nsockets, char *err, size_t errlen)
{
    memset(ch, 0, sizeof *ch);
    /* a slot never filled must not read as fd 0: abort closes them all */
    for (int l = 0; l < CONFIG_MAX_LISTEN; l++)
        for (int i = 0; i < CONFIG_MAX_WORKERS; i++)
            ch->next.fds[l][i] = -1;
    ch->next.nsockets = nsockets;
    ch->next.passed = cur->passed;
    struct inherited none = {0};
    for (int l = 0; l < next->nlisten; l++) {
        int j = find(cur_cfg, cur->nlisten, next->listen[l].text), rc;
        ch->from[l] = j;
        ch->next.nlisten = l + 1;
        if (j >= 0) {
            ch->kept[j] = 1;
            next->listen[l] = cur_cfg->listen[j]; /* the bound address (port 0) */
            rc = keep_address(ch, cur, j, next, l);
        } else {
            rc = listeners_open_one(&ch->next, next, &none, l, 0);
            ch->made[l] = rc == 0;
        }
        if (rc < 0) {
            snprintf(err, errlen, "cannot listen on %s: %s", next->listen[l].text,
                     strerror(-rc));
            listen_change_abort(ch, next);
            return -1;
        }
    }
    return 0;
}

void listen_change_abort(struct listen_change *ch, const struct serve_config *next)
{
    for (int l = 0; l < ch->next.nlisten; l++) {
        int count = listeners_count(&ch->next, l);
        for (int i = ch->from[l] < 0 ? 0 : ch->first_new[l]; i < count; i++)
            if (ch->next.fds[l][i] >= 0)
                close(ch->next.fds[l][i]);
        if (ch->made[l])
            listen_cleanup(&next->listen[l]);
    }
    ch->next.nlisten = 0;
}

int listen_change_any(const struct listen_change *ch, const struct listeners *cur)
{
    if (ch->next.nlisten != cur->nlisten)
        return 1;
    for (int l = 0; l < ch->next.nlisten; l++)
        if (ch->from[l] < 0 || !ch->kept[l])
            return 1;
    return 0;
}

void listen_change_commit(struct listen_change *ch, struct listeners *cur,
                          const struct serve_config *cur_cfg, const struct serve_config *next)
{
    /* said here, not when bound: a reload refused later never listened */
    for (int l = 0; l < ch->next.nlisten; l++)
        if (ch->made[l])
            listeners_announce(&ch->next, next, l);
    for (int l = 0; l < ch->next.nlisten; l++) {
        int j = ch->from[l];
        /* a reuseport group that shrank: the old workers drain the rest */
        for (int i = listeners_count(&ch->next, l); j >= 0 && i < listeners_count(cur, j); i++)
            close(cur->fds[j][i]);
    }
    for (int j = 0; j < cur->nlisten; j++) {
        if (ch->kept[j])
            continue;
        char desc[160];
        listen_describe(&cur_cfg->listen[j], desc, sizeof desc);
        log_msg(LOG_NOTICE, "no longer listening on %s (the old workers serve what is "
                "queued there)", desc);
        close_sockets(cur, j);
        if (cur->path_ours[j])
            listen_cleanup(&cur_cfg->listen[j]);
    }
    *cur = ch->next;
}
