/* TLS server contexts (OpenSSL 3): the default certificate, one context
 * per SNI name, protocols, ciphers, ALPN http/1.1. Loaded by the master
 * (or the single process) before workers fork and drop privileges, so the
 * private keys are read as the user who started the server; a HUP loads a
 * new set and keeps the old one when any file is bad. Key material never
 * reaches a log line: errors name the file and OpenSSL's reason only. */
#ifndef HERD_NET_TLS_CTX_H
#define HERD_NET_TLS_CTX_H

#include <stddef.h>
#include <stdint.h>

#define TLS_MAX_SNI 16
#define TLS_PATH_MAX 1024

struct tls_sni_entry {
    char name[256];             /* host name, or *.domain */
    char cert[TLS_PATH_MAX], key[TLS_PATH_MAX];
};

/* The settings, as the config holds them. */
struct tls_conf {
    char cert[TLS_PATH_MAX], key[TLS_PATH_MAX]; /* the default certificate */
    struct tls_sni_entry sni[TLS_MAX_SNI];
    int nsni;
    uint8_t proto_min, proto_max; /* 2: TLS 1.2, 3: TLS 1.3; 0: defaults (1.2..1.3) */
    char ciphers[512];          /* TLS 1.2 cipher list; "" for the default */
    int64_t session_timeout_ms; /* ticket lifetime and key rotation period */
};

struct tls_server;
struct tls_tickets;

/* Parses "TLSv1.2 TLSv1.3" (spaces or commas) into c->proto_min/max.
 * Returns 0 or -1 with a reason. */
int tls_conf_protocols(struct tls_conf *c, const char *v, char *err, size_t errlen);
/* Parses NAME=CERT,KEY into one more SNI entry. Returns 0 or -1. */
int tls_conf_add_sni(struct tls_conf *c, const char *v, char *err, size_t errlen);

/* Builds the contexts: reads every certificate and key and checks that
 * they match. tickets (may be NULL) supplies the shared ticket keys.
 * Returns NULL with "FILE: reason" in err. */
struct tls_server *tls_server_load(const struct tls_conf *c, struct tls_tickets *tickets,
                                   char *err, size_t errlen);
void tls_server_free(struct tls_server *s);

/* The default context (an SSL_CTX *), for SSL_new. */
void *tls_server_ctx(const struct tls_server *s);

/* Logs once which path files take over TLS (kernel TLS or read + SSL_write). */
void tls_log_file_path(void);

#endif
