"""Generated request heads: request-line variants, Host variants, every
Content-Length / Transfer-Encoding combination, Connection lists, obs-fold,
duplicates, bad line ends and whitespace, control bytes, heads at herd's
8192-byte limit and at 64 headers; then a few byte-level edits on some."""

from grammar import chance, eol, mutate_bytes, pick, poke, token, value

MAX_HEAD = 8192  # verdict.c's max head, herd's default --max-header-size

METHODS = [(30, b"GET"), (5, b"HEAD"), (10, b"POST"), (3, b"PUT"), (2, b"DELETE"),
           (2, b"OPTIONS"), (2, b"CONNECT"), (1, b"PATCH"), (1, b"TRACE"), (3, b"FOO-BAR"),
           (2, b"get"), (1, b"M~!#$"), (1, b""), (1, b"G\x00ET"), (1, b"GET\t")]

VERSIONS = [(60, b"HTTP/1.1"), (12, b"HTTP/1.0"), (1, b"HTTP/1.2"), (1, b"HTTP/2.0"),
            (1, b"HTTP/0.9"), (1, b"HTTP/9.9"), (1, b"http/1.1"), (1, b"HTTP/1.1 "),
            (1, b"HTTP/11"), (1, b"HTTP/1."), (1, b"HTTP /1.1"), (1, b"HTTP/1.10"),
            (1, b"HTTP/1.1\x00"), (1, b" HTTP/1.1")]

ODD_TARGETS = [b"*", b"http://h/x", b"https://h:8080/p?q", b"http://h", b"http://h?q",
               b"HTTP://H/", b"http:///x", b"http://?q", b"example.com:443", b"/a#f", b"//x",
               b"/a\\b", b"/<>", b"/{}", b"/|^", b"/`", b"/%", b"/%zz", b"/\x80", b"/a b",
               b"", b"a", b"/\x7f", b"/?", b"/??", b"/'\"", b"http://u@h/"]

HOSTS = [(30, b"a"), (6, b"example.com"), (6, b"example.com:8080"), (3, b"[::1]:80"),
         (3, b"127.0.0.1"), (2, b""), (1, b"a b"), (1, b"a/b"), (1, b"a@b"), (1, b"a?b"),
         (1, b"a#b"), (1, b"a\\b"), (1, b"\x80"), (1, b"a,b"), (1, b"a:"), (1, b"a\x01"),
         (1, b"a{b}"), (1, b"a\"b"), (1, b"a%20b"), (1, b"xn--d1a.example")]

CONTENT_LENGTHS = [(20, b"0"), (20, b"5"), (4, b"05"), (2, b"+5"), (2, b"-1"), (2, b"5,5"),
                   (2, b"5, 5"), (2, b"5,6"), (2, b" 5 "), (2, b"9" * 18), (2, b"9" * 19),
                   (2, b"0" * 20 + b"5"), (1, b"1" * 21), (1, b"0x5"), (1, b"5a"), (1, b""),
                   (1, b"1e3"), (1, b"\x805"), (1, b"5\t"), (1, b"\"5\"")]

TRANSFER_ENCODINGS = [(30, b"chunked"), (3, b"Chunked"), (3, b"CHUNKED"), (2, b"chunked "),
                      (2, b"gzip"), (2, b"chunked, gzip"), (2, b"gzip, chunked"),
                      (2, b"identity"), (1, b"chunked,"), (1, b",chunked"), (1, b""),
                      (1, b"chunked\x0b"), (1, b"chunked;q=1"), (1, b"\"chunked\""),
                      (1, b"chunked, chunked"), (1, b"ch unked")]

CONNECTIONS = [b"close", b"keep-alive", b"Close", b"foo, close", b"upgrade", b"close close",
               b"keep-alive, close", b"closed", b" close ", b"CLOSE", b"close\t,x", b",,close,,",
               b"x-close", b"close;q=1"]

OTHER_NAMES = [b"Accept", b"User-Agent", b"If-None-Match", b"If-Modified-Since", b"Range",
               b"If-Range", b"If-Match", b"If-Unmodified-Since", b"Expect", b"Cookie",
               b"X-Forwarded-For", b"Trailer", b"Upgrade"]

SEPS = [(30, b": "), (6, b":"), (3, b":\t"), (2, b":  "), (2, b": \t"), (1, b" :"),
        (1, b"\t:"), (1, b"::"), (1, b"")]


def recase(rng, name):
    r = rng.random()
    if r < 0.6:
        return name
    if r < 0.8:
        return name.lower()
    return name.upper()


# RFC 3986 pchar, less '%' (added on its own below)
PCHARS = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@"


def target(rng):
    if chance(rng, 0.15):
        return rng.choice(ODD_TARGETS)
    path = b"".join(b"/" + bytes(rng.choice(PCHARS) for _ in range(rng.randint(0, 8)))
                    for _ in range(rng.randint(1, 4)))
    if chance(rng, 0.2):
        path += b"%" + rng.choice([b"41", b"2F", b"2e", b"00", b"zz", b"4"])
    if chance(rng, 0.3):
        path += b"?" + token(rng, 0, 6) + b"=" + token(rng, 0, 6)
    return path


def framing_headers(rng):
    """Content-Length and Transfer-Encoding: none, one, both, or repeated."""
    cl = lambda: (b"Content-Length", pick(rng, CONTENT_LENGTHS))  # noqa: E731
    te = lambda: (b"Transfer-Encoding", pick(rng, TRANSFER_ENCODINGS))  # noqa: E731
    return pick(rng, [(55, []), (20, [cl()]), (12, [te()]), (4, [cl(), te()]),
                      (2, [te(), cl()]), (3, [cl(), cl()]), (2, [te(), te()]),
                      (1, [(b"Content-Length", b"5"), (b"Content-Length", b"5")])])


def host_headers(rng):
    host = lambda: (rng.choice([b"Host", b"Host", b"host", b"HOST"]), pick(rng, HOSTS))  # noqa: E731
    return pick(rng, [(85, [host()]), (7, []), (5, [host(), host()]),
                      (2, [host(), (b"Host", b"a")]), (1, [(b"Host ", b"a")])])


def header_fields(rng):
    fields = host_headers(rng) + framing_headers(rng)
    for _ in range(rng.randint(0, 5)):
        r = rng.random()
        if r < 0.25:
            fields.append((b"Connection", rng.choice(CONNECTIONS)))
        elif r < 0.6:
            fields.append((rng.choice(OTHER_NAMES), value(rng)))
        else:
            fields.append((token(rng), value(rng)))
    if chance(rng, 0.03):  # at the 64-header limit
        fields += [(b"X-%d" % i, b"v") for i in range(rng.randint(60, 66) - len(fields))]
    rng.shuffle(fields)
    return [(recase(rng, n), v) for n, v in fields]


def header_line(rng, name, val, k=1.0):
    """name: val, with pieces swapped for odd forms (k scales how often)."""
    name = poke(rng, name, 0.04 * k)
    val = poke(rng, val, 0.06 * k)
    if chance(rng, 0.1):
        val = rng.choice([b" ", b"\t", b"  "]) + val + rng.choice([b"", b" ", b"\t "])
    line = name + (pick(rng, SEPS) if chance(rng, k) else b": ") + val + eol(rng, 0.03 * k)
    if chance(rng, 0.03 * k):  # obs-fold: a continuation line
        line += rng.choice([b" ", b"\t", b"  "]) + value(rng, 8) + b"\r\n"
    return line


def body_after(rng):
    return rng.choice([b"", b"", b"hello", b"5\r\nhello\r\n0\r\n\r\n", b"GET / HTTP/1.1\r\n",
                       b"\r\n", b"\n"])


def pad_to_limit(rng, head, final):
    """Adds a header so the head is a few bytes under, at or over the limit."""
    want = MAX_HEAD + rng.randint(-2, 2)
    n = want - len(head) - len(final) - len(b"X-Pad: \r\n")
    return head + b"X-Pad: " + b"a" * max(n, 0) + b"\r\n"


def request_head(rng):
    # a third of the heads have only the field values above to differ on
    k = 0.0 if chance(rng, 0.35) else 1.0
    lead = rng.choice([b"\r\n", b"\n", b"\r\n\r\n", b"\r", b" "]) if chance(rng, 0.04) else b""
    method = poke(rng, pick(rng, METHODS), 0.03 * k)
    tgt = poke(rng, target(rng), 0.05 * k)
    if chance(rng, 0.01):
        tgt = b"/" + b"a" * (MAX_HEAD + rng.randint(-40, 2))
    sp1 = rng.choice([b"  ", b"\t", b""]) if chance(rng, 0.03 * k) else b" "
    sp2 = rng.choice([b"  ", b"\t", b""]) if chance(rng, 0.03 * k) else b" "
    head = lead + method + sp1 + tgt + sp2 + pick(rng, VERSIONS) + eol(rng, 0.04 * k)
    for name, val in header_fields(rng):
        head += header_line(rng, name, val, k)
    final = eol(rng, 0.04 * k)
    if chance(rng, 0.03):
        head = pad_to_limit(rng, head, final)
    head += final
    if chance(rng, 0.12 * k):
        head = mutate_bytes(rng, head, rng.randint(1, 3))
    return head + body_after(rng)


def request_heads(rng, n):
    return [request_head(rng) for _ in range(n)]
