#include "net/tls.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>

/* One record's worth of plaintext. */
#define TLS_CHUNK 16384

static __thread char gather[TLS_CHUNK];

SSL *tls_open(void *ctx, int fd)
{
    SSL *ssl = SSL_new((SSL_CTX *)ctx);
    if (!ssl)
        return NULL;
    if (SSL_set_fd(ssl, fd) != 1) {
        SSL_free(ssl);
        return NULL;
    }
    SSL_set_accept_state(ssl);
    return ssl;
}

/* Maps an OpenSSL result to -errno; a fatal error also marks ssl so that
 * no close_notify follows (OpenSSL forbids SSL_shutdown after one). */
static int failure(SSL *ssl, int ret)
{
    int e = SSL_get_error(ssl, ret);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return -EAGAIN;
    if (e == SSL_ERROR_ZERO_RETURN)
        return 0;
    int sys = errno;
    SSL_set_quiet_shutdown(ssl, 1);
    ERR_clear_error();
    if (e == SSL_ERROR_SYSCALL)
        return sys == EAGAIN || !sys ? -EPIPE : -sys;
    return -EPROTO;
}

/* Before OpenSSL reads a byte: is the client speaking plain HTTP? A TLS
 * record starts with its type (0x16 for a handshake; an SSLv2-style hello
 * has the top bit set), a request with a method's first letter. OpenSSL
 * itself says so only for GET, HEAD, POST and PUT (SSL_R_HTTP_REQUEST),
 * so DELETE or OPTIONS would get a reset where they should get the 400.
 * nginx decides on this byte too. One MSG_PEEK per connection, until the
 * first byte is here: 1 plain HTTP, 0 not (or nothing to decide on: an
 * EOF or an error, which OpenSSL then reports), -EAGAIN no byte yet.
 * OpenSSL must not read before that byte is seen: a request arriving
 * between an empty peek and OpenSSL's read was taken for a broken record
 * (a protocol failure, and a reset for the client, on a loaded machine). */
static int plain_http_first(SSL *ssl)
{
    BIO *rb = SSL_get_rbio(ssl);
    if (!rb || BIO_number_read(rb) != 0)
        return 0;
    unsigned char b;
    ssize_t n = recv(SSL_get_rfd(ssl), &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return -EAGAIN;
    return n == 1 && b >= 'A' && b <= 'Z';
}

int tls_handshake(SSL *ssl, enum tls_fail *why)
{
    int plain = plain_http_first(ssl);
    if (plain == -EAGAIN)
        return -EAGAIN; /* the caller waits to read, as OpenSSL would */
    if (plain) {
        *why = TLS_FAIL_PLAIN_HTTP;
        SSL_set_quiet_shutdown(ssl, 1);
        return -EPROTO;
    }
    ERR_clear_error();
    int ret = SSL_do_handshake(ssl);
    if (ret == 1)
        return 0;
    int e = SSL_get_error(ssl, ret);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return -EAGAIN;
    unsigned long err = ERR_peek_error();
    *why = ERR_GET_REASON(err) == SSL_R_HTTP_REQUEST ||
                   ERR_GET_REASON(err) == SSL_R_HTTPS_PROXY_REQUEST
               ? TLS_FAIL_PLAIN_HTTP
           : e == SSL_ERROR_SSL                        ? TLS_FAIL_PROTOCOL
                                                       : TLS_FAIL_CLOSED;
    SSL_set_quiet_shutdown(ssl, 1);
    ERR_clear_error();
    return -EPROTO;
}

/* SSL_read_ex or SSL_peek_ex, as tls_read says. */
static ssize_t take_plain(SSL *ssl, void *buf, size_t n,
                          int (*take)(SSL *, void *, size_t, size_t *))
{
    size_t got;
    ERR_clear_error();
    int ret = take(ssl, buf, n, &got);
    if (ret == 1)
        return (ssize_t)got;
    return failure(ssl, ret);
}

ssize_t tls_read(SSL *ssl, void *buf, size_t n)
{
    return take_plain(ssl, buf, n, SSL_read_ex);
}

ssize_t tls_peek(SSL *ssl, void *buf, size_t n)
{
    return take_plain(ssl, buf, n, SSL_peek_ex);
}

static ssize_t write_chunk(SSL *ssl, const void *p, size_t len)
{
    size_t done;
    ERR_clear_error();
    int ret = SSL_write_ex(ssl, p, len, &done);
    if (ret == 1)
        return (ssize_t)done;
    int rc = failure(ssl, ret);
    return rc ? rc : -EPIPE;
}

ssize_t tls_writev(SSL *ssl, const struct iovec *iov, int niov)
{
    ssize_t total = 0;
    int i = 0;
    size_t skip = 0;
    while (i < niov) {
        /* Gather up to one record; a single large iovec goes as it is. */
        const char *p;
        size_t len = 0;
        if (iov[i].iov_len - skip >= TLS_CHUNK || i + 1 == niov) {
            p = (const char *)iov[i].iov_base + skip;
            len = iov[i].iov_len - skip;
            if (len > TLS_CHUNK)
                len = TLS_CHUNK;
        } else {
            int k = i;
            size_t s = skip;
            while (k < niov && len < TLS_CHUNK) {
                size_t take = iov[k].iov_len - s;
                if (take > TLS_CHUNK - len)
                    take = TLS_CHUNK - len;
                memcpy(gather + len, (const char *)iov[k].iov_base + s, take);
                len += take;
                s = 0;
                k++;
            }
            p = gather;
        }
        if (!len) {
            i++;
            skip = 0;
            continue;
        }
        ssize_t n = write_chunk(ssl, p, len);
        if (n < 0)
            return total ? total : n;
        total += n;
        /* advance (i, skip) by n */
        size_t adv = (size_t)n;
        while (adv && i < niov) {
            size_t left = iov[i].iov_len - skip;
            if (adv < left) {
                skip += adv;
                adv = 0;
            } else {
                adv -= left;
                i++;
                skip = 0;
            }
        }
        while (i < niov && iov[i].iov_len == skip) {
            i++;
            skip = 0;
        }
    }
    return total;
}

int tls_sendfile(SSL *ssl, int file_fd, off_t *off, off_t end, uint64_t *sent)
{
    while (*off < end) {
        size_t want = end - *off > TLS_CHUNK ? TLS_CHUNK : (size_t)(end - *off);
        ssize_t r = pread(file_fd, gather, want, *off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r == 0 ? -EIO : -errno;
        ssize_t n = write_chunk(ssl, gather, (size_t)r);
        if (n < 0)
            return (int)n;
        *off += n;
        *sent += (uint64_t)n;
    }
    return 0;
}

void tls_close_notify(SSL *ssl)
{
    if (SSL_get_quiet_shutdown(ssl) || !SSL_is_init_finished(ssl) ||
        (SSL_get_shutdown(ssl) & SSL_SENT_SHUTDOWN))
        return;
    ERR_clear_error();
    (void)SSL_shutdown(ssl);
    ERR_clear_error();
}

int tls_untouched(SSL *ssl)
{
    BIO *rbio = SSL_get_rbio(ssl);
    return !SSL_is_init_finished(ssl) && rbio && BIO_number_read(rbio) == 0 &&
           BIO_number_written(SSL_get_wbio(ssl)) == 0;
}

void tls_free(SSL *ssl)
{
    tls_close_notify(ssl);
    SSL_free(ssl);
}

void tls_refuse_plain_http(int fd)
{
    static const char msg[] = "HTTP/1.1 400 Bad Request\r\n"
                              "Content-Type: text/plain\r\n"
                              "Content-Length: 46\r\n"
                              "Connection: close\r\n\r\n"
                              "This port speaks HTTPS: use https:// instead.\n";
    (void)!send(fd, msg, sizeof msg - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    /* Unread request bytes would turn our close into a reset that can
     * destroy the answer: read what is there (no waiting), then FIN. */
    char sink[4096];
    for (int i = 0; i < 4 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++)
        ;
    shutdown(fd, SHUT_WR);
}
