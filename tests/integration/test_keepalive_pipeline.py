"""Keep-alive, Connection handling, HTTP/1.0, pipelining, many connections."""

import hashlib
import os
import selectors
import socket
import threading
import time

import pytest

from conftest import descendants, tcp_sockets, tree_fds
from herdtest import (OP_TIMEOUT, RawConn, build_request, check_common, etag_for, get_req,
                      parse_head, segments_without_data, wait_for)


def test_keepalive_is_default_for_11(shared, site):
    with shared.connect() as c:
        for _ in range(5):
            c.send(get_req("/small.txt"))
            r = c.read_response()
            assert r.status == 200 and r.body == site.files["small.txt"]
            assert "close" not in r.conn_tokens()
        assert c.is_open()


@pytest.mark.parametrize("value", ["close", "Close", "keep-alive, close"])
def test_connection_close_honoured(shared, site, value):
    with shared.connect() as c:
        c.send(get_req("/small.txt", headers=[("Connection", value)]))
        r = c.read_response()
        assert r.status == 200 and r.body == site.files["small.txt"]
        assert "close" in r.conn_tokens(), r
        c.expect_close()


@pytest.mark.parametrize("request_bytes,status", [
    (get_req("/small.txt", headers=[("Connection", "close")]), 200),
    (get_req("/small.txt", version="HTTP/1.0", host=None), 200),
    (b"GET / HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n", 400),  # shut down, lingering
])
def test_last_answer_carries_the_fin(shared, request_bytes, status):
    """The last answer before a close leaves with MSG_MORE, so the close (or
    the lingering shutdown) tacks the FIN onto its segment: the client takes
    the SYN-ACK, the ACK of its request and one segment with the answer and
    the FIN, not a fourth segment with the FIN alone."""
    with shared.connect() as c:
        c.send(request_bytes)
        r = c.read_response()
        assert r.status == status
        c.expect_close()
        if c.sock.family == socket.AF_UNIX:
            pytest.skip("a Unix socket has no segments")
        assert segments_without_data(c.sock) <= 2


def test_close_answer_survives_input_left_unread(shared, site):
    """A Connection: close request followed by bytes the server never
    reads: closing with unread input resets the connection, so the answer
    (held back for its FIN) must have left by then."""
    with shared.connect() as c:
        req = get_req("/small.txt", headers=[("Connection", "close")])
        # one send: the junk is in the socket before the answer is written
        sender = threading.Thread(target=c.send_ignore_errors, args=(req + b"x" * 400_000,))
        sender.start()
        r = c.read_response()
        sender.join(OP_TIMEOUT)
        assert r.status == 200 and r.body == site.files["small.txt"]


@pytest.mark.parametrize("close", [True, False], ids=["close", "keep-alive"])
def test_answer_survives_input_piling_up_behind_it(shared, site, close):
    """A 50 MiB answer with 600 KB sent behind its request at once, read
    only after: the server may drop input it will not hold while the answer
    is on its way (uring cut the connection there), and a close that finds
    input unread resets the connection and drops what the socket has not
    sent yet (so it must linger: iterative never did, and no model did
    after a Connection: close), but the answer must arrive whole."""
    headers = [("Connection", "close")] if close else []
    with shared.connect() as c:
        sender = threading.Thread(target=c.send_ignore_errors,
                                  args=(get_req("/big.bin", headers=headers) + b"x" * 600_000,))
        sender.start()
        h = hashlib.sha256()
        r = c.read_response(sink=h.update)
        sender.join(OP_TIMEOUT)
        assert r.status == 200 and h.hexdigest() == site.big_sha


def test_http10_closes_by_default(shared, site):
    with shared.connect() as c:
        c.send(get_req("/small.txt", version="HTTP/1.0", host=None))
        r = c.read_response()
        assert r.status == 200 and r.body == site.files["small.txt"]
        assert "keep-alive" not in r.conn_tokens()
        c.expect_close()


def test_http10_keepalive_on_request(shared, site):
    with shared.connect() as c:
        for i in range(3):
            c.send(get_req("/small.txt", version="HTTP/1.0", host=None,
                           headers=[("Connection", "keep-alive")]))
            r = c.read_response()
            assert r.status == 200 and r.body == site.files["small.txt"]
            assert "keep-alive" in r.conn_tokens(), f"request {i}: {r}"
            check_common(r)
        # without the header again: the server closes after this one
        c.send(get_req("/index.html", version="HTTP/1.0", host=None))
        r = c.read_response()
        assert r.status == 200 and r.body == site.files["index.html"]
        c.expect_close()


def test_http10_head_and_404(shared):
    with shared.connect() as c:
        c.send(build_request("HEAD", "/index.html", version="HTTP/1.0", host=None,
                             headers=[("Connection", "keep-alive")]))
        r = c.read_response("HEAD")
        assert r.status == 200 and r.body == b""
        c.send(get_req("/missing", version="HTTP/1.0", host=None))
        r = c.read_response()
        assert r.status == 404
        c.expect_close()


def test_http10_with_host_is_fine(shared, site):
    r = shared.request(get_req("/small.txt", version="HTTP/1.0"))
    assert r.status == 200 and r.body == site.files["small.txt"]


def test_pipeline_20_gets_in_one_send(shared, site):
    names = ["index.html", "style.css", "pixel.png", "small.txt", "sub/page.txt",
             "empty.txt", "mime/a.json", "sub/index.html", "mime/a.js", "with space.txt"] * 2
    data = b"".join(get_req("/" + n.replace(" ", "%20")) for n in names)
    with shared.connect() as c:
        c.send(data)                       # one send, 20 requests
        for n in names:
            r = c.read_response()
            assert r.status == 200, (n, r)
            assert r.body == site.files[n], n
            check_common(r)
        assert c.nothing_within(0.2), "extra bytes after the 20 responses"


def test_pipeline_mixed_in_order(shared, site):
    etag = etag_for(site.root / "small.txt")
    reqs = [
        ("GET", get_req("/index.html"), 200, site.files["index.html"]),
        ("HEAD", build_request("HEAD", "/style.css"), 200, b""),
        ("GET", get_req("/missing.txt"), 404, None),
        ("GET", get_req("/sub"), 301, None),
        ("GET", get_req("/sub/"), 200, site.files["sub/index.html"]),
        ("GET", get_req("/small.txt", headers=[("Range", "bytes=0-4")]), 206, b"01234"),
        ("GET", get_req("/small.txt", headers=[("If-None-Match", etag)]), 304, b""),
        ("HEAD", build_request("HEAD", "/missing"), 404, b""),
        ("GET", get_req("/small.txt", headers=[("Range", "bytes=-3")]), 206, b"xyz"),
        ("GET", get_req("/empty/"), 403, None),
        ("GET", get_req("/.hidden"), 404, None),
        ("GET", get_req("/%69ndex.html"), 200, site.files["index.html"]),
        ("GET", get_req("/small.txt", body=b"abc", headers=[("Content-Length", "3")]),
         200, site.files["small.txt"]),
        ("GET", get_req("/pixel.png"), 200, site.files["pixel.png"]),
        ("HEAD", build_request("HEAD", "/big.bin"), 200, b""),
        ("GET", get_req("/small.txt", headers=[("Connection", "close")]), 200,
         site.files["small.txt"]),
    ]
    with shared.connect() as c:
        c.send(b"".join(r[1] for r in reqs))
        for i, (method, _, status, body) in enumerate(reqs):
            r = c.read_response(method)
            assert r.status == status, (i, r)
            if body is not None:
                assert r.body == body, (i, r.body[:100])
        c.expect_close()


def test_pipeline_with_error_methods_keepalive(shared, site):
    """501 and 405 keep the connection: pipelined requests after them work."""
    data = (build_request("FOO", "/") + get_req("/small.txt")
            + build_request("POST", "/index.html", body=b"hello",
                            headers=[("Content-Length", "5")])
            + get_req("/style.css")
            + build_request("DELETE", "/index.html") + get_req("/index.html"))
    with shared.connect() as c:
        c.send(data)
        expect = [(501, None), (200, site.files["small.txt"]), (405, None),
                  (200, site.files["style.css"]), (405, None), (200, site.files["index.html"])]
        for status, body in expect:
            r = c.read_response()
            assert r.status == status, r
            if body is not None:
                assert r.body == body
        assert c.is_open()


@pytest.mark.slow
def test_pipeline_1000_requests(shared, site):
    """Far more pipelined requests than fit in one read: output backpressure
    while input keeps coming."""
    n = 1000
    data = get_req("/index.html") * (n - 1) + get_req("/small.txt")
    with shared.connect() as c:
        c.send(data)
        for i in range(n - 1):
            r = c.read_response()
            assert r.status == 200 and r.body == site.files["index.html"], i
        r = c.read_response()
        assert r.body == site.files["small.txt"]


def test_request_one_byte_at_a_time(shared, site):
    req = get_req("/index.html", headers=[("User-Agent", "trickle/1"), ("Accept", "*/*")])
    with shared.connect() as c:
        for i, b in enumerate(req):
            c.send(bytes([b]))
            time.sleep(0.001)           # pacing so bytes travel in separate segments
            if i == len(req) - 2:
                assert c.nothing_within(0.2), "responded before the head was complete"
        r = c.read_response()
        assert r.status == 200 and r.body == site.files["index.html"]
        # and a second request on the same connection, also byte by byte
        req2 = get_req("/small.txt", headers=[("Content-Length", "4")], body=b"abcd")
        for b in req2:
            c.send(bytes([b]))
            time.sleep(0.001)
        r = c.read_response()
        assert r.status == 200 and r.body == site.files["small.txt"]
        assert c.nothing_within(0.2)


def test_request_split_across_sends_at_crlf(shared, site):
    """Splits right inside the CRLFCRLF terminator."""
    req = get_req("/small.txt")
    with shared.connect() as c:
        for part in (req[:-3], req[-3:-2], req[-2:-1], req[-1:]):
            c.send(part)
            time.sleep(0.02)
        r = c.read_response()
        assert r.status == 200 and r.body == site.files["small.txt"]


# ------------------------------------------------------------ keepalive-requests

def test_keepalive_requests_limit(server, site):
    srv = server("--keepalive-requests", "3")
    with srv.connect() as c:
        for i in range(3):
            c.send(get_req("/small.txt"))
            r = c.read_response()
            assert r.status == 200 and r.body == site.files["small.txt"]
            if i < 2:
                assert "close" not in r.conn_tokens(), f"response {i + 1} closes early"
            else:
                assert "close" in r.conn_tokens(), "3rd response lacks Connection: close"
        c.expect_close()


def test_keepalive_requests_limit_pipelined(server, site):
    srv = server("--keepalive-requests", "3")
    with srv.connect() as c:
        c.send(get_req("/small.txt") * 5)
        for i in range(3):
            r = c.read_response()
            assert r.status == 200
        assert "close" in r.conn_tokens()
        rest = c.read_to_close()
        assert b"HTTP/1." not in rest, "answered more than --keepalive-requests requests"


def test_keepalive_requests_1(server):
    srv = server("--keepalive-requests", "1")
    with srv.connect() as c:
        c.send(get_req("/small.txt"))
        r = c.read_response()
        assert "close" in r.conn_tokens()
        c.expect_close()


# ------------------------------------------------------------ many connections

@pytest.mark.concurrency
@pytest.mark.slow
def test_1000_concurrent_keepalive_connections(shared, site):
    n = 1000
    req = get_req("/index.html")
    body = site.files["index.html"]
    base_fds = shared.tree_fd_count()
    sel = selectors.DefaultSelector()
    state = {}
    socks = []
    try:
        for i in range(n):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(shared.addr)
            socks.append(s)
            state[s] = {"out": req, "in": bytearray(), "round": 0, "done": False}
            sel.register(s, selectors.EVENT_WRITE)

        def run_round(rnd, deadline):
            pending = n
            while pending:
                if time.monotonic() > deadline:
                    raise AssertionError(f"round {rnd}: {pending} of {n} connections "
                                         f"not served in time")
                for key, ev in sel.select(timeout=1.0):
                    s = key.fileobj
                    st = state[s]
                    if ev & selectors.EVENT_WRITE:
                        try:
                            k = s.send(st["out"])
                        except (BlockingIOError, InterruptedError):
                            continue
                        st["out"] = st["out"][k:]
                        if not st["out"]:
                            sel.modify(s, selectors.EVENT_READ)
                    elif ev & selectors.EVENT_READ:
                        try:
                            data = s.recv(65536)
                        except BlockingIOError:
                            continue
                        assert data, f"round {rnd}: server closed a keep-alive connection"
                        st["in"] += data
                        i = st["in"].find(b"\r\n\r\n")
                        if i < 0:
                            continue
                        ver, status, _, hdrs = parse_head(bytes(st["in"][:i]))
                        cl = int(dict((k.lower(), v) for k, v in hdrs)["content-length"])
                        if len(st["in"]) < i + 4 + cl:
                            continue
                        assert status == 200
                        assert bytes(st["in"][i + 4:]) == body
                        st["in"] = bytearray()
                        sel.unregister(s)
                        pending -= 1

        t0 = time.monotonic()
        run_round(1, t0 + 25)
        # all 1000 are still open on the server side at the same time
        fds = shared.tree_fd_count()
        assert fds >= base_fds + n - 5, f"server holds {fds} fds, base {base_fds}"
        for s in socks:
            state[s]["out"] = req
            sel.register(s, selectors.EVENT_WRITE)
        run_round(2, time.monotonic() + 15)
        assert time.monotonic() - t0 < 30
    finally:
        for s in socks:
            s.close()
        sel.close()
    r = shared.get("/small.txt")
    assert r.status == 200


# ---- pipelined output budget: clients that pipeline and read slowly or never

PIPE_FILES = 8          # distinct 32 KiB files (the largest kept in memory)
PIPE_DEPTH = 130        # pipelined GETs per connection (~4.5 KB of requests)


@pytest.fixture(scope="module")
def pipe_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("pipe")
    files = {}
    for i in range(PIPE_FILES):
        files[f"f{i}.bin"] = os.urandom(32 * 1024)
    files["big.bin"] = os.urandom(1 << 20)         # sent with sendfile
    for name, data in files.items():
        (root / name).write_bytes(data)
    return root, files


def tree_rss_kib(pid):
    """VmRSS of pid and its descendants (workers, logger), in KiB."""
    total = 0
    for p in [pid] + descendants(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass
    return total


def server_inodes(server_port, client_ports):
    """Inodes of the server-side sockets of these client ports (one pass over
    /proc/net/tcp)."""
    return {int(f[9]) for lport, rport, f in tcp_sockets()
            if lport == server_port and rport in client_ports and int(f[9])}


def held_sockets(pid):
    """Inodes of the sockets pid and its descendants hold."""
    return {int(t[8:-1]) for _, _, t in tree_fds(pid) if t.startswith("socket:[")}


# What a stalled connection may own: its input buffer (16 KiB) and the heads
# of the unsent responses (at most 256 KiB of output, ~9 responses here: the
# bodies stay in the shared file cache, referenced), or on coro its stack
# (64 KiB) and buffers (57 KiB). Measured: 6-18 KiB (evloop models), ~25 KiB
# (coro). Before, the evloop models copied the unsent rest of a
# ~126-response batch: ~1.35 MB per connection here, up to 4 MiB.
STALL_CONNS = 200
STALL_BOUND_KIB = 128


@pytest.mark.concurrency
@pytest.mark.slow
def test_stalled_pipelined_readers_hold_bounded_memory(server, pipe_root):
    root, files = pipe_root
    srv = server(docroot=root)
    r = srv.get("/f0.bin")
    assert r.status == 200 and r.body == files["f0.bin"]
    base_rss = tree_rss_kib(srv.pid)
    burst = get_req("/f0.bin") * PIPE_DEPTH
    conns = []
    try:
        for _ in range(STALL_CONNS):
            c = srv.connect(rcvbuf=4096)
            c.send(burst)
            conns.append(c)
        # every connection got its first bytes: the server parsed its burst
        # and blocked on a full socket
        sel = selectors.DefaultSelector()
        for c in conns:
            sel.register(c.sock, selectors.EVENT_READ)
        answered = set()
        deadline = time.monotonic() + 30
        while len(answered) < len(conns) and time.monotonic() < deadline:
            for key, _ in sel.select(0.5):
                answered.add(key.fd)
                sel.unregister(key.fileobj)
        sel.close()
        assert len(answered) == len(conns), f"{len(conns) - len(answered)} never answered"
        peak = base_rss
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.5:
            peak = max(peak, tree_rss_kib(srv.pid))
            time.sleep(0.05)
        growth = peak - base_rss
        per_conn = growth / STALL_CONNS
        print(f"stalled pipelining readers: {per_conn:.1f} KiB RSS each")
        assert per_conn <= STALL_BOUND_KIB, (
            f"RSS grew {growth} KiB for {STALL_CONNS} stalled pipelining readers: "
            f"{per_conn:.0f} KiB each (bound {STALL_BOUND_KIB} KiB)")
        inodes = server_inodes(srv.port, {c.sock.getsockname()[1] for c in conns})
        assert len(inodes) == len(conns), "server sockets not found"
        assert len(held_sockets(srv.pid) & inodes) == len(conns)
    finally:
        for c in conns:
            c.close()
    wait_for(lambda: not held_sockets(srv.pid) & inodes, timeout=10,
             what="the server to close the stalled readers' sockets")
    r = srv.get("/f1.bin")
    assert r.status == 200 and r.body == files["f1.bin"]


def test_slow_reader_gets_every_pipelined_response_in_order(server, pipe_root):
    """130 pipelined requests (32 KiB files from memory, sendfile ranges,
    errors, HEAD) to a client that reads a little at a time: the server
    blocks and resumes many times, and every response arrives whole, in
    order."""
    root, files = pipe_root
    srv = server(docroot=root)
    big = files["big.bin"]
    plan = []
    for i in range(PIPE_DEPTH):
        name = f"f{i % PIPE_FILES}.bin"
        if i % 13 == 5:
            a = i * 1000
            plan.append(("GET", get_req("/big.bin", headers=[("Range", f"bytes={a}-{a + 99999}")]),
                         206, big[a:a + 100000]))
        elif i % 17 == 3:
            plan.append(("GET", get_req(f"/missing{i}"), 404, None))
        elif i % 19 == 7:
            plan.append(("HEAD", build_request("HEAD", "/" + name), 200, b""))
        elif i % 11 == 4:
            plan.append(("GET", get_req("/" + name, headers=[("Range", "bytes=100-")]),
                         206, files[name][100:]))
        else:
            plan.append(("GET", get_req("/" + name), 200, files[name]))
    with srv.connect(rcvbuf=4096) as c:
        c.send(b"".join(p[1] for p in plan))
        time.sleep(0.5)                    # the server fills the socket and blocks
        for i, (method, _, status, body) in enumerate(plan):
            r = c.read_response(method)
            assert r.status == status, (i, r)
            if body is not None:
                assert r.body == body, (i, len(r.body))
            if i % 10 == 9:
                time.sleep(0.02)           # a slow reader: the server blocks again
        assert c.nothing_within(0.2), "extra bytes after the pipelined responses"
        c.send(get_req("/f2.bin"))
        assert c.read_response().body == files["f2.bin"]
