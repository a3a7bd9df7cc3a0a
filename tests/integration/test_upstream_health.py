"""Active upstream health checks (--upstream-health, issue 14): the master
sends GET PATH to each server of a group every interval; a failing server
is skipped by every worker until a check passes, and the status JSON shows
each server's health."""

import json
import signal
import time

import pytest

from conftest import HERD_ARGS, descendants, run_herd
from herdtest import ThreadedListener, wait_for
from proxy_backend import Backend

pytestmark = pytest.mark.skipif(
    "--model" in HERD_ARGS, reason="picks its models itself")

INTERVAL = 0.3


@pytest.fixture
def pair():
    a, b = Backend("tcp", "a"), Backend("tcp", "b")
    yield a, b
    a.close()
    b.close()


def health_of(srv):
    ups = json.loads(srv.get("/st?format=json").body)["upstreams"]
    return {u["server"].split()[-1]: u["health"] for u in ups}


def served_by(srv, n):
    out = []
    for i in range(n):
        r = srv.get(f"/app/x?{i}")
        assert r.status == 200, r
        out.append(json.loads(r.body)["backend"])
    return out


def app_requests(b):
    return [p for p in b.paths() if p != "/health"]


@pytest.mark.parametrize("model", ["reuseport", "coro", "uring"])
def test_failing_server_skipped_then_taken_back(server, pair, model):
    a, b = pair
    srv = server("--model", model, "--workers", "2", "--upstream",
                 f"g={a.address},{b.address}", "--proxy", "/app/=g", "--status-path", "/st",
                 "--upstream-health", f"g=/health,{int(INTERVAL * 1000)}ms")
    wait_for(lambda: health_of(srv) == {a.address: "up", b.address: "up"}, timeout=3,
             what="both servers checked up")
    assert set(served_by(srv, 6)) == {"a", "b"}
    b.health = 503
    t0 = time.monotonic()
    wait_for(lambda: health_of(srv)[b.address] == "down", timeout=2 * INTERVAL + 1,
             what="b's failed check")
    took = time.monotonic() - t0
    assert took < 2 * INTERVAL + 0.5, f"down after {took:.2f}s"
    before = len(app_requests(b))
    # every worker (new connection each: any of them) skips it
    assert served_by(srv, 10) == ["a"] * 10
    assert len(app_requests(b)) == before
    assert "health check /health failed (status not 2xx or 3xx)" in srv.stderr_text()
    b.health = 200
    wait_for(lambda: health_of(srv)[b.address] == "up", timeout=2 * INTERVAL + 1,
             what="b's passing check")
    assert "b" in served_by(srv, 6)
    # checks come from the master alone: about one per interval per server
    n = b.paths().count("/health")
    time.sleep(5 * INTERVAL)
    more = b.paths().count("/health") - n
    assert 3 <= more <= 7, f"{more} checks in 5 intervals"


def test_refused_connect_marks_down_and_all_down_are_tried_anyway(server, pair, tmp_path):
    a, b = pair
    srv = server("--workers", "1", "--upstream", f"g={a.address},unix:{tmp_path}/none.sock",
                 "--upstream", f"h={b.address}", "--proxy", "/h/=h", "--proxy", "/app/=g",
                 "--status-path", "/st", "--upstream-health", "g=/health,200ms",
                 "--upstream-health", "h=/health,200ms")
    wait_for(lambda: health_of(srv) == {f"unix:{tmp_path}/none.sock": "down",
                                        a.address: "up", b.address: "up"}, timeout=3,
             what="the refused server down, the others up")
    assert served_by(srv, 4) == ["a"] * 4
    # a group whose every server fails its check is tried anyway (as nginx)
    b.health = 500
    wait_for(lambda: health_of(srv)[b.address] == "down", timeout=3, what="h down")
    r = srv.get("/h/y")
    assert r.status == 200 and json.loads(r.body)["backend"] == "b"


@pytest.mark.parametrize("args,msg", [
    (["--upstream-health", "g=/health,0s"], "invalid duration '0s' for upstream-health"),
    (["--upstream-health", "g=/health,soon"], "invalid duration 'soon'"),
    (["--upstream-health", "g=/health,99ms"], "INTERVAL below the minimum of 100ms"),
    (["--upstream-health", "g=/health,1ms"], "INTERVAL below the minimum of 100ms"),
    (["--upstream-health", "g=/health"], "expected NAME=/PATH,INTERVAL"),
    (["--upstream-health", "g=health,1s"], "expected NAME=/PATH,INTERVAL"),
    (["--upstream-health", "nope=/health,1s"], "upstream-health nope: unknown upstream 'nope'"),
    (["--upstream", "f=unix:/y", "--fastcgi", "*.php=f", "--upstream-health", "f=/h,1s"],
     "speaks FastCGI"),
])
def test_bad_health_option_exits_2(args, msg):
    r = run_herd(["serve", ".", "--upstream", "g=unix:/x", "--proxy", "/api/=g", *args],
                 extra=False)
    assert r.returncode == 2, r
    assert msg in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_config_file_line(tmp_path):
    conf = tmp_path / "herd.conf"
    conf.write_text("upstream-health = b=/healthz,2s\nupstream = b=unix:/x\nproxy = /=b\n")
    r = run_herd(["serve", "--check-config", str(conf)], extra=False)
    assert r.returncode == 0, r.stderr
    conf.write_text("upstream = b=unix:/x\nproxy = /=b\nupstream-health = c=/healthz,2s\n")
    r = run_herd(["serve", "--check-config", str(conf)], extra=False)
    assert r.returncode == 2 and "unknown upstream 'c'" in r.stderr, r.stderr


def test_reload_restarts_the_checks_from_the_new_config(server, pair, tmp_path):
    a, b = pair
    conf = tmp_path / "herd.conf"
    base = (f"upstream = g={a.address},{b.address}\nproxy = /app/=g\nstatus-path = /st\n"
            "workers = 1\n")
    conf.write_text(base + "upstream-health = g=/health,200ms\n")
    b.health = 503
    srv = server("--config", str(conf))
    wait_for(lambda: health_of(srv)[b.address] == "down", timeout=3, what="b down")
    assert served_by(srv, 4) == ["a"] * 4
    conf.write_text(base)          # no checks any more: b is used again
    old = descendants(srv.pid)
    srv.send_signal(signal.SIGHUP)
    # requests only once the old worker is gone: each then meets the new
    # config's checks (none)
    wait_for(lambda: not set(old) & set(descendants(srv.pid)), timeout=5,
             what="the old worker to exit")
    wait_for(lambda: health_of(srv) == {a.address: "unchecked", b.address: "unchecked"},
             timeout=5, what="the checks gone after the reload")
    wait_for(lambda: "b" in served_by(srv, 4), timeout=5, what="b served again")
    n = b.paths().count("/health")
    time.sleep(0.6)
    assert b.paths().count("/health") == n, "a check after the reload removed them"


@pytest.mark.parametrize("model", ["reuseport", "uring"])
def test_a_draining_worker_reads_the_health_of_its_own_servers(server, tmp_path, model):
    """A reload that reorders a group's servers: a worker of the old
    generation still busy with a connection reads the verdicts of its own
    servers, not of the servers the new config puts at their places. Here
    it served a request pipelined behind a slow one from a, which checks
    down, because after the reload a's place held b's verdict."""
    a, b, slow = Backend("tcp", "a"), Backend("tcp", "b"), Backend("tcp", "slow")
    try:
        a.health = 503
        conf = tmp_path / "herd.conf"
        rest = (f"upstream = s={slow.address}\nproxy = /app/=g\nproxy = /s/=s\n"
                f"status-path = /st\nworkers = 1\nmodel = {model}\n"
                "upstream-health = g=/health,200ms\n")
        conf.write_text(f"upstream = g={a.address},{b.address}\n" + rest)
        srv = server("--config", str(conf))
        wait_for(lambda: health_of(srv) == {a.address: "down", b.address: "up",
                                            slow.address: "unchecked"},
                 timeout=4, what="a down, b up")
        gen = status_json(srv)["generation"]
        with srv.connect() as c:
            c.send(b"GET /s/slow?s=1.5 HTTP/1.1\r\nHost: t\r\n\r\n"
                   b"GET /app/x HTTP/1.1\r\nHost: t\r\n\r\n")
            wait_for(lambda: "/s/slow" in slow.paths(), timeout=3, what="the slow request")
            conf.write_text(f"upstream = g={b.address},{a.address}\n" + rest)
            srv.send_signal(signal.SIGHUP)
            wait_for(lambda: status_json(srv)["generation"] == gen + 1, timeout=3,
                     what="the reload")
            first, second = c.read_response(), c.read_response()
        # the status page lists the new config's servers, in its order
        assert [u["server"] for u in status_json(srv)["upstreams"]] == \
            [f"g {b.address}", f"g {a.address}", f"s {slow.address}"]
        assert first.status == 200 and json.loads(first.body)["backend"] == "slow", first
        assert second.status == 200, second
        assert json.loads(second.body)["backend"] == "b", second
        assert "/app/x" not in a.paths()
    finally:
        for x in (a, b, slow):
            x.close()


def status_json(srv):
    return json.loads(srv.get("/st?format=json").body)


def test_reload_keeps_a_down_server_down_until_a_check_passes(server, pair, tmp_path):
    # b's checks time out (no answer within the interval), so after a
    # reload its first check takes a whole interval to fail: until then it
    # must keep its verdict, not be taken as unchecked.
    a, b = pair
    conf = tmp_path / "herd.conf"
    conf.write_text(f"upstream = g={a.address},{b.address}\nproxy = /app/=g\n"
                    "status-path = /st\nworkers = 1\nupstream-health = g=/health,1s\n")
    b.health_delay = 3
    srv = server("--config", str(conf))
    wait_for(lambda: health_of(srv) == {a.address: "up", b.address: "down"}, timeout=4,
             what="b down")
    gen = status_json(srv)["generation"]
    srv.send_signal(signal.SIGHUP)
    wait_for(lambda: status_json(srv)["generation"] == gen + 1, timeout=3, what="the reload")
    t_end = time.monotonic() + 0.6         # well inside the first check's second
    while time.monotonic() < t_end:
        assert health_of(srv) == {a.address: "up", b.address: "down"}
        assert served_by(srv, 2) == ["a", "a"]
    b.health_delay = 0                     # a check that passes takes it back
    wait_for(lambda: health_of(srv)[b.address] == "up", timeout=4, what="b up again")
    assert "b" in served_by(srv, 4)


def test_unix_socket_server_is_checked_with_a_valid_host(server, tmp_path):
    u = Backend(f"unix:{tmp_path}/u.sock", "u")
    try:
        srv = server("--workers", "1", "--upstream", f"g={u.address}", "--proxy", "/app/=g",
                     "--status-path", "/st", "--upstream-health", "g=/health,200ms")
        wait_for(lambda: health_of(srv) == {u.address: "up"}, timeout=3, what="u up")
        check = next(r for r in u.requests if r["path"] == "/health")
        assert check["method"] == "GET"
        assert ["Host", "localhost"] in [list(h) for h in check["headers"]], check["headers"]
    finally:
        u.close()


class RawUpstream(ThreadedListener):
    """A fake upstream that reads each request head and answers with fixed
    pieces of bytes (a short pause between them, so the checker sees them
    on separate reads), then closes; forever: it sends the last piece again
    and again until the checker goes."""

    def __init__(self, pieces, forever=False):
        self.pieces, self.forever = pieces, forever
        self.checks = 0
        self.listen()

    def _serve(self, s):
        s.settimeout(5)
        try:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 8192:
                data = s.recv(4096)
                if not data:
                    return
                head += data
            self.checks += 1
            for i, piece in enumerate(self.pieces):
                if i:
                    time.sleep(0.02)
                s.sendall(piece)
            deadline = time.monotonic() + 5
            while self.forever and time.monotonic() < deadline:
                s.sendall(self.pieces[-1])
        except OSError:
            pass  # the checker closed: it had read enough
        finally:
            s.close()


def health_server(server, up):
    return server("--workers", "1", "--upstream", f"g={up.address}", "--proxy", "/app/=g",
                  "--status-path", "/st", "--upstream-health", "g=/health,200ms")


EARLY_HINTS = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n"
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


@pytest.mark.parametrize("pieces", [
    [EARLY_HINTS, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"],
    [CONTINUE, CONTINUE, b"HTTP/1.1 204 No Content\r\n\r\n"],
    # cut inside a status line, inside the interim head's end, and a status
    # line with no reason phrase
    [b"HTTP/1.1 1", b"03 Early Hints\r\nLink: </a>\r\n\r", b"\nHTTP/1.0 200\r", b"\n\r\n"],
    # bare LF line ends, which the proxy accepts too (RFC 9112 2.2)
    [b"HTTP/1.1 100 Continue\n\n", b"HTTP/1.1 200\nContent-Length: 0\n\n"],
], ids=["103-then-200", "100-100-204", "split", "bare-lf"])
def test_interim_1xx_answers_are_skipped(server, pieces):
    """RFC 9110 15.2: a client skips interim 1xx answers and judges the final
    status (the proxy itself drops them too)."""
    up = RawUpstream(pieces)
    try:
        srv = health_server(server, up)
        wait_for(lambda: up.checks >= 3, timeout=5, what="three checks")
        assert health_of(srv) == {up.address: "up"}, srv.stderr_text()
        assert "health check" not in srv.stderr_text()
    finally:
        up.close()


@pytest.mark.parametrize("pieces,why", [
    ([b"HTTP/1.X 200 OK\r\n\r\n"], "malformed status line"),
    ([b"HTTP/1.1 2000 OK\r\n\r\n"], "malformed status line"),
    ([b"HTTP/1.1 200garbage\r\n\r\n"], "malformed status line"),
    ([b"HTTP/1.1 20 OK\r\n\r\n"], "malformed status line"),
    ([EARLY_HINTS, b"HTTP/1.1 200-OK\r\n\r\n"], "malformed status line"),
    ([b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n"],
     "status 101 (a switch of protocols)"),
    ([CONTINUE, b"HTTP/1.1 503 Busy\r\n\r\n"], "status not 2xx or 3xx"),
], ids=["version", "four-digits", "no-space", "two-digits", "after-103", "101",
        "100-then-503"])
def test_bad_status_line_marks_down(server, pieces, why):
    up = RawUpstream(pieces)
    try:
        srv = health_server(server, up)
        wait_for(lambda: health_of(srv) == {up.address: "down"}, timeout=3,
                 what="the server down")
        line = f"health check /health failed ({why}); down"
        wait_for(lambda: line in srv.stderr_text(), timeout=2, what=line)
    finally:
        up.close()


def test_endless_interim_answers_are_read_to_a_bound(server):
    """1xx after 1xx: the checker reads a bounded number of bytes, then
    fails the check (it never waits for the interval or reads forever)."""
    up = RawUpstream([CONTINUE], forever=True)
    try:
        srv = health_server(server, up)
        wait_for(lambda: health_of(srv) == {up.address: "down"}, timeout=3,
                 what="the server down")
        line = ("health check /health failed (no final status in the first 16384 bytes: "
                "interim 1xx answers only); down")
        wait_for(lambda: line in srv.stderr_text(), timeout=2, what=line)
        # the master still serves its loop: status pages and checks go on
        n = up.checks
        wait_for(lambda: up.checks >= n + 2, timeout=3, what="more checks")
    finally:
        up.close()


def test_timers_weeks_away_neither_break_the_master_nor_its_stop(server):
    """A config may put a master's timer 2^31 ms (24.8 days) away: a health
    interval, a shutdown timeout. The wait for it overflowed an int (UBSan
    stopped the master at start; the plain build waited with no timeout).
    It now waits a minute at a time (red-team pass 17)."""
    srv = server("--workers", "1", "--upstream", "g=127.0.0.1:9", "--proxy", "/app/=g",
                 "--upstream-health", "g=/health,2147483645ms",
                 "--shutdown-timeout", "2147482645ms")
    time.sleep(0.5)
    assert srv.proc.poll() is None, srv.stderr_text()
    assert srv.get("/small.txt").status == 200
    assert srv.stop() == 0
    assert "runtime error" not in srv.stderr_text()
