"""Generated chunked bodies (RFC 9112 7.1): chunk sizes in hex of every
case and length (leading zeros, 16/17/20/30 digits, off by one), extension
syntax (BWS, quoted strings, escapes, bare CR or LF, empty names), line
ends, data holding CR and LF, trailers (no colon, obs-fold, bare CR,
framing fields, bad bytes), chunk lines at herd's 4096-byte limit; then a
few byte-level edits on some. The bytes of a next request follow each
body, so where the body ends is compared too."""

from grammar import chance, eol, mutate_bytes, pick, poke, value

CHUNK_LINE_MAX = 4096  # body.h's BODY_CHUNK_LINE_MAX

NEXT = b"GET /next HTTP/1.1\r\nHost: a\r\n\r\n"

EXTENSIONS = [(60, b""), (6, b";a"), (6, b";a=b"), (4, b';a="q"'), (2, b';a="q\\"x"'),
              (2, b";a;b=c;d"), (3, b" ;a"), (2, b"\t;a"), (2, b"; a"), (2, b";a =b"),
              (2, b";a= b"), (2, b";a=b "), (1, b";"), (1, b";=b"), (1, b";a="),
              (1, b';a="open'), (1, b";a\rb"), (1, b";a\nb"), (1, b";a=\x80"),
              (1, b";a=b\x00"), (1, b';a="\x7f"'), (1, b";a,b"), (1, b";a=b=c"),
              (1, b';a="\\'), (1, b';a=""'), (1, b";a=\"x\"y")]

TRAILER_NAMES = [(20, b"X-T"), (4, b"Expires"), (3, b"Content-Length"),
                 (3, b"Transfer-Encoding"), (2, b"content-length"), (2, b"Host"),
                 (2, b"Trailer"), (1, b"X T"), (1, b""), (1, b"X\x00"), (1, b"X:Y")]

TRAILER_VALUES = [(30, None), (4, b"5"), (3, b"chunked"), (2, b"gzip"), (2, b"x"),
                  (2, b"a\rb"), (1, b"a\x00b"), (1, b"\x7f"), (1, b"\x01"), (1, b"5, 5"),
                  (1, b"5,6"), (1, b" \t")]


def size_text(rng, n):
    """The chunk-size for n data bytes, in one of its many spellings."""
    r = rng.random()
    if r < 0.03:
        n += rng.choice([-1, 1])
        n = max(n, 0)
    digits = b"%x" % n
    if chance(rng, 0.3):
        digits = digits.upper()
    if r < 0.15:
        width = rng.choice([2, 4, 15, 16, 16, 17, 19, 20, 21, 30])
        digits = digits.rjust(width, b"0")
    elif r < 0.2:
        digits = rng.choice([b"0x", b"+", b" ", b"-", b""]) + digits
    elif r < 0.23:
        digits += rng.choice([b"g", b" ", b"\t", b"h", b"\x00"])
    return digits


def ext(rng):
    e = pick(rng, EXTENSIONS)
    if chance(rng, 0.01):  # a chunk line at, or just past, 4096 bytes
        e = b";a=" + b"b" * (CHUNK_LINE_MAX + rng.randint(-8, 2) - 6)
    return poke(rng, e, 0.03)


def data(rng):
    n = pick(rng, [(50, rng.randint(1, 16)), (30, rng.randint(17, 300)),
                   (3, rng.randint(1000, 20000))])
    alphabet = b"abc\r\n0;\x00\xff"
    return bytes(rng.choice(alphabet) if chance(rng, 0.2) else 0x61 + i % 26 for i in range(n))


def trailer_line(rng):
    if chance(rng, 0.04):
        return rng.choice([b" folded\r\n", b"\tfolded\r\n", b"NoColon\r\n", b":v\r\n",
                           b"X-T : v\r\n", b"X-T:v\n", b"X-T:v\r"])
    val = pick(rng, TRAILER_VALUES)
    if val is None:
        val = value(rng, 12)
    return pick(rng, TRAILER_NAMES) + rng.choice([b": ", b":", b":\t"]) + val + eol(rng, 0.03)


def chunked_body(rng):
    body = b""
    for _ in range(pick(rng, [(20, 0), (50, 1), (20, 2), (10, rng.randint(3, 8))])):
        d = data(rng)
        body += size_text(rng, len(d)) + ext(rng) + eol(rng, 0.03) + d + eol(rng, 0.03)
    body += size_text(rng, 0) + ext(rng) + eol(rng, 0.03)
    for _ in range(pick(rng, [(75, 0), (18, 1), (7, rng.randint(2, 4))])):
        body += trailer_line(rng)
    body += eol(rng, 0.04)
    if chance(rng, 0.12):
        body = mutate_bytes(rng, body, rng.randint(1, 3))
    return body + rng.choice([NEXT, NEXT, b"", b"\r\n"])


def chunked_bodies(rng, n):
    return [chunked_body(rng) for _ in range(n)]


# The six forms h11 0.16 rejects that herd accepted before 4291807: each is
# a place where two parsers split one stream into different messages.
H11_REJECTS = {
    "lf_after_data": b"5\r\nhello\n0\r\n\r\n",
    "lf_after_size": b"5\nhello\r\n0\r\n\r\n",
    "lf_in_extension": b"5;a\nb\r\nhello\r\n0\r\n\r\n",
    "thirty_hex_digits": b"0" * 29 + b"5\r\nhello\r\n0\r\n\r\n",
    "bare_cr_in_trailer": b"5\r\nhello\r\n0\r\nX-T: a\rb\r\n\r\n",
    "trailer_without_colon": b"5\r\nhello\r\n0\r\nX-T\r\n\r\n",
}

# Forms the differential found herd laxer on, fixed in body.c.
HERD_WAS_LAXER = {
    "bws_before_extension": b"5 ;a=b\r\nhello\r\n0\r\n\r\n",
    "tab_before_extension": b"5\t;a\r\nhello\r\n0\r\n\r\n",
    "content_length_trailer": b"5\r\nhello\r\n0\r\nContent-Length: x\r\n\r\n",
    "transfer_encoding_trailer": b"5\r\nhello\r\n0\r\nTransfer-Encoding: gzip\r\n\r\n",
}
