#include "bench/json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 64

struct reader {
    const char *p, *end, *start;
    char *err;
    size_t errlen;
    int failed;
};

static void fail(struct reader *r, const char *why)
{
    if (r->failed)
        return;
    r->failed = 1;
    int line = 1;
    for (const char *q = r->start; q < r->p && q < r->end; q++)
        line += *q == '\n';
    snprintf(r->err, r->errlen, "line %d: %s", line, why);
}

static void skip_ws(struct reader *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

static struct json *node(struct reader *r, enum json_type t)
{
    struct json *v = calloc(1, sizeof *v);
    if (!v)
        fail(r, "out of memory");
    else
        v->type = t;
    return v;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A string literal at r->p (on the opening quote), decoded to UTF-8. */
static char *string(struct reader *r)
{
    r->p++;
    size_t cap = 16, n = 0;
    char *s = malloc(cap);
    if (!s) {
        fail(r, "out of memory");
        return NULL;
    }
    for (;;) {
        if (r->p >= r->end) {
            fail(r, "unterminated string");
            break;
        }
        unsigned char c = (unsigned char)*r->p++;
        if (c == '"') {
            s[n] = '\0';
            return s;
        }
        if (c < 0x20) {
            fail(r, "control character in a string");
            break;
        }
        char out[4];
        size_t k = 1;
        out[0] = (char)c;
        if (c == '\\') {
            if (r->p >= r->end) {
                fail(r, "unterminated string");
                break;
            }
            char e = *r->p++;
            switch (e) {
            case '"': case '\\': case '/': out[0] = e; break;
            case 'b': out[0] = '\b'; break;
            case 'f': out[0] = '\f'; break;
            case 'n': out[0] = '\n'; break;
            case 'r': out[0] = '\r'; break;
            case 't': out[0] = '\t'; break;
            case 'u': {
                unsigned cp = 0;
                for (int i = 0; i < 4; i++) {
                    int h = r->p < r->end ? hexval(*r->p) : -1;
                    if (h < 0) {
                        fail(r, "bad \\u escape");
                        goto bad;
                    }
                    cp = cp << 4 | (unsigned)h;
                    r->p++;
                }
                /* Surrogates are kept as they are: herd never writes them. */
                if (cp < 0x80) {
                    out[0] = (char)cp;
                } else if (cp < 0x800) {
                    out[0] = (char)(0xc0 | cp >> 6);
                    out[1] = (char)(0x80 | (cp & 0x3f));
                    k = 2;
                } else {
                    out[0] = (char)(0xe0 | cp >> 12);
                    out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
                    out[2] = (char)(0x80 | (cp & 0x3f));
                    k = 3;
                }
                break;
            }
            default:
                fail(r, "bad escape in a string");
                goto bad;
            }
        }
        if (n + k + 1 > cap) {
            cap *= 2;
            char *t = realloc(s, cap);
            if (!t) {
                fail(r, "out of memory");
                break;
            }
            s = t;
        }
        memcpy(s + n, out, k);
        n += k;
    }
bad:
    free(s);
    return NULL;
}

static struct json *number(struct reader *r)
{
    const char *b = r->p;
    if (r->p < r->end && *r->p == '-')
        r->p++;
    int digits = 0, integer = 1;
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
        r->p++, digits++;
    if (r->p < r->end && *r->p == '.') {
        integer = 0;
        r->p++;
        while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
            r->p++;
    }
    if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
        integer = 0;
        r->p++;
        if (r->p < r->end && (*r->p == '+' || *r->p == '-'))
            r->p++;
        while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
            r->p++;
    }
    if (!digits) {
        fail(r, "bad number");
        return NULL;
    }
    char buf[64];
    size_t len = (size_t)(r->p - b);
    if (len >= sizeof buf) {
        fail(r, "number too long");
        return NULL;
    }
    memcpy(buf, b, len);
    buf[len] = '\0';
    struct json *v = node(r, JSON_NUM);
    if (!v)
        return NULL;
    v->num = strtod(buf, NULL);
    if (integer && buf[0] != '-') {
        errno = 0;
        unsigned long long u = strtoull(buf, NULL, 10);
        if (errno == 0) {
            v->is_u64 = 1;
            v->u64 = u;
        }
    }
    return v;
}

static int literal(struct reader *r, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n))
        return 0;
    r->p += n;
    return 1;
}

static struct json *value(struct reader *r, int depth)
{
    skip_ws(r);
    if (depth > JSON_MAX_DEPTH) {
        fail(r, "nested too deep");
        return NULL;
    }
    if (r->p >= r->end) {
        fail(r, "unexpected end");
        return NULL;
    }
    char c = *r->p;
    struct json *v;
    if (c == '{' || c == '[') {
        int obj = c == '{';
        char close = obj ? '}' : ']';
        v = node(r, obj ? JSON_OBJ : JSON_ARR);
        if (!v)
            return NULL;
        r->p++;
        struct json **tail = &v->child;
        skip_ws(r);
        if (r->p < r->end && *r->p == close) {
            r->p++;
            return v;
        }
        for (;;) {
            char *key = NULL;
            if (obj) {
                skip_ws(r);
                if (r->p >= r->end || *r->p != '"') {
                    fail(r, "expected a member name");
                    break;
                }
                key = string(r);
                if (!key)
                    break;
                skip_ws(r);
                if (r->p >= r->end || *r->p != ':') {
                    free(key);
                    fail(r, "expected ':'");
                    break;
                }
                r->p++;
            }
            struct json *e = value(r, depth + 1);
            if (!e) {
                free(key);
                break;
            }
            e->key = key;
            *tail = e;
            tail = &e->next;
            skip_ws(r);
            if (r->p < r->end && *r->p == ',') {
                r->p++;
                continue;
            }
            if (r->p < r->end && *r->p == close) {
                r->p++;
                return v;
            }
            fail(r, obj ? "expected ',' or '}'" : "expected ',' or ']'");
            break;
        }
        json_free(v);
        return NULL;
    }
    if (c == '"') {
        char *s = string(r);
        if (!s)
            return NULL;
        v = node(r, JSON_STR);
        if (!v) {
            free(s);
            return NULL;
        }
        v->str = s;
        return v;
    }
    if (c == '-' || (c >= '0' && c <= '9'))
        return number(r);
    int truth = literal(r, "true");
    if (truth || literal(r, "false")) {
        v = node(r, JSON_BOOL);
        if (v)
            v->num = truth;
        return v;
    }
    if (literal(r, "null"))
        return node(r, JSON_NULL);
    fail(r, "unexpected character");
    return NULL;
}

struct json *json_parse(const char *text, size_t len, char *err, size_t errlen)
{
    struct reader r = {.p = text, .end = text + len, .start = text, .err = err, .errlen = errlen};
    struct json *v = value(&r, 0);
    if (v) {
        skip_ws(&r);
        if (r.p != r.end) {
            fail(&r, "text after the value");
            json_free(v);
            return NULL;
        }
    }
    return v;
}

void json_free(struct json *v)
{
    while (v) {
        struct json *next = v->next;
        json_free(v->child);
        free(v->str);
        free(v->key);
        free(v);
        v = next;
    }
}

const struct json *json_get(const struct json *obj, const char *key)
{
    if (!obj || obj->type != JSON_OBJ)
        return NULL;
    for (const struct json *m = obj->child; m; m = m->next)
        if (m->key && !strcmp(m->key, key))
            return m;
    return NULL;
}

int json_get_u64(const struct json *obj, const char *key, uint64_t *out)
{
    const struct json *v = json_get(obj, key);
    if (!v || v->type != JSON_NUM)
        return -1;
    if (v->is_u64) {
        *out = v->u64;
        return 0;
    }
    if (!(v->num >= 0) || v->num >= 18446744073709551616.0)
        return -1;
    *out = (uint64_t)v->num;
    return 0;
}

int json_get_double(const struct json *obj, const char *key, double *out)
{
    const struct json *v = json_get(obj, key);
    if (!v || v->type != JSON_NUM || !isfinite(v->num))
        return -1;
    *out = v->num;
    return 0;
}

void json_write_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}
