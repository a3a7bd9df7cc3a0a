"""A second `herd serve` on an address a running herd serves (issue 18).

SO_REUSEPORT lets any process of the same user bind a listening address
whose sockets have it, so before the fix a second reuseport (or threads)
herd started, exited 0 and took a share of the first one's connections. On
every model the second start must fail the way docs/SPEC-serve.md says
("cannot listen on ADDR: Address already in use", exit 1), with --daemon
too, and leave the first server as it was: still answering, the same
listening sockets, its pid file untouched."""

import os

import pytest

from conftest import HERD_ARGS, ipv6_available, run_herd
from herdtest import get_req, wait_for
from test_upgrade import read_pid, stop_master

pytestmark = pytest.mark.skipif(
    "--model" in HERD_ARGS, reason="drives the master/worker model itself")

MODELS = ["reuseport", "prefork", "dispatch", "threads", "coro", "iterative", "single"]


def listening_sockets(port, table):
    """How many sockets listen on port (from /proc/net/tcp or tcp6)."""
    n = 0
    with open(table) as f:
        next(f)
        for line in f:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":
                n += 1
    return n


def answers(srv):
    r = srv.request(get_req("/small.txt", headers=[("Connection", "close")]), timeout=5)
    return r.status == 200 and r.body == b"0123456789abcdefghijklmnopqrstuvwxyz"


def second_start(srv, site, pidfile, listen, *args):
    """Runs a second herd on srv's port; returns its result. A second server
    that does start (the bug) is stopped by the pid it wrote."""
    first = read_pid(pidfile)
    try:
        return run_herd(["serve", str(site.root), "--listen", listen, "--workers", "2",
                         "--pid-file", str(pidfile), *args], timeout=5, extra=False)
    finally:
        intruder = read_pid(pidfile)
        if intruder and intruder != first:
            stop_master(intruder)
            pidfile.write_text(f"{first}\n")


def check_refused(srv, site, tmp_path, host, table, second_args):
    pidfile = tmp_path / "herd.pid"
    listen = f"[{host}]:{srv.port}" if ":" in host else f"{host}:{srv.port}"
    wait_for(lambda: read_pid(pidfile) == srv.pid, timeout=5, what="the first pid file")
    before = listening_sockets(srv.port, table)
    assert before >= 1 and answers(srv)
    for daemon in ([], ["--daemon"]):
        r = second_start(srv, site, pidfile, listen, *second_args, *daemon)
        assert r.returncode == 1, (daemon, r.returncode, r.stderr)
        assert r.stderr.strip() == f"herd: cannot listen on {listen}: Address already in use", \
            r.stderr
        assert "listening on" not in r.stderr, r.stderr
        assert listening_sockets(srv.port, table) == before, \
            f"{daemon}: {listening_sockets(srv.port, table)} sockets listen, {before} before"
        assert pidfile.read_text() == f"{srv.pid}\n", "the first server's pid file changed"
        assert srv.alive() and answers(srv)


@pytest.mark.parametrize("model", MODELS)
def test_second_server_on_a_served_address_is_refused(server, site, tmp_path, model):
    args = ["--model", model, "--workers", "2"]
    srv = server(*args, "--pid-file", tmp_path / "herd.pid")
    check_refused(srv, site, tmp_path, "127.0.0.1", "/proc/net/tcp", args)


@pytest.mark.parametrize("first", ["prefork", "single", "threads"])
def test_second_server_with_the_default_model_is_refused(server, site, tmp_path, first):
    """The second one is started as a user would, with the default model."""
    args = ["--model", first, "--workers", "2"]
    srv = server(*args, "--pid-file", tmp_path / "herd.pid")
    check_refused(srv, site, tmp_path, "127.0.0.1", "/proc/net/tcp", [])


@pytest.mark.skipif(not ipv6_available(), reason="no IPv6 loopback")
def test_second_server_on_a_served_ipv6_address_is_refused(server, site, tmp_path):
    srv = server("--workers", "2", "--pid-file", tmp_path / "herd.pid",
                 listen=("[::1]:0",))
    check_refused(srv, site, tmp_path, "::1", "/proc/net/tcp6", [])


def test_port_zero_group_still_binds_next_to_its_probe(server):
    """The probe holds port 0's pick while the group binds to it: one
    address, one socket per worker, all on one port."""
    srv = server("--workers", "3")
    assert listening_sockets(srv.port, "/proc/net/tcp") == 3
    for _ in range(6):
        assert answers(srv)


def test_restart_at_once_after_serving(server, site, tmp_path):
    """The probe has SO_REUSEADDR: the connections a stopped server closed
    (TIME_WAIT on its port) do not keep a new one from binding it."""
    srv = server("--workers", "2")
    port = srv.port
    for _ in range(5):
        assert answers(srv)
    assert srv.stop() == 0
    again = server("--workers", "2", listen=(f"127.0.0.1:{port}",))
    assert answers(again)


@pytest.mark.parametrize("why", ["busy-address", "bad-pid-file"])
@pytest.mark.parametrize("model", ["reuseport", "uring", "single"])
def test_a_failed_start_leaves_no_unix_socket_file(server, site, tmp_path, model, why):
    """A start that binds a unix address, then fails (on a busy address,
    or on a pid file it cannot write), removes the socket file it made: no
    server is behind it (red-team pass 17 and the review after it: every
    model but single left it, and every model on a pid file)."""
    first = server("--model", "reuseport")
    path = tmp_path / "s.sock"
    extra = (["--listen", f"{first.host}:{first.port}"] if why == "busy-address" else
             ["--pid-file", str(tmp_path / "no" / "herd.pid")])
    r = run_herd(["serve", str(site.root), "--model", model, "--listen", f"unix:{path}",
                  *extra], timeout=20, extra=False)
    assert r.returncode == 1, r
    assert ("Address already in use" if why == "busy-address" else "No such file") in r.stderr
    assert not path.exists(), "the unix socket file was left behind"
    # said once the start cannot be refused: it logged the unix address
    assert "listening on" not in r.stderr, r.stderr
    assert answers(first)


@pytest.mark.parametrize("kind", ["file", "fifo", "symlink"])
def test_a_unix_path_that_is_no_socket_is_left_alone(site, tmp_path, kind):
    """A regular file, a FIFO or a symlink at a unix listen path refuses
    the start and stays as it was: connecting to any of them is refused
    as to a dead server's socket, and herd unlinked them to bind there (a
    typo in --listen deleted a file; red-team pass 23)."""
    path = tmp_path / "not-a-socket"
    target = tmp_path / "data.txt"
    target.write_text("precious\n")
    if kind == "file":
        path.write_text("precious\n")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(target)
    r = run_herd(["serve", str(site.root), "--workers", "1", "--listen", f"unix:{path}"],
                 timeout=10, extra=False)
    assert r.returncode == 1, r
    assert r.stderr.strip() == f"herd: cannot listen on unix:{path}: File exists", r.stderr
    assert os.path.lexists(path), f"herd removed the {kind} in its way"
    assert target.read_text() == "precious\n"
    if kind == "file":
        assert path.read_text() == "precious\n"
