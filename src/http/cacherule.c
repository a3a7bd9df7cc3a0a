#include "http/cacherule.h"

#include <stdio.h>
#include <string.h>

#include "core/httpdate.h"
#include "core/units.h"

#define PUT_LIT(out, lit) resp_header_raw(out, lit, sizeof lit - 1)

static int has_control(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return 1;
    return 0;
}

/* MATCH: "*SUFFIX" or "/PREFIX", no other '*', no control characters. */
static int parse_match(struct cache_rule *rule, const char *m, size_t len, char *err,
                       size_t errlen)
{
    int suffix = len > 1 && m[0] == '*';
    const char *p = suffix ? m + 1 : m;
    size_t n = suffix ? len - 1 : len;
    if ((!suffix && (len == 0 || m[0] != '/')) || memchr(p, '*', n) || has_control(m, len) ||
        n >= CACHE_MATCH_MAX) {
        snprintf(err, errlen, "'%.*s': MATCH must be *SUFFIX (e.g. *.css) or /PREFIX (e.g. "
                 "/static/), printable, under %d characters", (int)len, m, CACHE_MATCH_MAX);
        return -1;
    }
    memcpy(rule->match, p, n);
    rule->match[n] = '\0';
    rule->match_len = (uint16_t)n;
    rule->suffix = (uint8_t)suffix;
    return 0;
}

static int parse_value(struct cache_rule *rule, int expires, const char *v, char *err,
                       size_t errlen)
{
    size_t len = strlen(v);
    if (expires) {
        int64_t ms;
        if (unit_duration_ms(v, &ms) < 0 || ms % 1000 || ms / 1000 > CACHE_EXPIRES_MAX_S) {
            snprintf(err, errlen, "'%s' is not a duration in whole seconds up to ten years "
                     "(0, 60s, 30m, 8760h)", v);
            return -1;
        }
        rule->seconds = ms / 1000;
        return 0;
    }
    if (len == 0 || has_control(v, len) || len >= CACHE_VALUE_MAX) {
        snprintf(err, errlen, "the value must be 1 to %d printable characters (no CR, LF or "
                 "other control characters)", CACHE_VALUE_MAX - 1);
        return -1;
    }
    memcpy(rule->value, v, len + 1);
    rule->value_len = (uint16_t)len;
    rule->has_max_age = strcasestr(v, "max-age") != NULL;
    return 0;
}

int cache_rule_add(struct cache_rules *r, int expires, const char *spec, char *err,
                   size_t errlen)
{
    const char *what = expires ? "expires" : "cache-control";
    const char *eq = strchr(spec, '=');
    if (!eq) {
        snprintf(err, errlen, "%s '%s': expected MATCH=%s", what, spec,
                 expires ? "DURATION" : "VALUE");
        return -1;
    }
    struct cache_rule *rules = expires ? r->exp : r->cc;
    uint8_t *n = expires ? &r->nexp : &r->ncc;
    if (*n == CACHE_RULES_MAX) {
        snprintf(err, errlen, "too many %s rules (at most %d)", what, CACHE_RULES_MAX);
        return -1;
    }
    struct cache_rule rule;
    memset(&rule, 0, sizeof rule);
    char why[256];
    if (parse_match(&rule, spec, (size_t)(eq - spec), why, sizeof why) < 0 ||
        parse_value(&rule, expires, eq + 1, why, sizeof why) < 0) {
        snprintf(err, errlen, "%s: %s", what, why);
        return -1;
    }
    for (int i = 0; i < *n; i++)
        if (rules[i].suffix == rule.suffix && !strcmp(rules[i].match, rule.match)) {
            snprintf(err, errlen, "%s: '%.*s' given twice", what, (int)(eq - spec), spec);
            return -1;
        }
    rules[(*n)++] = rule;
    return 0;
}

const struct cache_rule *cache_rule_match(const struct cache_rule *rules, size_t n,
                                          const char *path, size_t len)
{
    const struct cache_rule *best = NULL;
    for (size_t i = 0; i < n; i++) {
        const struct cache_rule *r = &rules[i];
        size_t m = r->match_len;
        if (m > len || (best && m <= best->match_len))
            continue;
        const char *at = r->suffix ? path + len - m : path;
        if (memcmp(at, r->match, m) == 0)
            best = r;
    }
    return best;
}

/* Expires = Date + seconds, formatted once per distinct date per thread:
 * the rules are few, so consecutive responses mostly repeat it. */
static const char *expires_date(time_t at)
{
    static __thread time_t last_at = -1;
    static __thread char last[HTTPDATE_LEN];
    if (at != last_at) {
        httpdate_format(at, last);
        last_at = at;
    }
    return last;
}

void cache_headers(const struct cache_rules *r, const char *path, size_t len, time_t now,
                   struct http_out *out)
{
    const struct cache_rule *cc = cache_rule_match(r->cc, r->ncc, path, len);
    const struct cache_rule *exp = cache_rule_match(r->exp, r->nexp, path, len);
    if (cc) {
        PUT_LIT(out, "Cache-Control: ");
        resp_header_raw(out, cc->value, cc->value_len);
        if (exp && !cc->has_max_age) {
            PUT_LIT(out, ", max-age=");
            out->len += fmt_u64(out->buf + out->len, (uint64_t)exp->seconds);
        }
        PUT_LIT(out, "\r\n");
    } else if (exp) {
        PUT_LIT(out, "Cache-Control: max-age=");
        out->len += fmt_u64(out->buf + out->len, (uint64_t)exp->seconds);
        PUT_LIT(out, "\r\n");
    }
    if (exp) {
        PUT_LIT(out, "Expires: ");
        resp_header_raw(out, expires_date(now + exp->seconds), HTTPDATE_LEN);
        PUT_LIT(out, "\r\n");
    }
}
