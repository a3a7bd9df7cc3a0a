"""Timeouts: header, keep-alive, send."""

import hashlib
import select
import socket
import time

import pytest

from herdtest import ConnClosed, RawConn, build_request, get_req, wait_for

pytestmark = pytest.mark.slow


def trickle_until_closed(c, first, pieces, interval, limit):
    """Send `first`, then one piece every `interval` s, until the server
    closes. Returns seconds from the call to the close (or None)."""
    t0 = time.monotonic()
    c.send(first)
    i = 0
    while time.monotonic() - t0 < limit:
        r, _, _ = select.select([c.sock], [], [], interval)
        if r:
            try:
                data = c.sock.recv(65536)
            except ConnectionResetError:
                return time.monotonic() - t0
            if not data:
                return time.monotonic() - t0
            continue          # e.g. a 408 before the close
        if not c.send_ignore_errors(pieces[i % len(pieces)]):
            return time.monotonic() - t0
        i += 1
    return None


def test_header_timeout_cuts_trickling_client(server):
    srv = server("--header-timeout", "1s")
    with srv.connect() as c:
        elapsed = trickle_until_closed(c, b"GET /small.txt HTTP/1.1\r\nHost: t\r\n",
                                       [b"X-Slow: 1\r\n"], 0.2, 10)
    assert elapsed is not None, "trickling client never cut off (header timeout missing)"
    assert 0.8 <= elapsed <= 3.5, f"cut after {elapsed:.2f}s with --header-timeout 1s"


def test_header_timeout_byte_by_byte_request_line(server):
    srv = server("--header-timeout", "1s")
    with srv.connect() as c:
        elapsed = trickle_until_closed(c, b"G", [bytes([b]) for b in b"ET /" + b"a" * 200],
                                       0.1, 10)
    assert elapsed is not None and elapsed <= 3.5, elapsed


def test_header_timeout_silent_connection(server):
    """Connect and send nothing: the head timer runs from accept."""
    srv = server("--header-timeout", "1s")
    with srv.connect() as c:
        closed, elapsed, _ = c.closed_within(8)
    assert closed, "silent connection never closed"
    assert elapsed <= 3.5, elapsed


def test_header_timeout_does_not_cut_fast_requests(server, site):
    srv = server("--header-timeout", "1s")
    with srv.connect() as c:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 2.2:          # > 2x the header timeout
            c.send(get_req("/small.txt"))
            r = c.read_response()
            assert r.status == 200
            time.sleep(0.1)


def test_header_timeout_does_not_apply_to_keepalive_idle(server, site):
    """After a response the idle time is governed by the keep-alive timeout
    (75s default), not the 1s header timeout."""
    srv = server("--header-timeout", "1s")
    with srv.connect() as c:
        c.send(get_req("/small.txt"))
        assert c.read_response().status == 200
        assert c.nothing_within(2.0), "idle keep-alive conn closed by the header timeout"
        c.send(get_req("/small.txt"))
        r = c.read_response()
        assert r.status == 200 and r.body == site.files["small.txt"]
        # a second head that trickles is still cut by the header timeout
        elapsed = trickle_until_closed(c, b"GET /small.txt HTTP/1.1\r\n",
                                       [b"X-Slow: 1\r\n"], 0.2, 10)
        assert elapsed is not None and elapsed <= 3.5, elapsed


def test_keepalive_timeout_closes_idle(server):
    srv = server("--keepalive-timeout", "1s")
    with srv.connect() as c:
        c.send(get_req("/small.txt"))
        assert c.read_response().status == 200
        closed, elapsed, extra = c.closed_within(8)
    assert closed, "idle keep-alive connection never closed"
    assert extra == b"" or extra.startswith(b"HTTP/1.1 408"), extra[:200]
    assert 0.7 <= elapsed <= 3.5, f"closed after {elapsed:.2f}s with --keepalive-timeout 1s"


def test_keepalive_timeout_resets_on_activity(server, site):
    srv = server("--keepalive-timeout", "1s")
    with srv.connect() as c:
        t0 = time.monotonic()
        n = 0
        while time.monotonic() - t0 < 2.5:
            c.send(get_req("/small.txt"))
            r = c.read_response()
            assert r.status == 200
            n += 1
            time.sleep(0.4)          # pacing below the timeout, not synchronisation
        assert n >= 5


def test_keepalive_timeout_default_is_long(shared):
    with shared.connect() as c:
        c.send(get_req("/small.txt"))
        assert c.read_response().status == 200
        assert c.nothing_within(2.0), "default keep-alive timeout is far shorter than 75s"
        assert c.is_open()


def test_send_timeout_drops_stalled_reader(server, site):
    srv = server("--send-timeout", "1s")
    c = srv.connect(rcvbuf=4096)
    try:
        c.send(get_req("/big.bin"))
        head = c.read_until(b"\r\n\r\n")
        assert b" 200 " in head.split(b"\r\n")[0]
        wait_for(lambda: srv.holds_connection(c), timeout=5, what="server-side socket")
        t0 = time.monotonic()
        wait_for(lambda: not srv.holds_connection(c), timeout=10,
                 what="server to drop a reader that stopped reading (--send-timeout 1s)")
        elapsed = time.monotonic() - t0
        assert elapsed <= 5, f"stalled connection dropped after {elapsed:.1f}s"
        # the client sees a truncated body, then EOF/RST
        rest = c.read_to_close(timeout=20)
        assert len(rest) < site.big_size
    finally:
        c.close()
    assert srv.get("/small.txt").status == 200


def test_default_send_timeout_keeps_stalled_reader(server, site):
    """Control for the test above: with the default 60s, a reader stalled
    for 3s is still connected."""
    srv = server()
    c = srv.connect(rcvbuf=4096)
    try:
        c.send(get_req("/big.bin"))
        c.read_until(b"\r\n\r\n")
        wait_for(lambda: srv.holds_connection(c), timeout=5, what="server-side socket")
        time.sleep(3)
        assert srv.holds_connection(c), "stalled reader dropped long before --send-timeout"
    finally:
        c.close()


# ---- the request-body clock: --body-timeout, --body-min-rate

BODY_CLOCK = ("--body-timeout", "2s", "--body-min-rate", "100")


def body_head(framing, length):
    """A GET with a body (answered at once, its body then read past)."""
    if framing == "chunked":
        return (build_request("GET", "/small.txt", headers=[("Transfer-Encoding", "chunked")])
                + b"%x\r\n" % length)
    return build_request("GET", "/small.txt", headers=[("Content-Length", str(length))])


@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_body_timeout_cuts_a_body_below_the_min_rate(server, site, framing):
    """1 byte every 200 ms (5 bytes/s, below --body-min-rate 100): cut when
    the body clock runs out, 2 s plus 10 ms per byte received (~2.1 s).
    Body bytes must not restart a timer (before, every byte re-armed the
    15 s header timer: a body of 100000 bytes could trickle for a day)."""
    srv = server(*BODY_CLOCK)
    with srv.connect() as c:
        elapsed = trickle_until_closed(c, body_head(framing, 100000), [b"x"], 0.2, 10)
        assert elapsed is not None, "a body trickling below --body-min-rate was never cut"
        assert 1.8 <= elapsed <= 3.5, f"cut after {elapsed:.2f}s; expected ~2.1s"
        wait_for(lambda: not srv.holds_connection(c), timeout=5,
                 what="the server to close its socket")
    assert srv.get("/small.txt").status == 200


def test_body_longer_than_header_timeout_at_a_fair_rate_succeeds(server, site):
    """A 3 s upload at 1000 bytes/s with --header-timeout 1s: the body is
    not a head, and its rate keeps extending its clock (2 s + 30 s)."""
    srv = server("--header-timeout", "1s", *BODY_CLOCK)
    with srv.connect() as c:
        c.send(body_head("length", 3000))
        r = c.read_response()
        assert r.status == 200 and r.body == site.files["small.txt"]
        t0 = time.monotonic()
        for _ in range(30):
            c.send(b"y" * 100)
            time.sleep(0.1)
        assert time.monotonic() - t0 >= 3.0
        c.send(get_req("/index.html"))
        r = c.read_response()
        assert r.status == 200 and r.body == site.files["index.html"]
        # after the body, a trickled head is cut by the header timeout again
        elapsed = trickle_until_closed(c, b"GET /small.txt HTTP/1.1\r\n",
                                       [b"X-Slow: 1\r\n"], 0.2, 10)
        assert elapsed is not None and elapsed <= 3.5, elapsed
        wait_for(lambda: not srv.holds_connection(c), timeout=5,
                 what="the server to close its socket")


def test_body_min_rate_0_bounds_the_whole_body(server, site):
    """--body-min-rate 0: no extension, the whole body within the timeout,
    however fast it keeps coming."""
    srv = server("--body-timeout", "1s", "--body-min-rate", "0")
    with srv.connect() as c:
        elapsed = trickle_until_closed(c, body_head("length", 100000), [b"z" * 100], 0.05, 10)
    assert elapsed is not None, "--body-min-rate 0 never cut a body that outlived the timeout"
    assert 0.8 <= elapsed <= 2.5, f"cut after {elapsed:.2f}s with --body-timeout 1s"


def test_lingering_close_is_bounded_against_a_client_that_keeps_sending(server):
    """A Connection: close answer with input behind its request lingers: the
    server shuts its side, then reads and drops what comes, so a close with
    unread input cannot reset the answer away. A client that keeps sending
    after the answer's EOF must still be cut once the linger time (5 s) is
    up, not held open for as long as it sends."""
    srv = server()
    with srv.connect() as c:
        c.send(get_req("/small.txt", headers=[("Connection", "close")]) + b"junk\r\n" * 50)
        r = c.read_response()
        assert r.status == 200
        t0 = time.monotonic()
        assert c.sock.recv(1) == b"", "no EOF after the Connection: close answer"
        cut = None
        while time.monotonic() - t0 < 20:
            if not c.send_ignore_errors(b"more junk\r\n"):
                cut = time.monotonic() - t0
                break
            time.sleep(0.2)
    assert cut is not None, "a client sending after a closing answer was never cut"
    assert cut <= 9, f"cut {cut:.1f}s after the answer; the linger time is 5s"
