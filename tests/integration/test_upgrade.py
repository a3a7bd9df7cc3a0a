"""Binary upgrade on USR2 (issue 7): the master execs the binary with the
listen sockets inherited, the new master starts its workers, and the old one
drains and exits once the new one reports ready. No request may fail on the
way, the pid file follows the new master, and a new binary that cannot start
leaves the old master serving with a log line that says why.

The masters after the first are not our children: every one is stopped by
the pid it wrote to the pid file."""

import os
import re
import signal
import stat
import threading
import time

import pytest

from conftest import (HERD_ARGS, HERD_BIN, Server, descendants, fd_count, require_binary,
                      shim_env)
from herdtest import get_req, wait_for
from test_hitless import Load
from test_reload import Hammer, gone

pytestmark = pytest.mark.skipif(
    "--model" in HERD_ARGS, reason="drives the master/worker model itself")

UPGRADE_TIMEOUT = 15


def read_pid(path):
    try:
        return int(path.read_text().strip() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def stop_master(pid):
    """TERM a master by pid and wait for it (and its workers) to go; SIGKILL
    whatever is left after the deadline."""
    if not pid or gone(pid):
        return
    kids = descendants(pid)
    os.kill(pid, signal.SIGTERM)
    try:
        wait_for(lambda: gone(pid), timeout=10, what=f"master {pid} gone")
    finally:
        for p in [pid] + kids:
            if not gone(p):
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass


@pytest.fixture
def upgradable(site, tmp_path):
    """Factory: start(*args, listen=...) -> (Server, pid file path). At the end
    every master the pid file named, and the first one, is stopped by pid."""
    require_binary()
    started = []

    def start(*args, listen=("127.0.0.1:0",)):
        pidfile = tmp_path / f"herd{len(started)}.pid"
        srv = Server([*map(str, args), "--pid-file", str(pidfile)], listen, site.root)
        started.append((srv, pidfile))
        return srv, pidfile

    yield start
    problems = []
    for srv, pidfile in started:
        for pid in dict.fromkeys([read_pid(pidfile), *getattr(srv, "masters", []), srv.pid]):
            stop_master(pid)
        try:
            srv.proc.wait(5)
        except Exception:   # noqa: BLE001
            pass
        srv.stopped = True
        srv.reader.join(5)
        crashes = srv.crash_lines()
        if crashes:
            problems.append("crash reported on stderr: " + " | ".join(crashes[:5]))
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def upgrade(srv, pidfile):
    """USR2 to the master the pid file names; wait until the pid file names
    a new master and the old one is gone. Returns the new pid."""
    # the pid file is written just after the "listening on" lines
    old = wait_for(lambda: read_pid(pidfile), timeout=5, what=f"a pid in {pidfile}")
    assert not gone(old), f"no live master in {pidfile}"
    old_workers = descendants(old)
    os.kill(old, signal.SIGUSR2)
    new = wait_for(lambda: (lambda p: p if p not in (0, old) else None)(read_pid(pidfile)),
                   timeout=UPGRADE_TIMEOUT, interval=0.02,
                   what=f"a new pid in {pidfile}\n{srv.stderr_text()[-2000:]}")
    srv.masters = getattr(srv, "masters", []) + [new]
    wait_for(lambda: gone(old), timeout=UPGRADE_TIMEOUT, interval=0.02,
             what=f"old master {old} gone\n{srv.stderr_text()[-2000:]}")
    wait_for(lambda: all(gone(p) for p in old_workers), timeout=UPGRADE_TIMEOUT,
             what="the old master's workers gone")
    assert not gone(new), f"new master {new} died\n{srv.stderr_text()[-3000:]}"
    return new


def fetch_ok(srv, target="/small.txt"):
    r = srv.request(get_req(target, headers=[("Connection", "close")]), timeout=5)
    return r.status == 200 and r.body == b"0123456789abcdefghijklmnopqrstuvwxyz"


@pytest.mark.slow
@pytest.mark.parametrize("model", ["reuseport", "prefork", "dispatch", "threads", "coro",
                                   "uring"])
def test_three_upgrades_under_load_lose_nothing(upgradable, site, model):
    srv, pidfile = upgradable("--model", model, "--workers", "2")
    masters = [srv.pid]
    # the master's own fds, once its workers are up (not mid-spawn)
    nprocs = 1 if model in ("threads", "coro") else 2
    wait_for(lambda: len(descendants(srv.pid)) == nprocs, timeout=5, what="the workers")
    time.sleep(0.3)
    fds_before = fd_count(srv.pid)
    body = site.files["index.html"]
    with Hammer(srv, "/index.html", body) as h:
        time.sleep(0.5)
        for _ in range(3):
            masters.append(upgrade(srv, pidfile))
            time.sleep(0.3)
        time.sleep(0.3)
    text = srv.stderr_text()
    assert not h.failures, (f"{len(h.failures)} failed requests of "
                            f"{h.ok + len(h.failures)} (retried {h.retried}): "
                            f"{h.failures[:10]}\n{text[-3000:]}")
    assert h.ok > 100, f"too little load to mean anything: {h.ok} requests"
    assert len(set(masters)) == 4, masters
    assert srv.proc.poll() == 0, "the first master must exit 0 after handing over"
    assert text.count("stopped (upgraded)") == 3, text[-3000:]
    assert "upgrade failed" not in text, text[-3000:]
    # the last master runs its own workers, nothing of the old ones is left
    final = masters[-1]
    wait_for(lambda: len([p for p in descendants(final) if not gone(p)]) == nprocs,
             timeout=5, what="the final master's workers")
    for _ in range(5):
        assert fetch_ok(srv)
    # the ready pipe and the old master's fds did not pile up
    assert fd_count(final) == fds_before, (os.listdir(f"/proc/{final}/fd"))


def test_pid_file_and_unix_socket_follow_the_upgrade(upgradable, site, tmp_path):
    sock = tmp_path / "herd.sock"
    alog = tmp_path / "access.log"
    srv, pidfile = upgradable("--workers", "2", "--access-log", alog,
                              listen=("127.0.0.1:0", f"unix:{sock}"))
    first = srv.pid
    for _ in range(3):
        assert fetch_ok(srv, "/small.txt?before")
    new = upgrade(srv, pidfile)
    for _ in range(3):
        assert fetch_ok(srv, "/small.txt?after")
    assert read_pid(pidfile) == new != first
    # the old master left the socket path to the new one
    assert sock.exists(), "the old master removed the unix socket path it handed over"
    r = srv.request(get_req("/small.txt", headers=[("Connection", "close")]),
                    addr=str(sock), timeout=5)
    assert r.status == 200 and r.body == site.files["small.txt"]
    assert fetch_ok(srv)
    # HUP and USR1 work on the new master
    mark = srv.stderr_mark()
    os.kill(new, signal.SIGHUP)
    wait_for(lambda: "reloaded: generation 2" in "\n".join(
        l for l in srv.lines[mark:] if l), timeout=5, what="the new master reloads")
    os.kill(new, signal.SIGUSR1)
    wait_for(lambda: "reopening log files" in "\n".join(
        l for l in srv.lines[mark:] if l), timeout=5, what="the new master reopens logs")
    assert fetch_ok(srv)
    # a second upgrade from the new master works too
    newer = upgrade(srv, pidfile)
    assert newer not in (first, new)
    stop_master(newer)
    assert not sock.exists(), "the last master must remove its unix socket path"
    assert not pidfile.exists(), "the last master must remove its pid file"
    # both masters' loggers wrote to the access log
    log = alog.read_text()
    assert log.count("GET /small.txt?before ") == 3, log
    assert log.count("GET /small.txt?after ") == 3, log


def script(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def failure_lines(srv, mark):
    return [l for l in srv.lines[mark:] if l and "upgrade failed" in l]


def still_serving(srv, pidfile, first):
    assert srv.alive()
    assert read_pid(pidfile) == first, "the pid file must name the old master again"
    for _ in range(5):
        assert fetch_ok(srv)


def test_failed_upgrades_leave_the_old_master_serving(upgradable, tmp_path):
    bad = script(tmp_path / "bad-herd", "#!/bin/sh\necho 'bad-herd: refusing' >&2\nexit 1\n")
    cfg = tmp_path / "herd.conf"
    cfg.write_text(f"workers = 2\nupgrade-binary = {bad}\n")
    srv, pidfile = upgradable("--config", cfg)
    first = srv.pid
    wait_for(lambda: read_pid(pidfile) == first, timeout=5, what="pid file written")

    # a binary that exits 1
    mark = srv.stderr_mark()
    os.kill(first, signal.SIGUSR2)
    lines = wait_for(lambda: failure_lines(srv, mark), timeout=10, what="a failure line")
    assert re.search(r"new master \(pid \d+\) exited with status 1 before it was ready; "
                     rf"the old master \(pid {first}\) keeps serving", lines[0]), lines
    still_serving(srv, pidfile, first)

    # a binary that is not there (the config is re-read on HUP)
    missing = tmp_path / "no-such-herd"
    cfg.write_text(f"workers = 2\nupgrade-binary = {missing}\n")
    mark = srv.stderr_mark()
    os.kill(first, signal.SIGHUP)
    wait_for(lambda: any("reloaded" in l for l in srv.lines[mark:] if l), timeout=5,
             what="reload")
    os.kill(first, signal.SIGUSR2)
    lines = wait_for(lambda: failure_lines(srv, mark), timeout=10, what="a failure line")
    assert f"{missing}: No such file or directory" in lines[0], lines
    still_serving(srv, pidfile, first)

    # a binary that starts but never reports ready (and holds the pipe):
    # a second USR2 meanwhile is ignored
    slow = script(tmp_path / "slow-herd", "#!/bin/sh\nsleep 1.5\nexit 3\n")
    cfg.write_text(f"workers = 2\nupgrade-binary = {slow}\n")
    mark = srv.stderr_mark()
    os.kill(first, signal.SIGHUP)
    wait_for(lambda: any("reloaded" in l for l in srv.lines[mark:] if l), timeout=5,
             what="reload")
    os.kill(first, signal.SIGUSR2)
    wait_for(lambda: any("upgrade: started" in l for l in srv.lines[mark:] if l), timeout=5,
             what="upgrade started")
    os.kill(first, signal.SIGUSR2)
    wait_for(lambda: any("USR2 ignored: an upgrade is in flight" in l
                         for l in srv.lines[mark:] if l), timeout=5, what="second USR2 ignored")
    lines = wait_for(lambda: failure_lines(srv, mark), timeout=10, what="a failure line")
    assert "exited with status 3 before it was ready" in lines[0], lines
    still_serving(srv, pidfile, first)

    # and the real binary still upgrades afterwards
    cfg.write_text(f"workers = 2\nupgrade-binary = {HERD_BIN}\n")
    mark = srv.stderr_mark()
    os.kill(first, signal.SIGHUP)
    wait_for(lambda: any("reloaded" in l for l in srv.lines[mark:] if l), timeout=5,
             what="reload")
    new = upgrade(srv, pidfile)
    assert new != first
    assert fetch_ok(srv)


def test_upgrade_binary_flag(upgradable, tmp_path):
    """--upgrade-binary names another file: a copy of the binary here."""
    copy = tmp_path / "herd-next"
    copy.write_bytes(open(HERD_BIN, "rb").read())
    copy.chmod(0o755)
    srv, pidfile = upgradable("--workers", "1", "--upgrade-binary", copy)
    new = upgrade(srv, pidfile)
    assert os.readlink(f"/proc/{new}/exe") == str(copy)
    assert fetch_ok(srv)


def test_upgrade_timeout_abandons_a_binary_that_never_gets_ready(upgradable, tmp_path):
    """--upgrade-timeout: a new binary that starts but never reports ready
    is killed at the deadline, and the old master keeps serving."""
    hang = script(tmp_path / "hang-herd", "#!/bin/sh\nexec sleep 30\n")
    srv, pidfile = upgradable("--workers", "1", "--upgrade-timeout", "1s",
                              "--upgrade-binary", hang)
    first = srv.pid
    wait_for(lambda: read_pid(pidfile) == first, timeout=5, what="pid file written")
    mark = srv.stderr_mark()
    t0 = time.monotonic()
    os.kill(first, signal.SIGUSR2)
    lines = wait_for(lambda: failure_lines(srv, mark), timeout=10, what="a failure line")
    took = time.monotonic() - t0
    assert "was not ready within 1000 ms (--upgrade-timeout; killed)" in lines[0], lines
    assert 0.9 < took < 5, took
    still_serving(srv, pidfile, first)


def upgrades_under_load(srv, pidfile, model, nconns, upgrades=3):
    """upgrades USR2 upgrades under test_hitless's Load (nconns keep-alive
    connections, half busy, half idling 0-500 ms, never retrying); returns
    the load, finished."""
    nprocs = 1 if model in ("threads", "coro") else 2
    wait_for(lambda: len(descendants(srv.pid)) == nprocs, timeout=5, what="the workers")
    load = Load(("127.0.0.1", srv.port), nconns)
    load.start()
    stop = threading.Event()

    def run():
        while not stop.is_set():
            load.step(time.monotonic())
    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        time.sleep(0.3)
        for _ in range(upgrades):
            upgrade(srv, pidfile)
        time.sleep(0.3)
    finally:
        stop.set()
        t.join(10)
    load.finish()
    return load


@pytest.mark.slow
@pytest.mark.parametrize("model", ["reuseport", "prefork", "dispatch", "threads", "coro",
                                   "uring"])
def test_three_upgrades_lose_nothing_without_retries(upgradable, model):
    """Three USR2 upgrades under a client that never retries (test_hitless's
    Load: 100 keep-alive connections, half busy, half idling 0-500 ms): the
    old master's idle connections move to the new master's workers, so
    every request gets its whole response on the connection it was sent on."""
    srv, pidfile = upgradable("--model", model, "--workers", "2", "--keepalive-timeout", "30s")
    load = upgrades_under_load(srv, pidfile, model, 100)
    assert load.ok > 100, (load.ok, load.errors[:5])
    assert not load.errors, (f"{len(load.errors)} errors in {load.ok + len(load.errors)} "
                             f"requests: {load.errors[:8]}\n{srv.stderr_text()[-2000:]}")


@pytest.mark.slow
@pytest.mark.parametrize("model", ["reuseport", "prefork", "dispatch", "threads", "coro",
                                   "uring"])
def test_upgrades_with_full_handover_channels_lose_nothing(upgradable, monkeypatch, model):
    """The same with 1000 connections and socket buffers as small as the
    kernel allows (tests/tools/sockbuf_cap.c): the channels between the
    masters and to their workers fill after a few messages, and what none
    takes waits in a master and goes again shortly, in either direction
    (the old master closed a connection the new one sent back when its old
    worker's channel was full)."""
    for k, v in shim_env("sockbuf_cap", SOCKBUF_CAP=4608).items():
        monkeypatch.setenv(k, v)   # the new masters inherit it
    srv, pidfile = upgradable("--model", model, "--workers", "2", "--keepalive-timeout", "30s")
    monkeypatch.delenv("LD_PRELOAD")
    load = upgrades_under_load(srv, pidfile, model, 1000)
    assert load.ok > 1000, (load.ok, load.errors[:5])
    assert not load.errors, (f"{len(load.errors)} errors in {load.ok + len(load.errors)} "
                             f"requests: {load.errors[:8]}\n{srv.stderr_text()[-2000:]}")

@pytest.mark.slow
@pytest.mark.parametrize("model", ["reuseport", "prefork", "dispatch", "threads", "coro",
                                   "uring"])
def test_back_to_back_upgrades_keep_a_busy_connection(upgradable, site, model):
    """A download in progress while USR2 goes to the master and, before the
    old one is gone, to the new one: the middle master bounces the
    connection back when it goes idle. It must finish whole and answer its
    next request (with or without close), not be dropped."""
    import hashlib
    import socket
    srv, pidfile = upgradable("--model", model, "--workers", "1", "--shutdown-timeout", "20s")
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    s.settimeout(10)
    try:
        s.connect(("127.0.0.1", srv.port))
        s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        while b"\r\n\r\n" not in got:
            data = s.recv(65536)
            assert data, "closed before the head"
            got += data
        head, _, body = got.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        for _ in range(2):
            old = read_pid(pidfile)
            os.kill(old, signal.SIGUSR2)
            new = wait_for(lambda: (lambda p: p if p not in (0, old) else None)(read_pid(pidfile)),
                           timeout=UPGRADE_TIMEOUT, interval=0.02, what="a new master")
            srv.masters = getattr(srv, "masters", []) + [new]
            time.sleep(0.2)
        time.sleep(1)
        h = hashlib.sha256(body)
        n = len(body)
        while n < site.big_size:
            data = s.recv(1 << 20)
            assert data, f"closed after {n} of {site.big_size} bytes"
            h.update(data)
            n += len(data)
        assert n == site.big_size and h.hexdigest() == site.big_sha
        s.sendall(b"GET /small.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while not answer.endswith(b"0123456789abcdefghijklmnopqrstuvwxyz"):
            data = s.recv(65536)
            assert data, f"no answer to the next request, {answer!r}\n{srv.stderr_text()[-2000:]}"
            answer += data
        assert answer.startswith(b"HTTP/1.1 200"), answer
    finally:
        s.close()
