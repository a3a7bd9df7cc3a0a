"""Generated upstream response heads, for upstream_parse_response against
h11 as a client: status-line variants (version, code, reason bytes), the
same framing and header-line variants as request heads, and byte-level
edits on some."""

from gen_requests import CONNECTIONS, OTHER_NAMES, framing_headers, header_line
from grammar import chance, eol, mutate_bytes, pick, poke, token, value

VERSIONS = [(60, b"HTTP/1.1"), (12, b"HTTP/1.0"), (1, b"HTTP/1.2"), (1, b"HTTP/2.0"),
            (1, b"HTTP/0.9"), (1, b"http/1.1"), (1, b"HTTP/1.1 "), (1, b"HTTP/11"),
            (1, b"HTTP/1."), (1, b"HTTP /1.1"), (1, b"HTTP/1.10")]

CODES = [(30, b"200"), (4, b"204"), (4, b"304"), (3, b"100"), (3, b"103"), (2, b"101"), (4, b"404"),
         (2, b"500"), (2, b"599"), (1, b"600"), (1, b"999"), (1, b"099"), (1, b"000"),
         (1, b"20"), (1, b"2000"), (1, b"abc"), (1, b"2 0"), (1, b"+20")]

REASONS = [(30, b" OK"), (5, b" Not Found"), (4, b""), (4, b" "), (2, b"  OK"), (2, b" a\tb"),
           (2, b" \x80\xff"), (1, b" \x7f"), (1, b" \x01"), (1, b" \x00"), (1, b" a\rb"),
           (1, b"\tOK"), (1, b"OK"), (1, b" OK "), (1, b" \x0b")]


def response_head(rng):
    lead = rng.choice([b"\r\n", b"\n", b" "]) if chance(rng, 0.02) else b""
    line = (pick(rng, VERSIONS) + (b" " if chance(rng, 0.97) else rng.choice([b"  ", b"\t", b""]))
            + pick(rng, CODES) + poke(rng, pick(rng, REASONS), 0.04) + eol(rng, 0.04))
    fields = framing_headers(rng)
    for _ in range(rng.randint(0, 5)):
        r = rng.random()
        if r < 0.2:
            fields.append((b"Connection", rng.choice(CONNECTIONS)))
        elif r < 0.5:
            fields.append((rng.choice(OTHER_NAMES + [b"Server", b"Date", b"Keep-Alive"]),
                           value(rng)))
        else:
            fields.append((token(rng), value(rng)))
    rng.shuffle(fields)
    head = lead + line + b"".join(header_line(rng, n, v) for n, v in fields) + eol(rng, 0.04)
    if chance(rng, 0.12):
        head = mutate_bytes(rng, head, rng.randint(1, 3))
    return head + rng.choice([b"", b"hello", b"5\r\nhello\r\n0\r\n\r\n", b"HTTP/1.1 200 OK\r\n"])


def response_heads(rng, n):
    return [response_head(rng) for _ in range(n)]
