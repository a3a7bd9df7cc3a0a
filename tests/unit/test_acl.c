/* acl_add, acl_default_if_empty, acl_allows: the --status-allow list. */
#include "unit.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include "net/acl.h"

static struct sockaddr_storage addr(const char *text)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, text, &in->sin_addr) == 1)
        ss.ss_family = AF_INET;
    else if (inet_pton(AF_INET6, text, &in6->sin6_addr) == 1)
        ss.ss_family = AF_INET6;
    else
        abort();
    return ss;
}

static int allows(const struct acl *a, const char *text)
{
    struct sockaddr_storage ss = addr(text);
    return acl_allows(a, 0, &ss);
}

static struct acl list_of(const char *const *entries, size_t n)
{
    struct acl a;
    memset(&a, 0, sizeof a);
    char err[256];
    for (size_t i = 0; i < n; i++)
        if (!CHECK_EQ_INT(acl_add(&a, entries[i], err, sizeof err), 0))
            UNIT_NOTE("%s: %s", entries[i], err);
    return a;
}

TEST(default_is_loopback_and_unix)
{
    struct acl a;
    memset(&a, 0, sizeof a);
    acl_default_if_empty(&a);
    CHECK(allows(&a, "127.0.0.1"));
    CHECK(allows(&a, "127.255.0.9"));
    CHECK(allows(&a, "::1"));
    CHECK(allows(&a, "::ffff:127.0.0.1"));
    CHECK(acl_allows(&a, 1, NULL));
    CHECK(!allows(&a, "128.0.0.1"));
    CHECK(!allows(&a, "10.0.0.1"));
    CHECK(!allows(&a, "::2"));
    CHECK(!allows(&a, "::"));
    CHECK(!allows(&a, "::ffff:10.0.0.1"));
    CHECK(!allows(&a, "fe80::1"));
    /* an unknown TCP peer never passes */
    CHECK(!acl_allows(&a, 0, NULL));
    /* an AF_UNIX peer is a unix-socket client */
    struct sockaddr_storage un;
    memset(&un, 0, sizeof un);
    un.ss_family = AF_UNIX;
    CHECK(acl_allows(&a, 0, &un));
}

TEST(default_only_when_empty)
{
    static const char *const only_unix[] = {"unix"};
    struct acl a = list_of(only_unix, 1);
    acl_default_if_empty(&a);
    CHECK(acl_allows(&a, 1, NULL));
    CHECK(!allows(&a, "127.0.0.1"));
    static const char *const only_net[] = {"10.0.0.0/8"};
    struct acl b = list_of(only_net, 1);
    acl_default_if_empty(&b);
    CHECK(!allows(&b, "127.0.0.1"));
    CHECK(!acl_allows(&b, 1, NULL));
    CHECK(allows(&b, "10.1.2.3"));
}

TEST(cidrs)
{
    static const char *const e[] = {
        "10.0.0.0/8", "192.168.1.7", "172.16.0.0/12", "2001:db8::/32", "fd00::1",
        "100.64.1.2/10", /* host bits past the prefix are ignored */
    };
    struct acl a = list_of(e, sizeof e / sizeof e[0]);
    CHECK(allows(&a, "10.0.0.0"));
    CHECK(allows(&a, "10.255.255.255"));
    CHECK(!allows(&a, "11.0.0.0"));
    CHECK(!allows(&a, "9.255.255.255"));
    CHECK(allows(&a, "192.168.1.7"));
    CHECK(!allows(&a, "192.168.1.8"));
    CHECK(allows(&a, "172.31.255.255"));
    CHECK(!allows(&a, "172.32.0.0"));
    CHECK(allows(&a, "2001:db8:ffff::1"));
    CHECK(!allows(&a, "2001:db9::1"));
    CHECK(allows(&a, "fd00::1"));
    CHECK(!allows(&a, "fd00::2"));
    CHECK(allows(&a, "100.64.0.0"));
    CHECK(allows(&a, "100.127.255.255"));
    CHECK(!allows(&a, "100.128.0.0"));
    /* a v4-mapped client matches IPv4 rules (a dual-stack listener) */
    CHECK(allows(&a, "::ffff:10.9.8.7"));
    CHECK(!allows(&a, "::ffff:11.9.8.7"));
    CHECK(!allows(&a, "127.0.0.1"));
    CHECK(!acl_allows(&a, 1, NULL));
}

TEST(odd_prefix_lengths)
{
    static const char *const e[] = {"0.0.0.0/0"};
    struct acl a = list_of(e, 1);
    CHECK(allows(&a, "1.2.3.4"));
    CHECK(allows(&a, "::ffff:1.2.3.4"));
    CHECK(!allows(&a, "::1")); /* /0 of IPv4 is not IPv6 */
    static const char *const f[] = {"::/0", "1.2.3.5/31", "8.8.8.8/32", "::1/128"};
    struct acl b = list_of(f, 4);
    CHECK(allows(&b, "::1"));
    CHECK(allows(&b, "1.2.3.4"));
    CHECK(allows(&b, "1.2.3.5"));
    CHECK(!allows(&b, "1.2.3.6"));
    CHECK(allows(&b, "8.8.8.8"));
    CHECK(!allows(&b, "8.8.8.9"));
    static const char *const g[] = {"2001:db8::/33", "192.168.0.0/23"};
    struct acl c = list_of(g, 2);
    CHECK(allows(&c, "2001:db8:7fff::1"));
    CHECK(!allows(&c, "2001:db8:8000::1"));
    CHECK(allows(&c, "192.168.1.255"));
    CHECK(!allows(&c, "192.168.2.0"));
}

TEST(bad_entries_refused)
{
    static const char *const bad[] = {
        "1.2.3.4/33", "::/129", "foo", "", "/8", "1.2.3.4/", "1.2.3.4/-1", "1.2.3.4/8x",
        "1.2.3.4/1000", "1.2.3", "1.2.3.4.5", "256.0.0.1", "10.0.0.0/ 8", " 10.0.0.1",
        "::1%lo", "unix:", "UNIX", "localhost", "[::1]", "1.2.3.4/8/8", "::ffff:1.2.3.4/129",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct acl a;
        memset(&a, 0, sizeof a);
        char err[256] = "";
        int ok = CHECK_EQ_INT(acl_add(&a, bad[i], err, sizeof err), -1);
        ok &= CHECK(strstr(err, "status-allow") != NULL && strstr(err, bad[i]) != NULL);
        ok &= CHECK_EQ_INT(a.n, 0);
        if (!ok)
            UNIT_NOTE("'%s': '%s'", bad[i], err);
    }
    char err[256];
    struct acl a;
    memset(&a, 0, sizeof a);
    acl_add(&a, "1.2.3.4/33", err, sizeof err);
    CHECK(strstr(err, "0..32") != NULL);
    acl_add(&a, "::/129", err, sizeof err);
    CHECK(strstr(err, "0..128") != NULL);
}

TEST(full_list_refused)
{
    struct acl a;
    memset(&a, 0, sizeof a);
    char err[256], text[32];
    for (int i = 0; i < ACL_MAX; i++) {
        snprintf(text, sizeof text, "10.0.%d.0/24", i);
        CHECK_EQ_INT(acl_add(&a, text, err, sizeof err), 0);
    }
    CHECK_EQ_INT(acl_add(&a, "11.0.0.0/8", err, sizeof err), -1);
    CHECK(strstr(err, "too many") != NULL);
    CHECK_EQ_INT(acl_add(&a, "unix", err, sizeof err), 0); /* no slot needed */
    CHECK(allows(&a, "10.0.31.1"));
}
