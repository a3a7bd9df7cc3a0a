/* The TLS client of herd load (https:// targets), OpenSSL 3. Non-blocking
 * throughout: the handshake is driven by the load thread's own epoll loop,
 * and reads and writes return like recv and send (-1 with errno EAGAIN when
 * OpenSSL needs the socket to become ready). Each load thread keeps the
 * last resumable session of a connection it closed and offers it on its
 * next connect, so a
 * connection-per-request run measures resumed handshakes, as a browser
 * coming back would make. Plain http:// never reaches this file. */
#ifndef HERD_BENCH_LOAD_TLS_H
#define HERD_BENCH_LOAD_TLS_H

#include <stddef.h>
#include <sys/types.h>

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_session_st SSL_SESSION;
struct target;

/* One context for all threads: peer verification against cacert (NULL:
 * the system's CAs) unless insecure, ALPN http/1.1. Returns NULL with a
 * one-line reason in err. */
SSL_CTX *load_tls_ctx_new(const char *cacert, int insecure, char *err, size_t errlen);
void load_tls_ctx_free(SSL_CTX *ctx);

/* A client for the connected socket fd: SNI and the certificate check use
 * t->name (an IP address is checked as one, without SNI); session, when
 * not NULL, is offered for resumption. *drained is kept up to date: 1 when
 * the last read from the socket was short. Returns NULL when out of memory. */
SSL *load_tls_new(SSL_CTX *ctx, int fd, const struct target *t, SSL_SESSION *session,
                  unsigned char *drained);

/* Advances the handshake. Returns 1 when done, 0 when it waits for the
 * socket, -1 on failure with the reason in why. */
int load_tls_handshake(SSL *ssl, char *why, size_t n);

/* After load_tls_recv returned data: whether more may be read without a
 * new edge from epoll. A record is shorter than a read, so a short read
 * does not say the socket is drained; the last read OpenSSL made from it
 * (drained) and what OpenSSL holds still do. */
int load_tls_more(SSL *ssl, unsigned char drained);

/* Whether the handshake resumed an earlier session. */
int load_tls_resumed(SSL *ssl);

/* Like recv and send: > 0 bytes, 0 at the end of the stream (recv), or -1
 * with errno (EAGAIN: wait for the socket; EPROTO: a TLS error). */
ssize_t load_tls_recv(SSL *ssl, void *buf, size_t len);
ssize_t load_tls_send(SSL *ssl, const void *buf, size_t len);

/* Frees ssl without a close_notify (the socket is closed by the caller) and
 * without spoiling its session for resumption. When keep is not NULL and
 * the session can be resumed, it replaces *keep (the thread's last
 * session). */
void load_tls_free(SSL *ssl, SSL_SESSION **keep);

/* The last session a thread kept, at the end of the run. */
void load_tls_session_free(SSL_SESSION **session);

#endif
