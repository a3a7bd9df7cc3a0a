/* libFuzzer target for the static-site string functions a request or a
 * setting goes through: Accept-Encoding negotiation, HTML and URI escaping
 * of listing names, and caching-rule parsing. The input is copied to a
 * buffer of exactly its size, so a read past a value is an ASan report. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/cacherule.h"
#include "http/encoding.h"
#include "http/html.h"

#define ENSURE(c)                                                                   \
    do {                                                                            \
        if (!(c))                                                                   \
            __builtin_trap();                                                       \
    } while (0)

static void fuzz_negotiate(const char *in, size_t size, unsigned avail)
{
    struct http_str v = {in, (uint32_t)size};
    int c = coding_negotiate(&v, 1, avail);
    ENSURE(c == CODING_NONE || c == CODING_IDENTITY || (c >= 0 && c < CODING_COUNT));
    if (c >= 0)
        ENSURE(avail & (1u << c));
}

static void fuzz_escape(const char *in, size_t size)
{
    size_t cap = size * HTML_ESCAPE_MAX + 1;
    char *out = malloc(cap);
    int n = html_escape(in, size, out, cap);
    ENSURE(n >= (int)size);
    for (int i = 0; i < n; i++)
        ENSURE(out[i] != '<' && out[i] != '>' && out[i] != '"' && out[i] != '\'');
    n = uri_escape_segment(in, size, out, size * URI_ESCAPE_MAX + 1);
    ENSURE(n >= (int)size);
    for (int i = 0; i < n; i++)
        ENSURE((out[i] >= 'a' && out[i] <= 'z') || (out[i] >= 'A' && out[i] <= 'Z') ||
               (out[i] >= '0' && out[i] <= '9') || strchr("-._~%", out[i]));
    free(out);
}

static void fuzz_rule(const char *in, size_t size)
{
    static struct cache_rules r;
    if (size > 1000 || memchr(in, '\0', size))
        return;
    char *spec = malloc(size + 1);
    memcpy(spec, in, size);
    spec[size] = '\0';
    memset(&r, 0, sizeof r);
    char err[512];
    if (cache_rule_add(&r, 0, spec, err, sizeof err) == 0) {
        const struct cache_rule *rule = &r.cc[0];
        for (size_t i = 0; i < rule->value_len; i++)
            ENSURE((unsigned char)rule->value[i] >= 0x20 && rule->value[i] != 0x7f);
        char buf[1024];
        struct http_out out = {buf, 0, sizeof buf};
        cache_headers(&r, "/x", 2, 1700000000, &out);
        ENSURE(out.len < sizeof buf);
    }
    memset(&r, 0, sizeof r);
    cache_rule_add(&r, 1, spec, err, sizeof err);
    free(spec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *in = malloc(size ? size : 1);
    memcpy(in, data, size);
    unsigned avail = size ? data[0] & 7u : 7u;
    fuzz_negotiate(in, size, avail);
    fuzz_negotiate(in, size, 7u);
    fuzz_escape(in, size);
    fuzz_rule(in, size);
    free(in);
    return 0;
}
