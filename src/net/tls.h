/* The TLS transport: what a driver calls instead of read, sendmsg and
 * sendfile when a connection came through a TLS listener. Every call is
 * non-blocking and returns like the syscall it replaces, as -errno:
 * -EAGAIN when OpenSSL waits for the socket (in either direction: a
 * driver that waits on edge-triggered IN|OUT retries on any event). A
 * write that said -EAGAIN must be retried with the same bytes (it is,
 * when the caller keeps what was not sent and starts from there).
 *
 * Writes gather at most one record (16 KiB) into a per-thread buffer:
 * writev's iovecs and file ranges (pread) go out through SSL_write. */
#ifndef HERD_NET_TLS_H
#define HERD_NET_TLS_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <openssl/ssl.h>

/* Why a handshake failed, for the status page. */
enum tls_fail {
    TLS_FAIL_PLAIN_HTTP,   /* plain HTTP sent to a TLS port */
    TLS_FAIL_PROTOCOL,     /* not TLS, or a version/cipher we do not speak */
    TLS_FAIL_CLOSED,       /* the peer closed or reset during the handshake */
    TLS_FAIL_TIMEOUT,      /* the header timeout cut it */
    TLS_FAIL_KINDS
};

/* A server-side SSL on fd, from ctx (an SSL_CTX *). NULL when out of memory. */
SSL *tls_open(void *ctx, int fd);

/* One step of the handshake: 0 done, -EAGAIN, or -EPROTO with *why set. */
int tls_handshake(SSL *ssl, enum tls_fail *why);

/* Like read(2): bytes, 0 at the end (close_notify or EOF), -errno. */
ssize_t tls_read(SSL *ssl, void *buf, size_t n);

/* As tls_read, but the bytes stay to be read: records are processed, so
 * a close_notify shows as 0 (what a raw MSG_PEEK cannot tell). */
ssize_t tls_peek(SSL *ssl, void *buf, size_t n);

/* Like writev(2): bytes written (> 0), or -errno. */
ssize_t tls_writev(SSL *ssl, const struct iovec *iov, int niov);

/* file[*off, end) through SSL_write; *off and *sent advance by what went.
 * 0 when all went, -EAGAIN, -EIO (the file shrank), another -errno. */
int tls_sendfile(SSL *ssl, int file_fd, off_t *off, off_t end, uint64_t *sent);

/* Sends close_notify once, without waiting for the peer's. */
void tls_close_notify(SSL *ssl);

/* Plain HTTP came to a TLS port: a 400 in plain text saying so (as
 * nginx's 497), then our side of the connection is shut. */
void tls_refuse_plain_http(int fd);

/* Whether ssl has read nothing from its socket yet (no handshake begun:
 * the client's ClientHello, if sent, is still in the kernel): such a
 * connection may move to another process, which starts afresh. */
int tls_untouched(SSL *ssl);

/* Frees ssl; a connection that failed sends nothing more. */
void tls_free(SSL *ssl);

#endif
