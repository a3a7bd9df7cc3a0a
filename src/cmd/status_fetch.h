/* `herd status`'s HTTP client: one GET of a server's status page, over TCP
 * or a unix socket. A server that is slow, stuck or hostile cannot keep it
 * waiting or growing: the whole exchange (connect, request, answer) has
 * one deadline, the answer is capped, and the body must be exactly as long
 * as its Content-Length says. */
#ifndef HERD_CMD_STATUS_FETCH_H
#define HERD_CMD_STATUS_FETCH_H

#include <stddef.h>
#include <stdint.h>

/* The largest answer taken, head and body. herd renders its status page
 * into at most HTTP_STATUS_MAX (32 KiB, http/handler.h), whatever the
 * number of workers and upstreams; this leaves a 32-fold margin. */
#define STATUS_ANSWER_MAX (1u << 20)

struct status_target {
    int unix_socket;
    char host[320];             /* a host name or address, or the socket's path */
    char port[8];
    char path[1024];            /* the status path, with its query if any */
};

/* http://HOST[:PORT][/PATH] (the scheme optional, IPv6 in brackets) or
 * unix:/SOCKET[:/PATH]; the path defaults to /herd-status. Returns 0, or
 * -1 with the reason in err for a URL it cannot read or would send other
 * than as written (another scheme, a port past 65535, a space in the
 * path). */
int status_target_parse(const char *url, struct status_target *t, char *err, size_t errlen);

/* GET the page in fmt ("json", "prometheus" or "table") within timeout_ms.
 * Returns its body (malloc'd, NUL-terminated), or NULL with a sentence in
 * err: timed out, refused, larger than STATUS_ANSWER_MAX, cut short of its
 * Content-Length, or not herd's status page. */
char *status_fetch(const struct status_target *t, const char *fmt, int64_t timeout_ms,
                   char *err, size_t errlen);

#endif
