/* The TLS state of a master (or the single process): the contexts its
 * workers inherit and the shared ticket keys it rotates. Everything is
 * read here, before any fork or privilege drop. */
#ifndef HERD_PROC_TLS_SETUP_H
#define HERD_PROC_TLS_SETUP_H

#include <stddef.h>
#include <stdint.h>

#include "net/tls_ctx.h"
#include "net/tls_tickets.h"
#include "proc/config.h"

struct tls_setup {
    struct tls_server *server;   /* NULL: no TLS listener */
    struct tls_tickets *tickets; /* made with the first server, kept across reloads */
    int64_t rotate_at_ms;        /* next ticket-key rotation, 0: none */
    int64_t period_ms;
};

/* Loads cfg's contexts when a listener speaks TLS, replacing t->server
 * only on success (a reload with a bad file keeps the old set). Returns 0,
 * or -1 with "FILE: reason" in err. */
int tls_setup_load(struct tls_setup *t, const struct serve_config *cfg, char *err,
                   size_t errlen);

/* Frees the contexts (the ticket keys' mapping goes with the process). */
void tls_setup_free(struct tls_setup *t);

/* Binary upgrade: a file (a close-on-exec memfd: the upgrade's child
 * places it for the exec, proc/upgrade.c) holding the ticket
 * keys and their rotation schedule for the new master, or -1 (no TLS,
 * or it could not be made: the new master makes fresh keys). */
int tls_setup_export(struct tls_setup *t);

/* New master: takes the ticket keys and their schedule from fd (from
 * tls_setup_export), then closes it. 0, or -1 when it holds none (the
 * fresh keys stay). Call after tls_setup_load. */
int tls_setup_import(struct tls_setup *t, int fd);

/* Rotates the ticket keys when due; returns ms until the next rotation, or -1. */
int64_t tls_setup_tick(struct tls_setup *t, int64_t now_ms);

#endif
