#include "bench/load_tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "bench/target.h"

SSL_CTX *load_tls_ctx_new(const char *cacert, int insecure, char *err, size_t errlen)
{
    static const unsigned char alpn[] = "\x08http/1.1";
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) {
        snprintf(err, errlen, "cannot create a TLS context");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* A server that closes without close_notify (after Connection: close)
     * ends the stream; it is no error here. */
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
    /* flush() resends from where a write stopped, so partial writes are fine. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_alpn_protos(ctx, alpn, sizeof alpn - 1);
    /* Read what the socket holds in one call, not a record header and then
     * its body: one read per response instead of two. */
    SSL_CTX_set_read_ahead(ctx, 1);
    /* No client cache: each thread keeps its own last session (with the
     * cache on, OpenSSL makes a TLS 1.3 ticket single-use, and a server
     * that sends no new ticket after a resumption gets a full handshake
     * every other time). */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    if (insecure) {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
        return ctx;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    int ok = cacert ? SSL_CTX_load_verify_locations(ctx, cacert, NULL)
                    : SSL_CTX_set_default_verify_paths(ctx);
    if (!ok) {
        char buf[160];
        ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
        snprintf(err, errlen, "cannot load CA certificates%s%s: %s", cacert ? " from " : "",
                 cacert ? cacert : "", buf);
        ERR_clear_error();
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

void load_tls_ctx_free(SSL_CTX *ctx)
{
    SSL_CTX_free(ctx);
}

/* After each read from the socket: was it short (so the socket was
 * drained then)? */
static long note_drained(BIO *b, int oper, const char *argp, size_t len, int argi, long argl,
                         int ret, size_t *processed)
{
    (void)argp, (void)argi, (void)argl;
    if (oper == (BIO_CB_READ | BIO_CB_RETURN)) {
        unsigned char *drained = (unsigned char *)BIO_get_callback_arg(b);
        *drained = ret <= 0 || !processed || *processed < len;
    }
    return ret;
}

SSL *load_tls_new(SSL_CTX *ctx, int fd, const struct target *t, SSL_SESSION *session,
                  unsigned char *drained)
{
    SSL *ssl = SSL_new(ctx);
    if (!ssl)
        return NULL;
    unsigned char ip[16];
    int is_ip = inet_pton(AF_INET, t->name, ip) == 1 || inet_pton(AF_INET6, t->name, ip) == 1;
    int ok = SSL_set_fd(ssl, fd);
    if (is_ip) /* RFC 6066: no IP addresses in SNI */
        ok = ok && X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), t->name);
    else
        ok = ok && SSL_set_tlsext_host_name(ssl, t->name) && SSL_set1_host(ssl, t->name);
    if (!ok) {
        SSL_free(ssl);
        return NULL;
    }
    *drained = 0;
    BIO *rbio = SSL_get_rbio(ssl);
    BIO_set_callback_arg(rbio, (char *)drained);
    BIO_set_callback_ex(rbio, note_drained);
    if (session)
        SSL_set_session(ssl, session);
    SSL_set_connect_state(ssl);
    return ssl;
}

/* Why the last call on ssl failed with error code e, in a line. */
static void describe(SSL *ssl, int e, char *why, size_t n)
{
    long v = SSL_get_verify_result(ssl);
    unsigned long code = ERR_peek_last_error();
    if (v != X509_V_OK) {
        snprintf(why, n, "certificate verify failed: %s", X509_verify_cert_error_string(v));
    } else if (code) {
        char buf[128];
        ERR_error_string_n(code, buf, sizeof buf);
        snprintf(why, n, "handshake: %s", buf);
    } else if (e == SSL_ERROR_SYSCALL && errno) {
        snprintf(why, n, "handshake: %s", strerror(errno));
    } else {
        snprintf(why, n, "handshake: the server closed the connection");
    }
    ERR_clear_error();
}

int load_tls_handshake(SSL *ssl, char *why, size_t n)
{
    ERR_clear_error();
    int rc = SSL_do_handshake(ssl);
    if (rc == 1)
        return 1;
    int e = SSL_get_error(ssl, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return 0;
    describe(ssl, e, why, n);
    return -1;
}

int load_tls_resumed(SSL *ssl)
{
    return SSL_session_reused(ssl);
}

int load_tls_more(SSL *ssl, unsigned char drained)
{
    return !drained || SSL_has_pending(ssl);
}

/* errno for a failed SSL_read or SSL_write that returned rc. */
static ssize_t fail(SSL *ssl, int rc)
{
    int e = SSL_get_error(ssl, rc);
    int saved = errno;
    ERR_clear_error();
    switch (e) {
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_SYSCALL:
        if (saved) {
            errno = saved;
            return -1;
        }
        return 0; /* the peer closed without close_notify */
    default:
        errno = EPROTO;
        return -1;
    }
}

ssize_t load_tls_recv(SSL *ssl, void *buf, size_t len)
{
    int n = SSL_read(ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
    return n > 0 ? n : fail(ssl, n);
}

ssize_t load_tls_send(SSL *ssl, const void *buf, size_t len)
{
    int n = SSL_write(ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
    return n > 0 ? n : fail(ssl, n);
}

void load_tls_free(SSL *ssl, SSL_SESSION **keep)
{
    if (keep && SSL_is_init_finished(ssl)) {
        /* the session as it is now: with the ticket a TLS 1.3 server sent
         * after the handshake, when one came */
        SSL_SESSION *s = SSL_get1_session(ssl);
        if (s && SSL_SESSION_is_resumable(s)) {
            if (*keep)
                SSL_SESSION_free(*keep);
            *keep = s;
        } else if (s) {
            SSL_SESSION_free(s);
        }
    }
    /* An SSL freed before a shutdown takes its session out of resumption;
     * a connection the load generator closes is not a failed one. */
    SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    SSL_free(ssl);
}

void load_tls_session_free(SSL_SESSION **session)
{
    if (*session)
        SSL_SESSION_free(*session);
    *session = NULL;
}
