#include "proc/tls_setup.h"

#include <stdio.h>

#include "core/clock.h"
#include "core/log.h"

int tls_setup_load(struct tls_setup *t, const struct serve_config *cfg, char *err,
                   size_t errlen)
{
    if (!config_has_tls(cfg))
        return 0;
    if (!t->tickets && !(t->tickets = tls_tickets_create())) {
        snprintf(err, errlen, "TLS: cannot map the ticket keys");
        return -1;
    }
    struct tls_server *s = tls_server_load(&cfg->tls, t->tickets, err, errlen);
    if (!s)
        return -1;
    if (!t->server)
        tls_log_file_path();
    tls_server_free(t->server);
    t->server = s;
    t->period_ms = cfg->tls.session_timeout_ms;
    /* A reload keeps the schedule (a shorter period counts from now):
     * restarting it on each HUP never rotated the keys under reloads more
     * frequent than the period. */
    int64_t due = clock_now_ms() + t->period_ms;
    if (!t->rotate_at_ms || due < t->rotate_at_ms)
        t->rotate_at_ms = due;
    return 0;
}

void tls_setup_free(struct tls_setup *t)
{
    tls_server_free(t->server);
    t->server = NULL;
}

int64_t tls_setup_tick(struct tls_setup *t, int64_t now_ms)
{
    if (!t->rotate_at_ms)
        return -1;
    if (now_ms >= t->rotate_at_ms) {
        tls_tickets_rotate(t->tickets);
        t->rotate_at_ms = now_ms + t->period_ms;
        log_debug("TLS: session ticket keys rotated");
    }
    return t->rotate_at_ms - now_ms;
}
