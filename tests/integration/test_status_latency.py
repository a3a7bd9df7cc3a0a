"""Latency histograms on the status page (issue 17): every answered request
lands in its worker's histogram once; a slow upstream lands in the slow
buckets; the Prometheus text (histogram plus per-worker series) parses with
prometheus_client's own parser.

What is measured: from the loop wakeup that delivered the first bytes of a
request's head to when its answer is planned (static) or its proxy
exchange ends (models/step.c).
"""

import json
import sys
from pathlib import Path

import pytest

from conftest import HERD_ARGS
from herdtest import build_request, wait_for
from proxy_backend import Backend

PYDEPS = Path(__file__).resolve().parents[2] / "build" / "pydeps"
sys.path.insert(0, str(PYDEPS))
try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    text_string_to_metric_families = None

pytestmark = pytest.mark.skipif(
    "--model" in HERD_ARGS, reason="picks its models itself")

STATUS = "/herd-status"
MODELS = ["reuseport", "prefork", "dispatch", "threads", "coro", "iterative"]


def status_json(srv):
    r = srv.get(STATUS)
    assert r.status == 200, r
    return json.loads(r.body)


def prometheus(srv):
    if text_string_to_metric_families is None:
        pytest.fail(f"prometheus_client is not in {PYDEPS}: run `sh scripts/deps.sh test`")
    r = srv.get(STATUS + "?format=prometheus")
    assert r.status == 200, r
    return {f.name: f for f in text_string_to_metric_families(r.body.decode())}


def start(server, model, *args):
    workers = [] if model == "iterative" else (
        ["--threads", "2"] if model in ("threads", "coro") else ["--workers", "2"])
    srv = server("--model", model, *workers, "--status-path", STATUS, *args)
    wait_for(lambda: status_json(srv)["workers"] >= 1, timeout=5, interval=0.05,
             what="a running worker")
    return srv


@pytest.mark.parametrize("model", MODELS)
def test_count_equals_requests_sent(server, model):
    srv = start(server, model)
    before = status_json(srv)
    sent = 0
    with srv.connect() as c:             # keep-alive, some pipelined
        for _ in range(20):
            c.send(build_request("GET", "/small.txt"))
            assert c.read_response().status == 200
            sent += 1
        c.send(build_request("GET", "/small.txt") * 5)
        for _ in range(5):
            assert c.read_response().status == 200
            sent += 1
    for _ in range(10):                  # a connection each, one 404
        assert srv.get("/small.txt").status == 200
        sent += 1
    assert srv.get("/missing").status == 404
    sent += 1
    after = status_json(srv)
    lat = after["latency_us"]
    # the first status read is counted too, after it was rendered
    assert lat["count"] - before["latency_us"]["count"] == sent + 1, (before, after)
    assert lat["count"] == after["requests"]
    assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p999"] < 1_000_000, lat


@pytest.mark.parametrize("model", ["reuseport", "coro"])
def test_slow_upstream_lands_in_slow_buckets(server, tmp_path, model):
    b = Backend(f"unix:{tmp_path}/b.sock")
    try:
        srv = start(server, model, "--upstream", f"b={b.address}", "--proxy", "/slow=b")
        for _ in range(30):
            assert srv.get("/small.txt").status == 200
        for _ in range(3):
            assert srv.get("/slow?s=0.3").status == 200
        st = status_json(srv)
        lat = st["latency_us"]
        # the static ones, and the slow ones (whose bucket's high end is at
        # most 25% above them; the upper bound leaves room for a loaded
        # machine and ASan, under which 0.3 s took up to 0.45 s)
        assert lat["p50"] < 250_000, lat
        assert 300_000 <= lat["p99"] < 2_500_000, lat
        fams = prometheus(srv)
        buckets = {s.labels["le"]: s.value
                   for s in fams["herd_request_duration_seconds"].samples
                   if s.name.endswith("_bucket")}
        total = buckets["+Inf"]
        assert total == st["requests"] + 1          # this scrape's JSON read before it
        assert buckets["0.25"] == total - 3, buckets
        assert buckets["2.5"] == total, buckets
    finally:
        b.close()


def test_prometheus_parses_with_per_worker_series(server):
    srv = start(server, "reuseport")
    for _ in range(12):
        assert srv.get("/small.txt").status == 200
    fams = prometheus(srv)
    hist = fams["herd_request_duration_seconds"]
    assert hist.type == "histogram"
    samples = {(s.name, s.labels.get("le")): s.value for s in hist.samples}
    les = [s.labels["le"] for s in hist.samples if s.name.endswith("_bucket")]
    assert les[-1] == "+Inf" and len(les) == 17, les
    values = [samples[("herd_request_duration_seconds_bucket", le)] for le in les]
    assert values == sorted(values), values           # cumulative
    count = samples[("herd_request_duration_seconds_count", None)]
    assert count == values[-1] >= 13                  # 12 + the start's status reads
    assert samples[("herd_request_duration_seconds_sum", None)] > 0

    st = status_json(srv)
    for name, key in (("herd_worker_accepted_connections", "accepted"),
                      ("herd_worker_requests", "requests")):
        fam = fams[name]
        assert fam.type == "counter", fam
        per = {(s.labels["slot"], s.labels["worker"]): s.value for s in fam.samples
               if s.name.endswith("_total")}
        assert len(per) == 2, per
        assert {w for _, w in per} == {"0", "1"}
        assert sum(per.values()) <= st[key]
    req = {s.labels["slot"]: s.value for s in fams["herd_worker_requests"].samples
           if s.name.endswith("_total")}
    assert sum(req.values()) == count
