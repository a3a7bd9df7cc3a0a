"""Verdicts on one message, from herd (the verdict driver) and from h11, in
one shape so the test can compare them.

A Verdict is ("accept", taken, fields), ("reject", None, {}),
("incomplete", None, {}), or, from herd only, ("split-mismatch", None,
{"why": ...}) when herd's answer depended on how the bytes were cut.
fields of a request head: method, target, minor, headers (raw name, value),
chunked, content_length (-1 when absent), close; of a chunked body: data;
of a response head: status, reason, minor, headers, chunked, content_length.
"""

import subprocess
from collections import namedtuple

Verdict = namedtuple("Verdict", "kind taken fields")

REJECT = Verdict("reject", None, {})
INCOMPLETE = Verdict("incomplete", None, {})

# What the driver gets before a chunked body in h11's case: the body alone
# is not a message.
CHUNKED_REQUEST = (b"POST / HTTP/1.1\r\nHost: a\r\n"
                   b"Transfer-Encoding: chunked\r\n\r\n")


# ---------------------------------------------------------------- herd


def _unhex(word):
    assert word[:1] == "x", word
    return bytes.fromhex(word[1:])


def _headers(words):
    out = []
    for w in words:
        name, value = w.split(":")
        out.append((_unhex(name), _unhex(value)))
    return out


def _parse_line(kind, line):
    words = line.split(" ")
    if words[0] == "reject":
        return REJECT
    if words[0] == "incomplete":
        return INCOMPLETE
    if words[0] == "split-mismatch":
        return Verdict("split-mismatch", None, {"why": words[1]})
    assert words[0] == "accept", line
    taken = int(words[1])
    if kind == "H":
        minor, chunked, cl, close = (int(w) for w in words[2:6])
        return Verdict("accept", taken, {
            "minor": minor, "chunked": chunked, "content_length": cl, "close": close,
            "method": _unhex(words[6]), "target": _unhex(words[7]),
            "headers": _headers(words[8:])})
    if kind == "C":
        return Verdict("accept", taken, {"data": _unhex(words[2])})
    status, minor, chunked, cl = (int(w) for w in words[2:6])
    return Verdict("accept", taken, {
        "status": status, "minor": minor, "chunked": chunked, "content_length": cl,
        "reason": _unhex(words[6]), "headers": _headers(words[7:])})


def herd_verdicts(driver, kind, cases, timeout=120):
    """Runs the driver once over every case of one kind ("H", "C" or "R")."""
    stdin = b"".join(b"%s %d\n%s" % (kind.encode(), len(c), c) for c in cases)
    out = subprocess.run([driver], input=stdin, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, timeout=timeout)
    if out.returncode != 0:
        raise AssertionError("verdict driver exited %d: %s"
                             % (out.returncode, out.stderr.decode(errors="replace")[-3000:]))
    lines = out.stdout.decode("ascii").splitlines()
    assert len(lines) == len(cases), "driver answered %d of %d cases" % (len(lines), len(cases))
    return [_parse_line(kind, line) for line in lines]


# ---------------------------------------------------------------- h11


def _framing(headers):
    """(chunked, content_length) from h11's normalised headers."""
    chunked = int(any(n == b"transfer-encoding" for n, _ in headers))
    cl = [v for n, v in headers if n == b"content-length"]
    return chunked, int(cl[0]) if cl else -1


def h11_request(h11, data):
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(data)
    try:
        ev = conn.next_event()
    except h11.RemoteProtocolError:
        return REJECT
    if ev is h11.NEED_DATA:
        return INCOMPLETE
    assert type(ev) is h11.Request, ev
    chunked, cl = _framing(ev.headers)
    close = b"close" in h11._headers.get_comma_header(ev.headers, b"connection")
    return Verdict("accept", len(data) - len(conn.trailing_data[0]), {
        "method": ev.method, "target": ev.target, "minor": int(ev.http_version[2:]),
        "headers": ev.headers.raw_items(), "chunked": chunked, "content_length": cl,
        "close": int(close)})


def h11_chunked(h11, body):
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(CHUNKED_REQUEST + body)
    data = []
    try:
        ev = conn.next_event()
        assert type(ev) is h11.Request, ev
        while True:
            ev = conn.next_event()
            if ev is h11.NEED_DATA:
                return INCOMPLETE
            if type(ev) is h11.EndOfMessage:
                break
            assert type(ev) is h11.Data, ev
            data.append(bytes(ev.data))
    except h11.RemoteProtocolError:
        return REJECT
    return Verdict("accept", len(body) - len(conn.trailing_data[0]), {"data": b"".join(data)})


def h11_response(h11, data):
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method="GET", target="/", headers=[("Host", "a")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(data)
    try:
        ev = conn.next_event()
    except h11.RemoteProtocolError:
        return REJECT
    if ev is h11.NEED_DATA:
        return INCOMPLETE
    assert type(ev) in (h11.Response, h11.InformationalResponse), ev
    chunked, cl = _framing(ev.headers)
    return Verdict("accept", len(data) - len(conn.trailing_data[0]), {
        "status": ev.status_code, "reason": ev.reason, "minor": int(ev.http_version[2:]),
        "headers": ev.headers.raw_items(), "chunked": chunked, "content_length": cl})
