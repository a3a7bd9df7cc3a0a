"""Socket activation (issue 7): started with LISTEN_FDS/LISTEN_PID set for
its pid, herd serves on the passed sockets instead of binding. The tests
bind the sockets themselves and start herd through sd_launch.py, which puts
them at fds 3.. and sets the variables as systemd would, then execs herd
(keeping its pid)."""

import os
import signal
import socket
import sys
from pathlib import Path

import pytest

from conftest import HERD_ARGS, HERD_BIN, Server, require_binary, tree_holds_socket
from herdtest import get_req, wait_for
from test_upgrade import read_pid, stop_master, upgrade

pytestmark = pytest.mark.skipif(
    "--model" in HERD_ARGS, reason="drives the master/worker model itself")

LAUNCHER = str(Path(__file__).resolve().parent / "sd_launch.py")


def tcp_listener(reuseport=False):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if reuseport:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(128)
    return s


def unix_listener(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.listen(128)
    return s


def listening_sockets(port):
    """How many TCP sockets listen on port (from /proc/net/tcp)."""
    n = 0
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":
                n += 1
    return n


@pytest.fixture
def launched(site):
    """Factory: launch(socks, *herd_args, ready=N, pid_offset=0) starts herd
    through sd_launch.py with socks passed; the usual teardown checks (exit
    0 on TERM, no crash) apply."""
    require_binary()
    started, held = [], []

    def launch(socks, *args, ready=1, pid_offset=0, names=None):
        fds = [s.fileno() for s in socks]
        held.extend(socks)
        cmd = [sys.executable, LAUNCHER, "--pid-offset", str(pid_offset),
               *(["--names", names] if names else []), *map(str, fds), "--",
               HERD_BIN, "serve", str(site.root), *map(str, args), *HERD_ARGS]
        srv = Server([], ["?"] * ready, site.root, cmd=cmd, popen={"pass_fds": fds})
        started.append(srv)
        return srv

    yield launch
    problems = []
    for srv in started:
        problems += srv.finish()
    for s in held:
        s.close()
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


def get_ok(srv, addr=None):
    r = srv.request(get_req("/small.txt", headers=[("Connection", "close")]), addr=addr,
                    timeout=5)
    return r.status == 200 and r.body == b"0123456789abcdefghijklmnopqrstuvwxyz"


@pytest.mark.parametrize("model", ["reuseport", "prefork", "dispatch", "threads", "single"])
def test_serves_the_passed_socket_without_listen(launched, model):
    sock = tcp_listener()
    port = sock.getsockname()[1]
    srv = launched([sock], "--model", model, "--workers", "2")
    assert srv.port == port, srv.stderr_text()
    assert f"listening on http://127.0.0.1:{port}/ (inherited)" in srv.stderr_text()
    for _ in range(20):
        assert get_ok(srv)
    # nothing else was bound: the one socket serves every worker
    assert listening_sockets(port) == 1
    assert tree_holds_socket(srv.pid, os.fstat(sock.fileno()).st_ino)
    if model in ("reuseport", "threads"):
        assert "has no SO_REUSEPORT" in srv.stderr_text()
    if model != "single":
        # a reload keeps the passed set without calling it a change
        mark = srv.stderr_mark()
        srv.send_signal(signal.SIGHUP)
        wait_for(lambda: any("reloaded" in l for l in srv.lines[mark:] if l), timeout=5,
                 what="reload")
        assert not any("listen addresses changed" in l for l in srv.lines[mark:] if l)
        for _ in range(5):
            assert get_ok(srv)


@pytest.mark.parametrize("model", ["reuseport", "threads"])
def test_reuseport_socket_gets_a_sibling_per_worker(launched, model):
    sock = tcp_listener(reuseport=True)
    port = sock.getsockname()[1]
    srv = launched([sock], "--model", model, "--workers", "3")
    assert srv.port == port
    wait_for(lambda: listening_sockets(port) == 3, timeout=5,
             what="the passed socket and 2 bound next to it")
    assert "share" not in srv.stderr_text()
    for _ in range(30):
        assert get_ok(srv)


def test_listen_matches_the_passed_socket_by_address(launched):
    sock = tcp_listener()
    port = sock.getsockname()[1]
    srv = launched([sock], "--listen", f"127.0.0.1:{port}", "--listen", "127.0.0.1:0",
                   "--workers", "2", ready=2)
    text = srv.stderr_text()
    # binding port again would fail (EADDRINUSE): it was matched, not bound
    assert f"listening on http://127.0.0.1:{port}/ (inherited)" in text, text
    other = [l for l in srv.listeners if l[1][1] != port]
    assert len(other) == 1, srv.listeners
    assert get_ok(srv, ("127.0.0.1", port))
    assert get_ok(srv, other[0][1])


def test_unmatched_passed_socket_is_closed(launched):
    sock = tcp_listener()
    srv = launched([sock], "--listen", "127.0.0.1:0", "--workers", "2")
    assert srv.port != sock.getsockname()[1]
    wait_for(lambda: "closed 1 inherited sockets that no listen address wants"
             in srv.stderr_text(), timeout=5, what="the closing line")
    assert not tree_holds_socket(srv.pid, os.fstat(sock.fileno()).st_ino)
    assert get_ok(srv)


def test_sockets_for_another_pid_are_ignored(launched):
    sock = tcp_listener()
    srv = launched([sock], "--listen", "127.0.0.1:0", "--workers", "2", pid_offset=1)
    assert srv.port != sock.getsockname()[1]
    assert "inherited" not in srv.stderr_text(), srv.stderr_text()
    assert get_ok(srv)


def test_passed_unix_socket_path_is_left_to_its_owner(launched, tmp_path):
    path = tmp_path / "activated.sock"
    sock = unix_listener(path)
    srv = launched([sock], "--workers", "2", names="web")
    assert f"listening on unix:{path} (inherited)" in srv.stderr_text()
    assert get_ok(srv, str(path))
    assert srv.stop() == 0
    assert path.exists(), "herd removed a socket path systemd made"


def test_upgrade_after_socket_activation(site, tmp_path):
    """The passed sockets go on to the new master; systemd's unix path
    outlives both masters."""
    require_binary()
    path = tmp_path / "activated.sock"
    tcp, unix = tcp_listener(), unix_listener(path)
    port = tcp.getsockname()[1]
    pidfile = tmp_path / "herd.pid"
    fds = [tcp.fileno(), unix.fileno()]
    cmd = [sys.executable, LAUNCHER, *map(str, fds), "--", HERD_BIN, "serve", str(site.root),
           "--workers", "2", "--pid-file", str(pidfile)]
    srv = Server([], ["?", "?"], site.root, cmd=cmd, popen={"pass_fds": fds})
    masters = [srv.pid]
    try:
        assert srv.port == port
        masters.append(upgrade(srv, pidfile))
        assert get_ok(srv) and get_ok(srv, str(path))
        assert listening_sockets(port) == 1
        masters.append(upgrade(srv, pidfile))
        assert get_ok(srv) and get_ok(srv, str(path))
    finally:
        for pid in reversed(masters):
            stop_master(pid)
        srv.proc.wait(5)
        srv.reader.join(5)
        tcp.close()
        unix.close()
    assert path.exists(), "a master removed a socket path systemd made"
    assert read_pid(pidfile) == 0
    assert not srv.crash_lines(), srv.crash_lines()
