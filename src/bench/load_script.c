#include "bench/load_script.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/readfile.h"

#define SCRIPT_MAX_BYTES (64u << 20)

/* One line of the text: [p, end) without its line break, next after it. */
struct line {
    const char *p, *end, *next;
    int no;
};

static int next_line(const char *text, size_t len, struct line *l)
{
    const char *start = l->next, *stop = text + len;
    if (start >= stop)
        return 0;
    const char *lf = memchr(start, '\n', (size_t)(stop - start));
    l->p = start;
    l->next = lf ? lf + 1 : stop;
    l->end = lf ? lf : stop;
    if (l->end > l->p && l->end[-1] == '\r')
        l->end--;
    l->no++;
    return 1;
}

static int is_sep(const struct line *l)
{
    return l->end - l->p == 3 && !memcmp(l->p, "---", 3);
}

static int tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* "METHOD /target": 0, or a reason. */
static const char *request_line(const struct line *l, struct load_req *r)
{
    const char *p = l->p;
    while (p < l->end && tchar((unsigned char)*p))
        p++;
    if (p == l->p || p == l->end || *p != ' ')
        return "expected a request line 'METHOD /TARGET'";
    r->method = l->p;
    r->method_len = (size_t)(p - l->p);
    if (r->method_len == 4 && !memcmp(r->method, "HEAD", 4))
        return "HEAD is not supported in a requests file (use --method HEAD)";
    r->target = ++p;
    r->target_len = (size_t)(l->end - p);
    if (!r->target_len || *p != '/')
        return "the target must start with '/'";
    for (; p < l->end; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f)
            return "a space or control byte in the target";
    return NULL;
}

static const char *header_line(const struct line *l)
{
    const char *p = l->p;
    while (p < l->end && tchar((unsigned char)*p))
        p++;
    if (p == l->p || p == l->end || *p != ':')
        return "expected a header line 'Name: value' (or an empty line before the body)";
    for (; p < l->end; p++)
        if (((unsigned char)*p < ' ' && *p != '\t') || *p == 0x7f)
            return "a control byte in a header";
    return NULL;
}

/* Parses the block that starts after l (comments and empty lines first).
 * 1 with r filled, 0 at the end of the text, -1 with *why. */
static int parse_block(const char *text, size_t len, struct line *l, struct load_req *r,
                       const char **why)
{
    memset(r, 0, sizeof *r);
    do {
        if (!next_line(text, len, l))
            return 0;
    } while (l->p == l->end || *l->p == '#' || is_sep(l));
    if ((*why = request_line(l, r)) != NULL)
        return -1;
    r->headers = l->next;
    for (;;) {
        if (!next_line(text, len, l)) {
            r->headers_len = (size_t)(text + len - r->headers);
            return 1;
        }
        if (is_sep(l) || l->p == l->end)
            break;
        if ((*why = header_line(l)) != NULL)
            return -1;
    }
    r->headers_len = (size_t)(l->p - r->headers);
    if (is_sep(l))
        return 1;
    r->body = l->next;
    const char *body_end = text + len;
    while (next_line(text, len, l))
        if (is_sep(l)) {
            body_end = l->p;
            break;
        }
    /* the line break before "---" (or the file's last one) is not body */
    if (body_end > r->body && body_end[-1] == '\n')
        body_end--;
    if (body_end > r->body && body_end[-1] == '\r')
        body_end--;
    r->body_len = (size_t)(body_end - r->body);
    return 1;
}

static int slurp(const char *path, struct load_script *s, size_t *len, char *err,
                 size_t errlen)
{
    s->text = read_file_bounded(path, SCRIPT_MAX_BYTES, len);
    if (!s->text) {
        snprintf(err, errlen, "cannot read --requests %s: %s", path,
                 errno == EFBIG ? "over 64 MiB" : strerror(errno));
        return -1;
    }
    return 0;
}

int load_script_read(const char *path, struct load_script *s, char *err, size_t errlen)
{
    size_t len;
    memset(s, 0, sizeof *s);
    if (slurp(path, s, &len, err, errlen) < 0)
        return -1;
    struct line l = {.next = s->text};
    uint32_t cap = 0;
    for (;;) {
        struct load_req r;
        const char *why = NULL;
        int rc = parse_block(s->text, len, &l, &r, &why);
        if (rc == 0)
            break;
        if (rc < 0 || s->n == LOAD_SCRIPT_MAX) {
            snprintf(err, errlen, "%s:%d: %s", path, l.no,
                     rc < 0 ? why : "too many requests (at most 100000)");
            goto fail;
        }
        if (s->n == cap) {
            cap = cap ? cap * 2 : 16;
            struct load_req *more = realloc(s->reqs, cap * sizeof *more);
            if (!more) {
                snprintf(err, errlen, "out of memory");
                goto fail;
            }
            s->reqs = more;
        }
        s->reqs[s->n++] = r;
    }
    if (!s->n) {
        snprintf(err, errlen, "%s: no requests in the file", path);
        goto fail;
    }
    return 0;
fail:
    load_script_free(s);
    return -1;
}

void load_script_free(struct load_script *s)
{
    free(s->text);
    free(s->reqs);
    memset(s, 0, sizeof *s);
}
