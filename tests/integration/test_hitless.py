"""Hitless reload (issue 13): clients that never retry see no error across
HUPs. A draining worker hands its idle keep-alive connections over to the
new generation instead of closing them while a request may be on the wire.

The client here is deliberately not forgiving: a keep-alive connection that
closes (EOF or RST) before the whole response to a request it sent is an
error, as wrk and ab count it. A response that says Connection: close is
honoured (the client then opens a new connection): that is not an error."""

import json
import os
import random
import re
import selectors
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import HERD_ARGS, comm, descendants, shim_env, tcp_sockets, tree_fds, worker_pids
from herdtest import RawConn, get_req, log_lines, wait_for
from proxy_backend import Backend

pytestmark = pytest.mark.skipif(
    "--model" in HERD_ARGS, reason="drives the models itself")

MODELS = ["reuseport", "prefork", "dispatch", "threads", "coro", "uring"]
TARGET = "/small.txt"
BODY = b"0123456789abcdefghijklmnopqrstuvwxyz"
REQ = f"GET {TARGET} HTTP/1.1\r\nHost: t\r\n\r\n".encode()
HEAD_RE = re.compile(rb"^HTTP/1\.1 (\d{3}) ")



class Client:
    """One keep-alive connection: sends a request, reads the whole response,
    then sends the next at once (busy) or after 0-500 ms (idle)."""

    def __init__(self, addr, idle):
        self.addr, self.idle = addr, idle
        self.sock = None
        self.buf = b""
        self.due = 0.0           # when to send the next request (idle ones)
        self.waiting = False     # a request is on the wire
        self.reused = False

    def open(self, sel):
        self.sock = socket.create_connection(self.addr, timeout=5)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.reused = False
        sel.register(self.sock, selectors.EVENT_READ, self)

    def close(self, sel):
        if self.sock is not None:
            sel.unregister(self.sock)
            self.sock.close()
            self.sock = None

    def send(self):
        self.sock.sendall(REQ)   # 40 bytes: fits any socket buffer at once
        self.waiting = True
        self.buf = b""

    def parse(self):
        """None while incomplete, else (ok, close, detail)."""
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return None
        head = self.buf[:end].lower()
        m = re.search(rb"\r\ncontent-length: *(\d+)", head)
        if not m:
            return (False, True, "no content-length")
        total = end + 4 + int(m.group(1))
        if len(self.buf) < total:
            return None
        if len(self.buf) > total:
            return (False, True, "bytes after the response")
        ok = HEAD_RE.match(self.buf) is not None and self.buf[:12] == b"HTTP/1.1 200" \
            and self.buf[end + 4:] == BODY
        close = b"\r\nconnection: close" in head
        return (ok, close, None if ok else self.buf[:200])


class Load:
    """n connections, half busy and half idling; counts complete correct
    responses and errors (closed before a whole response, wrong bytes)."""

    def __init__(self, addr, n):
        self.sel = selectors.DefaultSelector()
        self.clients = [Client(addr, idle=i % 2 == 1) for i in range(n)]
        self.ok = 0
        self.errors = []
        self.closes = 0          # server said Connection: close (honoured)
        self.stuck_where = ""    # where unanswered requests waited (finish)

    def start(self):
        self.dropped_before = softnet_dropped()
        now = time.monotonic()
        for c in self.clients:
            c.open(self.sel)
            c.due = now + (random.uniform(0, 0.5) if c.idle else 0)

    def step(self, now, timeout=0.02, reopen=True):
        for c in self.clients:
            if c.sock is None:
                if not reopen:
                    continue
                c.open(self.sel)
            if not c.waiting and now >= c.due:
                try:
                    c.send()
                except OSError as e:
                    self.errors.append(("send", repr(e), c.reused))
                    c.close(self.sel)
        for key, _ in self.sel.select(timeout):
            self.readable(key.data)

    def readable(self, c):
        try:
            data = c.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError as e:
            data, err = b"", repr(e)
        else:
            err = "EOF"
        if not data:
            what = "closed before the response" if c.waiting else "closed while idle"
            if c.waiting:
                self.errors.append((what, err, c.reused))
            c.close(self.sel)
            c.waiting = False
            return
        if not c.waiting:
            self.errors.append(("unasked bytes", data[:100], c.reused))
            c.close(self.sel)
            return
        c.buf += data
        r = c.parse()
        if r is None:
            return
        ok, close, detail = r
        c.waiting = False
        c.reused = True
        if ok:
            self.ok += 1
        else:
            self.errors.append(("bad response", detail, True))
        c.due = time.monotonic() + (random.uniform(0, 0.5) if c.idle else 0)
        if close:
            self.closes += 1
            c.close(self.sel)

    def finish(self, limit=15.0, on_stuck=None):
        """Lets every request on the wire complete (bounded), then closes;
        on_stuck(client ports) runs first when some never completed. The
        bound is long because loopback loses packets too: a burst past the
        kernel's backlog (net.core.netdev_max_backlog) is dropped, and TCP's
        retransmission backs off on a loaded machine for seconds. It stays
        under the server's 30 s keep-alive timeout, so a connection nobody
        serves still fails here."""
        end = time.monotonic() + limit
        for c in self.clients:
            c.due = float("inf")
        # No new connections now: a connect is blocking, and one whose SYN a
        # full listen queue dropped waits a second or more for its retry,
        # while the answers to the requests on the wire wait unread.
        while any(c.waiting for c in self.clients) and time.monotonic() < end:
            self.step(time.monotonic(), reopen=False)
        stuck = [c.sock.getsockname()[1] for c in self.clients if c.waiting]
        if stuck and on_stuck:
            on_stuck(stuck)
        for c in self.clients:
            if c.waiting:
                self.errors.append(("no response", None, c.reused))
            c.close(self.sel)
        self.sel.close()


def softnet_dropped():
    """Packets the kernel dropped for a full backlog, all CPUs
    (/proc/net/softnet_stat, 2nd column): loopback traffic counts there."""
    with open("/proc/net/softnet_stat") as f:
        return sum(int(line.split()[1], 16) for line in f)


def where_stuck(srv, client_ports, show=6):
    """Where the requests nobody answered wait, for the failure message: per
    connection, each end's TCP state from /proc/net/tcp (queues: a request
    unread has srv rx > 0, an answer unsent or unacknowledged srv tx > 0, a
    request not yet acknowledged cli tx > 0; retransmission timeouts so far
    and the timeout now, in jiffies), and which process of the server holds
    its end (pid and name), or "nobody" (in flight in a channel, or closed)."""
    want = set(client_ports)
    rows = {}                    # (client port, "srv" or "cli") -> fields
    for lport, rport, fields in tcp_sockets():
        if lport == srv.port and rport in want:
            rows[(rport, "srv")] = fields
        elif rport == srv.port and lport in want:
            rows[(lport, "cli")] = fields
    inodes = {rows[k][9]: k[0] for k in rows if k[1] == "srv"}
    holders = {inodes[t[8:-1]]: f"{p} {comm(p)} fd {fd}"
               for p, fd, t in tree_fds(srv.pid) if t[8:-1] in inodes}

    def end(port, side):
        x = rows.get((port, side))
        if x is None:
            return f"{side} gone"
        tx, rx = (int(v, 16) for v in x[4].split(":"))
        return (f"{side} st {x[3]} tx {tx} rx {rx} retrans {int(x[6], 16)} "
                f"rto {x[12] if len(x) > 12 else '?'}")
    told = [f"port {p}: {end(p, 'srv')}, {end(p, 'cli')}, held by {holders.get(p, 'nobody')}"
            for p in sorted(want)]
    return f"{len(want)} unanswered: " + "; ".join(told[:show])


def reload_under_load(srv, nconns, hups):
    """Sends `hups` HUPs under load, each once the previous generation has
    gone; returns the load and how long each old generation took to go."""
    load = Load(("127.0.0.1", srv.port), nconns)
    load.start()
    took = []
    old, hup_at = None, 0.0
    end_run = time.monotonic() + 60
    next_hup = time.monotonic() + 0.5
    while (len(took) < hups) and time.monotonic() < end_run:
        now = time.monotonic()
        load.step(now)
        if old is not None and not old & worker_pids(srv):
            took.append(now - hup_at)
            old = None
        if old is None and len(took) < hups and now >= next_hup:
            old = worker_pids(srv)
            srv.send_signal(signal.SIGHUP)
            hup_at, next_hup = now, now + 0.7
    end = time.monotonic() + 0.5   # serve on a little with the last generation
    while time.monotonic() < end:
        load.step(time.monotonic())
    finish(load, srv)
    return load, took


def finish(load, srv):
    """load.finish, noting where any unanswered request waits."""
    load.finish(on_stuck=lambda ports: setattr(load, "stuck_where", where_stuck(srv, ports)))


def errors_told(load, srv):
    """The failure message: the errors, where unanswered requests waited,
    and the end of the server's error log."""
    return (f"{len(load.errors)} errors in {load.ok + len(load.errors)} requests: "
            f"{load.errors[:8]}; {load.stuck_where}; the kernel dropped "
            f"{softnet_dropped() - load.dropped_before} packets for a full backlog "
            f"meanwhile\n"
            + "\n".join(srv.stderr_text().splitlines()[-20:]))


def server_args(model, extra=()):
    return ["--model", model, "--workers", "2", "--shutdown-timeout", "5s",
            "--keepalive-timeout", "30s", *extra]


@pytest.mark.slow
@pytest.mark.concurrency
@pytest.mark.parametrize("nconns", [20, 200, 1000])
@pytest.mark.parametrize("model", MODELS)
def test_hups_lose_no_request(server, model, nconns):
    """5 HUPs under a non-retrying load: every request sent gets its whole,
    correct response on the connection it was sent on, and each old
    generation leaves well before its shutdown timeout."""
    srv = server(*server_args(model))
    load, took = reload_under_load(srv, nconns, 5)
    assert len(took) == 5, took
    assert load.ok > nconns, (load.ok, load.errors[:5])
    # Each old generation left by handing its connections over, not at the
    # 5 s shutdown timeout.
    assert max(took) < 4, took
    assert not load.errors, f"HUPs took {took}; " + errors_told(load, srv)


@pytest.mark.slow
@pytest.mark.concurrency
@pytest.mark.parametrize("model", MODELS)
def test_full_handover_channels_lose_no_request(server, model):
    """Socket buffers as small as the kernel allows (as a small
    net.core.wmem_max leaves them) fill the handover channels after a few
    messages. What the master can neither place nor bounce waits in the
    master, as do the acknowledgements it owes, and goes once a channel
    has room: no request is lost (the master closed those connections: 24
    to 35 resets in 1000 on dispatch) and no old generation waits for its
    shutdown timeout (it did, 5 s, for an acknowledgement dropped)."""
    srv = server(*server_args(model), env=shim_env("sockbuf_cap", SOCKBUF_CAP=4608))
    load, took = reload_under_load(srv, 1000, 3)
    assert len(took) == 3, took
    assert max(took) < 4, took
    assert not load.errors, f"HUPs took {took}; " + errors_told(load, srv)


@pytest.mark.parametrize("model", MODELS)
def test_idle_connection_moves_to_the_new_generation(server, tmp_path, model):
    """An idle keep-alive connection opened before a HUP is answered after
    it, on the same TCP connection, by a worker of the new generation (the
    JSON access log's "generation" field says which answered)."""
    log = tmp_path / "access.json"
    srv = server(*server_args(model, ["--access-log", log, "--access-log-format", "json"]))
    procs = 1 if model in ("threads", "coro") else 2
    c = RawConn.open(("127.0.0.1", srv.port), timeout=5)
    port = c.sock.getsockname()[1]
    c.send(get_req(TARGET + "?before"))
    assert c.read_response().body == BODY
    old = worker_pids(srv)
    srv.send_signal(signal.SIGHUP)
    # the old workers have gone, the new ones serve
    wait_for(lambda: len(worker_pids(srv)) == procs and not old & set(descendants(srv.pid)),
             timeout=8, what="old generation gone")
    c.send(get_req(TARGET + "?after"))
    r = c.read_response()
    assert r.body == BODY
    assert "close" not in r.conn_tokens()
    assert c.sock.getsockname()[1] == port
    c.close()

    def records():
        out = {}
        for line in log_lines(log):
            rec = json.loads(line)
            out[rec["request"].split()[1]] = rec
        return out
    recs = wait_for(lambda: len(records()) >= 2 and records(), timeout=5,
                    what="both access-log records")
    assert recs[TARGET + "?before"]["generation"] == 1
    assert recs[TARGET + "?after"]["generation"] == 2


@pytest.mark.parametrize("model", MODELS)
def test_fresh_connection_moves_to_the_new_generation(server, model):
    """A connection accepted before a HUP that has not sent a byte yet (a
    browser's preconnect, a pool's warm connection) moves to the new
    generation like an idle one: the old workers leave at once, and its
    first request, sent after they have gone, is answered. It stayed in
    the old worker, which closed it at the shutdown timeout: a request sent
    after that (still well within the header timeout) met an EOF, and the
    old generation lived on for the whole shutdown timeout."""
    srv = server(*server_args(model))
    procs = 1 if model in ("threads", "coro") else 2
    wait_for(lambda: len(worker_pids(srv)) == procs, timeout=5, what="the workers")
    conns = [RawConn.open(("127.0.0.1", srv.port), timeout=10) for _ in range(4)]
    time.sleep(0.3)   # accepted by the old workers
    old = worker_pids(srv)
    hup_at = time.monotonic()
    srv.send_signal(signal.SIGHUP)
    wait_for(lambda: not old & set(descendants(srv.pid)), timeout=8,
             what="old generation gone")
    took = time.monotonic() - hup_at
    for i, c in enumerate(conns):
        c.send(get_req(f"{TARGET}?{i}"))
        r = c.read_response()
        assert r.status == 200 and r.body == BODY
        c.close()
    # it left by handing them over, not at its 5 s shutdown timeout
    assert took < 3, took


@pytest.mark.slow
@pytest.mark.concurrency
@pytest.mark.parametrize("model", MODELS)
def test_proxied_request_in_flight_across_a_hup(server, tmp_path, model):
    """A proxied request upstream while a HUP comes finishes with keep-alive
    (its head went out saying so), and its connection then moves to the
    new generation like an idle one: the next request on it is answered.
    The event-loop models and uring closed it after the answer, without a
    Connection: close, so a client that does not retry lost its next
    request (found by a red-team pass)."""
    backend = Backend(f"unix:{tmp_path}/b.sock")
    try:
        srv = server(*server_args(model, ["--upstream", f"b={backend.address}",
                                          "--proxy", "/api/=b"]))
        c = RawConn.open(("127.0.0.1", srv.port), timeout=10)
        c.send(get_req("/api/slow?s=1"))
        wait_for(lambda: backend.requests, what="the request upstream")
        srv.send_signal(signal.SIGHUP)
        r = c.read_response()
        assert r.status == 200, r
        assert "close" not in r.conn_tokens(), "a reload need not close it"
        c.send(get_req(TARGET + "?after"))
        r = c.read_response()
        assert r.status == 200 and r.body == BODY
        c.close()
    finally:
        backend.close()


@pytest.mark.parametrize("model", ["prefork", "dispatch", "coro", "reuseport", "threads",
                                   "uring"])
def test_reload_changes_the_worker_count_under_load(server, tmp_path, model):
    """HUP applies a changed worker count: 4 -> 2 -> 4 under a
    non-retrying load, no error. With reuseport and threads each listen
    address's socket group shrinks and grows with it."""
    cfg = tmp_path / "herd.conf"
    key = "threads" if model in ("coro", "threads") else "workers"
    cfg.write_text(f"{key} = 4\n")
    srv = server("--config", cfg, "--model", model, "--shutdown-timeout", "5s",
                 "--keepalive-timeout", "30s", "--status-path", "/herd-status")

    def running():
        r = srv.get("/herd-status")
        return sum(1 for s in json.loads(r.body)["slots"] if s["state"] == "running")
    wait_for(lambda: running() == 4, timeout=5, what="4 workers")
    load = Load(("127.0.0.1", srv.port), 100)
    load.start()
    for n in (2, 4):
        cfg.write_text(f"{key} = {n}\n")
        old = worker_pids(srv)
        srv.send_signal(signal.SIGHUP)
        end = time.monotonic() + 8
        while time.monotonic() < end and (old & worker_pids(srv)):
            load.step(time.monotonic())
        assert not old & worker_pids(srv), "the old generation did not leave"
        assert running() == n
    end = time.monotonic() + 0.5
    while time.monotonic() < end:
        load.step(time.monotonic())
    finish(load, srv)
    assert load.ok > 100, (load.ok, load.errors[:5])
    assert not load.errors, errors_told(load, srv)


def _all_answered(conns):
    for c in conns:
        r = c.read_response()
        assert r.status == 200 and r.body == BODY


def _resume_and_close(pids, conns):
    """SIGCONT to the stopped workers still there, and the clients closed."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    for c in conns:
        c.close()


@pytest.mark.parametrize("model", MODELS)
def test_a_stalled_old_generation_ends_at_its_shutdown_timeout(server, model):
    """An old worker that cannot end itself at its shutdown timeout
    (stopped here; looping or swapped out alike) is killed by the master a
    second after it, as a stop kills what is left. It lived on for good:
    with dispatch, the connections waiting in its channel were never
    answered (the master passes them on once it exits), and with uring its
    armed accept took the wakeups of its listen socket from the new worker."""
    srv = server("--model", model, "--workers", "2", "--shutdown-timeout", "1s")
    procs = 1 if model in ("threads", "coro") else 2
    wait_for(lambda: len(worker_pids(srv)) == procs, timeout=5, what="the workers")
    old = worker_pids(srv)
    mark = srv.stderr_mark()
    for pid in old:
        os.kill(pid, signal.SIGSTOP)

    def all_stopped():  # every thread: a running one may still accept
        states = []
        for pid in old:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
        return all(st in ("T", "t") for st in states)
    wait_for(all_stopped, timeout=5, what="the old workers stopped")
    conns = []

    def connect(n):
        for i in range(n):
            c = RawConn.open(("127.0.0.1", srv.port), timeout=10)
            c.send(get_req(f"{TARGET}?{i}"))
            conns.append(c)
    try:
        # accepted into a channel (dispatch) or queued; not where a stopped
        # worker may accept them itself (uring's multishot accept stays
        # armed in its ring; coro's acceptor thread, blocked in accept(2),
        # completes one in the kernel before it stops), and killing it
        # closes what it holds
        accepts_stopped = model in ("uring", "coro")
        if not accepts_stopped:
            connect(4)
            time.sleep(0.3)
        srv.send_signal(signal.SIGHUP)
        wait_for(lambda: not old & set(descendants(srv.pid)), timeout=6,
                 what="the stopped old generation gone")
        if accepts_stopped:
            connect(4)  # the new workers get the listen socket's wakeups
        _all_answered(conns)
    finally:
        _resume_and_close(old, conns)
    want = r"\[warn\] worker \d \(pid \d+, generation 1\) still draining a second past its shutdown timeout: killed"
    told = srv.wait_stderr(want, mark)
    assert re.search(want, told), told
    r = srv.get(TARGET)
    assert r.status == 200 and r.body == BODY


@pytest.mark.parametrize("model", MODELS)
def test_clients_queued_while_a_stalled_old_generation_holds_the_wakeups_are_served(server, model):
    """Clients that connect after a reload while an old worker is stopped
    (so it cannot leave the listen socket's wait queue) and before the
    master kills it are served by the new generation, within a few
    seconds, with no further connection to wake it. With uring the old
    worker's armed accept took their wakeups, and after the kill they
    waited in the backlog until the next client came."""
    srv = server("--model", model, "--workers", "1", "--shutdown-timeout", "2s")
    wait_for(lambda: len(worker_pids(srv)) == 1, timeout=5, what="the worker")
    old = worker_pids(srv)
    for pid in old:
        os.kill(pid, signal.SIGSTOP)
    conns = []
    try:
        srv.send_signal(signal.SIGHUP)
        wait_for(lambda: len(worker_pids(srv) - old) == 1, timeout=5,
                 what="the new generation")
        time.sleep(0.5)  # the new worker's accept armed
        for i in range(4):
            c = RawConn.open(("127.0.0.1", srv.port), timeout=10)
            c.send(get_req(f"{TARGET}?{i}"))
            conns.append(c)
        _all_answered(conns)
    finally:
        _resume_and_close(old, conns)


@pytest.mark.parametrize("model", MODELS)
def test_reloads_do_not_restart_the_idle_and_header_timeouts(server, model):
    """A connection that moves to the new generation at a reload keeps the
    deadline it had: an idle keep-alive connection closes at its keep-alive
    timeout, and one that has sent nothing at its header timeout, however
    often reloads come. Each move started the timeout again, so reloads
    more often than it (a config pushed every few seconds) kept idle and
    silent connections open for good, each holding a slot."""
    srv = server("--model", model, "--workers", "1", "--keepalive-timeout", "2s",
                 "--header-timeout", "2s", "--shutdown-timeout", "5s")
    idle = srv.connect(timeout=10)
    idle.send(get_req(TARGET))
    assert idle.read_response().status == 200
    silent = srv.connect(timeout=10)
    t0 = time.monotonic()
    try:
        for _ in range(9):  # a reload every 0.5 s for 4.5 s
            time.sleep(0.5)
            srv.send_signal(signal.SIGHUP)
        for name, c in (("idle", idle), ("silent", silent)):
            closed, _, _ = c.closed_within(max(0.1, t0 + 3.5 - time.monotonic()))
            assert closed, f"the {name} connection was still open " \
                f"{time.monotonic() - t0:.1f} s on (its timeout is 2 s)"
    finally:
        idle.close()
        silent.close()


@pytest.mark.parametrize("model", MODELS)
def test_new_connections_are_served_while_the_old_generation_drains(server, model):
    """While an old worker drains (a half-sent request keeps it alive), new
    connections are answered at once by the new generation. A draining
    worker that only closed its copy of a shared listen socket stayed in the
    socket's wait queue as an exclusive waiter: it took the wakeups and
    ignored them, and a client that waits timed out."""
    srv = server("--model", model, "--workers", "1", "--threads", "1",
                 "--shutdown-timeout", "8s", "--header-timeout", "6s")
    procs = 1
    wait_for(lambda: len(worker_pids(srv)) == procs, timeout=5, what="the worker")
    old = worker_pids(srv)
    slow = RawConn.open(("127.0.0.1", srv.port), timeout=10)
    slow.send(b"GET /small.txt HTTP/1.1\r\nHost: t\r\n")   # no blank line yet
    time.sleep(0.2)
    srv.send_signal(signal.SIGHUP)
    wait_for(lambda: len(worker_pids(srv) - old) == procs, timeout=5,
             what="the new generation")
    time.sleep(0.3)   # the new worker waits in its loop, the old one drains
    assert old & worker_pids(srv), "the old worker should still be draining"
    for i in range(10):
        with RawConn.open(("127.0.0.1", srv.port), timeout=2) as c:
            c.send(get_req(f"{TARGET}?{i}"))
            r = c.read_response()
        assert r.status == 200 and r.body == BODY
        time.sleep(0.02)
    # the half-sent request still gets its answer
    slow.send(b"\r\n")
    r = slow.read_response()
    assert r.status == 200 and r.body == BODY
    slow.close()


@pytest.mark.slow
@pytest.mark.concurrency
@pytest.mark.skipif(not shutil.which("wrk"), reason="wrk is not installed")
@pytest.mark.parametrize("model", MODELS)
def test_wrk_counts_no_error_across_hups(server, model):
    """wrk, which never retries and counts a keep-alive connection closed
    under a sent request as a read error: 3 HUPs in a 4 s run at 50
    connections, no socket error and no non-2xx."""
    srv = server(*server_args(model))
    wrk = subprocess.Popen(["wrk", "-t1", "-c50", "-d4s", srv.url(TARGET)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for _ in range(3):
            time.sleep(1)
            srv.send_signal(signal.SIGHUP)
        out, _ = wrk.communicate(timeout=30)
    finally:
        if wrk.poll() is None:
            wrk.kill()
            wrk.wait()
    assert wrk.returncode == 0, out
    m = re.search(r"(\d+) requests in", out)
    assert m and int(m.group(1)) > 50, out
    assert "Socket errors" not in out and "Non-2xx" not in out, out
