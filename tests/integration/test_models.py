"""Behaviour specific to the concurrency models (issue: models).

Every model serves the same HTTP (the whole suite runs per model through
HERD_ARGS='--model X' in `make test`); these tests check what differs:
the accept loop under a burst with a tiny backlog, dispatch surviving a
worker that stops reading its channel, and prefork's thundering herd.
"""

import json
import os
import re
import select
import selectors
import threading
import signal
import socket
import time
import urllib.request

import pytest

from conftest import HERD_ARGS, descendants
from herdtest import get_req, wait_for

# These tests pick the model themselves.
pytestmark = pytest.mark.skipif("--model" in HERD_ARGS, reason="sets --model itself")

MODELS = ["reuseport", "prefork", "dispatch", "threads", "coro", "iterative", "single", "uring"]
# Small enough that a burst overflows it many times over (so an accept loop
# that stops before EAGAIN strands connections), large enough that TCP's
# synchronized SYN retransmissions (1, 3, 7, 15, 31 s) get everyone in
# within the deadline on a loaded 2-core machine; 16 proved flaky there.
# 128, not 64: a fresh-root run at 64 left 1 of 2000 unanswered after 120 s
# (a connection dropped six times outlives TCP's SYN retries).
BURST_BACKLOG = os.environ.get("HERD_BURST_BACKLOG", "128")
REQ = b"GET /index.html HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"


def status(srv, path="/herd-status"):
    with urllib.request.urlopen(f"http://127.0.0.1:{srv.port}{path}", timeout=10) as r:
        return json.loads(r.read())


def burst(port, n, deadline_s):
    """Opens n connections at once (non-blocking), sends a request on each
    as soon as it connects, and returns how many got a complete 200."""
    sel = selectors.DefaultSelector()
    socks = {}
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        socks[s] = {"sent": False, "data": b""}
        sel.register(s, selectors.EVENT_WRITE)
    ok = 0
    end = time.monotonic() + deadline_s
    while socks and time.monotonic() < end:
        for key, ev in sel.select(timeout=0.5):
            s = key.fileobj
            st = socks[s]
            if not st["sent"]:
                try:
                    s.send(REQ)
                except OSError:
                    sel.unregister(s); s.close(); del socks[s]
                    continue
                st["sent"] = True
                sel.modify(s, selectors.EVENT_READ)
                continue
            try:
                d = s.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                d = b""
            if d:
                st["data"] += d
                continue
            if st["data"].startswith(b"HTTP/1.1 200"):
                ok += 1
            sel.unregister(s); s.close(); del socks[s]
    for s in socks:
        s.close()
    return ok


@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS)
def test_burst_with_small_backlog_all_answered(server, model):
    """2000 connections opened at once against a small backlog: connections
    the kernel could not queue are retried by TCP (SYN retransmit), and an
    accept loop that stops before EAGAIN would leave some stuck forever."""
    srv = server("--model", model, "--backlog", BURST_BACKLOG, "--workers", "2")
    n = 2000
    # Connections whose handshake the full queue dropped come back on TCP's
    # backoff, so under load the last ones take tens of seconds; an accept
    # loop that stops early leaves them stuck for good instead.
    ok = burst(srv.port, n, deadline_s=120)
    assert ok == n, f"{model}: {ok} of {n} answered"
    assert srv.alive()


def _answered(s):
    """Whether the server's answer on s, read to its close, is a 200."""
    data = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        data += d
    return data.startswith(b"HTTP/1.1 200")


def _answered_keepalive(s):
    """Whether the server's answer on s (framed by Content-Length, the
    connection left open) is a 200."""
    data = b""
    while b"\r\n\r\n" not in data:
        d = s.recv(65536)
        if not d:
            return False
        data += d
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head).group(1))
    while len(body) < length:
        d = s.recv(65536)
        if not d:
            return False
        body += d
    return head.startswith(b"HTTP/1.1 200")


def _clients(port, n, data, pause=0.0):
    """n connections that each sent data (pause seconds after each)."""
    conns = []
    for _ in range(n):
        c = socket.create_connection(("127.0.0.1", port), timeout=10)
        c.sendall(data)
        conns.append(c)
        time.sleep(pause)
    return conns


def _answered_within(conns, seconds, read=_answered):
    """How many of conns get a 200 (by read) within seconds in all."""
    deadline = time.monotonic() + seconds
    answered = 0
    for c in conns:
        c.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            answered += read(c)
        except socket.timeout:
            pass
    return answered


def _get(port, timeout):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(REQ)
        return _answered(s)


def _dispatch_with_worker_0_stopped(server, policy):
    """A two-worker dispatch server whose first worker is stopped (SIGSTOP);
    its worker pids."""
    srv = server("--model", "dispatch", "--dispatch", policy, "--workers", "2",
                 "--status-path", "/herd-status")
    pids = [s["pid"] for s in status(srv)["slots"]]
    assert len(pids) == 2
    os.kill(pids[0], signal.SIGSTOP)

    def stopped():  # until then it may still take a connection
        with open(f"/proc/{pids[0]}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("T", "t")
    wait_for(stopped, timeout=5, what="worker 0 stopped")
    return srv, pids


def test_dispatch_does_not_pass_connections_between_two_stopped_workers(server):
    """Both dispatch workers stopped: what waits in one's channel is taken
    back once (to the other, not yet found stalled) and then stays, where
    it waited anyway, until a worker runs again. A worker found stalled was
    passed over for a second only, so the two passed the same connections
    back and forth once a second, a notice each time. Resumed, the workers
    answer every one of them."""
    srv, pids = _dispatch_with_worker_0_stopped(server, "rr")
    os.kill(pids[1], signal.SIGSTOP)
    mark = srv.stderr_mark()
    try:
        conns = _clients(srv.port, 4, b"GET /index.html HTTP/1.1\r\nHost: t\r\n\r\n")
        time.sleep(4.5)
        since = srv.wait_stderr(r"(?!)", mark, timeout=0)  # all from mark on
        moves = re.findall(r"dispatch: the worker in slot \d took no connection", since)
        assert len(moves) <= 2, f"{len(moves)} moves in 4.5 s:\n" + "\n".join(moves)
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    answered = _answered_within(conns, 8, _answered_keepalive)
    for c in conns:
        c.close()
    assert answered == 4, f"{answered} of 4 answered once the workers ran again"


@pytest.mark.parametrize("policy", ["rr", "least"])
def test_dispatch_survives_a_stopped_worker(server, policy):
    """SIGSTOP one dispatch worker: the master must not block on its full
    channel and must route new connections to the others. The few passed to
    the stopped worker before the master noticed wait for it (they are not
    lost): they complete once it runs again."""
    srv, pids = _dispatch_with_worker_0_stopped(server, policy)
    results = []
    lock = threading.Lock()
    resumed = threading.Event()

    def client():
        for _ in range(30):
            t0 = time.monotonic()
            ok = _get(srv.port, timeout=30)
            with lock:
                results.append((ok, resumed.is_set(), time.monotonic() - t0))

    try:
        threads = [threading.Thread(target=client) for _ in range(20)]
        for t in threads:
            t.start()
        time.sleep(3)
        with lock:
            done_while_stopped = len(results)
    finally:
        resumed.set()
        os.kill(pids[0], signal.SIGCONT)
    for t in threads:
        t.join(60)
    assert len(results) == 600 and all(ok for ok, _, _ in results)
    # While the worker was stopped, the server kept serving through the other.
    assert done_while_stopped >= 150, done_while_stopped
    stuck = sum(1 for ok, after, took in results if took > 2.5)
    assert stuck <= 20, f"{stuck} requests waited for the stopped worker"


@pytest.mark.parametrize("policy", ["rr", "least"])
def test_dispatch_passes_on_what_a_dead_worker_never_took(server, policy):
    """Connections passed to a worker that dies before it takes them from
    its channel go to another worker: they were lost (closed with the
    channel: no answer for a client that does not retry). Worker 0 is
    stopped so the first connections wait in its channel, then killed."""
    srv, pids = _dispatch_with_worker_0_stopped(server, policy)
    conns = []
    try:
        for _ in range(6):
            c = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
            c.sendall(REQ)
            conns.append(c)
        # the running worker answers its share at once; the rest wait in
        # the stopped worker's channel (rr and least both send it the first)
        # until it has taken nothing for a second (then they are passed on)
        time.sleep(0.3)
        waiting = [c for c in conns if not select.select([c], [], [], 0)[0]]
        assert waiting, "no connection waits for the stopped worker"
    finally:
        os.kill(pids[0], signal.SIGKILL)
    answered = 0
    for c in conns:
        with c:
            answered += _answered(c)
    assert answered == 6, f"{answered} of 6 answered"
    assert srv.alive()


@pytest.mark.parametrize("policy", ["rr", "least"])
def test_dispatch_passes_on_what_a_stalled_worker_does_not_take(server, policy):
    """Connections that wait in the channel of a worker that takes nothing
    (stopped here; swapped out, looping or at --max-connections alike) are
    taken back after a second and passed to another worker: they waited
    with no timeout of any kind until the worker ran again, a hang for a
    client that does not retry. The worker stays stopped throughout."""
    srv, pids = _dispatch_with_worker_0_stopped(server, policy)
    mark = srv.stderr_mark()
    try:
        # keep-alive: the running worker's connections stay open, so least
        # too sends the stopped one some (its frozen count looks lighter)
        conns = _clients(srv.port, 6, b"GET /index.html HTTP/1.1\r\nHost: t\r\n\r\n")
        answered = _answered_within(conns, 8, _answered_keepalive)
        for c in conns:
            c.close()
        assert answered == 6, f"{answered} of 6 answered while worker 0 is stopped"
        want = (r"dispatch: the worker in slot 0 took no connection for \d+ ms "
                r"\(stalled\): [1-6] waiting in its channel passed on, 0 closed")
        told = srv.wait_stderr(want, mark)
        assert re.search(want, told), told
    finally:
        os.kill(pids[0], signal.SIGCONT)
    # running again, it gets its share: every request is answered
    assert all(_get(srv.port, timeout=10) for _ in range(10))
    assert srv.alive()


def test_dispatch_passes_on_what_a_stalled_worker_holds_at_a_reload(server):
    """A reload drops the channel of a stopped worker with connections still
    waiting in it: they are taken back after a second as before the reload,
    not left there until the worker exits (at its shutdown timeout, 20 s
    here, a client that does not retry timed out first)."""
    srv = server("--model", "dispatch", "--dispatch", "rr", "--workers", "2",
                 "--status-path", "/herd-status", "--shutdown-timeout", "20s")
    pids = [s["pid"] for s in status(srv)["slots"]]
    mark = srv.stderr_mark()
    os.kill(pids[0], signal.SIGSTOP)
    conns = []
    try:
        conns = _clients(srv.port, 6, REQ)
        time.sleep(0.3)   # dispatched: some wait in worker 0's channel
        srv.send_signal(signal.SIGHUP)   # within the second: nothing moved yet
        answered = _answered_within(conns, 6)
        assert answered == 6, f"{answered} of 6 answered within 6 s of the reload"
        want = r"dispatch: the worker in slot 0 took no connection for \d+ ms \(stalled\)"
        told = srv.wait_stderr(want, mark)
        assert re.search(want, told), told
    finally:
        os.kill(pids[0], signal.SIGCONT)
        for c in conns:
            c.close()
    assert all(_get(srv.port, timeout=10) for _ in range(4))
    assert srv.alive()


def test_dispatch_sends_nothing_to_wait_for_a_full_worker(server):
    """A worker at --max-connections stops taking from its channel; a
    connection sent there waited for one of its connections to end (a slow
    client held it for the whole header timeout). The master now sends new
    connections to a worker with room, and what waits in a full worker's
    channel is passed on after a second."""
    srv = server("--model", "dispatch", "--dispatch", "rr", "--workers", "2",
                 "--max-connections", "1", "--header-timeout", "60")
    # two clients that send half a head fill both workers (each taken from
    # its channel before the next goes)
    busy = _clients(srv.port, 2, b"GET /index.html HTTP/1.1\r\nHost: t\r\n", pause=0.3)
    try:
        # one leaves: its worker has room again, the other is still full
        busy.pop(0).close()
        time.sleep(0.3)
        for i in range(4):
            t0 = time.monotonic()
            assert _get(srv.port, timeout=8), f"request {i} not answered"
            took = time.monotonic() - t0
            assert took < 3, f"request {i} took {took:.1f} s"
    finally:
        for c in busy:
            c.close()
    assert srv.alive()


def test_dispatch_passes_on_what_waits_for_a_full_worker(server):
    """Every worker at --max-connections: a new connection waits in a
    channel (rr sends it to worker 0). When worker 1 gets room, it is taken
    back from worker 0's channel and passed there within about a second;
    it waited until worker 0's slow client timed out."""
    srv = server("--model", "dispatch", "--dispatch", "rr", "--workers", "2",
                 "--max-connections", "1", "--header-timeout", "60")
    mark = srv.stderr_mark()
    # worker 0, then worker 1, each taken from its channel before the next
    busy = _clients(srv.port, 2, b"GET /index.html HTTP/1.1\r\nHost: t\r\n", pause=0.3)
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as waiting:
            waiting.sendall(REQ)
            time.sleep(0.3)
            assert not select.select([waiting], [], [], 0)[0], "answered by a full worker"
            busy.pop(1).close()  # worker 1's client leaves
            t0 = time.monotonic()
            assert _answered(waiting)
            assert time.monotonic() - t0 < 4
        want = r"\(at --max-connections\): 1 waiting in its channel passed on, 0 closed"
        told = srv.wait_stderr(want, mark)
        assert re.search(want, told), told
    finally:
        for c in busy:
            c.close()
    assert srv.alive()


EPOLLEXCLUSIVE = 1 << 28
EPOLLIN = 0x1
EPOLLET = 1 << 31


def _listener_epoll_masks(pid):
    """The epoll event masks a worker registered for its listen socket:
    edge-triggered EPOLLIN without EPOLLOUT (client sockets always ask for
    EPOLLOUT too; the signalfd is level-triggered)."""
    masks = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:[eventpoll]":
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                for line in f:
                    if line.startswith("tfd:"):
                        mask = int(line.split()[3], 16)
                        if mask & EPOLLIN and mask & EPOLLET and not mask & 0x4:
                            masks.append(mask)
        except OSError:
            continue
    return masks


def _wakeups(model_args, server):
    """Serves 300 spaced-out connections with 4 prefork workers; returns the
    listen-socket epoll masks of the workers, their empty accept wakeups
    (status page) and their voluntary context switches."""
    srv = server("--model", "prefork", "--workers", "4", "--status-path", "/herd-status",
                 *model_args)
    pids = [s["pid"] for s in status(srv)["slots"]]
    deadline = time.monotonic() + 5  # workers register the socket as they start
    while True:
        masks = [m for pid in pids for m in _listener_epoll_masks(pid)]
        if len(masks) >= len(pids) or time.monotonic() > deadline:
            break
        time.sleep(0.05)

    def switches():
        total = 0
        for pid in pids:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches"):
                        total += int(line.split()[1])
        return total

    before = switches()
    for _ in range(300):
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
            s.sendall(REQ)
            while s.recv(65536):
                pass
        time.sleep(0.002)  # let every worker go idle between connections
    return masks, status(srv)["empty_accept_wakeups"], switches() - before


@pytest.mark.slow
def test_prefork_exclusive_wakes_one_worker(server):
    """With EPOLLEXCLUSIVE a connection wakes one worker; with --accept-herd
    every idle worker wakes, and a loser that gets as far as accept() finds
    an empty queue. The registration itself is checked in each worker's
    epoll fdinfo; the wakeups are a race the kernel mostly hides (a woken
    worker whose epoll_wait finds the event gone sleeps again): for 300
    connections, exclusive gave 0 empty wakeups and herd between 4 and 84
    across runs (context switches ~400 vs ~1,500, but once 411 vs 374), so
    only the direction is asserted."""
    ex_masks, ex_empty, ex_cs = _wakeups([], server)
    herd_masks, herd_empty, herd_cs = _wakeups(["--accept-herd"], server)
    # Every registration seen has the right flag. Some environments do not
    # show them (a fresh chroot saw none), so none seen is not a failure.
    assert all(m & EPOLLEXCLUSIVE for m in ex_masks), ex_masks
    assert not any(m & EPOLLEXCLUSIVE for m in herd_masks), herd_masks
    assert ex_empty <= 5, f"exclusive: {ex_empty} empty wakeups"
    assert herd_empty >= ex_empty, f"herd {herd_empty} < exclusive {ex_empty}"
    print(f"300 connections: empty wakeups herd {herd_empty}, exclusive {ex_empty}; "
          f"context switches herd {herd_cs}, exclusive {ex_cs}")


def test_prefork_worker_at_max_connections_leaves_the_queue_to_the_others(server):
    """A prefork worker at --max-connections stayed an exclusive waiter on
    the shared socket: woken first for each new connection (it waits for
    timers), it accepted nothing, and the other worker slept with room
    while clients waited in the backlog for the header timeout to free a
    slot (4 silent connections: 3 of 10 requests answered within 2 s;
    red-team pass 19)."""
    srv = server("--model", "prefork", "--workers", "2", "--max-connections", "4",
                 "--status-path", "/herd-status")
    wait_for(lambda: len(descendants(srv.pid)) == 2, 10, what="2 workers")
    silent = []
    try:
        for _ in range(4):
            silent.append(socket.create_connection(("127.0.0.1", srv.port), timeout=5))
            time.sleep(0.05)   # each accepted by whichever worker the kernel woke
        time.sleep(0.3)
        ok = 0
        for _ in range(10):
            try:
                with socket.create_connection(("127.0.0.1", srv.port), timeout=2) as s:
                    s.sendall(REQ)
                    ok += s.recv(12) == b"HTTP/1.1 200"
            except OSError:
                pass
        assert ok == 10, f"{ok}/10 answered; slots: " + \
            str([(x["slot"], x["active"]) for x in status(srv)["slots"]])
    finally:
        for s in silent:
            s.close()


def test_threads_model_has_one_worker_process_with_threads(server):
    srv = server("--model", "threads", "--workers", "2", "--status-path", "/herd-status")
    # The master fills the slots after the fork: a fast worker can answer first.
    st = wait_for(lambda: (lambda s: s if len(s["slots"]) == 2 and all(x["pid"] for x in s["slots"])
                           else None)(status(srv)), 10, what="both thread slots filled")
    pids = {s["pid"] for s in st["slots"]}
    assert len(pids) == 1 and len(st["slots"]) == 2
    pid = pids.pop()
    deadline = time.monotonic() + 5  # the loops start right after the status page answers
    while len(os.listdir(f"/proc/{pid}/task")) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(os.listdir(f"/proc/{pid}/task")) >= 3  # main + 2 loops


def test_threads_worker_whose_loops_cannot_start_exits_and_is_respawned(server, tmp_path):
    """A threads worker whose loops failed to start (here: its docroot gone
    when it was respawned; also out of fds for --threads 128 under a limit
    of 256) kept its main thread waiting for a signal: alive with no loop,
    it served nobody and the master never started another, also once the
    docroot was back (red-team pass 19). It exits now, as a reuseport
    worker does, and the master's respawn serves again."""
    root = tmp_path / "www"
    root.mkdir()
    (root / "index.html").write_text("hi\n")
    srv = server("--model", "threads", "--threads", "2", docroot=root)
    assert srv.get("/index.html").status == 200
    worker = wait_for(lambda: descendants(srv.pid), 10, what="the worker")[0]
    os.rename(root, tmp_path / "away")
    os.kill(worker, signal.SIGKILL)
    wait_for(lambda: "cannot open docroot" in srv.stderr_text(), 5,
             what="a respawned worker that cannot start")
    os.rename(tmp_path / "away", root)

    def serves():
        try:
            with socket.create_connection(("127.0.0.1", srv.port), timeout=1) as s:
                s.sendall(REQ)
                return s.recv(12) == b"HTTP/1.1 200"
        except OSError:
            return False
    wait_for(serves, 8, what="serving again once the docroot is back\n" + srv.stderr_text())
    srv.crash_seen = srv.stderr_mark()   # the deaths above were the point


def test_iterative_serves_one_connection_at_a_time(server):
    """The baseline's weakness, made visible: while one client holds its
    connection open, a second client waits."""
    srv = server("--model", "iterative", "--keepalive-timeout", "2s")
    a = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    a.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
    assert a.recv(65536).startswith(b"HTTP/1.1 200")
    b = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    b.sendall(REQ)
    b.settimeout(1.0)
    with pytest.raises(socket.timeout):
        b.recv(65536)  # stuck behind a's keep-alive connection
    a.close()
    b.settimeout(10)
    assert b.recv(65536).startswith(b"HTTP/1.1 200")
    b.close()


@pytest.mark.parametrize("sig", ["HUP", "TERM"])
def test_iterative_drains_its_queue_at_a_stop(server, sig):
    """A graceful stop (a reload, an upgrade, TERM) answers every
    connection the worker had accepted: before, those still queued behind
    the one being served were closed unread and their clients got a reset
    (red-team). A connection idle at the stop waits at the back, and its
    next request is answered too; every answer after the stop closes."""
    srv = server("--model", "iterative", "--workers", "1", "--shutdown-timeout", "10s")
    worker = wait_for(lambda: descendants(srv.pid), timeout=5, what="the worker")[0]
    os.kill(worker, signal.SIGSTOP)  # so a and b arrive in one accept batch
    try:
        a = srv.connect(timeout=10)
        b = srv.connect(timeout=10)
        a.send(get_req("/index.html"))
        b.send(get_req("/index.html"))
    finally:
        os.kill(worker, signal.SIGCONT)
    try:
        assert a.read_response().status == 200     # a is served; b waits behind it
        time.sleep(0.3)                            # a is idle now: the worker waits on it
        srv.send_signal(getattr(signal, "SIG" + sig))
        r = b.read_response()                      # b is not reset
        assert r.status == 200 and r.get("connection") == "close", r
        b.expect_close(timeout=5)
        a.send(get_req("/index.html"))           # a's next request comes after the stop
        r = a.read_response()
        assert r.status == 200 and r.get("connection") == "close", r
        a.expect_close(timeout=5)
    finally:
        a.close()
        b.close()
    if sig == "TERM":  # the server stops once both are answered
        assert srv.wait(15) == 0


def read_to_eof(sock):
    """Everything the server sends until it closes (a reset ends it too)."""
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk


def test_iterative_header_timeout_counts_from_accept(server):
    """A connection queued behind a slow one has spent its header timeout
    waiting (SPEC: "from its first byte / accept"); it used to get a fresh
    one when its turn came. A queued request that is complete is still
    answered when its turn comes."""
    srv = server("--model", "iterative", "--header-timeout", "2s")
    worker = wait_for(lambda: descendants(srv.pid), timeout=5, what="the worker")[0]
    os.kill(worker, signal.SIGSTOP)  # so the three arrive in one accept batch
    try:
        slow = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        queued = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        ready = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        ready.sendall(REQ)
    finally:
        os.kill(worker, signal.SIGCONT)
    t0 = time.monotonic()
    try:
        assert read_to_eof(slow) == b""  # cut at its header timeout, unanswered
        assert read_to_eof(queued) == b""
        cut = time.monotonic() - t0
        assert read_to_eof(ready).startswith(b"HTTP/1.1 200")
        answered = time.monotonic() - t0
    finally:
        for s in (slow, queued, ready):
            s.close()
    assert cut <= 3.0, f"queued connection cut {cut:.2f}s after accept (--header-timeout 2s)"
    assert answered <= 3.0, f"complete queued request answered after {answered:.2f}s"


def test_iterative_send_timeout_frees_the_worker(server):
    """A client that never reads a big download holds the only worker for
    the send timeout counted from the last byte the kernel took, not for
    that timeout per blocking call (8 s with --send-timeout 2s)."""
    srv = server("--model", "iterative", "--send-timeout", "2s")
    stalled = srv.connect(rcvbuf=4096)
    try:
        stalled.send(get_req("/big.bin"))
        stalled.read_until(b"\r\n\r\n")
        t0 = time.monotonic()
        with srv.connect(timeout=15) as c:
            c.send(get_req("/small.txt"))
            assert c.read_response().status == 200
        elapsed = time.monotonic() - t0
    finally:
        stalled.close()
    assert 1.0 <= elapsed <= 3.0, f"worker freed {elapsed:.2f}s after the stall (--send-timeout 2s)"
