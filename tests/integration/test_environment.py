"""A bad environment (issue 19): LISTEN_FDS / LISTEN_PID naming fds that
are missing or of the wrong kind, and HERD_UPGRADE_READY_FD naming
something that is not an upgrading master's ready pipe. herd must refuse
with one clear line and exit 1, never take its own fds for passed ones
(a master that closed its own signalfd spun at 100% CPU and ignored TERM),
never close a listener or write into someone's file.

herd is started through sd_launch.py, which puts the given fds at 3.. and
sets LISTEN_PID to the pid herd will have."""

import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import HERD_ARGS, HERD_BIN, descendants, require_binary

pytestmark = pytest.mark.skipif(
    "--model" in HERD_ARGS, reason="picks the model itself")

LAUNCHER = str(Path(__file__).resolve().parent / "sd_launch.py")
EXIT_TIMEOUT = 10


def cpu_seconds(pid):
    """User + system CPU time of pid so far (from /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def launch(site, fds, *opts, args=(), listen=True):
    """Runs herd serve through sd_launch.py with fds passed; expects it to
    exit by itself. Returns (rc, stderr). A herd still running after
    EXIT_TIMEOUT is killed (with its workers) and the test fails, saying
    how much CPU it burnt meanwhile and whether it obeyed TERM."""
    require_binary()
    cmd = [sys.executable, LAUNCHER, *opts, *map(str, fds), "--", HERD_BIN, "serve",
           str(site.root), *(["--listen", "127.0.0.1:0"] if listen else []), *args]
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, pass_fds=fds, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=err)
        try:
            rc = p.wait(EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            rc = None
            cpu = cpu_seconds(p.pid)
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(5)
                after_term = "it stopped on TERM"
            except subprocess.TimeoutExpired:
                after_term = "it ignored TERM"
                for pid in [p.pid] + descendants(p.pid):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                p.wait(5)
        err.seek(0)
        text = err.read().decode("utf-8", "replace")
    if rc is None:
        pytest.fail(f"herd still ran {EXIT_TIMEOUT}s after a bad environment "
                    f"({cpu:.1f}s CPU; {after_term}):\n{text}", pytrace=False)
    return rc, text


def tcp_listener():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    return s


def assert_refused(rc, err, *words):
    assert rc == 1, (rc, err)
    lines = [l for l in err.splitlines() if l.strip()]
    assert lines and lines[-1].startswith("herd: "), err
    for w in words:
        assert w in lines[-1], f"the reason should say {w!r}: {lines[-1]!r}"
    assert "listening on" not in err, err


@pytest.mark.parametrize("model", ["reuseport", "single"])
def test_listen_fds_naming_a_missing_fd(site, model):
    """LISTEN_FDS=1 for our pid, but nothing at fd 3: herd's own signalfd
    used to land there and be closed as a stranger."""
    rc, err = launch(site, [], "--count", "1", args=["--model", model])
    assert_refused(rc, err, "LISTEN_FDS=1", "fd 3 is not open")


def _regular_file(tmp_path):
    f = open(tmp_path / "not-a-socket", "w")
    return f, "fd 3 is a regular file"


def _udp_socket(tmp_path):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    return s, "fd 3 is a datagram socket"


def _tcp_not_listening(tmp_path):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    return s, "fd 3 is a stream socket that does not listen"


def _unix_connection(tmp_path):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    b.close()
    return a, "fd 3 is a stream socket that does not listen"


def _abstract_unix_listener(tmp_path):
    """herd names a unix listener by its path: an abstract one passed the
    check, was then closed unused, and herd served 127.0.0.1:8080, which
    nobody asked for (red-team pass 17)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(f"\0herd-test-{os.getpid()}-{tmp_path.name}")
    s.listen(4)
    return s, "fd 3 is an abstract or unnamed unix socket"


@pytest.mark.parametrize("make", [_regular_file, _udp_socket, _tcp_not_listening,
                                  _unix_connection, _abstract_unix_listener],
                         ids=["regular-file", "udp", "tcp-not-listening", "unix-connection",
                              "abstract-unix"])
@pytest.mark.parametrize("model", ["reuseport", "single"])
def test_listen_fds_of_the_wrong_kind(site, tmp_path, make, model):
    obj, reason = make(tmp_path)
    with obj:
        rc, err = launch(site, [obj.fileno()], args=["--model", model])
    assert_refused(rc, err, "LISTEN_FDS=1", reason)


@pytest.mark.parametrize("value", ["two", "-1", "99999999"])
def test_malformed_listen_fds_for_our_pid(site, value):
    rc, err = launch(site, [], "--count", value)
    assert_refused(rc, err, f"LISTEN_FDS={value}")


@pytest.mark.parametrize("model", ["reuseport", "single"])
def test_more_passed_addresses_than_herd_serves_refuses_all(site, model):
    """17 addresses, one more than herd serves: the 17th was closed with a
    notice and refused its connections (single wrote past its arrays).
    Now the start is refused."""
    socks = [tcp_listener() for _ in range(17)]
    try:
        rc, err = launch(site, [s.fileno() for s in socks], listen=False,
                         args=["--model", model])
    finally:
        for s in socks:
            s.close()
    assert_refused(rc, err, "LISTEN_FDS passes 17 addresses; herd serves at most 16")


def test_second_passed_fd_bad_refuses_all(site, tmp_path):
    """One good listener and one file: herd does not serve on part of what
    the launcher meant."""
    good = tcp_listener()
    with good, open(tmp_path / "f", "w") as f:
        rc, err = launch(site, [good.fileno(), f.fileno()],
                         args=["--listen", f"127.0.0.1:{good.getsockname()[1]}"])
    assert_refused(rc, err, "LISTEN_FDS=2", "fd 4 is a regular file")


def test_ready_fd_naming_an_inherited_listener(site):
    """It used to write its ready byte to the listener and close it."""
    sock = tcp_listener()
    port = sock.getsockname()[1]
    with sock:
        rc, err = launch(site, [sock.fileno()], "--env", "HERD_UPGRADE_READY_FD={fd0}",
                         args=["--listen", f"127.0.0.1:{port}"])
        assert_refused(rc, err, "HERD_UPGRADE_READY_FD=3", "inherited listen socket")
        # our copy still listens (nothing was shut down under us)
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass


@pytest.mark.parametrize("daemon", [False, True], ids=["foreground", "daemon"])
def test_ready_fd_naming_a_regular_file(site, tmp_path, daemon):
    """It used to write its ready byte into the file, and skip --daemon
    as if it were an upgraded master."""
    sock = tcp_listener()
    path = tmp_path / "precious.txt"
    path.write_bytes(b"keep me\n")
    extra = ["--daemon", "--pid-file", str(tmp_path / "herd.pid")] if daemon else []
    with sock, open(path, "ab") as f:
        rc, err = launch(site, [sock.fileno(), f.fileno()], "--count", "1",
                         "--env", "HERD_UPGRADE_READY_FD={fd1}",
                         args=["--listen", f"127.0.0.1:{sock.getsockname()[1]}", *extra])
    assert_refused(rc, err, "HERD_UPGRADE_READY_FD=4", "is not a pipe")
    assert path.read_bytes() == b"keep me\n"
    assert not (tmp_path / "herd.pid").exists()


def test_ready_fd_that_is_not_a_number(site):
    rc, err = launch(site, [], "--env", "HERD_UPGRADE_READY_FD=seven")
    assert_refused(rc, err, "HERD_UPGRADE_READY_FD=seven")


def test_ready_fd_read_end_of_a_pipe(site):
    sock = tcp_listener()
    r, w = os.pipe()
    try:
        with sock:
            rc, err = launch(site, [sock.fileno(), r], "--count", "1",
                             "--env", "HERD_UPGRADE_READY_FD={fd1}",
                             args=["--listen", f"127.0.0.1:{sock.getsockname()[1]}"])
    finally:
        os.close(r)
        os.close(w)
    assert_refused(rc, err, "HERD_UPGRADE_READY_FD=4", "read end")
