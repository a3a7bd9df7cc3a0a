"""--error-log FILE (issue 18): the master, the workers and the logger write
their lines to FILE instead of stderr; USR1 reopens it (logrotate renames
the file, then signals), and every process writes its next line to the new
file; with --daemon, fd 2 of the daemon is the file too."""

import os
import re
import signal
import subprocess

import pytest

from conftest import HERD_ARGS, descendants, herd_cmd, require_binary, run_herd
from herdtest import get_req, wait_for, RawConn
from test_upgrade import read_pid, stop_master
from test_workers import gone

pytestmark = pytest.mark.skipif(
    "--model" in HERD_ARGS, reason="drives the master/worker model itself")

READY = re.compile(r"\[notice\] listening on http://127\.0\.0\.1:(\d+)/")
QUIT_LINE = "SIGQUIT: exiting at once"


def text(path):
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def wait_line(path, what, timeout=5):
    """Waits until path holds a line matching the regex what; returns the match."""
    return wait_for(lambda: re.search(what, text(path)), timeout=timeout,
                    what=f"{what!r} in {path}:\n{text(path)}")


class Herd:
    """herd serve with exactly these args; stderr captured to a file."""

    def __init__(self, tmp_path, *args):
        require_binary()
        self.err = tmp_path / "stderr.txt"
        with open(self.err, "wb") as f:
            self.proc = subprocess.Popen(herd_cmd("serve", *map(str, args)),
                                         stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=f)
        self.pid = self.proc.pid

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            kids = descendants(self.pid)
            os.kill(self.pid, sig)
            try:
                self.proc.wait(5)
            finally:
                for p in [self.pid] + kids:
                    if not gone(p):
                        os.kill(p, signal.SIGKILL)
        return self.proc.returncode


@pytest.fixture
def herd(tmp_path):
    started = []

    def start(*args):
        h = Herd(tmp_path, *args)
        started.append(h)
        return h
    yield start
    for h in started:
        h.stop()


def get_ok(port):
    with RawConn.open(("127.0.0.1", port), timeout=5) as c:
        c.send(get_req("/small.txt"))
        return c.read_response().status == 200


@pytest.mark.parametrize("model", ["reuseport", "threads", "coro", "single"])
def test_lines_go_to_the_file_and_follow_a_rotation(herd, site, tmp_path, model):
    log = tmp_path / "error.log"
    h = herd(site.root, "--listen", "127.0.0.1:0", "--workers", "2", "--model", model,
             "--error-log", log, "--access-log", tmp_path / "access.log")
    port = int(wait_line(log, READY.pattern).group(1))
    wait_line(log, r"\[notice\] (master \d+|serving)")
    assert get_ok(port)
    assert text(h.err) == "", "log lines must not reach stderr with --error-log"

    # logrotate: rename, then USR1
    os.rename(log, tmp_path / "error.log.1")
    h.proc.send_signal(signal.SIGUSR1)
    wait_line(log, r"reop")
    assert get_ok(port)
    # the workers (threads, coroutine threads, the single process) write
    # their next lines to the new file: a fast stop makes each say so
    h.proc.send_signal(signal.SIGQUIT)
    assert h.proc.wait(5) is not None
    new, old = text(log), text(tmp_path / "error.log.1")
    want = 2 if model == "reuseport" else 1
    assert new.count(QUIT_LINE) >= want, new
    assert QUIT_LINE not in old and "reop" not in old, old
    assert "listening on" in old and "listening on" not in new
    assert text(h.err) == ""


def test_reopen_of_a_fifo_with_no_reader_keeps_the_master_going(herd, site, tmp_path):
    """An error log that is a FIFO whose reader went away (a log shipper
    restarting): USR1's reopen waited in open(2) for a reader, and the
    master with it; on dispatch the master accepts, so nobody was served
    (red-team pass 19). Now the reopen fails at once and the old fd stays."""
    fifo = tmp_path / "error.fifo"
    os.mkfifo(fifo)
    rd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    h = herd(site.root, "--listen", "127.0.0.1:0", "--workers", "1", "--model", "dispatch",
             "--error-log", fifo)
    seen = b""

    def port():
        nonlocal seen
        try:
            seen += os.read(rd, 65536)
        except BlockingIOError:
            pass
        m = READY.search(seen.decode(errors="replace"))
        return m and int(m.group(1))
    p = wait_for(port, timeout=5, what="the listening line in the FIFO")
    assert get_ok(p)
    os.close(rd)
    h.proc.send_signal(signal.SIGUSR1)
    for _ in range(3):
        assert get_ok(p)
    assert h.stop() == 0


def test_daemon_stderr_is_the_file_and_follows_a_rotation(site, tmp_path):
    log, pidfile = tmp_path / "error.log", tmp_path / "herd.pid"
    r = run_herd(["serve", str(site.root), "--listen", "127.0.0.1:0", "--workers", "2",
                  "--daemon", "--pid-file", str(pidfile), "--error-log", str(log)],
                 timeout=10, extra=False)
    pid = wait_for(lambda: read_pid(pidfile), timeout=5, what="the pid file")
    try:
        assert r.returncode == 0, r.stderr
        assert r.stderr == "", "the daemon's lines go to the error log, not the caller"
        port = int(wait_line(log, READY.pattern).group(1))
        assert get_ok(port)
        assert os.readlink(f"/proc/{pid}/fd/2") == str(log)
        os.rename(log, tmp_path / "error.log.1")
        os.kill(pid, signal.SIGUSR1)
        wait_line(log, r"reop")
        assert os.readlink(f"/proc/{pid}/fd/2") == str(log), "fd 2 must follow the reopen"
        assert get_ok(port)
    finally:
        stop_master(pid)
    wait_line(log, r"\[notice\] stopped")


def test_config_line(herd, site, tmp_path):
    log = tmp_path / "from-config.log"
    cfg = tmp_path / "herd.conf"
    cfg.write_text(f"listen = 127.0.0.1:0\nworkers = 1\nerror-log = {log}\n")
    herd(site.root, "--config", cfg)
    port = int(wait_line(log, READY.pattern).group(1))
    assert get_ok(port)


def others_may_enter(path):
    """Can a user other than the owner reach path (o+x on every folder up)?
    Not in a chroot made by mktemp -d, whose / is 0700."""
    for p in [path, *path.parents]:
        if not os.stat(p).st_mode & 0o001:
            return False
    return True


@pytest.mark.skipif(os.geteuid() != 0, reason="--user needs root")
def test_rotated_file_is_writable_by_workers_that_dropped_root(herd, short_tmp):
    """The master (root) creates the new file; it belongs to --user so the
    workers (nobody) can open it and write their lines."""
    os.chmod(short_tmp, 0o755)           # nobody serves it and opens the log in it
    if not others_may_enter(short_tmp):
        pytest.skip(f"nobody cannot reach {short_tmp} (a folder above it is not o+x)")
    (short_tmp / "index.html").write_text("hi\n")
    log = short_tmp / "error.log"
    h = herd(short_tmp, "--listen", "127.0.0.1:0", "--workers", "2", "--user", "nobody",
             "--error-log", log)
    port = int(wait_line(log, READY.pattern).group(1))
    wait_line(log, r"master \d+")
    os.rename(log, short_tmp / "error.log.1")
    h.proc.send_signal(signal.SIGUSR1)
    wait_line(log, r"reop")
    assert log.stat().st_uid != 0
    with RawConn.open(("127.0.0.1", port), timeout=5) as c:
        c.send(get_req("/index.html"))
        assert c.read_response().status == 200
    h.proc.send_signal(signal.SIGQUIT)
    h.proc.wait(5)
    assert text(log).count(QUIT_LINE) == 2, text(log)


def test_unwritable_error_log_fails_at_start(site, tmp_path):
    log = tmp_path / "missing-dir" / "error.log"
    r = run_herd(["serve", str(site.root), "--listen", "127.0.0.1:0", "--error-log", str(log)],
                 timeout=10, extra=False)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert r.stderr.strip() == f"herd: error log {log}: No such file or directory", r.stderr


@pytest.mark.parametrize("model", ["reuseport", "coro", "uring"])
def test_a_stalled_stderr_reader_costs_lines_not_service(site, model):
    """stderr is a pipe nobody reads (a paused log shipper): every proxied
    request to a dead upstream logs lines until the pipe is full. The worker
    must drop lines and keep serving, then say how many it dropped."""
    import socket
    require_binary()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = probe.getsockname()[1]       # closed: connects are refused
    r, w = os.pipe()
    os.set_blocking(r, False)
    proc = subprocess.Popen(herd_cmd("serve", str(site.root), "--listen", "127.0.0.1:0",
                                     "--model", model, "--workers", "1",
                                     "--upstream", f"app=127.0.0.1:{dead}", "--proxy", "/up/=app"),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=w)
    os.close(w)
    try:
        got = b""

        def ready():
            nonlocal got
            try:
                got += os.read(r, 65536)
            except BlockingIOError:
                pass
            return READY.search(got.decode(errors="replace"))
        port = int(wait_for(ready, timeout=10, what="the listening line").group(1))
        conn = RawConn.open(("127.0.0.1", port), timeout=5)   # the pipe is not read now
        for i in range(1500):
            conn.send(get_req(f"/up/{i}"))
            assert conn.read_response().status == 502
        # the pipe (64 KiB) is long full: a static file still comes
        assert get_ok(port)
        conn.close()
        while True:                     # the reader catches up
            try:
                if not os.read(r, 1 << 20):
                    break
            except BlockingIOError:
                break
        with RawConn.open(("127.0.0.1", port), timeout=5) as c:   # one more error line
            c.send(get_req("/up/last"))
            assert c.read_response().status == 502
        said = wait_for(lambda: (lambda t: t if re.search(rb"\d+ error-log lines dropped", t)
                                 else None)(os.read(r, 1 << 20)), timeout=5,
                        what="the dropped-lines notice")
        assert b"[warn]" in said
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        os.close(r)
