"""DESIGN's hot-path budget: a warm keep-alive request allocates nothing, on
every model, with the access log on; a proxied one over a pooled upstream
connection neither. An LD_PRELOAD counter
(tests/tools/malloc_count.c, built as build/malloc_count.so) counts malloc,
calloc and realloc per process; the test reads the counters after a warm-up
and again after 2000 more requests."""

import glob
import os
import re
import struct

import pytest

from conftest import HERD_ARGS, HERD_BIN, REPO_ROOT
from herdtest import get_req, wait_for
from proxy_backend import Backend

COUNTER = REPO_ROOT / "build" / "malloc_count.so"
pytestmark = [
    pytest.mark.skipif("--model" in HERD_ARGS, reason="picks its models itself"),
    pytest.mark.skipif("asan" in HERD_BIN, reason="ASan has its own allocator"),
]

MODELS = ["reuseport", "prefork", "dispatch", "threads", "single", "iterative",
          "coro --threads 1", "coro --threads 2", "uring"]


def counts(d):
    out = {}
    for f in glob.glob(f"{d}/*"):
        with open(f, "rb") as fh:
            out[f] = struct.unpack("Q", fh.read(8))[0]
    return out


def allocations_in_warm_requests(server, tmp_path, monkeypatch, args, target):
    """Starts herd with args under the counter, warms one connection with
    300 requests for target, and returns the allocations per process
    during 2000 more (only processes that allocated)."""
    if not COUNTER.exists():
        pytest.fail(f"{COUNTER} missing: run `make build/malloc_count.so`", pytrace=False)
    d = tmp_path / "counts"
    d.mkdir()
    monkeypatch.setenv("LD_PRELOAD", str(COUNTER))
    monkeypatch.setenv("MALLOC_COUNT_DIR", str(d))
    srv = server(*args, "--workers", "1", "--access-log", tmp_path / "access.log")
    monkeypatch.delenv("LD_PRELOAD")
    # one connection at a time (the iterative model serves them in turn)
    with srv.connect() as c:
        def go(n):
            for _ in range(n):
                c.send(get_req(target))
                assert c.read_response().status == 200
        go(300)
        wait_for(lambda: counts(d), what="the counters")
        before = counts(d)
        go(2000)
        after = counts(d)
    return {re.sub(r".*/", "pid ", k): v - before.get(k, 0) for k, v in after.items()
            if v - before.get(k, 0)}


@pytest.mark.parametrize("model", MODELS)
def test_warm_keepalive_requests_do_not_allocate(server, tmp_path, model, monkeypatch):
    grew = allocations_in_warm_requests(server, tmp_path, monkeypatch,
                                        ["--model", *model.split()], "/index.html")
    assert not grew, f"{model}: allocations during 2000 warm requests: {grew}"


@pytest.mark.parametrize("model", [m for m in MODELS if m != "iterative"])  # it does not proxy
def test_warm_proxied_requests_do_not_allocate(server, tmp_path, model, monkeypatch):
    """The same budget for a proxied request over a pooled keep-alive
    upstream connection, access log on: the exchange, its upstream head and
    the copy of the request head kept for the log line reuse their memory."""
    b = Backend("tcp")
    try:
        grew = allocations_in_warm_requests(
            server, tmp_path, monkeypatch,
            ["--model", *model.split(), "--upstream", f"b={b.address}", "--proxy", "/p/=b"],
            "/p/echo")
    finally:
        b.close()
    assert not grew, f"{model}: allocations during 2000 warm proxied requests: {grew}"
