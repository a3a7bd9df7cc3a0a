"""--upstream-keepalive N is per worker process and server: the threads and
coro models split it among their threads (red-team pass 12, F7), so a
process keeps at most N idle connections to a server, not N per thread."""

import json
import threading

import pytest

from conftest import HERD_ARGS
from herdtest import get_req
from proxy_backend import Backend

pytestmark = pytest.mark.skipif("--model" in HERD_ARGS, reason="picks its models itself")


@pytest.mark.parametrize("model", ["threads", "coro"])
def test_idle_upstream_connections_per_process_not_per_thread(server, model):
    b = Backend("tcp", "b")
    try:
        srv = server("--model", model, "--threads", "2", "--upstream", f"g={b.address}",
                     "--proxy", "/app/=g", "--upstream-keepalive", "3", "--status-path", "/st")
        answers = []

        def one(i):
            r = srv.request(get_req(f"/app/slow?s=0.3&i={i}",
                                    headers=[("Connection", "close")]), timeout=15)
            answers.append(r.status)
        for _ in range(2):          # overlapping requests open many upstream connections
            ts = [threading.Thread(target=one, args=(i,)) for i in range(16)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(20)
        assert answers == [200] * 32, answers
        ups = json.loads(srv.get("/st?format=json").body)["upstreams"]
        idle = sum(u["idle"] for u in ups)
        assert 1 <= idle <= 3, ups
    finally:
        b.close()
