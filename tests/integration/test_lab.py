"""herd lab: a short lab run writes report.md with the manifest and one
table per metric, report.json with real figures, and SVG charts with one
polyline per model and keep-alive mode; bad flags exit 2 with one line;
a signal stops every server the lab started; a --compare server that is
not installed is a note, not a failure.

Every run of herd lab here is bounded by a subprocess timeout, and the lab
itself runs each herd load for a fixed duration. Servers listen on
127.0.0.1 only (the lab refuses anything else)."""

import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import comm, descendants, shim_env

REPO_ROOT = Path(__file__).resolve().parents[2]
HERD_BIN = os.environ.get("HERD_BIN") or str(REPO_ROOT / "build" / "herd")
if not os.path.isabs(HERD_BIN):
    HERD_BIN = str((REPO_ROOT / HERD_BIN).resolve())

SVG_NS = "{http://www.w3.org/2000/svg}"
MODELS = ["reuseport", "iterative"]
CONCURRENCY = [1, 4]
# Below the kernel's ephemeral range (32768-60999 here): the lab picks a
# free port and the server binds it later, and in between any outgoing
# connection could take a port from that range (nginx failed to bind one).
PORTS = (23100, 23199)
# a bound, not a speed check: a loaded machine's runs take longer
RUN_TIMEOUT = 180
# Each metric gets a table per keep-alive mode.
TABLES = ["Requests per second", "Latency p50", "Latency p90", "Latency p99",
          "Latency p99.9", "Latency max", "Errors", "Server CPU, % of one core",
          "Server CPU per request", "Voluntary context switches",
          "Involuntary context switches", "ListenOverflows / ListenDrops",
          "Empty accept wakeups", "Little's law"]


def require_binary():
    if not (os.path.isfile(HERD_BIN) and os.access(HERD_BIN, os.X_OK)):
        pytest.fail(f"herd binary not found: {HERD_BIN} (run `make build`)", pytrace=False)


def lab_cmd(out, *args):
    return [HERD_BIN, "lab", "--out", str(out), *[str(a) for a in args]]


def run_lab(out, *args, timeout=RUN_TIMEOUT, env=None):
    require_binary()
    return subprocess.run(lab_cmd(out, *args), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, errors="replace", timeout=timeout, env=env)


def processes_mentioning(text):
    """PIDs of live processes whose command line contains text."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{d}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmd and state != "Z":
            found.append((int(d), cmd))
    return found


def alive(pid, text):
    """pid is a live process that is still one of the lab's servers: its command line
    mentions text, or it is a server worker whose title does not (nginx: worker process)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z" and (text in cmd or re.search(r"herd|nginx|h2o|lighttpd", cmd))


def md_table(md, section, title):
    """Rows of the table headed '#### title...' inside '## section...': {row label: [cells]}."""
    part = md.split(f"\n## {section}", 1)[1].split("\n## ", 1)[0]
    block = part.split(f"\n#### {title}", 1)[1].split("\n#### ", 1)[0]
    head, body = table_cells(block)
    return head, {cells[0]: cells[1:] for cells in body}


def table_cells(text):
    """The first markdown table in text: (header cells, [row cells]), separator skipped."""
    lines = [l for l in text.splitlines() if l.startswith("|")]
    split = [[c.strip() for c in l.strip("|").split("|")] for l in lines]
    return split[0], split[2:]


@pytest.fixture(scope="module")
def short_lab(tmp_path_factory):
    out = tmp_path_factory.mktemp("lab") / "out"
    t0 = time.monotonic()
    r = run_lab(out, "--models", ",".join(MODELS), "--concurrency", "1,4", "--duration", "1s",
                "--warmup", "0", "--keepalive", "both", "--compare", "none",
                "--retries", "0", "--port-range", f"{PORTS[0]}-{PORTS[1]}")
    elapsed = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    return out, r, elapsed


def test_short_lab_report_md(short_lab):
    out, r, elapsed = short_lab
    md = (out / "report.md").read_text()
    # the machine manifest comes first
    manifest = md.split("\n## ", 2)[1]
    assert manifest.startswith("Machine")
    for key in ("| CPU |", "| cores online |", "| kernel |", "| net.core.somaxconn |",
                "| net.ipv4.tcp_max_syn_backlog |", "| fs.file-max |"):
        assert key in manifest, key
    assert "## How to read this" in md
    assert "CPU per request" in md
    for section in ("Keep-alive on", "Keep-alive off"):
        for title in TABLES:
            head, rows = md_table(md, section, title)
            assert head == ["server/model", "c=1", "c=4"], (section, title, head)
            assert set(rows) == {f"herd/{m}" for m in MODELS}, (section, title, rows)
        _, rps = md_table(md, section, "Requests per second")
        for model in MODELS:
            for cell in rps[f"herd/{model}"]:
                assert float(cell.rstrip("*").replace(",", "")) > 0, (section, model, cell)
    assert "## Failed runs" not in md
    # progress on stderr names each run
    assert len(re.findall(r"^lab: herd/\w+ .* req/s", r.stderr, re.M)) == 8, r.stderr


def test_short_lab_report_json(short_lab):
    out, _, _ = short_lab
    rep = json.loads((out / "report.json").read_text())
    assert rep["interrupted"] is False
    assert rep["config"]["concurrency"] == CONCURRENCY
    assert rep["config"]["keepalive"] == [True, False]
    assert rep["machine"]["sysctl"]["net.core.somaxconn"]
    assert [s["label"] for s in rep["servers"]] == [f"herd/{m}" for m in MODELS]
    runs = rep["runs"]
    assert len(runs) == len(MODELS) * 2 * len(CONCURRENCY)
    seen = set()
    for run in runs:
        key = (run["server"], run["keepalive"], run["concurrency"])
        seen.add(key)
        assert run["ok"] is True, run
        assert run["requests_per_sec"] > 0, run
        assert run["requests"] > 0
        lat = run["latency_us"]
        assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p999"] <= lat["max"], lat
        use = run["server_usage"]
        assert use["wall_s"] >= 0.9
        assert use["user_s"] + use["sys_s"] > 0, use
        assert use["voluntary_ctxt_switches"] + use["involuntary_ctxt_switches"] > 0, use
        assert isinstance(use["empty_accept_wakeups"], int)
        # the server's own count can include the odd status-page request
        assert use["requests_counted"] >= run["requests"] - run["errors_total"]
        assert isinstance(run["listen_overflows"], int)
        assert isinstance(run["listen_drops"], int)
        assert (out / run["raw"]).is_file()
    assert len(seen) == len(runs)
    # keep-alive off opens a connection per request
    for run in runs:
        if not run["keepalive"]:
            assert run["connects"] >= run["requests"], run


@pytest.mark.parametrize("name", ["reqs.svg", "p99.svg", "errors.svg", "cpu.svg"])
def test_short_lab_svg(short_lab, name):
    out, _, _ = short_lab
    root = ET.parse(out / name).getroot()
    assert root.tag == SVG_NS + "svg"
    assert root.get("version") == "1.1"
    assert float(root.get("width")) > 0 and float(root.get("height")) > 0
    lines = root.findall(f".//{SVG_NS}polyline")
    titles = sorted(l.find(SVG_NS + "title").text for l in lines)
    want = sorted(f"herd/{m}, keep-alive {ka}" for m in MODELS for ka in ("on", "off"))
    assert titles == want
    for l in lines:
        points = l.get("points").split()
        assert len(points) == len(CONCURRENCY)
        for p in points:
            x, y = map(float, p.split(","))
            assert 0 <= x <= float(root.get("width")) and 0 <= y <= float(root.get("height"))


def test_short_lab_left_nothing_running(short_lab):
    out, _, _ = short_lab
    rep = json.loads((out / "report.json").read_text())
    pids = [p for s in rep["servers"] for p in s["pids"]]
    assert pids, rep["servers"]
    for pid in pids:
        assert not alive(pid, str(out)), pid
    assert processes_mentioning(str(out)) == []


@pytest.mark.parametrize("args", [
    ["--bogus"],
    ["--keepalive", "sometimes"],
    ["--concurrency", "0"],
    ["--concurrency", "1,,2"],
    ["--models", "nosuch"],
    ["--compare", "apache"],
    ["--duration", "soon"],
    ["--duration"],
    ["--path", "index.html"],
    ["--server-cpu", "1", "--load-cpu", "1"],
    ["--load-cpu", "4095"],
    ["--models", "none", "--compare", "none"],
    ["stray"],
    ["--port-range", "5-4"],
    ["--port-range", "8080"],
    ["--port-range", "1-70000"],
    ["--scenario", "restart"],
    ["--scenario", "reload", "--reloads", "-1"],
    ["--scenario", "reload", "--reloads", "0"],
    ["--scenario", "reload", "--reload-signal", "kill"],
    ["--scenario", "reload", "--reload-every", "10ms"],
    ["--scenario", "reload", "--profile"],
])
def test_bad_flags_exit_2(tmp_path, args):
    require_binary()
    out = tmp_path / "out"
    r = subprocess.run([HERD_BIN, "lab", *args, "--out", str(out)] if args != ["--duration"]
                       else [HERD_BIN, "lab", "--out", str(out), *args],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10)
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("herd lab: "), r.stderr
    assert r.stdout == ""
    assert not out.exists()


def test_help():
    require_binary()
    r = subprocess.run([HERD_BIN, "lab", "--help"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0
    assert "--concurrency" in r.stdout and "--keepalive" in r.stdout


def read_until(proc, pattern, timeout):
    """stderr lines of proc until one matches pattern; returns (match, text so far)."""
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], 0.2)
        if not ready:
            if proc.poll() is not None:
                break
            continue
        line = proc.stderr.readline()
        if not line:
            break
        text += line
        m = re.search(pattern, line)
        if m:
            return m, text
    raise AssertionError(f"no line matching {pattern!r} within {timeout}s:\n{text}")


@pytest.mark.parametrize("sig,when", [(signal.SIGINT, "running"), (signal.SIGTERM, "starting")])
def test_signal_stops_every_server(tmp_path, sig, when):
    require_binary()
    out = tmp_path / "out"
    proc = subprocess.Popen(lab_cmd(out, "--models", "prefork,threads", "--concurrency", "1,2",
                                    "--duration", "3s", "--warmup", "0", "--compare", "none"),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, errors="replace")
    try:
        if when == "running":
            m, text = read_until(proc, r"ready, pids ([\d ]+)", 20)
            pids = [int(p) for p in m.group(1).split()]
            assert len(pids) >= 2, text  # master and worker
            time.sleep(1.0)  # inside the first run of herd load
        else:
            m, text = read_until(proc, r"started pid (\d+)", 20)
            pids = [int(m.group(1))]
        os.kill(proc.pid, sig)
        _, rest = proc.communicate(timeout=30)  # stdout is DEVNULL: the text is stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 130, text + rest
    for pid in pids:
        assert not alive(pid, str(out)), (pid, text + rest)
    assert processes_mentioning(str(out)) == [], text + rest
    rep = json.loads((out / "report.json").read_text())
    assert rep["interrupted"] is True
    assert "Interrupted" in (out / "report.md").read_text()
    # the second model never started
    assert rep["servers"][1]["state"] == "not run"


def child_running(parent, word):
    """The pid of parent's child whose command line has word as an argument, or None."""
    for pid in descendants(parent):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if word.encode() in args:
            return pid
    return None


def numbers_in(value):
    """Every number in a parsed JSON document."""
    if isinstance(value, dict):
        return [n for v in value.values() for n in numbers_in(v)]
    if isinstance(value, list):
        return [n for v in value for n in numbers_in(v)]
    return [value] if isinstance(value, (int, float)) and not isinstance(value, bool) else []


def test_worker_killed_mid_run_fails_the_point(tmp_path):
    """A server process that dies between the samples around a run takes
    its CPU time with it (and the tree's sum can go down: a figure of
    1e19 %): the run is failed with the reason, never a number. The master
    respawns the worker, so the server itself is still there."""
    require_binary()
    out = tmp_path / "out"
    proc = subprocess.Popen(lab_cmd(out, "--models", "reuseport", "--concurrency", "1",
                                    "--duration", "3s", "--warmup", "0", "--compare", "none",
                                    "--retries", "0", "--balance-workers", "0"),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, errors="replace")
    try:
        m, text = read_until(proc, r"ready, pids ([\d ]+)", 20)
        master = int(m.group(1).split()[0])
        workers = [p for p in descendants(master) if comm(p).startswith("herd-w")]
        assert len(workers) == 1, (workers, text)
        # herd load running: the first sample is taken, the second not yet
        deadline = time.monotonic() + 10
        while child_running(proc.pid, "load") is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert child_running(proc.pid, "load") is not None, text
        time.sleep(0.5)
        os.kill(workers[0], signal.SIGKILL)
        _, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    err = text + rest
    # the lab's one run failed: as for any failed run, "no run succeeded"
    assert proc.returncode == 1, err
    assert re.search(rf"FAILED: a server process \(pid {workers[0]}\) exited during the run", err), err
    assert not re.search(r"server CPU +\d{4,}%", err), err
    rep = json.loads((out / "report.json").read_text())
    [run] = rep["runs"]
    assert run["ok"] is False and f"pid {workers[0]}" in run["reason"], run
    assert all(abs(n) < 1e9 for n in numbers_in(rep)), rep
    md = (out / "report.md").read_text()
    assert "## Failed runs" in md and f"(pid {workers[0]}) exited during the run" in md
    assert processes_mentioning(str(out)) == [], err


def test_compare_not_installed_is_a_note(tmp_path):
    env = dict(os.environ, NGINX_BIN=str(tmp_path / "no-such-nginx"))
    out = tmp_path / "out"
    r = run_lab(out, "--models", "single", "--compare", "nginx", "--concurrency", "2",
                "--duration", "500ms", "--warmup", "0", env=env)
    assert r.returncode == 0, r.stderr
    md = (out / "report.md").read_text()
    assert "nginx is not installed" in md
    _, rows = md_table(md, "Keep-alive on", "Requests per second")
    assert list(rows) == ["herd/single"]
    rep = json.loads((out / "report.json").read_text())
    states = {s["label"]: s["state"] for s in rep["servers"]}
    assert states == {"herd/single": "ran", "nginx": "not installed"}


def summary_table(md):
    """The summary table of report.md: (header cells, {(server, c): [cells]})."""
    part = md.split("\n## Summary", 1)[1].split("\n## ", 1)[0]
    head, body = table_cells(part)
    return head, {(cells[0], int(cells[1])): cells[2:] for cells in body}


def number(cell):
    return float(cell.rstrip("*").replace(",", ""))


def test_close_lab_summary_has_cps_and_cpu_per_connection(tmp_path):
    """Keep-alive off: the summary gives connections per second and server
    CPU µs per connection for each model and concurrency, in report.md,
    report.json and the closing lines on stderr."""
    out = tmp_path / "out"
    models = ["reuseport", "coro"]
    r = run_lab(out, "--models", ",".join(models), "--concurrency", "1,4", "--duration", "1s",
                "--warmup", "0", "--keepalive", "off", "--compare", "none", "--retries", "0",
                "--port-range", f"{PORTS[0]}-{PORTS[1]}")
    assert r.returncode == 0, r.stderr
    md = (out / "report.md").read_text()
    head, rows = summary_table(md)
    assert head == ["server/model", "c", "keep-alive off: conn/s (CPS)",
                    "keep-alive off: CPU µs/connection"], head
    assert set(rows) == {(f"herd/{m}", c) for m in models for c in CONCURRENCY}, rows
    for key, (cps, cpu) in rows.items():
        assert number(cps) > 0 and number(cpu) > 0, (key, cps, cpu)
    rep = json.loads((out / "report.json").read_text())
    for run in rep["runs"]:
        assert run["connections_per_sec"] > 0, run
        assert run["server_usage"]["cpu_us_per_connection"] > 0, run
    lines = [l for l in r.stderr.splitlines() if re.match(r"lab: summary herd/\w+ +c=\d+ +off ", l)]
    assert len(lines) == len(models) * len(CONCURRENCY), r.stderr
    assert all("conn/s" in l and "us/conn" in l for l in lines), lines


def test_short_lab_summary_has_both_modes(short_lab):
    out, _, _ = short_lab
    head, rows = summary_table((out / "report.md").read_text())
    assert head == ["server/model", "c", "keep-alive on: req/s", "keep-alive on: CPU µs/request",
                    "keep-alive off: conn/s (CPS)", "keep-alive off: CPU µs/connection"], head
    assert set(rows) == {(f"herd/{m}", c) for m in MODELS for c in CONCURRENCY}, rows
    for key, cells in rows.items():
        assert all(number(c) > 0 for c in cells), (key, cells)


COMPARE = [s for s in ("nginx", "h2o", "lighttpd")
           if shutil.which(s, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")]


@pytest.mark.skipif(not COMPARE, reason="none of nginx, h2o, lighttpd is installed")
def test_compare_servers_run(tmp_path):
    out = tmp_path / "out"
    r = run_lab(out, "--models", "none", "--compare", ",".join(COMPARE), "--concurrency", "2",
                "--duration", "500ms", "--warmup", "0", "--keepalive", "both")
    assert r.returncode == 0, r.stderr
    rep = json.loads((out / "report.json").read_text())
    for s in rep["servers"]:
        assert s["state"] == "ran", s
        assert s["version"], s
        assert s["pids"], s
    assert len(rep["runs"]) == 2 * len(COMPARE)
    for run in rep["runs"]:
        assert run["ok"] and run["requests_per_sec"] > 0, run
        assert run["server_usage"]["empty_accept_wakeups"] is None
    for s in rep["servers"]:
        for pid in s["pids"]:
            assert not alive(pid, str(out)), (s["label"], pid)
    assert processes_mentioning(str(out)) == []


def test_short_lab_ports_in_range(short_lab):
    out, _, _ = short_lab
    rep = json.loads((out / "report.json").read_text())
    ports = [int(re.search(r"--listen 127\.0\.0\.1:(\d+)", s["command"]).group(1))
             for s in rep["servers"]]
    assert len(ports) == len(MODELS) and len(set(ports)) == len(ports), ports
    assert all(PORTS[0] <= p <= PORTS[1] for p in ports), ports


def test_short_lab_estimates_its_run_time_first(short_lab):
    _, r, elapsed = short_lab
    first = r.stderr.splitlines()[0]
    m = re.match(r"lab: estimated run time: at least (\d+)m(\d+)s", first)
    assert m, r.stderr
    est = int(m.group(1)) * 60 + int(m.group(2))
    # 2 servers x 4 runs of 1 s, plus the pauses and starts: a floor, not a ceiling
    assert 8 <= est <= elapsed, (est, elapsed)


@pytest.mark.parametrize("name", ["reqs.svg", "p99.svg"])
def test_short_lab_svg_title_is_centred_on_the_canvas(short_lab, name):
    out, _, _ = short_lab
    root = ET.parse(out / name).getroot()
    width = float(root.get("width"))
    title = next(t for t in root.iter(SVG_NS + "text") if t.get("font-size") == "16")
    assert title.get("text-anchor") == "middle"
    x = float(title.get("x"))
    assert x == width / 2, (x, width)
    # bold 16 px sans-serif: at most about 10 px a character
    assert len(title.text) * 10 / 2 <= x, title.text


def test_port_range_with_no_free_port(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        out = tmp_path / "out"
        r = run_lab(out, "--models", "single", "--compare", "none", "--concurrency", "1",
                    "--duration", "200ms", "--warmup", "0", "--port-range", f"{port}-{port}")
    assert r.returncode == 1, r.stderr
    assert f"no free port on 127.0.0.1 in {port}-{port}" in (out / "report.md").read_text()


def test_a_port_taken_before_the_server_binds_it_costs_a_retry(tmp_path):
    """The lab picks a free port and the server binds it a moment later; a
    port taken in between (an outgoing connection may take one of the
    ephemeral range: nginx once failed to bind) makes the lab start the
    server again on another port, not fail it. A shim fails herd serve's
    first bind with EADDRINUSE."""
    out = tmp_path / "out"
    mark = tmp_path / "taken"
    env = {**os.environ, **shim_env("taken_port", TAKEN_PORT_ONCE=mark)}
    r = run_lab(out, "--models", "single", "--compare", "none", "--concurrency", "1",
                "--duration", "200ms", "--warmup", "0", "--keepalive", "on",
                "--port-range", f"{PORTS[0]}-{PORTS[1]}", env=env)
    assert r.returncode == 0, r.stderr
    assert mark.exists(), "the shim did not fail a bind"
    taken = re.findall(r"port (\d+) was taken before the server bound it: another port",
                       r.stderr)
    started = re.findall(r"started pid \d+ on 127\.0\.0\.1:(\d+)", r.stderr)
    assert len(taken) == 1 and len(started) == 2 and started[0] == taken[0], r.stderr
    assert started[1] != started[0], r.stderr
    run, = json.loads((out / "report.json").read_text())["runs"]
    assert run["ok"] is True, run


def test_short_lab_littles_law(short_lab):
    """Each run checks itself: req/s x mean latency against the connections,
    flagged past 10% in the JSON and in its own table."""
    out, _, _ = short_lab
    rep = json.loads((out / "report.json").read_text())
    checked = 0
    for run in rep["runs"]:
        if not run["ok"]:
            continue
        want = run["requests_per_sec"] * run["latency_us"]["mean"] / 1e6 / run["concurrency"]
        assert run["little_ratio"] == pytest.approx(want, rel=1e-3), run
        assert run["little_off"] == (abs(run["little_ratio"] - 1) > 0.10), run
        checked += 1
    assert checked >= 4
    md = (out / "report.md").read_text()
    head, rows = md_table(md, "Keep-alive on", "Little's law")
    cells = rows["herd/reuseport"]
    assert len(cells) == len(CONCURRENCY)
    for c in cells:
        assert re.fullmatch(r"\d+\.\d\d( off)?", c), cells


def test_short_lab_accept_balance(short_lab):
    """reuseport runs once more with 4 workers, a connection per request: the
    accepted counts per worker come from its status page into the JSON, the
    report's table and balance.svg (a bar per worker)."""
    out, r, _ = short_lab
    rep = json.loads((out / "report.json").read_text())
    runs = {b["run"]: b for b in rep["balance"]}
    assert list(runs) == ["reuseport"], rep["balance"]      # iterative has one worker
    b = runs["reuseport"]
    assert b["ok"] and b["workers"] == 4 and len(b["accepted"]) == 4, b
    assert sum(b["accepted"]) > 50, b
    assert "lab: balance reuseport" in r.stderr
    md = (out / "report.md").read_text()
    assert "## Accept balance" in md
    root = ET.parse(out / "balance.svg").getroot()
    assert root.tag == SVG_NS + "svg"
    bars = [e for e in root.iter(SVG_NS + "rect") if e.get("class") == "bar"]
    assert len(bars) == 4
    heights = [float(e.get("height")) for e in bars]
    assert abs(sum(heights) - 300) < 1, heights             # shares add up to the plot height


def test_balance_workers_flag_checked(tmp_path):
    r = run_lab(tmp_path / "out", "--balance-workers", "1")
    assert r.returncode == 2 and "--balance-workers" in r.stderr, r.stderr
    r = run_lab(tmp_path / "out", "--balance-workers", "17")
    assert r.returncode == 2, r.stderr


def perf_usable():
    """None when perf can record here, else why not (for the skip)."""
    perf = shutil.which("perf")
    if not perf:
        return "perf is not installed: apt-get install linux-perf"
    r = subprocess.run([perf, "record", "-e", "cpu-clock", "-g", "-o", "/dev/null", "--", "true"],
                       capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        return ("perf record is not permitted here (kernel.perf_event_paranoid?): "
                + r.stderr.strip()[-200:])
    return None


@pytest.mark.slow
def test_profile_writes_flame_graphs(tmp_path):
    why = perf_usable()
    if why:
        pytest.skip(why)
    out = tmp_path / "out"
    r = run_lab(out, "--models", "reuseport,coro", "--concurrency", "4", "--duration", "1s",
                "--warmup", "0", "--retries", "0", "--compare", "none",
                "--balance-workers", "0", "--profile", "--port-range", f"{PORTS[0]}-{PORTS[1]}",
                timeout=180)
    assert r.returncode == 0, r.stderr
    rep = json.loads((out / "report.json").read_text())
    for model in ("reuseport", "coro"):
        svg = out / f"flame-herd-{model}.svg"
        root = ET.parse(svg).getroot()                  # well-formed XML
        assert root.tag == SVG_NS + "svg" and root.get("version") == "1.1"
        boxes = root.findall(f".//{SVG_NS}rect")
        assert len(boxes) > 5, len(boxes)
        titles = [g.find(SVG_NS + "title").text for g in root.iter(SVG_NS + "g")]
        assert any("samples" in t for t in titles), titles[:5]
        # the root box spans the whole width: every sample passed through it
        widths = [float(b.get("width")) for b in boxes[1:]]
        assert max(widths) == pytest.approx(1180, abs=1)
        server = next(s for s in rep["servers"] if s["label"] == f"herd/{model}")
        assert server["profile"].startswith(f"flame-herd-{model}.svg"), server
    assert "## Profiles" in (out / "report.md").read_text()


# ---- the reload scenario (issue 13): one herd model, and nginx when installed

NGINX = shutil.which("nginx") or next(
    (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)), None)
RELOAD_PORTS = (23200, 23299)


@pytest.fixture(scope="module")
def reload_lab(tmp_path_factory):
    out = tmp_path_factory.mktemp("lab") / "reload"
    t0 = time.monotonic()
    r = run_lab(out, "--scenario", "reload", "--models", "reuseport",
                "--compare", "nginx" if NGINX else "none", "--reloads", "2",
                "--reload-every", "1s", "--reload-signal", "both", "--concurrency", "5",
                "--warmup", "300ms", "--port-range", f"{RELOAD_PORTS[0]}-{RELOAD_PORTS[1]}",
                timeout=60)
    elapsed = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    return out, r, elapsed


def reload_table(md, section):
    """Rows of the table under '## section': {(server, c): {column: cell}}."""
    part = md.split(f"\n## {section}", 1)[1].split("\n## ", 1)[0]
    head, body = table_cells(part)
    return {(cells[0], int(cells[1])): dict(zip(head, cells)) for cells in body}


def load_outputs(out):
    """The end of each herd load run's own text: it names the first reason
    of each kind of error (3 errors once under USR2 on a loaded machine,
    of a kind the report alone did not tell)."""
    return "\n".join(f"{p.name}: ...{p.read_text(errors='replace')[-600:]}"
                     for p in sorted((out / "raw").glob("*.txt")))


def test_reload_report_md(reload_lab):
    out, _, elapsed = reload_lab
    assert elapsed < 45, f"the reload lab took {elapsed:.0f} s"
    md = (out / "report.md").read_text()
    assert md.split("\n## ", 2)[1].startswith("Machine")
    hup = reload_table(md, "HUP (reload)")
    usr2 = reload_table(md, "USR2 (binary upgrade)")
    want = {("herd/reuseport", 5)} | ({("nginx", 5)} if NGINX else set())
    assert set(hup) == want, hup
    assert set(usr2) == {("herd/reuseport", 5)}, usr2     # nginx: HUP only
    for table in (hup, usr2):
        row = table[("herd/reuseport", 5)]
        assert row["errors"] == "0", (row, load_outputs(out))
        assert row["errors/reload (per reload)"] == "0.0 (0 0)", row
        assert row["old gone"] == "2 of 2", row
        assert int(row["requests"].replace(",", "")) > 0, row
        for col in ("p99 near", "p99 away"):
            assert re.fullmatch(r"[\d.]+ (µs|ms|s)", row[col]), row


def test_reload_report_json(reload_lab):
    out, _, _ = reload_lab
    rep = json.loads((out / "report.json").read_text())
    assert rep["config"]["scenario"] == "reload"
    rel = rep["reload"]
    assert rel["reloads"] == 2 and rel["reload_every_ms"] == 1000 and rel["workers"] == 2
    assert rel["signals"] == ["hup", "usr2"]
    runs = {(r["server"], r["signal"]): r for r in rel["runs"]}
    want = {("herd/reuseport", "hup"), ("herd/reuseport", "usr2")}
    assert set(runs) == want | ({("nginx", "hup")} if NGINX else set())
    for key, run in runs.items():
        assert run["ok"] is True, run
        assert run["concurrency"] == 5
        marks = run["reloads"]
        assert len(marks) == 2, run
        # at 1 s and 2 s of herd load's measured run, which is where the
        # lab times them from (--start-file); late by as much as a loaded
        # machine keeps the lab from running
        assert abs(marks[1]["t_s"] - marks[0]["t_s"] - 1) < 0.3, marks
        for k, m in enumerate(marks):
            assert k + 1 - 0.05 < m["t_s"] < k + 1.5, marks
        assert sum(m["errors"] for m in marks) + run["errors_before_first"] == run["errors_total"]
        assert run["errors_per_reload"] == run["errors_total"] / 2
        assert run["requests"] > 0 and run["latency_us"]["p99_away"] > 0
        slices = run["requests_per_sec_by_slice"]
        assert len(slices) == 30 and sum(slices) > 0, slices   # 3 s in 100 ms slices
        assert (out / run["raw"]).is_file()
        if key[0].startswith("herd/"):
            assert run["errors_total"] == 0, (run, load_outputs(out))
            assert all(m["old_generation_gone"] for m in marks), marks
    # after USR2 the second signal went to the new master
    up = runs[("herd/reuseport", "usr2")]["reloads"]
    assert up[0]["master"] != up[1]["master"], up


def test_reload_signals_are_timed_from_herd_loads_own_start(tmp_path):
    """The lab times each signal from the start herd load gives itself
    (--start-file), not from its own clock before spawning herd load: a
    loaded machine put 0.44 s of herd load's start-up between the two, and
    both marks came that much early. A shim makes herd load's first
    connect, before it fixes its start, 0.6 s late."""
    out = tmp_path / "out"
    env = {**os.environ, **shim_env("slow_connect", SLOW_CONNECT_MS=600)}
    r = run_lab(out, "--scenario", "reload", "--models", "reuseport", "--compare", "none",
                "--reloads", "2", "--reload-every", "1s", "--reload-signal", "hup",
                "--concurrency", "2", "--warmup", "200ms",
                "--port-range", f"{RELOAD_PORTS[0]}-{RELOAD_PORTS[1]}", timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    run, = json.loads((out / "report.json").read_text())["reload"]["runs"]
    marks = run["reloads"]
    assert run["ok"] is True and len(marks) == 2, run
    # at 1 s and 2 s of herd load's measured run (0.4 s and 1.4 s without)
    for k, m in enumerate(marks):
        assert 1 + k - 0.05 < m["t_s"] < 1 + k + 0.3, marks
    assert not list((out / "raw").glob("*.start")), "the start file was left behind"


@pytest.mark.parametrize("sig", ["hup", "usr2"])
def test_reload_svg_marks_the_signals(reload_lab, sig):
    out, _, _ = reload_lab
    root = ET.parse(out / f"reload-c5-{sig}.svg").getroot()
    assert root.tag == SVG_NS + "svg" and root.get("version") == "1.1"
    servers = 2 if NGINX and sig == "hup" else 1
    lines = root.findall(f".//{SVG_NS}polyline")
    assert len(lines) == servers
    marks = [e for e in root.iter(SVG_NS + "line") if e.get("class") == "reload-mark"]
    assert len(marks) == 2 * servers
    width = float(root.get("width"))
    for m in marks:
        assert 0 < float(m.get("x1")) == float(m.get("x2")) < width


def test_reload_left_nothing_running(reload_lab):
    out, _, _ = reload_lab
    rep = json.loads((out / "report.json").read_text())
    for run in rep["reload"]["runs"]:
        for m in run["reloads"]:
            assert not alive(m["master"], str(out)), m
    assert processes_mentioning(str(out)) == []


def test_reload_interrupted_after_upgrades_stops_every_master(tmp_path):
    """Ctrl-C in the middle of a USR2 run, when the master the lab started
    has handed over to a new one: every generation is stopped, the report
    is written and marked interrupted."""
    require_binary()
    out = tmp_path / "out"
    proc = subprocess.Popen(lab_cmd(out, "--scenario", "reload", "--models", "prefork",
                                    "--compare", "none", "--reload-signal", "usr2",
                                    "--reloads", "3", "--reload-every", "1s",
                                    "--concurrency", "5", "--warmup", "0"),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, errors="replace")
    try:
        m, text = read_until(proc, r"ready, pids ([\d ]+)", 20)
        time.sleep(2.5)     # after the second upgrade
        os.kill(proc.pid, signal.SIGINT)
        _, rest = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 130, text + rest
    for pid in [int(p) for p in m.group(1).split()]:
        assert not alive(pid, str(out)), (pid, text + rest)
    assert processes_mentioning(str(out)) == [], text + rest
    rep = json.loads((out / "report.json").read_text())
    assert rep["interrupted"] is True
    assert "Interrupted" in (out / "report.md").read_text()


@pytest.mark.skipif(not NGINX, reason="nginx is not installed")
def test_relative_out_dir_with_nginx(tmp_path):
    """nginx is given -p PREFIX and -c CONF: with a relative --out it looked
    for CONF under PREFIX and never started."""
    require_binary()
    r = subprocess.run([HERD_BIN, "lab", "--out", "rel", "--models", "none", "--compare", "nginx",
                        "--concurrency", "1", "--duration", "300ms", "--warmup", "0",
                        "--retries", "0", "--balance-workers", "0"],
                       cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       errors="replace", timeout=60)
    assert r.returncode == 0, r.stderr
    rep = json.loads((tmp_path / "rel" / "report.json").read_text())
    assert [(s["label"], s["state"]) for s in rep["servers"]] == [("nginx", "ran")], rep["servers"]


def test_a_servers_own_text_reaches_terminal_and_report_escaped(tmp_path):
    """What a compared server prints (its -v line, its log's last line when it
    fails) goes into the terminal and report.md: ESC sequences must not, and
    '|' or HTML must not break the servers table (red-team pass 14)."""
    fake = tmp_path / "fake-nginx"
    fake.write_text(
        "#!/usr/bin/env python3\n"
        "import sys\n"
        "if '-v' in sys.argv:\n"
        "    sys.stderr.write('nginx version: nginx/1.0 | x | <img src=x> \\x1b]0;T\\x07\\n')\n"
        "    sys.exit(0)\n"
        "sys.stderr.write('emerg: \\x1b[2J | col | <b>bold</b>\\n')\n"
        "sys.exit(1)\n")
    fake.chmod(0o755)
    env = dict(os.environ, NGINX_BIN=str(fake))
    out = tmp_path / "out"
    r = subprocess.run(lab_cmd(out, "--models", "none", "--compare", "nginx", "--concurrency", 1,
                               "--duration", "500ms", "--warmup", "0", "--balance-workers", 0),
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=RUN_TIMEOUT, env=env)
    assert b"\x1b" not in r.stdout + r.stderr, r.stderr
    assert b"nginx: failed" in r.stderr, r.stderr
    md = (out / "report.md").read_bytes()
    assert b"\x1b" not in md
    part = md.split(b"\n## Servers", 1)[1].split(b"\n## ", 1)[0]
    row = [l for l in part.split(b"\n") if l.startswith(b"| nginx |")]
    assert len(row) == 1, part
    # five cells: every '|' inside one is escaped
    assert len(re.findall(rb"(?<!\\)\|", row[0])) == 6, row[0]
    assert b"<b>" not in row[0] and b"<img" not in row[0], row[0]
