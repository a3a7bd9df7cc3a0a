"""herd spawn: bind once, N children inherit the socket (fd 0 or systemd's
fd 3), respawn, signal forwarding, graceful stop, and clear failures."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import HERD_ARGS, HERD_BIN, require_binary
from herdtest import wait_for

pytestmark = pytest.mark.skipif(
    "--model" in HERD_ARGS, reason="herd spawn has no model: runs once")

BACKEND = str(Path(__file__).resolve().parent / "backends" / "pid_backend.py")
LISTENING_RE = re.compile(r"herd spawn: listening on (?:http://([^/\s]+):(\d+)/|unix:([^,\s]+))")
TIMEOUT = 15


class Spawn:
    """A running `herd spawn`, stopped by its pid."""

    def __init__(self, listen="127.0.0.1:0", args=(), cmd=None):
        require_binary()
        self.errpath = f"/tmp/herd-spawn-{os.getpid()}-{time.monotonic_ns()}.log"
        self.err = open(self.errpath, "w+")
        cmd = cmd or [sys.executable, BACKEND]
        self.proc = subprocess.Popen([HERD_BIN, "spawn", "--listen", listen, *args, "--", *cmd],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self.err)
        self.addr = None
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline and self.proc.poll() is None:
            m = LISTENING_RE.search(self.log())
            if m:
                self.addr = m.group(3) if m.group(3) else (m.group(1), int(m.group(2)))
                break
            time.sleep(0.02)
        assert self.addr, f"herd spawn did not start:\n{self.log()}"

    def log(self):
        self.err.flush()
        with open(self.errpath) as f:
            return f.read()

    def children(self):
        try:
            with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
                return [int(x) for x in f.read().split()]
        except OSError:
            return []

    def get(self, timeout=5):
        """One request on a new connection; the backend's JSON answer."""
        fam = socket.AF_UNIX if isinstance(self.addr, str) else socket.AF_INET
        with socket.socket(fam) as s:
            s.settimeout(timeout)
            s.connect(self.addr)
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), data
        return json.loads(body)

    def stop(self, sig=signal.SIGTERM, timeout=TIMEOUT):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def close(self):
        kids = self.children()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.err.close()
        os.unlink(self.errpath)


@pytest.fixture
def spawn():
    made = []

    def make(*a, **kw):
        s = Spawn(*a, **kw)
        made.append(s)
        return s
    yield make
    for s in made:
        s.close()


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ")[1][0] != "Z"


def open_fds(pid):
    return {int(x): os.readlink(f"/proc/{pid}/fd/{x}") for x in os.listdir(f"/proc/{pid}/fd")}


def waiting_in_accept(pid):
    try:
        with open(f"/proc/{pid}/wchan") as f:
            return "accept" in f.read()
    except OSError:
        return False


def accept_queue(port):
    """Connections waiting in the accept queue of the listener on port."""
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].split(":")[1], 16) == port:
                return int(fields[4].split(":")[1], 16)
    raise AssertionError(f"no listener on port {port}")


def test_children_share_the_socket_as_stdin(spawn):
    s = spawn(args=["-n", "3"])
    wait_for(lambda: len(s.children()) == 3 and all(map(waiting_in_accept, s.children())),
             TIMEOUT, what="3 children waiting in accept")
    # Each backend serves one connection at a time and blocks reading the
    # request: three silent connections must be taken by three children.
    socks = [socket.create_connection(s.addr, timeout=5) for _ in range(3)]
    try:
        pids = set()
        wait_for(lambda: accept_queue(s.addr[1]) == 0, TIMEOUT,
                 what="every connection accepted (one per child: each waits for a request)")
        for c in socks:
            c.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        for c in socks:
            data = b""
            while chunk := c.recv(65536):
                data += chunk
            pids.add(json.loads(data.partition(b"\r\n\r\n")[2])["pid"])
    finally:
        for c in socks:
            c.close()
    assert pids == set(s.children())
    a = s.get()
    assert a["fd"] == 0 and not a["systemd"] and a["listen_fds"] is None
    assert a["blocking"], "backends expect a blocking listening socket"
    assert a["sigblk"] == "0000000000000000", "children must not inherit blocked signals"
    for pid in s.children():
        fds = open_fds(pid)
        assert set(fds) == {0, 1, 2}, f"fds leaked into the child: {fds}"
        assert fds[0].startswith("socket:")
    assert s.stop() == 0


def test_systemd_style_sets_listen_fds_for_the_child(spawn):
    s = spawn(args=["-n", "2", "--fd-style", "systemd"])
    wait_for(lambda: len(s.children()) == 2 and all(map(waiting_in_accept, s.children())),
             TIMEOUT, what="2 children waiting in accept")
    a = s.get()
    assert a["systemd"] and a["fd"] == 3
    assert a["listen_fds"] == "1" and a["listen_pid"] == str(a["pid"])
    for pid in s.children():
        fds = open_fds(pid)
        assert set(fds) == {0, 1, 2, 3}, f"fds leaked into the child: {fds}"
    assert s.stop() == 0


def test_unix_socket_is_removed_after_stop(spawn, short_tmp):
    path = str(short_tmp / "app.sock")
    s = spawn(listen=f"unix:{path}", args=["-n", "2"])
    assert s.addr == path
    assert s.get()["pid"] in s.children()
    assert s.stop() == 0
    assert not os.path.exists(path)


@pytest.mark.parametrize("kind", ["file", "fifo"])
def test_a_unix_path_that_is_no_socket_is_left_alone(short_tmp, kind):
    """A regular file or FIFO at the --listen path is refused, not
    unlinked to bind there: connecting to it is refused as to a dead
    server's socket (red-team pass 23)."""
    require_binary()
    path = short_tmp / "data"
    if kind == "file":
        path.write_text("precious\n")
    else:
        os.mkfifo(path)
    r = subprocess.run([HERD_BIN, "spawn", "--listen", f"unix:{path}", "--", "/bin/true"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 1, r
    assert f"cannot listen on unix:{path}: File exists" in r.stderr, r.stderr
    assert os.path.lexists(path)
    if kind == "file":
        assert path.read_text() == "precious\n"


def test_a_killed_child_is_respawned(spawn):
    s = spawn(args=["-n", "2", "--respawn"])
    wait_for(lambda: len(s.children()) == 2, TIMEOUT, what="2 children")
    first = s.children()
    os.kill(first[0], signal.SIGKILL)
    wait_for(lambda: len(s.children()) == 2 and first[0] not in s.children(), TIMEOUT,
             what="a new child in the dead one's place")
    assert first[1] in s.children()
    for _ in range(10):
        assert s.get()["pid"] in s.children()
    assert "killed by signal 9" in s.log()
    assert s.stop() == 0


def test_without_respawn_a_dead_child_stays_dead_and_the_last_exit_ends_spawn(spawn):
    s = spawn(args=["-n", "1"], cmd=[sys.executable, BACKEND, "--exit-after", "2"])
    time.sleep(1.1)  # past the start window: a later exit is not a failure at start
    s.get()
    s.get()
    assert s.proc.wait(TIMEOUT) == 0
    assert "every child has exited" in s.log()


def test_hup_is_forwarded_to_every_child(spawn):
    s = spawn(args=["-n", "2"])
    wait_for(lambda: len(s.children()) == 2, TIMEOUT, what="2 children")
    time.sleep(0.5)  # let the backends install their HUP handler
    s.proc.send_signal(signal.SIGHUP)
    seen = {}
    deadline = time.monotonic() + TIMEOUT
    while len(seen) < 2 and time.monotonic() < deadline:
        a = s.get()
        if a["hups"] == 1:
            seen[a["pid"]] = a
    assert len(seen) == 2, "HUP did not reach both children"
    assert s.proc.poll() is None, "HUP must not stop herd spawn"
    assert s.stop() == 0


def test_term_stops_children_gracefully(spawn):
    s = spawn(args=["-n", "3"])
    wait_for(lambda: len(s.children()) == 3, TIMEOUT, what="3 children")
    kids = s.children()
    assert s.stop() == 0
    for pid in kids:
        wait_for(lambda: not alive(pid), 5, what=f"child {pid} gone")
    assert "killing them" not in s.log()


def test_children_ignoring_term_are_killed_after_the_stop_timeout(spawn):
    s = spawn(args=["-n", "2", "--stop-timeout", "500ms"],
              cmd=[sys.executable, BACKEND, "--ignore-term"])
    wait_for(lambda: len(s.children()) == 2, TIMEOUT, what="2 children")
    time.sleep(0.5)
    kids = s.children()
    t0 = time.monotonic()
    assert s.stop() == 0
    assert time.monotonic() - t0 < 5
    assert "killing them" in s.log()
    for pid in kids:
        assert not alive(pid)


def run_spawn(*args, timeout=TIMEOUT):
    require_binary()
    return subprocess.run([HERD_BIN, "spawn", *args], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)


def test_missing_command_is_a_clear_error():
    r = run_spawn("--listen", "127.0.0.1:0", "--", "herd-no-such-command")
    assert r.returncode == 1
    assert "command not found: 'herd-no-such-command'" in r.stderr


def test_command_that_is_not_executable(tmp_path):
    f = tmp_path / "script"
    f.write_text("#!/bin/sh\n")
    r = run_spawn("--listen", "127.0.0.1:0", "--", str(f))
    assert r.returncode == 1 and "cannot run" in r.stderr


def test_bind_failure_is_a_clear_error():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = run_spawn("--listen", f"127.0.0.1:{port}", "--", sys.executable, BACKEND)
    assert r.returncode == 1
    assert "address already in use" in r.stderr


@pytest.mark.parametrize("respawn", [[], ["--respawn"]])
def test_children_that_die_at_once_fail_spawn(respawn):
    t0 = time.monotonic()
    r = run_spawn("--listen", "127.0.0.1:0", "-n", "2", *respawn, "--", "false", timeout=30)
    assert r.returncode == 1
    assert "after it started" in r.stderr and "stopping" in r.stderr
    assert time.monotonic() - t0 < 10


def test_a_child_that_recycles_itself_quickly_is_restarted_for_good(spawn):
    """A child that exits 0 after a moment recycles itself, as php-cgi does
    after PHP_FCGI_MAX_REQUESTS requests (well within a second when busy):
    it is restarted, never a reason to stop the pool. Counted as a death
    at start, five in a row stopped herd spawn with exit 1 (red-team pass
    23). Here each child lives 0.25 s."""
    s = spawn(args=["--respawn"], cmd=["sh", "-c", "sleep 0.25"])
    time.sleep(4)
    assert s.proc.poll() is None, s.log()
    assert s.log().count("exited with status 0; restarting it") >= 8, s.log()
    assert s.stop() == 0


@pytest.mark.parametrize("args,needle", [
    ([], "--listen ADDR is required"),
    (["--listen", "127.0.0.1:0"], "no command"),
    (["--listen", "127.0.0.1:0", "--"], "no command"),
    (["--listen", "127.0.0.1:0", "-n", "0", "--", "true"], "invalid value '0' for -n"),
    (["--listen", "127.0.0.1:0", "--fd-style", "inetd", "--", "true"], "invalid value"),
    (["--listen", "127.0.0.1:0", "--bogus", "--", "true"], "unknown option '--bogus'"),
    (["--listen", "127.0.0.1:0", "true"], "after '--'"),
    (["--listen", "nonsense:x", "--", "true"], "bad listen address 'nonsense:x'"),
    (["--listen", "127.0.0.1:99999", "--", "true"], "bad listen address"),
])
def test_usage_errors(args, needle):
    r = run_spawn(*args)
    assert r.returncode == 2 and needle in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr


def test_help():
    r = run_spawn("--help")
    assert r.returncode == 0 and "--fd-style" in r.stdout


def test_herd_serve_runs_as_a_socket_activated_child(spawn, site):
    """herd spawn --fd-style systemd in front of herd serve (which takes
    LISTEN_FDS): two single-process servers share the one socket."""
    s = spawn(args=["-n", "2", "--fd-style", "systemd"],
              cmd=[HERD_BIN, "serve", str(site.root), "--model", "single"])
    wait_for(lambda: len(s.children()) == 2, TIMEOUT, what="2 children")
    for _ in range(20):
        with socket.create_connection(s.addr, timeout=5) as c:
            c.sendall(b"GET /small.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := c.recv(65536):
                data += chunk
        assert data.startswith(b"HTTP/1.1 200") and data.endswith(site.files["small.txt"])
    # the first child may serve all of them before the second has logged
    wait_for(lambda: s.log().count("(inherited)") == 2, TIMEOUT,
             what="both children on the inherited socket")
    assert s.stop() == 0


# ------------------------------------------- what a child forks (process groups)

FORKING = str(Path(__file__).resolve().parent / "backends" / "forking_backend.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pid_in(path, other_than=None):
    """The pid forking_backend.py wrote to path (a new one when other_than)."""
    def read():
        try:
            pid = int(path.read_text())
        except (OSError, ValueError):
            return None
        return pid if pid != other_than else None
    return wait_for(read, TIMEOUT, what=f"a pid in {path}")


def kill_quietly(*pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def answers_on(port):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
        return c.recv(100)


@pytest.mark.parametrize("stubborn", [False, True], ids=["helper-obeys-term",
                                                          "helper-ignores-term"])
def test_term_stops_what_a_child_forked(spawn, tmp_path, stubborn):
    """A helper forked by the child keeps the socket (fd 0); it used to
    outlive herd spawn, still accepting on the port, so a new herd spawn
    on the same address failed with "address already in use"."""
    port = free_port()
    pidfile = tmp_path / "helper.pid"
    cmd = [sys.executable, FORKING, str(pidfile), "stay",
           *(["--helper-ignores-term"] if stubborn else [])]
    s = spawn(listen=f"127.0.0.1:{port}", args=["--stop-timeout", "1s"], cmd=cmd)
    helper = pid_in(pidfile)
    kids = s.children()
    try:
        assert alive(helper) and len(kids) == 1
        t0 = time.monotonic()
        assert s.stop() == 0, s.log()
        assert time.monotonic() - t0 < 5, "stop took longer than the stop timeout allows"
        for pid in kids + [helper]:
            wait_for(lambda: not alive(pid), 5, what=f"process {pid} of the child's group gone")
        if stubborn:
            assert "killing them" in s.log(), s.log()
        again = spawn(listen=f"127.0.0.1:{port}")
        assert again.get()["pid"] in again.children()
    finally:
        kill_quietly(helper)


def test_a_child_exiting_takes_its_helpers_along(spawn, tmp_path):
    """Without --respawn herd spawn ends when the last child has exited; a
    helper the child left behind no longer serves on after it."""
    port = free_port()
    pidfile = tmp_path / "helper.pid"
    s = spawn(listen=f"127.0.0.1:{port}", cmd=[sys.executable, FORKING, str(pidfile), "exit"])
    helper = pid_in(pidfile)
    try:
        assert s.proc.wait(TIMEOUT) == 0, s.log()
        assert not alive(helper), "the child's helper outlived herd spawn"
        assert "left processes in its group" in s.log(), s.log()
        again = spawn(listen=f"127.0.0.1:{port}")
        assert again.get()["pid"] in again.children()
    finally:
        kill_quietly(helper)


def test_respawn_starts_after_the_old_group_is_gone(spawn, tmp_path):
    """With --respawn, the helper of a child that exited is stopped before
    the new child starts: two runs never accept side by side."""
    pidfile = tmp_path / "helper.pid"
    s = spawn(args=["--respawn"], cmd=[sys.executable, FORKING, str(pidfile), "exit"])
    first, second = pid_in(pidfile), None
    try:
        second = pid_in(pidfile, other_than=first)
        assert not alive(first), "the first run's helper still runs beside the second"
        assert s.stop() == 0
        wait_for(lambda: not alive(second), 5, what="the second helper gone")
    finally:
        kill_quietly(*[p for p in (first, second) if p])


# ------------------ what leaves the child's group (setsid) or loses its parent

def session_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    return int(stat[stat.rfind(")") + 2:].split()[3])


def helper_in_own_session(helper):
    """Waits until the helper has called setsid() (it writes no pid file
    itself, so its parent may name it first)."""
    wait_for(lambda: session_of(helper) == helper, TIMEOUT,
             what=f"helper {helper} in a session of its own")


def bindable(port):
    with socket.socket() as b:
        b.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            b.bind(("127.0.0.1", port))
            b.listen()
        except OSError:
            return False
    return True


def backend_pid(s):
    """The pid of child 0 (herd spawn -v logs it at start)."""
    m = wait_for(lambda: re.search(r"child 0 started \(pid (\d+)\)", s.log()), TIMEOUT,
                 what="child 0's start in the log")
    return int(m.group(1))


@pytest.mark.parametrize("stubborn", [False, True], ids=["helper-obeys-term",
                                                          "helper-ignores-term"])
def test_term_stops_a_helper_in_a_session_of_its_own(spawn, tmp_path, stubborn):
    """A helper that calls setsid() is in no process group herd spawn
    signals. It used to be left running when herd spawn stopped (re-parented
    to init), still holding the socket, so the address could not be bound
    again; one that ignores TERM is killed after the stop timeout."""
    port = free_port()
    pidfile = tmp_path / "helper.pid"
    cmd = [sys.executable, FORKING, str(pidfile), "stay", "--helper-setsid",
           *(["--helper-ignores-term"] if stubborn else [])]
    s = spawn(listen=f"127.0.0.1:{port}", args=["--stop-timeout", "1s"], cmd=cmd)
    helper = pid_in(pidfile)
    try:
        helper_in_own_session(helper)
        t0 = time.monotonic()
        assert s.stop() == 0, s.log()
        took = time.monotonic() - t0
        assert not alive(helper), f"the helper outlived herd spawn:\n{s.log()}"
        assert took < 5, "stop took longer than the stop timeout allows"
        if stubborn:
            assert took >= 0.9, "the helper was killed before the stop timeout"
            assert "killing" in s.log(), s.log()
        assert bindable(port), "something still listens on the address"
        again = spawn(listen=f"127.0.0.1:{port}")
        assert again.get()["pid"] in again.children()
    finally:
        kill_quietly(helper)


def test_a_child_exiting_takes_its_helper_in_another_session_along(spawn, tmp_path):
    """Without --respawn herd spawn ends when the last child has exited, and
    not before a helper it left in a session of its own is gone."""
    port = free_port()
    pidfile = tmp_path / "helper.pid"
    s = spawn(listen=f"127.0.0.1:{port}", args=["--stop-timeout", "1s"],
              cmd=[sys.executable, FORKING, str(pidfile), "exit", "--helper-setsid"])
    helper = pid_in(pidfile)
    try:
        assert s.proc.wait(TIMEOUT) == 0, s.log()
        assert not alive(helper), f"the child's helper outlived herd spawn:\n{s.log()}"
        assert bindable(port), "something still listens on the address"
    finally:
        kill_quietly(helper)


def test_respawn_waits_for_a_helper_in_another_session(spawn, tmp_path):
    """With --respawn, a helper that left the child's group is stopped
    before the new child starts, as one in the group is."""
    pidfile = tmp_path / "helper.pid"
    s = spawn(args=["--respawn", "--stop-timeout", "1s"],
              cmd=[sys.executable, FORKING, str(pidfile), "exit", "--helper-setsid"])
    first, second = pid_in(pidfile), None
    try:
        second = pid_in(pidfile, other_than=first)
        assert not alive(first), "the first run's helper still runs beside the second"
        assert s.stop() == 0
        assert not alive(second), "the second helper outlived herd spawn"
    finally:
        kill_quietly(*[p for p in (first, second) if p])


def test_an_orphan_in_another_session_is_stopped_while_the_child_runs(spawn, tmp_path):
    """A helper started by a double fork and setsid (daemonized) loses its
    parent while the child still runs and is herd spawn's (the subreaper's):
    nobody runs it, so it is stopped within a second or two; the child
    itself goes on."""
    pidfile = tmp_path / "helper.pid"
    s = spawn(args=["-v", "--stop-timeout", "1s"],
              cmd=[sys.executable, FORKING, str(pidfile), "stay", "--helper-setsid",
                   "--double-fork"])
    helper = pid_in(pidfile)
    try:
        child = backend_pid(s)
        wait_for(lambda: not alive(helper), 5, what="the orphaned helper stopped")
        assert alive(child), "the child was stopped with the orphan"
        assert f"process {helper} " in s.log(), s.log()
        assert s.stop() == 0
        assert not alive(child)
    finally:
        kill_quietly(helper)
