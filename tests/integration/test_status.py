"""Live status page (issue 3): --status-path serves the shared-memory counters
as JSON, Prometheus text and a table; off by default.

The counters come from the scoreboard every worker writes; whichever worker
answers the status request sums all the slots, so the totals must equal what
this test sent, whatever worker served each request.
"""

import json
import socket
import re
import subprocess
import time

import pytest

from conftest import HERD_ARGS, comm, descendants, herd_cmd
from herdtest import build_request, get_req, wait_for

pytestmark = pytest.mark.skipif(
    "--model" in HERD_ARGS, reason="drives the master/worker model itself")

STATUS = "/herd-status"


# ------------------------------------------------------------ helpers


def status_json(srv, path=STATUS):
    r = srv.get(path)
    assert r.status == 200, r
    return json.loads(r.body)


def wait_workers(srv, n, path=STATUS):
    """Wait until the status page shows n running workers; return it."""
    def ok():
        st = status_json(srv, path)
        running = [s for s in st["slots"] if s["state"] == "running"]
        return st if st["workers"] == n and len(running) == n else None
    return wait_for(ok, timeout=5, interval=0.05, what=f"{n} running workers")


def wire_len(resp):
    """Bytes the server wrote for this response (head, CRLFCRLF, body)."""
    return len(resp.head) + 4 + len(resp.body)


def settled_status(srv):
    """A status page rendered once every answer before it was counted: two
    status requests in a row whose counts differ by exactly the first one.
    (A worker counts the bytes it wrote right after the write returns.)"""
    prev = prev_resp = None
    for _ in range(50):
        r = srv.get(STATUS)
        assert r.status == 200, r
        st = json.loads(r.body)
        if prev is not None and st["requests"] == prev["requests"] + 1 \
                and st["bytes_out"] - prev["bytes_out"] == wire_len(prev_resp):
            return st, r
        prev, prev_resp = st, r
        time.sleep(0.02)
    raise AssertionError(f"status counters never settled: {prev}")


# ------------------------------------------------------------ tests

def test_status_off_by_default(server):
    srv = server("--workers", "2")
    for target in (STATUS, STATUS + "?format=prometheus", STATUS + "?format=table"):
        r = srv.get(target)
        assert r.status == 404, (target, r)


def test_status_only_at_its_own_path(server):
    srv = server("--workers", "2", "--status-path", "/_stats")
    assert srv.get(STATUS).status == 404
    r = srv.get("/_stats")
    assert r.status == 200, r
    json.loads(r.body)


def test_json_shape(server):
    srv = server("--workers", "2", "--status-path", STATUS)
    st = wait_workers(srv, 2)
    r = srv.get(STATUS)
    assert r.status == 200
    assert r.get("content-type", "").startswith("application/json"), r
    st = json.loads(r.body)

    for key in ("master_pid", "logger_pid", "model", "generation", "workers",
                "worker_restarts", "logger_restarts", "requests", "bytes_in",
                "bytes_out", "responses", "accepted", "active", "idle",
                "empty_accept_wakeups", "log_dropped", "file_reads", "slots"):
        assert key in st, f"status JSON lacks {key!r}: {st}"
    for key in ("master_pid", "logger_pid", "generation", "workers", "worker_restarts",
                "logger_restarts", "requests", "bytes_in", "bytes_out", "accepted",
                "active", "idle", "empty_accept_wakeups", "log_dropped", "file_reads"):
        assert isinstance(st[key], int) and st[key] >= 0, (key, st[key])
    assert st["master_pid"] == srv.pid
    assert st["logger_pid"] == 0, "no access log, so no logger"
    assert st["model"] == "reuseport"
    assert st["generation"] == 1
    assert st["workers"] == 2
    assert st["worker_restarts"] == 0 and st["logger_restarts"] == 0
    assert set(st["responses"]) == {"1xx", "2xx", "3xx", "4xx", "5xx"}, st["responses"]
    assert all(isinstance(v, int) for v in st["responses"].values())
    assert st["active"] >= 1, "the status request's own connection is open"

    slots = st["slots"]
    assert isinstance(slots, list) and len(slots) == 2, slots
    kids = set(descendants(srv.pid))
    for s in slots:
        for key in ("slot", "worker", "pid", "generation", "state", "requests"):
            assert key in s, f"slot lacks {key!r}: {s}"
        assert s["state"] == "running", s
        assert s["generation"] == 1, s
        assert s["pid"] in kids, f"slot pid {s['pid']} is not a child of the master"
        # named by the child itself, a moment after the master listed it
        wait_for(lambda: comm(s["pid"]) == f"herd-w{s['worker']}", timeout=3,
                 what=f"worker {s['worker']}'s name")
    assert sorted(s["worker"] for s in slots) == [0, 1]
    assert len({s["slot"] for s in slots}) == 2


@pytest.mark.parametrize("model", ["reuseport", "uring"])
def test_counters_match_what_was_sent(model, server, site):
    srv = server("--model", model, "--workers", "2", "--status-path", STATUS)
    wait_workers(srv, 2)
    # A fresh server, but the wait above made status requests: take a baseline
    # once the counters have caught up with them, then send a known mix.
    base_req = get_req(STATUS)
    base, base_resp = settled_status(srv)
    sent_bytes = len(base_req)
    got_bytes = wire_len(base_resp)
    conns = 1
    n_req, n2, n4 = 1, 1, 0          # the baseline status request, answered 200

    # 10 GETs on one keep-alive connection
    with srv.connect() as c:
        conns += 1
        for _ in range(10):
            req = get_req("/small.txt")
            c.send(req)
            r = c.read_response()
            assert r.status == 200 and r.body == site.files["small.txt"]
            sent_bytes += len(req)
            got_bytes += wire_len(r)
            n_req += 1
            n2 += 1
    # 5 404s on new connections
    for _ in range(5):
        req = get_req("/missing.txt")
        with srv.connect() as c:
            conns += 1
            c.send(req)
            r = c.read_response()
        assert r.status == 404
        sent_bytes += len(req)
        got_bytes += wire_len(r)
        n_req += 1
        n4 += 1
    # 3 HEADs on new connections
    for _ in range(3):
        req = build_request("HEAD", "/index.html")
        with srv.connect() as c:
            conns += 1
            c.send(req)
            r = c.read_response("HEAD")
        assert r.status == 200 and r.body == b""
        sent_bytes += len(req)
        got_bytes += wire_len(r)
        n_req += 1
        n2 += 1
    # 4 pipelined in one send
    reqs = [get_req("/small.txt"), get_req("/style.css"), get_req("/nope"),
            get_req("/index.html")]
    with srv.connect() as c:
        conns += 1
        c.send(b"".join(reqs))
        for want in (200, 200, 404, 200):
            r = c.read_response()
            assert r.status == want, r
            got_bytes += wire_len(r)
    sent_bytes += sum(len(q) for q in reqs)
    n_req += 4
    n2 += 3
    n4 += 1

    # A worker counts what it wrote right after its write returns, so the
    # client can have the answer (and ask another worker for the status)
    # a moment before the count moves. Ask again until bytes_out caught up;
    # each status answer asked for meanwhile is counted as part of the mix.
    status_req = get_req(STATUS)
    for _ in range(50):
        with srv.connect() as c:
            conns += 1
            c.send(status_req)
            r = c.read_response()
        st = json.loads(r.body)
        if st["bytes_out"] - base["bytes_out"] == got_bytes:
            break
        time.sleep(0.05)
        sent_bytes += len(status_req)
        got_bytes += wire_len(r)
        n_req += 1
        n2 += 1
    # The status request is counted once it is answered: not in its own body.
    assert st["requests"] - base["requests"] == n_req, (base, st)
    assert sum(s["requests"] for s in st["slots"]) == st["requests"], st
    assert st["responses"]["2xx"] - base["responses"]["2xx"] == n2, st["responses"]
    assert st["responses"]["4xx"] - base["responses"]["4xx"] == n4, st["responses"]
    for k in ("1xx", "3xx", "5xx"):
        assert st["responses"][k] == base["responses"][k], st["responses"]
    # bytes_in includes the status request being answered (already read).
    assert st["bytes_in"] - base["bytes_in"] == sent_bytes - len(base_req) + len(status_req), st
    # bytes_out: every response written before this status page was rendered
    # (the baseline status response included, since its counter moved after
    # its own rendering).
    assert st["bytes_out"] - base["bytes_out"] == got_bytes, (got_bytes, base, st)
    assert st["accepted"] - base["accepted"] == conns - 1, (conns, base, st)

    # The next status request sees the previous one.
    st2 = status_json(srv)
    assert st2["requests"] == st["requests"] + 1, (st, st2)
    assert st2["responses"]["2xx"] == st["responses"]["2xx"] + 1


PROM_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (-?[0-9.eE+]+|NaN|[+-]Inf)$")


def parse_prometheus(text):
    helps, types, samples = {}, {}, []
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("# HELP "):
            name, _, doc = line[7:].partition(" ")
            assert doc, f"HELP without text: {line!r}"
            helps[name] = doc
        elif line.startswith("# TYPE "):
            name, _, typ = line[7:].partition(" ")
            assert typ in ("counter", "gauge", "histogram", "summary", "untyped"), line
            assert name not in types, f"two TYPE lines for {name}"
            types[name] = typ
        elif line.startswith("#"):
            continue
        else:
            m = PROM_SAMPLE.match(line)
            assert m, f"bad Prometheus sample line: {line!r}"
            name = m.group(1)
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            assert name in types or types.get(base) == "histogram", \
                f"sample before its TYPE line: {line!r}"
            samples.append((m.group(1), m.group(2) or "", float(m.group(3))))
    return helps, types, samples


def test_prometheus_format(server):
    srv = server("--workers", "2", "--status-path", STATUS)
    wait_workers(srv, 2)
    before = status_json(srv)
    for _ in range(7):
        assert srv.get("/small.txt").status == 200
    r = srv.get(STATUS + "?format=prometheus")
    assert r.status == 200, r
    ctype = r.get("content-type", "")
    assert ctype.startswith("text/plain"), ctype
    assert "version=0.0.4" in ctype, ctype
    text = r.body.decode()
    assert text.endswith("\n")
    helps, types, samples = parse_prometheus(text)
    for name, typ in types.items():
        assert name in helps, f"{name} has a TYPE but no HELP line"
        if typ == "counter":
            assert name.endswith("_total"), f"counter {name} should end in _total"
    values = {(n, l): v for n, l, v in samples}
    # the status request that took `before` was answered; this one is not yet
    assert values[("herd_requests_total", "")] == before["requests"] + 1 + 7, text
    assert types["herd_requests_total"] == "counter"
    assert re.search(r"^herd_requests_total \d+$", text, re.M)
    assert values[("herd_responses_total", '{code="2xx"}')] == before["responses"]["2xx"] + 8
    for k in ("1xx", "3xx", "4xx", "5xx"):
        assert ("herd_responses_total", f'{{code="{k}"}}') in values, k
    if "herd_workers" in types:
        assert values[("herd_workers", "")] == 2
    if "herd_generation" in types:
        assert values[("herd_generation", "")] == 1


def test_table_format(server):
    srv = server("--workers", "2", "--status-path", STATUS)
    st = wait_workers(srv, 2)
    r = srv.get(STATUS + "?format=table")
    assert r.status == 200, r
    assert r.get("content-type", "").startswith("text/plain"), r
    text = r.body.decode()
    lines = text.splitlines()
    header = [i for i, l in enumerate(lines)
              if re.match(r"^\s*slot\s+worker\s+pid\s+gen\s+state\s+requests\b", l)]
    assert header, f"no slot table header in:\n{text}"
    rows = lines[header[0] + 1:]
    for s in st["slots"]:
        assert any(re.search(rf"\b{s['pid']}\b.*\brunning\b", row) for row in rows), \
            f"no row for worker pid {s['pid']}:\n{text}"
    assert str(srv.pid) in text, "table should name the master pid"


def test_head_on_status_has_no_body(server, site):
    srv = server("--workers", "1", "--status-path", STATUS)
    with srv.connect() as c:
        c.send(build_request("HEAD", STATUS))
        r = c.read_response("HEAD")
        assert r.status == 200, r
        assert r.get("content-type", "").startswith("application/json")
        assert int(r.get("content-length", "0")) > 0, r
        # A body after the HEAD head would be read as the next response.
        assert c.nothing_within(0.3), f"bytes after a HEAD response: {bytes(c.buf)[:200]!r}"
        c.send(get_req("/small.txt"))
        r2 = c.read_response()
        assert r2.status == 200 and r2.body == site.files["small.txt"], r2


def test_status_never_cached(server):
    srv = server("--workers", "1", "--status-path", STATUS)
    a = status_json(srv)
    b = status_json(srv)
    assert b["requests"] == a["requests"] + 1, "the second read must show the first"


# ------------------------------------------------------------ herd status (the command)

def run_status(*args, timeout=10):
    return subprocess.run(herd_cmd("status", *args), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)


def test_status_command_finds_the_server_from_its_config(server, tmp_path):
    pidf = tmp_path / "herd.pid"
    server("--status-path", "/_st", "--pid-file", str(pidf))
    wait_for(lambda: pidf.exists() and pidf.read_text().strip(), timeout=5, what="pid file")
    cfg = tmp_path / "herd.conf"
    cfg.write_text(f"status-path = /_st\npid-file = {pidf}\n")
    r = run_status("--config", str(cfg), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["master_pid"] == int(pidf.read_text())
    # --pid-file alone finds the port; the path is then the default one
    r = run_status("--pid-file", str(pidf))
    assert r.returncode != 0 and "/herd-status" in r.stderr, r.stderr


def test_status_command_finds_the_server_from_its_pid_file(server, tmp_path):
    pidf = tmp_path / "herd.pid"
    server("--status-path", STATUS, "--pid-file", str(pidf))
    wait_for(lambda: pidf.exists() and pidf.read_text().strip(), timeout=5, what="pid file")
    r = run_status("--pid-file", str(pidf), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["master_pid"] == int(pidf.read_text())


def test_status_command_says_what_it_tried(tmp_path):
    cfg = tmp_path / "herd.conf"
    cfg.write_text("listen = 127.0.0.1:9\n")
    r = run_status("--config", str(cfg))
    assert r.returncode == 1 and "status-path" in r.stderr, r.stderr
    r = run_status("--pid-file", str(tmp_path / "missing.pid"))
    assert r.returncode == 1 and "missing.pid" in r.stderr, r.stderr
    cfg.write_text("listen = 127.0.0.1:9\nstatus-path = /s\n")
    r = run_status("--config", str(cfg))
    assert r.returncode == 1 and "127.0.0.1:9" in r.stderr and "--config" in r.stderr, r.stderr


@pytest.mark.parametrize("form", ["{port}", "*:{port}", "0.0.0.0:{port}", "127.0.0.1:{port}",
                                  "[::]:{port}"])
def test_status_command_reaches_a_wildcard_listen_line_on_loopback(tmp_path, form):
    """listen = PORT and *:PORT are every address, as 0.0.0.0:PORT is: herd
    status asks loopback. It asked host "PORT" (0.0.x.y) on port 80, and
    *:PORT as a host name (red-team pass 17)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = tmp_path / "herd.conf"
    cfg.write_text(f"listen = {form.format(port=port)}\nstatus-path = /s\n")
    r = run_status("--config", str(cfg), "--timeout", "2s")
    assert r.returncode == 1, r
    host = "[::1]" if form.startswith("[") else "127.0.0.1"
    assert f"(tried http://{host}:{port}/s, from --config)" in r.stderr, r.stderr


def test_status_command_does_not_ask_a_tls_listener_in_plain_http(tmp_path):
    cfg = tmp_path / "herd.conf"
    cfg.write_text("listen = 127.0.0.1:9 tls\ntls-cert = c.pem\ntls-key = k.pem\n"
                   "status-path = /s\n")
    r = run_status("--config", str(cfg))
    assert r.returncode == 1 and "is TLS" in r.stderr, r.stderr


def test_status_command_rejects_a_page_that_is_not_the_status(server):
    srv = server("--status-path", STATUS)
    for fmt in ([], ["--json"], ["--prometheus"]):
        r = run_status(srv.url("/"), *fmt)
        assert r.returncode == 1, (fmt, r.stdout[:200])
        assert "not with herd's status page" in r.stderr, r.stderr
        assert r.stdout == ""


def test_status_watch_piped_prints_plain_lines_with_rates(server):
    srv = server("--status-path", STATUS)
    p = subprocess.Popen(herd_cmd("status", srv.url(STATUS), "--watch"),
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            assert srv.get("/").status in (200, 403, 404)
            time.sleep(0.05)
    finally:
        p.kill()
        out, err = p.communicate(timeout=5)
    assert "\x1b" not in out, repr(out[:200])
    lines = [ln for ln in out.splitlines() if "req/s" in ln]
    assert lines, (out, err)
    rate = float(re.search(r"req/s ([0-9.]+)", lines[-1]).group(1))
    assert rate > 1, lines
    assert re.search(r"out B/s \d+ .*2xx/s [0-9.]+ .*4xx/s [0-9.]+", lines[-1]), lines
