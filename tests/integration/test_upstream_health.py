"""Active upstream health checks (--upstream-health, issue 14): the master
sends GET PATH to each server of a group every interval; a failing server
is skipped by every worker until a check passes, and the status JSON shows
each server's health."""

import json
import signal
import time

import pytest

from conftest import HERD_ARGS, descendants, run_herd
from herdtest import wait_for
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
    # requests only once the old worker is gone: a request sent during the
    # drain can hang on main too (reported; not what this test is about)
    wait_for(lambda: not set(old) & set(descendants(srv.pid)), timeout=5,
             what="the old worker to exit")
    wait_for(lambda: health_of(srv) == {a.address: "unchecked", b.address: "unchecked"},
             timeout=5, what="the checks gone after the reload")
    wait_for(lambda: "b" in served_by(srv, 4), timeout=5, what="b served again")
    n = b.paths().count("/health")
    time.sleep(0.6)
    assert b.paths().count("/health") == n, "a check after the reload removed them"


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
