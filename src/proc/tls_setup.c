#include "proc/tls_setup.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

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

/* What a binary upgrade passes: the keys, and when they rotate next (on
 * CLOCK_MONOTONIC, which both masters share). */
struct tickets_file {
    char magic[8];
    int64_t rotate_at_ms;
    unsigned char keys[TLS_TICKETS_WIRE];
};

static const char TICKETS_MAGIC[8] = "herdtk01";

int tls_setup_export(struct tls_setup *t)
{
    if (!t->tickets || !t->server)
        return -1;
    struct tickets_file f;
    memcpy(f.magic, TICKETS_MAGIC, sizeof f.magic);
    f.rotate_at_ms = t->rotate_at_ms;
    int fd = -1;
    if (tls_tickets_save(t->tickets, f.keys) == 0 &&
        (fd = memfd_create("herd-ticket-keys", MFD_CLOEXEC)) >= 0 &&
        pwrite(fd, &f, sizeof f, 0) != (ssize_t)sizeof f) {
        close(fd);
        fd = -1;
    }
    OPENSSL_cleanse(&f, sizeof f);
    return fd;
}

int tls_setup_import(struct tls_setup *t, int fd)
{
    struct tickets_file f;
    struct stat st;
    int ok = t->tickets && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
             st.st_size == (off_t)sizeof f && pread(fd, &f, sizeof f, 0) == (ssize_t)sizeof f &&
             !memcmp(f.magic, TICKETS_MAGIC, sizeof f.magic);
    close(fd);
    if (ok) {
        tls_tickets_restore(t->tickets, f.keys);
        /* the old master's schedule, within this config's period */
        int64_t now = clock_now_ms();
        if (f.rotate_at_ms > now && f.rotate_at_ms < now + t->period_ms)
            t->rotate_at_ms = f.rotate_at_ms;
        log_debug("TLS: session ticket keys taken from the old master");
    }
    OPENSSL_cleanse(&f, sizeof f);
    return ok ? 0 : -1;
}
