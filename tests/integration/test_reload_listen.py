"""A reload changes the listen set (issue 13): addresses added to the config
file are bound by the HUP, removed ones stop taking connections once the old
generation has gone, kept ones keep their socket (port 0 keeps its port,
nothing queued is lost). What was queued on a removed address is served,
not reset. A new address that cannot be bound refuses the reload."""

import os
import signal
import socket
import time

import pytest

from conftest import HERD_ARGS, Server, finish_all, herd_cmd, require_binary
from herdtest import RawConn, get_req, wait_for
from test_hitless import BODY, TARGET, worker_pids

pytestmark = pytest.mark.skipif(
    "--model" in HERD_ARGS, reason="drives the models itself")

MODELS = ["reuseport", "prefork", "dispatch", "threads", "coro", "uring"]
HANDS_OVER = {"reuseport", "prefork", "dispatch", "threads", "coro"}


@pytest.fixture
def from_config(site, tmp_path):
    """Starts herd with its listen set in a config file (a --listen flag
    would replace the file's lines on every reload)."""
    require_binary()
    started = []
    cfg = tmp_path / "herd.conf"

    def start(listen, *args):
        write(cfg, listen)
        cmd = herd_cmd("serve", str(site.root), "--config", str(cfg),
                       "--shutdown-timeout", "5s", *args)
        s = Server([], listen, site.root, cmd=cmd)
        started.append(s)
        procs = 1 if "threads" in args or "coro" in args else 2
        wait_for(lambda: len(worker_pids(s)) == procs, timeout=5, what="the workers")
        return s, cfg

    yield start
    finish_all(started)


def write(cfg, listen):
    cfg.write_text("".join(f"listen = {a}\n" for a in listen))


def fetch(addr, timeout=2):
    with RawConn.open(addr, timeout=timeout) as c:
        c.send(get_req(TARGET, headers=[("Connection", "close")]))
        return c.read_response()


def serves(addr):
    try:
        r = fetch(addr)
        return r.status == 200 and r.body == BODY
    except OSError:
        return False


def refused(addr):
    try:
        with socket.create_connection(addr, timeout=2):
            return False
    except ConnectionRefusedError:
        return True


def new_generation(srv, old):
    wait_for(lambda: worker_pids(srv) and not old & worker_pids(srv), timeout=8,
             what="the old generation gone")


def reload_while_stopped(srv, old, new_config, addr, nclients, wait_note=False):
    """Stops the old workers (SIGSTOP), applies new_config by HUP, then
    connects nclients to addr and sends each a request: they queue on the
    old workers' sockets, and the HUP comes first in those workers' events.
    Resumes them and checks every client gets its whole answer."""
    conns = []
    for p in old:
        os.kill(p, signal.SIGSTOP)
    try:
        new_config()
        srv.send_signal(signal.SIGHUP)
        wait_for(lambda: worker_pids(srv) - old, timeout=5, what="the new generation")
        if wait_note:
            wait_for(lambda: any("no longer listening" in l for l in srv.lines if l),
                     timeout=5, what="the master's note")
        time.sleep(0.1)
        for i in range(nclients):
            c = RawConn.open(addr, timeout=8)
            c.send(get_req(f"{TARGET}?{i}"))
            conns.append(c)
    finally:
        for p in old:
            os.kill(p, signal.SIGCONT)
    for c in conns:
        r = c.read_response()
        assert r.status == 200 and r.body == BODY
        c.close()
    new_generation(srv, old)


@pytest.mark.parametrize("model", MODELS)
def test_hup_adds_and_removes_a_listen_address(from_config, tmp_path, model):
    srv, cfg = from_config(["127.0.0.1:0"], "--model", model, "--workers", "2")
    a = ("127.0.0.1", srv.port)
    b = str(tmp_path / "b.sock")
    assert serves(a)
    idle = RawConn.open(a, timeout=5)   # a keep-alive connection on the address to go
    idle.send(get_req(TARGET))
    assert idle.read_response().body == BODY

    write(cfg, ["127.0.0.1:0", f"unix:{b}"])
    old = worker_pids(srv)
    srv.send_signal(signal.SIGHUP)
    new_generation(srv, old)
    assert serves(b)
    assert serves(a), "127.0.0.1:0 kept its socket and so its port"

    write(cfg, [f"unix:{b}"])
    old = worker_pids(srv)
    srv.send_signal(signal.SIGHUP)
    new_generation(srv, old)
    wait_for(lambda: refused(a), timeout=5, what="the removed address closed")
    assert serves(b)
    assert any("no longer listening on http://127.0.0.1:%d/" % a[1] in l
               for l in srv.lines if l), srv.stderr_text()[-2000:]
    if model in HANDS_OVER:
        # handed over twice: answered on the same connection after both
        idle.send(get_req(TARGET))
        r = idle.read_response()
        assert r.status == 200 and r.body == BODY
    idle.close()
    assert "reload refused" not in srv.stderr_text()


@pytest.mark.parametrize("model", ["reuseport", "prefork"])
def test_an_address_that_cannot_be_bound_refuses_the_reload(from_config, model):
    srv, cfg = from_config(["127.0.0.1:0"], "--model", model, "--workers", "2")
    a = ("127.0.0.1", srv.port)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        write(cfg, ["127.0.0.1:0", f"127.0.0.1:{port}"])
        old = worker_pids(srv)
        srv.send_signal(signal.SIGHUP)
        wait_for(lambda: any("reload refused" in l for l in srv.lines if l), timeout=5,
                 what="the refusal")
        line = next(l for l in srv.lines if l and "reload refused" in l)
        assert f"cannot listen on 127.0.0.1:{port}" in line, line
        assert "in use" in line, line
        time.sleep(0.3)
        assert worker_pids(srv) == old
        assert serves(a)
        # the refusal closed only what it had opened: an unfilled socket
        # slot read as fd 0, and the master's stdin went with it
        assert os.path.exists(f"/proc/{srv.pid}/fd/0")


def test_a_refused_reload_removes_the_unix_socket_file_it_made(from_config, tmp_path):
    """A reload that binds a new unix address, then is refused (here: the
    next address is busy), removes the socket file it made: it was left
    behind, with no server, even after the stop (red-team pass 17)."""
    srv, cfg = from_config(["127.0.0.1:0"], "--model", "reuseport", "--workers", "2")
    path = tmp_path / "new.sock"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        write(cfg, ["127.0.0.1:0", f"unix:{path}", f"127.0.0.1:{port}"])
        srv.send_signal(signal.SIGHUP)
        wait_for(lambda: any("reload refused" in l for l in srv.lines if l), timeout=5,
                 what="the refusal")
    assert not path.exists(), "the refused reload left its unix socket file"
    # a refused reload never listened there, so it does not say it did
    assert not any(f"listening on unix:{path}" in l for l in srv.lines if l), srv.lines
    assert serves(("127.0.0.1", srv.port))


def reload_refused_for_a_busy_address(srv, cfg, lines):
    """Reloads srv to its address, one taken by another socket, and lines;
    returns once the master has refused it."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        cfg.write_text(f"listen = 127.0.0.1:0\nlisten = 127.0.0.1:{port}\n{lines}")
        srv.send_signal(signal.SIGHUP)
        wait_for(lambda: any("reload refused" in l for l in srv.lines if l), timeout=5,
                 what="the refusal")


def test_a_reload_refused_for_a_busy_address_leaves_no_new_access_log(from_config, tmp_path):
    """The reload opens (so makes) a new access log to check it first; one
    then refused for a busy address removes the file it made, as it does
    the unix socket files it bound (it was left behind, empty)."""
    srv, cfg = from_config(["127.0.0.1:0"], "--model", "reuseport", "--workers", "2")
    log = tmp_path / "new-access.log"
    reload_refused_for_a_busy_address(srv, cfg, f"access-log = {log}\n")
    assert not log.exists(), "the refused reload left the access log it made"
    assert serves(("127.0.0.1", srv.port))


def test_a_refused_reload_leaves_an_access_log_symlink_alone(from_config, tmp_path):
    """The new access log is a symlink to a file not made yet: the check
    creates the target, and a reload then refused removed the operator's
    link, not what the check made (the review after the last fix). Only a
    file the check itself created is removed."""
    srv, cfg = from_config(["127.0.0.1:0"], "--model", "reuseport", "--workers", "2")
    link = tmp_path / "access.log"
    link.symlink_to(tmp_path / "target.log")
    reload_refused_for_a_busy_address(srv, cfg, f"access-log = {link}\n")
    assert link.is_symlink(), "the refused reload removed the operator's symlink"
    assert serves(("127.0.0.1", srv.port))


# dispatch: the master is the only one that accepts; it takes a removed
# address's queue before it closes the socket (proc/dispatch.c), and a
# client that connects after that is refused, not queued.
@pytest.mark.parametrize("model", [m for m in MODELS if m != "dispatch"])
def test_connections_queued_on_a_removed_address_are_served(from_config, tmp_path, model):
    """The old workers are stopped (SIGSTOP) while the reload removes an
    address and tells them to stop, then clients connect and send their
    requests: those wait in the removed address's accept queue, and the
    HUP comes before them in the old workers' events. Resumed, each old
    worker takes that queue before its last close would reset it."""
    b = str(tmp_path / "b.sock")
    srv, cfg = from_config(["127.0.0.1:0", f"unix:{b}"], "--model", model, "--workers", "2")
    a = ("127.0.0.1", srv.port)
    assert serves(a)
    old = worker_pids(srv)
    reload_while_stopped(srv, old, lambda: write(cfg, [f"unix:{b}"]), a, 6, wait_note=True)
    assert refused(a)
    assert serves(b)


@pytest.mark.parametrize("model", ["reuseport", "threads"])
def test_connections_queued_on_a_socket_a_smaller_group_drops_are_served(from_config, model):
    """4 -> 1 worker (or thread) by HUP: the reuseport group keeps socket 0
    for the new worker; the other three close once their old workers have
    taken what the kernel queued on them."""
    key = "threads" if model == "threads" else "workers"
    srv, cfg = from_config(["127.0.0.1:0"], "--model", model)
    cfg.write_text(f"listen = 127.0.0.1:0\n{key} = 4\n")
    srv.send_signal(signal.SIGHUP)
    procs = 1 if model == "threads" else 4
    wait_for(lambda: len(worker_pids(srv)) == procs and serves(("127.0.0.1", srv.port)),
             timeout=8, what="4 workers")
    time.sleep(0.5)
    a = ("127.0.0.1", srv.port)
    old = worker_pids(srv)
    # 16 clients: the kernel's hash spreads them over the four sockets
    reload_while_stopped(srv, old, lambda: cfg.write_text(f"listen = 127.0.0.1:0\n{key} = 1\n"),
                         a, 16)
    for _ in range(8):
        assert serves(a)
