"""The coro model (issue 6): what differs from the other models. The HTTP
behaviour itself is checked by the whole suite under HERD_ARGS='--model
coro --threads N' (see the Makefile)."""

import json
import os
import signal
import socket
import time
import urllib.request

import pytest

from conftest import HERD_ARGS, run_herd
from herdtest import wait_for

pytestmark = pytest.mark.skipif("--model" in HERD_ARGS, reason="sets --model itself")

REQ = b"GET /small.txt HTTP/1.1\r\nHost: t\r\n\r\n"


def status(srv, slots=0):
    """The status page; with slots, waits (5 s at most) until that many
    worker slots show: the master marks them just after the fork, so a
    fast worker can answer first."""
    deadline = time.monotonic() + 5
    while True:
        with urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/herd-status",
                                    timeout=10) as r:
            st = json.loads(r.read())
        if len(st["slots"]) >= slots or time.monotonic() > deadline:
            return st
        time.sleep(0.05)


def read_response(s):
    """Reads one response with a Content-Length body; returns the head."""
    data = b""
    while b"\r\n\r\n" not in data:
        d = s.recv(65536)
        assert d, "connection closed before a response"
        data += d
    head, rest = data.split(b"\r\n\r\n", 1)
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v)
    while len(rest) < length:
        d = s.recv(65536)
        assert d
        rest += d
    return head


def test_one_worker_process_with_the_asked_threads(server):
    srv = server("--model", "coro", "--threads", "3", "--status-path", "/herd-status")
    st = status(srv, slots=3)
    assert st["model"] == "coro"
    pids = {s["pid"] for s in st["slots"]}
    assert len(pids) == 1 and len(st["slots"]) == 3
    pid = pids.pop()
    deadline = time.monotonic() + 5
    while len(os.listdir(f"/proc/{pid}/task")) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(os.listdir(f"/proc/{pid}/task")) >= 4  # main + 3 kernel threads


@pytest.mark.parametrize("bad", [
    ["--coro-stack", "4k"],       # below the minimum the HTTP code needs
    ["--coro-stack", "lots"],
    ["--threads", "0"],
    ["--threads", "many"],
], ids=lambda a: " ".join(a))
def test_bad_coro_values_exit_2_one_line(site, bad):
    r = run_herd(["serve", str(site.root), "--listen", "127.0.0.1:0", "--model", "coro", *bad],
                 extra=False)
    assert r.returncode == 2, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) >= 1 and bad[0].lstrip("-") in lines[0], r.stderr


@pytest.mark.concurrency
@pytest.mark.parametrize("threads", ["1", "2"])
def test_a_stalled_client_does_not_stall_others(server, threads):
    """One kernel thread, a client that sent half a request: the others are
    served at once (each connection is its own coroutine), unlike the
    iterative model whose blocking calls this code reads like."""
    srv = server("--model", "coro", "--threads", threads)
    stalled = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    stalled.sendall(b"GET /small.txt HTTP/1.1\r\nHo")
    try:
        t0 = time.monotonic()
        for _ in range(20):
            with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
                s.sendall(REQ)
                assert read_response(s).startswith(b"HTTP/1.1 200")
        assert time.monotonic() - t0 < 5
        stalled.sendall(b"st: t\r\n\r\n")
        assert read_response(stalled).startswith(b"HTTP/1.1 200")
    finally:
        stalled.close()


@pytest.mark.concurrency
def test_many_idle_keepalive_connections_then_graceful_stop(server):
    """500 idle keep-alive connections on small stacks are all served again
    after idling, show in the status page, and a TERM closes them at once
    (idle waits are interruptible) instead of waiting out the timeout."""
    srv = server("--model", "coro", "--threads", "2", "--coro-stack", "32k",
                 "--keepalive-timeout", "60s", "--shutdown-timeout", "20s",
                 "--status-path", "/herd-status")
    conns = []
    try:
        for _ in range(500):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            s.sendall(REQ)
            assert read_response(s).startswith(b"HTTP/1.1 200")
            conns.append(s)
        st = status(srv)
        assert st["active"] >= 500 and st["idle"] >= 500, st
        for s in conns[::50]:
            s.sendall(REQ)
            assert read_response(s).startswith(b"HTTP/1.1 200")
        t0 = time.monotonic()
        srv.send_signal(signal.SIGTERM)
        for s in conns:
            s.settimeout(10)
            assert s.recv(1) == b""  # closed by the server
        assert time.monotonic() - t0 < 10
        assert srv.wait(10) == 0
    finally:
        for s in conns:
            s.close()


def test_quit_ends_a_busy_connection_at_once(server):
    """QUIT cancels every wait, including a half-read request's."""
    srv = server("--model", "coro", "--threads", "2", "--header-timeout", "60s")
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    try:
        s.sendall(b"GET / HTTP/1.1\r\n")
        time.sleep(0.2)
        t0 = time.monotonic()
        srv.send_signal(signal.SIGQUIT)
        assert srv.wait(10) is not None
        assert time.monotonic() - t0 < 5
    finally:
        s.close()


@pytest.mark.parametrize("threads", ["1", "2"])
def test_half_a_head_then_eof_is_closed_at_once(server, threads):
    """Data and FIN can arrive as one edge: a short read drains the data,
    and the hang-up must still be seen then, not at the header timeout."""
    srv = server("--model", "coro", "--threads", threads, "--header-timeout", "30s")
    for _ in range(5):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        try:
            s.sendall(b"GET /small.txt HTTP/1.1\r\nHost: t\r\nX-A: bbb")
            s.shutdown(socket.SHUT_WR)
            t0 = time.monotonic()
            while s.recv(65536):  # at most an error page, then EOF
                pass
            assert time.monotonic() - t0 < 5
        finally:
            s.close()


def test_threads_flag_also_sets_the_threads_models_loops(server):
    """--threads is the one-process models' setting, not coro's alone."""
    srv = server("--model", "threads", "--threads", "3", "--status-path", "/herd-status")
    st = status(srv, slots=3)
    assert len(st["slots"]) == 3 and len({s["pid"] for s in st["slots"]}) == 1


def test_reload_with_a_download_in_progress_logs_no_error(server):
    """A download stalled across a HUP finishes in the old worker, and the
    connection then moves on: the master used to log "[error] handover
    from slot N: Connection reset by peer" in about half of such reloads
    (the old worker left the master's acknowledgement unread as it
    exited: the same event as its EOF). Three reloads."""
    srv = server("--model", "coro", "--threads", "2")
    for i in range(3):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        try:
            s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
            time.sleep(0.5)                     # the socket buffers fill
            srv.send_signal(signal.SIGHUP)
            time.sleep(0.5)
            got = b""
            while b"\r\n\r\n" not in got:
                got += s.recv(65536)
            head, body = got.split(b"\r\n\r\n", 1)
            length = int(next(l.split(b":")[1] for l in head.split(b"\r\n")
                              if l.lower().startswith(b"content-length")))
            n = len(body)
            while n < length:
                chunk = s.recv(1 << 20)
                assert chunk, f"cut at {n} of {length}"
                n += len(chunk)
            s.sendall(b"GET /small.txt HTTP/1.1\r\nHost: t\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.1 200")
        finally:
            s.close()
        wait_for(lambda: f"reloaded: generation {i + 2}" in srv.stderr_text(), timeout=10,
                 what="the reload")
    time.sleep(0.5)
    assert "[error]" not in srv.stderr_text(), srv.stderr_text()[-2000:]
