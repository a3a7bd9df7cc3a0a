"""herd lat: every message size round-trips through its own echo server, over
TCP and unix sockets; any missing server, cut-short or wrong echo, or
silence is exit 1 with the reason and no figure."""

import os
import re
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import herd_cmd, require_binary

RUN_TIMEOUT = 60
READY = re.compile(r"herd lat: echo server listening on (\S+)")
ROW = re.compile(r"^\s*(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")
SIZES = {"1": 1, "64": 64, "1k": 1024, "16k": 16384, "64k": 65536, "1m": 1048576}


def herd_lat(*args, timeout=RUN_TIMEOUT):
    require_binary()
    return subprocess.run(herd_cmd("lat", *[str(a) for a in args]), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, errors="replace", timeout=timeout)


def rows(stdout):
    out = {}
    for line in stdout.splitlines():
        m = ROW.match(line)
        if m:
            size = int(m.group(1))
            mean, p50, p99, mn, mx = (float(x) for x in m.groups()[1:])
            out[size] = dict(mean=mean, p50=p50, p99=p99, min=mn, max=mx)
    return out


def no_figures(r):
    assert not rows(r.stdout), r.stdout


def one_line_error(r):
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, r.stderr
    return lines[0]


class EchoServer:
    """herd lat -s, started and stopped by PID."""

    def __init__(self, listen="127.0.0.1:0", extra=()):
        require_binary()
        self.proc = subprocess.Popen(herd_cmd("lat", "-s", "--listen", listen, *extra),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        line = ""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            m = READY.search(line)
            if m:
                self.addr = m.group(1)
                return
            if not line and self.proc.poll() is not None:
                break
        self.stop()
        raise AssertionError(f"echo server not ready: {line!r}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            return None


@pytest.fixture
def echo():
    made = []

    def make(*a, **kw):
        s = EchoServer(*a, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop()


def check_table(r, sizes):
    assert r.returncode == 0, r.stderr
    got = rows(r.stdout)
    assert sorted(got) == sorted(SIZES[s] for s in sizes), r.stdout
    for size, v in got.items():
        assert 0 < v["min"] <= v["p50"] <= v["p99"] <= v["max"], (size, v)
        assert v["min"] <= v["mean"] <= v["max"], (size, v)
    return got


def test_every_size_over_tcp(echo):
    s = echo()
    sizes = ["1", "64", "1k", "16k", "64k", "1m"]
    r = herd_lat(s.addr, "-m", ",".join(sizes), "-N", 200)
    check_table(r, sizes)
    assert "200 round trips per size" in r.stdout
    assert s.stop() == 0


def test_every_size_over_unix(echo, short_tmp):
    path = short_tmp / "lat.sock"
    s = echo(f"unix:{path}")
    assert s.addr == f"unix:{path}"
    sizes = ["1", "64", "1k", "16k", "64k"]
    r = herd_lat(f"unix:{path}", "-m", ",".join(sizes), "-N", 200)
    check_table(r, sizes)
    assert s.stop() == 0
    assert not path.exists(), "the server leaves no socket file behind"


def test_two_clients_at_once(echo):
    s = echo()
    procs = [subprocess.Popen(herd_cmd("lat", s.addr, "-m", "1,16k", "-N", "300"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=RUN_TIMEOUT)
        assert p.returncode == 0, err
        assert sorted(rows(out)) == [1, 16384]


def test_spawn_places_both_ends():
    cpus = sorted(os.sched_getaffinity(0))
    c, sv = cpus[0], cpus[-1]
    r = herd_lat("--spawn", "--cpus", f"{c},{sv}", "-m", "1,64k", "-N", 200)
    check_table(r, ["1", "64k"])
    assert f"client on CPU {c}, server on CPU {sv}" in r.stdout, r.stdout


def test_cpus_without_spawn_says_only_the_client_is_pinned(echo):
    s = echo()
    cpus = sorted(os.sched_getaffinity(0))
    r = herd_lat(s.addr, "--cpus", f"{cpus[0]},{cpus[-1]}", "-N", 100)
    check_table(r, ["1"])
    assert "only the client is pinned" in r.stdout


# ------------------------------------------------------------ failures

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_server():
    r = herd_lat(f"127.0.0.1:{free_port()}", "-m", "1,64")
    assert r.returncode == 1
    line = one_line_error(r)
    assert "cannot connect" in line and "refused" in line, line
    no_figures(r)


def test_no_unix_server(short_tmp):
    r = herd_lat(f"unix:{short_tmp}/none.sock")
    assert r.returncode == 1
    assert "cannot connect" in one_line_error(r)
    no_figures(r)


class FakeEcho:
    """A misbehaving echo server: half (echoes half a message, then closes),
    wrong (echoes different bytes), silent (reads, never answers), drip
    (echoes one byte every DRIP_S seconds)."""

    DRIP_S = 0.2

    def __init__(self, mode):
        self.mode = mode
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(10)
        self.stopping = threading.Event()
        self.addr = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        try:
            c, _ = self.sock.accept()
        except OSError:
            return
        c.settimeout(10)
        with c:
            try:
                d = c.recv(65536)
                if self.mode == "half":
                    c.sendall(d[:max(1, len(d) // 2)] if len(d) > 1 else b"")
                elif self.mode == "wrong":
                    c.sendall(bytes(len(d)))
                elif self.mode == "silent":
                    time.sleep(3)
                elif self.mode == "drip":
                    for b in d:
                        if self.stopping.wait(self.DRIP_S):
                            break
                        c.sendall(bytes([b]))
            except OSError:
                pass

    def close(self):
        self.stopping.set()
        self.sock.close()
        self.t.join(5)


@pytest.mark.parametrize("mode,size,words", [
    ("half", "1k", "closed the connection after echoing 512 of 1024 bytes"),
    ("half", "1", "closed the connection after echoing 0 of 1 bytes"),
    ("wrong", "64", "differs"),
    ("silent", "64", "no reply within 500 ms"),
])
def test_bad_echo_fails_with_the_reason(mode, size, words):
    f = FakeEcho(mode)
    try:
        r = herd_lat(f.addr, "-m", size, "-N", 10, "--warmup", 0, "--timeout", "500ms")
    finally:
        f.close()
    assert r.returncode == 1, r.stdout
    line = one_line_error(r)
    assert words in line, line
    assert "round 1" in line, line
    no_figures(r)


def test_timeout_bounds_the_whole_round_trip():
    """--timeout is a deadline for each round, not for each read: a server
    that echoes one byte every 0.2 s (16 bytes take 3.2 s) keeps making
    progress, yet the round fails after 500 ms."""
    f = FakeEcho("drip")
    t0 = time.monotonic()
    try:
        r = herd_lat(f.addr, "-m", "16", "-N", 1, "--warmup", 0, "--timeout", "500ms")
    finally:
        f.close()
    took = time.monotonic() - t0
    assert r.returncode == 1, r.stdout
    line = one_line_error(r)
    assert "round 1" in line and "no reply within 500 ms" in line, line
    assert "of 16 bytes back" in line, line
    assert took < 2.0, took
    no_figures(r)


@pytest.mark.parametrize("args", [
    [],
    ["127.0.0.1:1", "-m", "0"],
    ["127.0.0.1:1", "-m", "abc"],
    ["127.0.0.1:1", "-N", "0"],
    ["127.0.0.1:1", "--cpus", "0,1,2"],
    ["127.0.0.1:99999"],
    ["-s", "127.0.0.1:1"],
    ["127.0.0.1:1", "--listen", "127.0.0.1:0"],
    ["127.0.0.1:1", "--bogus"],
])
def test_bad_usage_exits_2_with_one_line(args):
    r = herd_lat(*args)
    assert r.returncode == 2, (args, r.stderr)
    one_line_error(r)
    assert r.stdout == ""


def test_server_address_in_use(echo):
    s = echo()
    r = herd_lat("-s", "--listen", s.addr, timeout=10)
    assert r.returncode == 1
    assert "cannot listen" in one_line_error(r)


def test_help():
    r = herd_lat("--help")
    assert r.returncode == 0
    for word in ("-s", "--listen", "-m", "-N", "--cpus", "--spawn", "unix:/PATH"):
        assert word in r.stdout, word


@pytest.mark.parametrize("kind", ["file", "fifo"])
def test_server_leaves_a_file_at_its_unix_path_alone(short_tmp, kind):
    """A regular file or FIFO at the --listen path refuses the start and
    stays: connecting to it is refused as to a dead server's socket, and
    the server unlinked it to bind there (red-team pass 23)."""
    path = short_tmp / "data"
    if kind == "file":
        path.write_text("precious\n")
    else:
        os.mkfifo(path)
    r = herd_lat("-s", "--listen", f"unix:{path}", timeout=10)
    assert r.returncode == 1, r
    assert "cannot listen" in one_line_error(r)
    assert os.path.lexists(path)
    if kind == "file":
        assert path.read_text() == "precious\n"
