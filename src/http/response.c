#include "http/response.h"

#include <stdio.h>
#include <string.h>

#include "core/clock.h"

static inline void put(struct http_out *out, const char *s, size_t n)
{
    memcpy(out->buf + out->len, s, n);
    out->len += n;
}
#define PUT_LIT(out, lit) put(out, lit, sizeof lit - 1)

size_t fmt_u64(char *p, uint64_t n)
{
    char tmp[20];
    size_t i = 0;
    do {
        tmp[i++] = (char)('0' + n % 10);
        n /= 10;
    } while (n);
    for (size_t k = 0; k < i; k++)
        p[k] = tmp[i - 1 - k];
    return i;
}

struct status_text {
    uint16_t code;
    const char *line; /* "HTTP/1.1 200 OK\r\n" */
};

#define S(code, text) {code, "HTTP/1.1 " #code " " text "\r\n"}
static const struct status_text statuses[] = {
    S(200, "OK"),
    S(206, "Partial Content"),
    S(301, "Moved Permanently"),
    S(304, "Not Modified"),
    S(400, "Bad Request"),
    S(403, "Forbidden"),
    S(404, "Not Found"),
    S(405, "Method Not Allowed"),
    S(406, "Not Acceptable"),
    S(408, "Request Timeout"),
    S(411, "Length Required"),
    S(412, "Precondition Failed"),
    S(413, "Content Too Large"),
    S(414, "URI Too Long"),
    S(416, "Range Not Satisfiable"),
    S(431, "Request Header Fields Too Large"),
    S(500, "Internal Server Error"),
    S(501, "Not Implemented"),
    S(502, "Bad Gateway"),
    S(503, "Service Unavailable"),
    S(504, "Gateway Timeout"),
    S(505, "HTTP Version Not Supported"),
};
#undef S

static const struct status_text *find_status(unsigned code)
{
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++)
        if (statuses[i].code == code)
            return &statuses[i];
    return NULL;
}

static const struct status_text *status_of(unsigned code)
{
    const struct status_text *s = find_status(code);
    return s ? s : find_status(500);
}

int resp_status_known(unsigned status) { return find_status(status) != NULL; }

const char *resp_reason(unsigned status)
{
    return status_of(status)->line + 13;
}

void resp_status(struct http_out *out, unsigned status)
{
    const char *line = status_of(status)->line;
    put(out, line, strlen(line));
    PUT_LIT(out, SERVER_HEADER "Date: ");
    put(out, clock_date(), HTTPDATE_LEN);
    PUT_LIT(out, "\r\n");
}

void resp_header_raw(struct http_out *out, const char *s, size_t len) { put(out, s, len); }

void resp_content_length(struct http_out *out, uint64_t n)
{
    PUT_LIT(out, "Content-Length: ");
    out->len += fmt_u64(out->buf + out->len, n);
    PUT_LIT(out, "\r\n");
}

void resp_finish(struct http_out *out, int minor, int keepalive)
{
    if (!keepalive)
        PUT_LIT(out, "Connection: close\r\n\r\n");
    else if (minor == 0)
        PUT_LIT(out, "Connection: keep-alive\r\n\r\n");
    else
        PUT_LIT(out, "\r\n");
}

void resp_error_headers(struct http_out *out, unsigned status)
{
    if (status == 405)
        PUT_LIT(out, "Allow: GET, HEAD\r\n");
}

/* Error bodies are built once, before main, so threads only ever read them. */
#define NSTATUS (sizeof statuses / sizeof statuses[0])
static char error_bodies[NSTATUS][320];
static uint32_t error_lens[NSTATUS];

__attribute__((constructor)) static void build_error_bodies(void)
{
    for (size_t i = 0; i < NSTATUS; i++) {
        const char *reason = statuses[i].line + 9; /* "404 Not Found\r\n" */
        int rlen = (int)strlen(reason) - 2;
        int n = snprintf(error_bodies[i], sizeof error_bodies[i],
                         "<html>\r\n<head><title>%.*s</title></head>\r\n<body>\r\n"
                         "<center><h1>%.*s</h1></center>\r\n<hr><center>herd</center>\r\n"
                         "</body>\r\n</html>\r\n",
                         rlen, reason, rlen, reason);
        error_lens[i] = (uint32_t)n;
    }
}

static const char *error_body(unsigned status, uint32_t *len)
{
    size_t i = (size_t)(status_of(status) - statuses);
    *len = error_lens[i];
    return error_bodies[i];
}

void resp_error(struct http_out *out, struct http_plan *plan, unsigned status, int minor,
                int keepalive, int head_only)
{
    resp_error_with(out, plan, status, minor, keepalive, head_only, NULL, 0);
}

void resp_error_with(struct http_out *out, struct http_plan *plan, unsigned status, int minor,
                     int keepalive, int head_only, const char *extra, size_t extra_len)
{
    uint32_t blen;
    const char *body = error_body(status, &blen);
    plan->head_off = (uint32_t)out->len;
    resp_status(out, status);
    PUT_LIT(out, "Content-Type: text/html; charset=utf-8\r\n");
    resp_error_headers(out, status);
    if (extra_len)
        put(out, extra, extra_len);
    resp_content_length(out, blen);
    resp_finish(out, minor, keepalive);
    plan->head_len = (uint32_t)(out->len - plan->head_off);
    plan->body = head_only ? NULL : body;
    plan->body_len = head_only ? 0 : blen;
    plan->file = NULL;
    plan->status = (uint16_t)status;
    plan->close = !keepalive;
}
