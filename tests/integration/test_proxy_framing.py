"""The reverse proxy passes on no framing it did not produce (issue 11):
request smuggling through a lenient upstream, bodies framed anew both ways,
retries only of idempotent requests, header names with '_', and
100 Continue only to HTTP/1.1 clients. Each test runs on the event-loop
models that proxy (picked here, as test_proxy.py does)."""

import contextlib
import hashlib
import json
import os
import select
import signal
import socket
import time

import pytest

from conftest import HERD_ARGS, shim_env, worker_pids
from herdtest import RawConn, build_request, wait_for
from lenient_backend import Lenient
from proxy_backend import PATTERN, Backend, pattern_sha

pytestmark = pytest.mark.skipif(
    "--model" in HERD_ARGS, reason="picks its models itself")

MODELS = ["reuseport", "prefork", "dispatch", "threads", "coro", "uring"]


@pytest.fixture(params=MODELS)
def model(request):
    # coro proxies in the client's coroutine: two threads, two pools
    return ["--model", request.param] + (["--threads", "2"] if request.param == "coro" else [])


def one_pool(model):
    """The model with one keep-alive pool: one worker, or on coro one thread
    (each thread has its pool there, as each worker does)."""
    if "coro" in model:
        return ["--model", "coro", "--threads", "1"]
    return model + ["--workers", "1"]


@pytest.fixture
def backend(tmp_path):
    made = []

    def make(kind="unix"):
        b = Backend(f"unix:{tmp_path}/b{len(made)}.sock" if kind == "unix" else "tcp")
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()


@pytest.fixture
def lenient():
    b = Lenient()
    yield b
    b.close()


def echo(resp):
    assert resp.status == 200, resp
    return json.loads(resp.body)


# ------------------------------------------------------------ smuggling

def hidden(n=16):
    """A request a lenient parser may find inside a body: it asks for n
    body bytes, which would be the start of the next client's request."""
    return (b"GET /smuggled HTTP/1.1\r\nHost: x\r\nX-Req-Id: evil\r\n"
            b"Content-Length: %d\r\n\r\n" % n)


# Chunked bodies that end early for the lenient upstream, the hidden request
# after that end. RFC 9112 forbids each one (a framing field in a trailer:
# RFC 9110 6.5.1, and h11 refuses the ones it cannot use): the proxy
# answers 400.
MALFORMED = {
    "LF after chunk data": b"5\r\nhello\n0\r\n\r\n" + hidden(),
    "LF after the size": b"5\nhello\r\n0\n\r\n" + hidden(),
    "LF in an extension": b"5;ext\nhello\r\n0\r\n\r\n" + hidden(),
    "30 hex digits": b"0" * 29 + b"5\r\nhello\r\n0\r\n\r\n" + hidden(),
    "bare CR in a trailer": b"5\r\nhello\r\n0\r\n\r" + hidden(),
    "trailer line without a colon": b"5\r\nhello\r\n0\r\nXX" + hidden(),
    "a framing field in a trailer": b"5\r\nhello\r\n0\r\nX:" + hidden() + b"\r\n",
}
# Well-formed bodies with bytes a lenient upstream reads otherwise: trailers
# (one holding the hidden request: the upstream takes "X:" as the CRLF
# after the last chunk), extensions, leading zeros. Only their data may
# reach the upstream.
WELLFORMED = {
    "trailers with an embedded request":
        b"5\r\nhello\r\n0\r\nX:GET /smuggled HTTP/1.1\r\nHost: x\r\nX-Req-Id: evil\r\n\r\n\r\n",
    "extensions": b"5;a=\"b;c\";d\r\nhello\r\n0;e=f\r\n\r\n",
    "leading zeros": b"0000000000000005\r\nhello\r\n0\r\n\r\n",
}


def attack(srv, i, name, body, split):
    """One attacker request (its own connection); returns the response."""
    head = build_request("POST", "/attack", headers=[
        ("Transfer-Encoding", "chunked"), ("X-Req-Id", f"atk-{i}")])
    with srv.connect() as c:
        if split:  # the body in a later read: the upstream exchange has begun
            c.send(head)
            time.sleep(0.005)
            c.send(body)
        else:
            c.send(head + body)
        return c.read_response()


def test_no_request_smuggling_through_lenient_upstream(server, lenient, model):
    # One worker and one pooled upstream connection: attacker and victim
    # share it, so anything left over from an attack becomes victim input.
    srv = server(*one_pool(model), "--upstream", f"l={lenient.address}",
                 "--proxy", "/=l", "--upstream-keepalive", "1")
    forms = list(MALFORMED.items()) + list(WELLFORMED.items())
    victims = {}
    for i in range(200):
        name, body = forms[i % len(forms)]
        r = attack(srv, i, name, body, split=i % 2 == 1)
        if name in MALFORMED:
            assert r.status == 400, (i, name, r)
        else:
            info = echo(r)
            assert (info["path"], info["id"], info["body_sha"]) == (
                "/attack", f"atk-{i}", hashlib.sha256(b"hello").hexdigest()), (i, name, info)
        vbody = os.urandom(40)
        vid = f"victim-{i}"
        with srv.connect() as c:
            c.send(build_request("POST", "/victim", headers=[
                ("Cookie", f"session=secret-{i}"), ("X-Req-Id", vid),
                ("Content-Length", len(vbody))], body=vbody))
            info = echo(c.read_response())
        assert (info["method"], info["path"], info["id"], info["body_sha"]) == (
            "POST", "/victim", vid, hashlib.sha256(vbody).hexdigest()), (
            f"round {i}, after '{name}': the victim got {info}")
        victims[vid] = hashlib.sha256(vbody).hexdigest()
    seen = lenient.seen()
    assert not [s for s in seen if s["path"] != "/attack" and s["path"] != "/victim"], seen
    got = {s["id"]: s["body_sha"] for s in seen if s["path"] == "/victim"}
    assert got == victims


# ------------------------------------------------------------ bodies framed anew

def read_chunks(c):
    """Reads a chunked body strictly: each chunk line only hex digits and
    CRLF, no trailers. Returns (data, [sizes])."""
    data, sizes = bytearray(), []
    while True:
        line = c.read_until(b"\r\n")
        assert line[:-2] and all(ch in b"0123456789abcdef" for ch in line[:-2]), line
        n = int(line[:-2], 16)
        if n == 0:
            assert c.read_exact(2) == b"\r\n", "trailers passed on"
            return bytes(data), sizes
        data += c.read_exact(n)
        sizes.append(n)
        assert c.read_exact(2) == b"\r\n"


def test_chunked_response_loses_extensions_and_trailers(server, backend, model):
    b = backend()
    srv = server(*model, "--upstream", f"b={b.address}", "--proxy", "/=b")
    with srv.connect() as c:
        c.send(build_request("GET", "/chunkext"))
        head = c.read_until(b"\r\n\r\n")
        assert b"Transfer-Encoding: chunked\r\n" in head and b"Trailer" not in head, head
        data, _ = read_chunks(c)
        assert data == b"hello chunked world"
        # the connection goes on: the framing herd wrote was complete
        c.send(build_request("GET", "/echo"))
        assert json.loads(c.read_response().body)["target"] == "/echo"


def test_big_chunked_response_to_a_slow_reader(server, backend, model):
    """Chunks of many sizes through the bounded buffer while the client
    stalls: framing herd adds when the buffer is full waits, nothing lost."""
    b = backend()
    srv = server(*model, "--upstream", f"b={b.address}", "--proxy", "/=b")
    n = 3 * 1024 * 1024 + 17
    with srv.connect(rcvbuf=4096) as c:
        c.send(build_request("GET", f"/chunkbig?n={n}"))
        c.read_until(b"\r\n\r\n")
        time.sleep(0.3)
        data, sizes = read_chunks(c)
        assert len(data) == n and hashlib.sha256(data).hexdigest() == pattern_sha(n)
        assert max(sizes) <= 65536
        c.send(build_request("GET", "/echo"))
        assert c.read_response().status == 200


def test_request_bodies_reframed(server, backend, model):
    b = backend()
    srv = server(*model, "--upstream", f"b={b.address}", "--proxy", "/=b",
                 "--max-body-size", "16m")
    parts = [os.urandom(k) for k in (1, 3000, 70000, 200000, 5)]
    body = b"".join(b"%04x;ext=\"v\"\r\n%s\r\n" % (len(p), p) for p in parts)
    body += b"0\r\nX-Trailer: 1\r\n\r\n"
    with srv.connect() as c:
        c.send(build_request("POST", "/c", headers=[("Transfer-Encoding", "chunked"),
                                                    ("Trailer", "X-Trailer")]) + body)
        info = json.loads(c.read_response().body)
        assert info["body_len"] == sum(map(len, parts))
        assert info["body_sha"] == hashlib.sha256(b"".join(parts)).hexdigest()
        names = [k.lower() for k, _ in info["headers"]]
        assert names.count("transfer-encoding") == 1 and "content-length" not in names
        assert "trailer" not in names and "x-trailer" not in names
        assert info["chunk_exts"] == 0 and info["trailers"] == [], info
        # a Content-Length body goes up with its length, unchanged
        c.send(build_request("PUT", "/l", headers=[("Content-Length", 100000)],
                             body=PATTERN[:100000]))
        info = json.loads(c.read_response().body)
        assert info["body_sha"] == pattern_sha(100000)
        assert ("Content-Length", "100000") in [tuple(h) for h in info["headers"]]


def raw_upstream():
    """A listening socket that plays the upstream by hand."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(4)
    ls.settimeout(10)
    return ls


def test_upstream_sees_only_herds_chunk_lines(server, model):
    ls = raw_upstream()
    srv = server(*model, "--upstream", f"r=127.0.0.1:{ls.getsockname()[1]}",
                 "--proxy", "/=r")
    socks = [ls]
    try:
        c = srv.connect()
        socks.append(c)
        c.send(build_request("POST", "/raw", headers=[("Transfer-Encoding", "chunked")]))
        c.send(b"0003;a=1\r\nabc\r\n2;b\r\nde\r\n0;z=9\r\nT: v\r\n\r\n")
        up, _ = ls.accept()
        socks.append(up)
        up.settimeout(10)
        got = b""
        while b"\r\n\r\n" not in got or not got.endswith(b"\r\n\r\n") or \
                got.index(b"\r\n\r\n") + 4 == len(got):
            more = up.recv(65536)
            assert more, got
            got += more
        body = got.split(b"\r\n\r\n", 1)[1]
        assert body == b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", body
        up.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        assert c.read_response().body == b"ok"
    finally:
        for s in socks:
            s.close()


def accept_request(ls, socks):
    """Accepts herd's connection on the hand-played upstream ls and reads
    one request head from it; the socket joins socks (closed by the caller)."""
    up, _ = ls.accept()
    socks.append(up)
    up.settimeout(10)
    got = b""
    while b"\r\n\r\n" not in got:
        more = up.recv(65536)
        assert more, got
        got += more
    return up


@contextlib.contextmanager
def one_exchange(server, model, group):
    """herd proxying /up/ to a hand-played upstream, a client whose GET /up/x
    has reached it: yields (srv, client, upstream side); closes them all."""
    ls = raw_upstream()
    srv = server(*model, "--upstream", f"{group}=127.0.0.1:{ls.getsockname()[1]}",
                 "--proxy", f"/up/={group}")
    socks = [ls]
    try:
        c = srv.connect(timeout=10)
        socks.append(c)
        c.send(build_request("GET", "/up/x"))
        up = accept_request(ls, socks)
        yield srv, c, up
    finally:
        for s in socks:
            s.close()


@pytest.mark.parametrize("when", ["with the head", "after the head"])
def test_broken_chunked_response(server, model, when):
    """An upstream chunked body with a broken chunk line: when it came in
    the same read as the head, nothing has reached the client and it gets
    a clean 502 on a connection that stays open; once the head went out,
    the only honest signal left is a truncated answer and a close."""
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    broken = b"3\r\nabc\r\nzz\r\nxx\r\n0\r\n\r\n"
    with one_exchange(server, model, "r") as (srv, c, up):
        if when == "with the head":
            up.sendall(head + broken)
            r = c.read_response()
            assert r.status == 502, r
            c.send(build_request("GET", "/small.txt"))  # static: the connection stays open
            assert c.read_response().status == 200
        else:
            up.sendall(head + b"3\r\nabc\r\n")
            c.read_until(b"abc")  # the head and the first chunk went out
            up.sendall(b"zz\r\nxx\r\n0\r\n\r\n")
            c.read_to_close(timeout=5)


@pytest.mark.parametrize("how", ["close", "reset"])
def test_a_body_cut_short_upstream_is_logged(server, model, how):
    """The upstream ends a body early (a close or a reset) after the head
    went out: the client gets the truncated answer and a close, and the
    error log says why; it said nothing (red-team pass 15)."""
    with one_exchange(server, model, "cut") as (srv, c, up):
        up.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nPARTIAL")
        c.read_until(b"PARTIAL")
        if how == "reset":
            up.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
        up.close()
        assert c.read_to_close(timeout=5) == b""
        wait_for(lambda: "inside the response body" in srv.stderr_text(), timeout=5,
                 what="the log line")
        line = [l for l in srv.stderr_text().splitlines() if "inside the response body" in l]
        assert "upstream cut:" in line[0] and "cut short" in line[0], line


def test_a_204_loses_the_content_length_its_upstream_gave_it(server, model):
    """RFC 9110 8.6: no Content-Length in a 204. A client that believed the
    upstream's would wait for a body, or take the next answer's first bytes
    for it (red-team pass 15)."""
    with one_exchange(server, model, "r") as (srv, c, up):
        up.sendall(b"HTTP/1.1 204 No Content\r\nContent-Length: 4\r\nX-Kept: yes\r\n\r\nEVIL")
        head = c.read_until(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 204 "), head
        assert b"x-kept: yes" in head.lower() and b"content-length" not in head.lower(), head
        # the connection goes on, and nothing of the stray body reaches it
        c.send(build_request("GET", "/small.txt"))
        r = c.read_response()
        assert r.status == 200 and b"EVIL" not in r.body, r


def test_a_content_length_named_in_connection_still_frames_the_body(server, model):
    """An upstream whose Connection line names Content-Length: herd passes
    the body by that length, so the client must get it. Dropped as a
    hop-by-hop header, the keep-alive answer had no framing at all and the
    next answer on the connection was read as more of its body (red-team
    pass 18)."""
    with one_exchange(server, model, "r") as (srv, c, up):
        up.sendall(b"HTTP/1.1 200 OK\r\nConnection: Content-Length, X-Hop\r\n"
                   b"X-Hop: 1\r\nContent-Length: 5\r\n\r\nhello")
        head = c.read_until(b"\r\n\r\n").lower()
        assert b"content-length: 5\r\n" in head and b"x-hop" not in head, head
        assert b"connection" not in head, head
        assert c.read_exact(5) == b"hello"
        # the connection goes on, with the next answer read as an answer
        c.send(build_request("GET", "/small.txt"))
        r = c.read_response()
        assert r.status == 200 and r.body == b"0123456789abcdefghijklmnopqrstuvwxyz", r


@pytest.mark.parametrize("method,status,framing", [
    ("HEAD", b"200 OK", b"Content-Length: 38\r\n"),
    ("HEAD", b"200 OK", b""),                      # the GET's body would end at a close
    ("GET", b"204 No Content", b"Content-Length: 38\r\n")])
def test_an_answer_that_announces_a_body_it_must_not_have_ends_its_connection(
        server, model, method, status, framing):
    """A HEAD or 204 answer whose head announces a body (an app answering
    HEAD as GET): the body, if the upstream sends it, comes after the head,
    maybe much later. Pooled, the connection handed those bytes to the next
    request, another client's, as its answer (red-team pass 18: a forged
    answer 100 times in 100). The upstream here sends them only once the
    next request reaches it on the same connection, the worst timing."""
    ls = raw_upstream()
    srv = server(*one_pool(model), "--upstream", f"r=127.0.0.1:{ls.getsockname()[1]}",
                 "--proxy", "/up/=r")
    forged = b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nFORGED"
    socks = [ls]
    try:
        a = srv.connect(timeout=10)
        socks.append(a)
        a.send(build_request(method, "/up/a"))
        up = accept_request(ls, socks)
        up.sendall(b"HTTP/1.1 " + status + b"\r\n" + framing + b"\r\n")
        head = a.read_until(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 " + status[:3]), head
        b = srv.connect(timeout=10)
        socks.append(b)
        b.send(build_request("GET", "/up/b"))
        got = next_request(ls, up, socks)
        # on the same connection: the stray body first
        got.sendall((forged if got is up else b"") +
                    b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nreal")
        r = b.read_response()
        assert r.status == 200 and r.body == b"real", r
    finally:
        for x in socks:
            x.close()


@pytest.mark.parametrize("expect", [False, True])
def test_an_answer_before_the_whole_body_says_the_connection_closes(server, model, expect):
    """An upstream that answers before it read the body (a 413 or 401 to an
    upload, common): herd stops reading the body and closes the client
    connection once the answer is out, so the answer must say so (RFC 9112
    9.6, RFC 9110 10.1.1). It said nothing: a client took the connection
    for a kept-alive one and sent its next request into the close, which
    no client re-sends for a POST (red-team pass 32)."""
    with contextlib.ExitStack() as stack:
        ls = raw_upstream()
        stack.callback(ls.close)
        srv = server(*model, "--upstream", f"r=127.0.0.1:{ls.getsockname()[1]}",
                     "--proxy", "/up/=r")
        c = srv.connect(timeout=10)
        stack.callback(c.close)
        c.send(build_request("POST", "/up/upload", headers=[("Content-Length", 100000)] + (
            [("Expect", "100-continue")] if expect else [])) + b"x" * 10)
        socks = []
        up = accept_request(ls, socks)
        stack.callback(up.close)
        up.sendall(b"HTTP/1.1 413 Too Large\r\nContent-Length: 4\r\n\r\nnope")
        if expect:
            assert c.read_until(b"\r\n\r\n") == b"HTTP/1.1 100 Continue\r\n\r\n"
        r = c.read_response()
        assert r.status == 413 and r.body == b"nope", r
        assert "close" in r.conn_tokens(), r
        # and so it does, whether or not the client sends the rest
        c.send(b"x" * 1000)
        c.read_to_close(timeout=5)


def test_connect_is_never_proxied(server, model):
    """CONNECT with a path on a proxied route went to the upstream, and a
    2xx to it (a tunnel, to an RFC 9110 client) was relayed while herd read
    the connection on as HTTP (red-team pass 18). It gets the 405 any
    CONNECT gets, and the upstream never hears of it."""
    ls = raw_upstream()
    srv = server(*model, "--upstream", f"r=127.0.0.1:{ls.getsockname()[1]}",
                 "--proxy", "/up/=r")
    try:
        with srv.connect(timeout=10) as c:
            c.send(build_request("CONNECT", "/up/x"))
            assert c.read_response().status == 405
        assert select.select([ls], [], [], 0.3)[0] == [], "the upstream was asked"
    finally:
        ls.close()


# ------------------------------------------------------------ retries

def test_post_not_retried_get_retried(server, backend, model):
    b = backend()
    srv = server(*one_pool(model), "--upstream", f"b={b.address}", "--proxy", "/=b")
    echo(srv.get("/dropnext"))
    # the pooled connection takes the POST, reads it and closes unanswered
    r = srv.request(build_request("POST", "/post", headers=[("Content-Length", 3)],
                                  body=b"abc"))
    assert r.status == 502, r
    assert b.dropped == ["/post"] and b.paths() == ["/dropnext"], "the POST went up twice"
    assert b.conns == 1
    # a GET in the same spot is retried once, on a fresh connection
    echo(srv.get("/dropnext"))
    info = echo(srv.get("/get"))
    assert info["conn"] == 3 and b.dropped == ["/post", "/get"]
    assert b.paths() == ["/dropnext", "/dropnext", "/get"]


def test_a_server_that_closed_after_its_answer_is_not_sent_the_next_post(server, model):
    """A server that closes its connection right after an answer that did
    not say so (no Connection: close): the FIN comes with the answer's last
    bytes, in the same edge-triggered event, and no later event reports it.
    The connection went to the pool all the same and the next POST, sent
    on it a second later, got 502 (never re-sent), with no log line: 4 to 6
    times in 10 on reuseport and uring; coro's netpoll keeps the readiness
    and its sweep saw the close (red-team pass 28)."""
    ls = raw_upstream()
    srv = server(*one_pool(model), "--upstream", f"r=127.0.0.1:{ls.getsockname()[1]}",
                 "--proxy", "/up/=r")
    socks = [ls]
    try:
        for i in range(10):
            with srv.connect(timeout=10) as c:
                c.send(build_request("GET", "/up/get"))
                up = accept_request(ls, socks)
                up.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                up.close()
                assert c.read_response().body == b"ok"
                time.sleep(0.3)  # the pool has long had the FIN
                c.send(build_request("POST", "/up/post", headers=[("Content-Length", 3)],
                                     body=b"abc"))
                if not select.select([ls], [], [], 5)[0]:  # sent on the dead one
                    pytest.fail(f"round {i}: {c.read_response()}")
                up = accept_request(ls, socks)
                up.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\npost")
                r = c.read_response()
                assert r.status == 200 and r.body == b"post", (i, r)
                up.close()
    finally:
        for s in socks:
            s.close()


def next_request(ls, up, socks):
    """The socket herd's next request reached on the hand-played upstream:
    up (the pooled connection, its head read), or a fresh one from ls."""
    if select.select([up], [], [], 0.5)[0]:
        try:
            got = up.recv(65536)
        except ConnectionResetError:  # dropped with bytes unread
            got = b""
        if got:
            while b"\r\n\r\n" not in got:
                more = up.recv(65536)
                assert more, got
                got += more
            return up
    return accept_request(ls, socks)


def test_bytes_past_an_answer_that_filled_the_read_are_not_the_next_answer(server, model):
    """An upstream answer whose last byte ends exactly where herd's read of
    it ends (16384 bytes: the head's read size), with a second answer
    behind it in the same write: the bytes past the answer stay in the
    socket, their edge was the answer's own, and nothing marks the
    connection. Pooled as it was, the next request through it got those
    bytes as its answer ("EVIL"): a hostile or broken upstream poisoned
    another client's response. Pass 28 marked bytes that come in a later
    event; this is the one that comes in the same event."""
    ls = raw_upstream()
    srv = server(*one_pool(model), "--upstream", f"r=127.0.0.1:{ls.getsockname()[1]}",
                 "--proxy", "/up/=r")
    socks = [ls]
    try:
        with srv.connect(timeout=10) as c:
            c.send(build_request("GET", "/up/first"))
            up = accept_request(ls, socks)
            body = b"x" * 100
            head = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nX-Pad: "
            pad = 16384 - len(head) - len(b"\r\n\r\n") - len(body)
            answer = head + b"p" * pad + b"\r\n\r\n" + body
            assert len(answer) == 16384
            up.sendall(answer + b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nEVIL")
            r = c.read_response()
            assert r.status == 200 and r.body == body
            time.sleep(0.3)
            c.send(build_request("GET", "/up/second"))
            up = next_request(ls, up, socks)
            up.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ngood")
            r = c.read_response()
            assert r.body == b"good", f"the next request got {r.status} {r.body!r}"
    finally:
        for s in socks:
            s.close()


def all_stopped(pid):
    """Whether every thread of process pid is stopped (state T)."""
    for t in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{t}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] != "T":
                return False
    return True


def post_crossing_an_idle_close(c, ls, socks, worker, server_gone=False):
    """A GET through the hand-played upstream ls pools its connection; then,
    with the worker stopped, client c sends a POST and the server closes
    that idle connection (and its listen socket too when server_gone), so
    both reach herd in the one wakeup after the worker resumes."""
    c.send(build_request("GET", "/up/get"))
    up = accept_request(ls, socks)
    up.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    assert c.read_response().body == b"ok"
    time.sleep(0.3)  # pooled
    os.kill(worker, signal.SIGSTOP)
    try:
        # every thread stopped: the signal stops the others only once the
        # thread it went to runs
        wait_for(lambda: all_stopped(worker), timeout=5, what="the worker stopped")
        c.send(build_request("POST", "/up/post", headers=[("Content-Length", 3)], body=b"abc"))
        time.sleep(0.2)
        up.close()  # the server's idle close, after the POST left the client
        if server_gone:
            ls.close()
        time.sleep(0.2)
    finally:
        os.kill(worker, signal.SIGCONT)


def test_a_post_does_not_take_a_pooled_connection_closed_in_the_same_wakeup(server, model):
    """The server closes an idle pooled connection while a POST for it is
    on its way: both reach herd in one wakeup (the worker is stopped
    meanwhile, as a loaded one is busy), the POST's event first. It took the
    dead connection before the pool's event said it had closed, and a POST
    is never re-sent: 502 for a client that did nothing wrong. A request
    that may not go again now looks at a pooled connection first."""
    ls = raw_upstream()
    srv = server(*one_pool(model), "--upstream", f"r=127.0.0.1:{ls.getsockname()[1]}",
                 "--proxy", "/up/=r")
    wait_for(lambda: len(worker_pids(srv)) == 1, timeout=5, what="the worker")
    (worker,) = worker_pids(srv)
    socks = [ls]
    try:
        with srv.connect(timeout=10) as c:
            post_crossing_an_idle_close(c, ls, socks, worker)
            if not select.select([ls], [], [], 5)[0]:
                pytest.fail(f"the POST went on the closed connection: {c.read_response()}")
            up = accept_request(ls, socks)
            up.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\npost")
            r = c.read_response()
            assert r.status == 200 and r.body == b"post", r
    finally:
        for s in socks:
            s.close()


def test_a_post_that_closed_a_dead_pooled_connection_leaves_the_pool_count_true(
        server, model, short_tmp):
    """As above, but the server is gone too (its unix listen socket
    closed, so a new connection is refused at once): the POST closes the
    dead pooled connection, none can be opened, 502. The status page then
    counts no idle connection to that server. The closed one stayed
    counted (the pool was published only when a connection was taken or
    opened), and the stall judge of every other worker reads that count:
    an idle connection elsewhere that the server may be waiting on."""
    path = str(short_tmp / "up.sock")
    ls = socket.socket(socket.AF_UNIX)
    ls.bind(path)
    ls.listen(4)
    ls.settimeout(10)
    srv = server(*one_pool(model), "--upstream", f"r=unix:{path}",
                 "--proxy", "/up/=r", "--status-path", "/st")
    wait_for(lambda: len(worker_pids(srv)) == 1, timeout=5, what="the worker")
    (worker,) = worker_pids(srv)
    socks = [ls]
    try:
        with srv.connect(timeout=10) as c:
            post_crossing_an_idle_close(c, ls, socks, worker, server_gone=True)
            assert c.read_response().status == 502
        [u] = json.loads(srv.get("/st?format=json").body)["upstreams"]
        assert u["idle"] == 0 and u["busy"] == 0, u
    finally:
        for s in socks:
            s.close()


# ------------------------------------------------------------ headers with '_'

def test_underscore_headers_dropped_unless_passed(server, backend, model):
    b = backend("tcp")
    hs = [("X_Forwarded_For", "6.6.6.6"), ("X_Forwarded_Proto", "https"), ("X-Kept", "1")]
    srv = server(*model, "--upstream", f"b={b.address}", "--proxy", "/=b")
    info = echo(srv.get("/u", headers=hs))
    names = [k for k, _ in info["headers"]]
    assert "X_Forwarded_For" not in names and "X_Forwarded_Proto" not in names, names
    assert "6.6.6.6" not in json.dumps(info)
    assert [v for k, v in info["headers"] if k == "X-Forwarded-For"] == ["127.0.0.1"]
    assert "X-Kept" in names
    assert "underscores" not in srv.stderr_text()

    srv = server(*model, "--upstream", f"b={b.address}", "--proxy", "/=b",
                 "--proxy-pass-underscores")
    info = echo(srv.get("/u", headers=hs))
    assert ("X_Forwarded_For", "6.6.6.6") in [tuple(h) for h in info["headers"]]
    assert ("X_Forwarded_Proto", "https") in [tuple(h) for h in info["headers"]]
    assert srv.stderr_text().count("--proxy-pass-underscores") == 1, srv.stderr_text()


def test_header_names_php_reads_as_others_are_dropped(server, backend, model):
    """PHP's HTTP servers (php -S among them) read '.' in a header name as
    '_', as CGI servers read '_' as '-': `X.Forwarded.For: 6.6.6.6` was
    passed on and became the script's HTTP_X_FORWARDED_FOR (red-team pass
    32). Only names of letters, digits and '-' go up (and '_' with
    --proxy-pass-underscores), as nginx's ignore_invalid_headers does."""
    b = backend("tcp")
    hs = [("X.Forwarded.For", "6.6.6.6"), ("X-Real.IP", "6.6.6.6"), ("X~Real-IP", "6.6.6.6"),
          ("X_Under", "1"), ("X-Kept-2", "1")]
    for extra in ([], ["--proxy-pass-underscores"]):
        srv = server(*model, "--upstream", f"b={b.address}", "--proxy", "/=b", *extra)
        info = echo(srv.get("/u", headers=hs))
        names = [k for k, _ in info["headers"]]
        assert "6.6.6.6" not in json.dumps(info), info["headers"]
        assert "X-Kept-2" in names
        assert ("X_Under" in names) == bool(extra), names
        assert [v for k, v in info["headers"] if k == "X-Forwarded-For"] == ["127.0.0.1"]


def test_pass_underscores_config_line(server, backend, tmp_path):
    b = backend()
    conf = tmp_path / "herd.conf"
    conf.write_text(f"upstream = b={b.address}\nproxy = /=b\nproxy-pass-underscores\n")
    srv = server("--config", conf)
    info = echo(srv.get("/u", headers=[("My_Header", "v")]))
    assert ("My_Header", "v") in [tuple(h) for h in info["headers"]]


# ------------------------------------------------------------ 100 Continue

def test_100_continue_only_to_http11(server, backend, model):
    b = backend()
    srv = server(*model, "--upstream", f"b={b.address}", "--proxy", "/=b")
    for version in ("HTTP/1.0", "HTTP/1.1"):
        with srv.connect() as c:
            c.send(build_request("POST", "/e", version=version, headers=[
                ("Expect", "100-continue"), ("Content-Length", 5)]))
            if version == "HTTP/1.1":
                assert c.read_until(b"\r\n\r\n") == b"HTTP/1.1 100 Continue\r\n\r\n"
            else:
                assert c.nothing_within(0.5), "100 Continue to an HTTP/1.0 client"
            c.send(b"hello")
            if version == "HTTP/1.0":
                rest = c.read_to_close()
                assert b"100 Continue" not in rest and rest.startswith(b"HTTP/1.1 200 "), rest
            else:
                assert echo(c.read_response())["body_len"] == 5


@pytest.mark.parametrize("took", [9, 0])
def test_100_continue_cut_short_by_a_full_socket_goes_whole_before_the_answer(
        server, backend, model, took):
    """A client socket with little room (the client pipelined and does not
    read) may take only part of the interim line, or none. The rest must go
    before the answer: a cut-short "HTTP/1.1 " ran into the final head, and
    a refused line was lost, so a client waiting for it sent no body.
    tests/tools/short_send.c makes the socket take `took` bytes of it."""
    b = backend()
    srv = server(*model, "--upstream", f"b={b.address}", "--proxy", "/=b",
                 env=shim_env("short_send", SHORT_SEND_PREFIX="HTTP/1.1 100 Continue",
                              SHORT_SEND_BYTES=took))
    with srv.connect() as c:
        c.send(build_request("POST", "/e", headers=[("Expect", "100-continue"),
                                                   ("Content-Length", 5)]))
        assert c.read_until(b"\r\n\r\n") == b"HTTP/1.1 100 Continue\r\n\r\n"
        c.send(b"hello")
        assert echo(c.read_response())["body_len"] == 5
        assert echo(srv.get("/again"))["body_len"] == 0
