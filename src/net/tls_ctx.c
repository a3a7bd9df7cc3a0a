#include "net/tls_ctx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "core/log.h"
#include "net/tls_sni.h"
#include "net/tls_tickets.h"

/* Mozilla's "intermediate" list for TLS 1.2: forward secrecy and AEAD
 * only. TLS 1.3 suites stay OpenSSL's (all three are modern). */
#define DEFAULT_CIPHERS                                                          \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"                 \
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"                 \
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

struct tls_server {
    SSL_CTX *dflt;
    SSL_CTX *sni[TLS_MAX_SNI];
    char names[TLS_MAX_SNI][256];
    int nsni;
};

int tls_conf_protocols(struct tls_conf *c, const char *v, char *err, size_t errlen)
{
    uint8_t lo = 0, hi = 0;
    for (const char *p = v; *p;) {
        size_t l = strcspn(p, " ,");
        int ver = l == 7 && !strncmp(p, "TLSv1.2", 7) ? 2
                  : l == 7 && !strncmp(p, "TLSv1.3", 7) ? 3 : 0;
        if (l && !ver) {
            snprintf(err, errlen, "tls-protocols: unknown protocol '%.*s' (TLSv1.2, TLSv1.3)",
                     (int)l, p);
            return -1;
        }
        if (ver && (!lo || ver < lo))
            lo = (uint8_t)ver;
        if (ver > hi)
            hi = (uint8_t)ver;
        p += l;
        p += strspn(p, " ,");
    }
    if (!lo) {
        snprintf(err, errlen, "tls-protocols: empty (TLSv1.2, TLSv1.3)");
        return -1;
    }
    c->proto_min = lo;
    c->proto_max = hi;
    return 0;
}

int tls_conf_add_sni(struct tls_conf *c, const char *v, char *err, size_t errlen)
{
    const char *eq = strchr(v, '=');
    const char *comma = eq ? strchr(eq + 1, ',') : NULL;
    if (!eq || eq == v || !comma || comma == eq + 1 || !comma[1]) {
        snprintf(err, errlen, "tls-sni '%s': expected NAME=CERT,KEY", v);
        return -1;
    }
    if (c->nsni == TLS_MAX_SNI) {
        snprintf(err, errlen, "too many tls-sni names (at most %d)", TLS_MAX_SNI);
        return -1;
    }
    struct tls_sni_entry *e = &c->sni[c->nsni];
    size_t nl = (size_t)(eq - v), cl = (size_t)(comma - eq - 1);
    if (nl >= sizeof e->name || cl >= sizeof e->cert || strlen(comma + 1) >= sizeof e->key) {
        snprintf(err, errlen, "tls-sni '%s': too long", v);
        return -1;
    }
    if (!tls_sni_name_valid(v, nl)) {
        snprintf(err, errlen, "tls-sni '%.*s': NAME must be a host name (letters, digits, '-', "
                 "dot-separated labels, no trailing dot) or *.domain", (int)nl, v);
        return -1;
    }
    for (int i = 0; i < c->nsni; i++)
        if (strlen(c->sni[i].name) == nl && !strncasecmp(c->sni[i].name, v, nl)) {
            snprintf(err, errlen, "tls-sni '%.*s' is given twice", (int)nl, v);
            return -1;
        }
    memset(e, 0, sizeof *e);
    memcpy(e->name, v, nl);
    memcpy(e->cert, eq + 1, cl);
    strcpy(e->key, comma + 1);
    c->nsni++;
    return 0;
}

/* Why a file OpenSSL could not load cannot be read, as nginx says it:
 * OpenSSL's own reason for that is "system lib" or "PEM lib". NULL when
 * the file is a readable, non-empty regular file. */
static const char *file_problem(const char *file)
{
    struct stat st;
    if (stat(file, &st) < 0)
        return strerror(errno);
    if (S_ISDIR(st.st_mode))
        return "is a directory";
    if (!S_ISREG(st.st_mode))
        return "not a regular file";
    if (access(file, R_OK) < 0)
        return strerror(errno);
    if (st.st_size == 0)
        return "empty file";
    return NULL;
}

/* The reason for the last failure: the file's own problem, else OpenSSL's
 * (never any key material). */
static void ssl_reason(const char *what, const char *file, char *err, size_t errlen)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = file_problem(file);
    if (!r)
        r = e ? ERR_reason_error_string(e) : NULL;
    snprintf(err, errlen, "%s %s: %s", what, file, r ? r : "cannot load");
    ERR_clear_error();
}

/* Picks http/1.1 when the client offers it; other offers get no ALPN
 * answer (a client that insists on h2 then gives up with a clear error). */
static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
    (void)ssl;
    (void)arg;
    static const unsigned char ours[] = "\x08http/1.1";
    unsigned char *sel;
    if (SSL_select_next_proto(&sel, outlen, ours, sizeof ours - 1, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

/* The context for a server name: exact names first, then wildcards;
 * NULL for the default certificate. */
static SSL_CTX *ctx_for(const struct tls_server *s, const char *host)
{
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < s->nsni; i++)
            if ((s->names[i][0] == '*') == pass && tls_sni_name_matches(s->names[i], host))
                return s->sni[i];
    return NULL;
}

/* A session belongs to the name it was made under: its session ID
 * context is a digest of that name (lower case, no trailing dot; empty
 * without SNI), which OpenSSL compares before it resumes a ticket. So a
 * ticket of a.test never resumes under b.test, whose certificate it was
 * not made with (RFC 6066 3): that client gets a full handshake. */
static void bind_sessions_to(SSL *ssl, const char *host, size_t len)
{
    char low[TLS_SNI_MAX + 1];
    for (size_t i = 0; i < len; i++)
        low[i] = (char)((host[i] >= 'A' && host[i] <= 'Z') ? host[i] + 32 : host[i]);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (EVP_Digest(low, len, md, &mdlen, EVP_sha256(), NULL) != 1)
        return;
    SSL_set_session_id_context(ssl, md, mdlen < SSL_MAX_SID_CTX_LENGTH ? mdlen
                                                                     : SSL_MAX_SID_CTX_LENGTH);
}

/* SNI, read in the ClientHello callback, which runs before OpenSSL looks
 * for a session to resume (the servername callback runs after): the
 * context whose name matches, or the default one for unknown names and
 * clients that send none. */
static int client_hello_cb(SSL *ssl, int *alert, void *arg)
{
    (void)alert;
    const struct tls_server *s = arg;
    const unsigned char *ext;
    size_t extlen;
    char host[TLS_SNI_MAX + 1];
    int n = -1;
    if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &ext, &extlen) == 1)
        n = tls_sni_from_ext(ext, extlen, host);
    if (n < 0)
        n = 0;
    host[n] = 0;
    SSL_CTX *ctx = n ? ctx_for(s, host) : NULL;
    if (ctx)
        SSL_set_SSL_CTX(ssl, ctx);
    bind_sessions_to(ssl, host, (size_t)n);
    return SSL_CLIENT_HELLO_SUCCESS;
}

/* The name was handled in client_hello_cb: accept it, so that OpenSSL
 * acknowledges it and keeps it with the session. */
static int servername_ack(SSL *ssl, int *alert, void *arg)
{
    (void)ssl;
    (void)alert;
    (void)arg;
    return SSL_TLSEXT_ERR_OK;
}

static SSL_CTX *ctx_new(const struct tls_conf *c, const char *cert, const char *key,
                        char *err, size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        snprintf(err, errlen, "TLS: cannot create a context");
        return NULL;
    }
    int lo = c->proto_min == 3 ? TLS1_3_VERSION : TLS1_2_VERSION;
    int hi = c->proto_max == 2 ? TLS1_2_VERSION : TLS1_3_VERSION;
    SSL_CTX_set_min_proto_version(ctx, lo);
    SSL_CTX_set_max_proto_version(ctx, hi);
    /* No renegotiation (a client-driven CPU sink), no compression (CRIME);
     * our cipher order, not the client's (testssl rates that HIGH). */
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                                 SSL_OP_CIPHER_SERVER_PREFERENCE);
    /* A FIN without close_notify is an EOF, as nginx takes it: OpenSSL 3
     * otherwise calls it fatal and sends a decode_error alert after the
     * answers (a request has its own framing; truncation is no threat). */
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
    /* Partial writes and a moving buffer: a blocked SSL_write is retried
     * with the same bytes from wherever the caller keeps them; idle
     * connections give their record buffers back. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                              SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
    /* Stateless tickets only: a session cache per worker would resume
     * nothing on the others. */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_num_tickets(ctx, 1);
    SSL_CTX_set_timeout(ctx, (long)(c->session_timeout_ms / 1000));
    if (!SSL_CTX_set_cipher_list(ctx, c->ciphers[0] ? c->ciphers : DEFAULT_CIPHERS)) {
        snprintf(err, errlen, "tls-ciphers '%s': no cipher OpenSSL knows", c->ciphers);
        goto fail;
    }
    /* Looked at before OpenSSL opens them: a FIFO would keep its open
     * waiting for a writer, and a master stuck there answers no signal. */
    const char *bad;
    if ((bad = file_problem(cert)) != NULL) {
        snprintf(err, errlen, "certificate %s: %s", cert, bad);
        goto fail;
    }
    if ((bad = file_problem(key)) != NULL) {
        snprintf(err, errlen, "private key %s: %s", key, bad);
        goto fail;
    }
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        ssl_reason("certificate", cert, err, errlen);
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
            snprintf(err, errlen, "private key %s does not match certificate %s", key, cert);
            ERR_clear_error();
        } else {
            ssl_reason("private key", key, err, errlen);
        }
        goto fail;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(err, errlen, "private key %s does not match certificate %s", key, cert);
        ERR_clear_error();
        goto fail;
    }
    return ctx;
fail:
    SSL_CTX_free(ctx);
    return NULL;
}

struct tls_server *tls_server_load(const struct tls_conf *c, struct tls_tickets *tickets,
                                   char *err, size_t errlen)
{
    if (!c->cert[0] || !c->key[0]) {
        snprintf(err, errlen, "a TLS listener needs --tls-cert and --tls-key");
        return NULL;
    }
    struct tls_server *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->dflt = ctx_new(c, c->cert, c->key, err, errlen);
    for (int i = 0; s->dflt && i < c->nsni; i++) {
        s->sni[i] = ctx_new(c, c->sni[i].cert, c->sni[i].key, err, errlen);
        if (!s->sni[i])
            break;
        snprintf(s->names[i], sizeof s->names[i], "%s", c->sni[i].name);
        s->nsni++;
    }
    if (!s->dflt || s->nsni < c->nsni) {
        tls_server_free(s);
        return NULL;
    }
    SSL_CTX_set_client_hello_cb(s->dflt, client_hello_cb, s);
    SSL_CTX_set_tlsext_servername_callback(s->dflt, servername_ack);
    if (tickets)
        tls_tickets_attach(tickets, s->dflt);
    return s;
}

void tls_server_free(struct tls_server *s)
{
    if (!s)
        return;
    SSL_CTX_free(s->dflt);
    for (int i = 0; i < s->nsni; i++)
        SSL_CTX_free(s->sni[i]);
    free(s);
}

void *tls_server_ctx(const struct tls_server *s)
{
    return s->dflt;
}

void tls_log_file_path(void)
{
    char ulp[256] = "";
    FILE *f = fopen("/proc/sys/net/ipv4/tcp_available_ulp", "re");
    if (f) {
        if (!fgets(ulp, sizeof ulp, f))
            ulp[0] = '\0';
        fclose(f);
    }
    int ktls = strstr(ulp, "tls") != NULL;
    log_msg(LOG_NOTICE, "TLS: files are sent with read + SSL_write through a reused buffer "
                        "(kernel TLS %s)",
            ktls ? "is offered by this kernel but not used yet"
                 : "is not offered: no 'tls' in tcp_available_ulp");
}
