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

int listen_change_prepare(struct listen_change *ch, const struct listeners *cur,
                          const struct serve_config *cur_cfg, struct serve_config *next,
                          char *err, size_t errlen)
{
    memset(ch, 0, sizeof *ch);
    ch->next.nsockets = cur->nsockets;
    ch->next.passed = cur->passed;
    struct inherited none = {0};
    for (int l = 0; l < next->nlisten; l++) {
        int j = find(cur_cfg, cur->nlisten, next->listen[l].text);
        ch->from[l] = j;
        if (j >= 0) {
            ch->kept[j] = 1;
            next->listen[l] = cur_cfg->listen[j]; /* the bound address (port 0) */
            memcpy(ch->next.fds[l], cur->fds[j], sizeof ch->next.fds[l]);
            ch->next.shared[l] = cur->shared[j];
            ch->next.path_ours[l] = cur->path_ours[j];
        } else {
            int rc = listeners_open_one(&ch->next, next, &none, l, 0);
            if (rc < 0) {
                snprintf(err, errlen, "cannot listen on %s: %s", next->listen[l].text,
                         strerror(-rc));
                ch->next.nlisten = l;
                listen_change_abort(ch);
                return -1;
            }
        }
        ch->next.nlisten = l + 1;
    }
    return 0;
}

void listen_change_abort(struct listen_change *ch)
{
    for (int l = 0; l < ch->next.nlisten; l++)
        if (ch->from[l] < 0)
            close_sockets(&ch->next, l);
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
                          const struct serve_config *cur_cfg)
{
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
