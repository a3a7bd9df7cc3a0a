"""Master and workers (issue 3): the process tree, who carries the traffic,
respawn of a killed worker, workers dying with the master."""

import hashlib
import json
import os
import signal
import socket
import threading
import time

import pytest

from conftest import HERD_ARGS, HERD_BIN, comm, descendants
from herdtest import build_request, check_common, get_req, wait_for

pytestmark = pytest.mark.skipif(
    "--model" in HERD_ARGS, reason="drives the master/worker model itself")

STATUS = "/herd-status"


# ------------------------------------------------------------ helpers


def proc_state(pid):
    """One-letter state from /proc/PID/stat, None when the pid is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2]


def gone(pid):
    return proc_state(pid) in (None, "Z", "X")


def kids_by_comm(pid):
    """{comm: [pids]} of the live descendants of pid."""
    out = {}
    for k in descendants(pid):
        if not gone(k):
            out.setdefault(comm(k), []).append(k)
    return out


def wait_tree(pid, want, timeout=5):
    """Wait until the live children's comms are exactly `want` (a sorted list)."""
    def ok():
        names = sorted(c for c, ps in kids_by_comm(pid).items() for _ in ps)
        return names if names == want else None
    try:
        return wait_for(ok, timeout=timeout, interval=0.05, what=f"children {want}")
    except AssertionError:
        raise AssertionError(f"children of {pid}: {kids_by_comm(pid)}, want {want}")


def status_json(srv):
    r = srv.get(STATUS)
    assert r.status == 200, r
    return json.loads(r.body)


def accept_deaths(srv, pids, timeout=3):
    """Wait for the master's error line about each intended death (the pid is
    named in it), then tell the fixture's crash check (conftest's
    Server.crash_lines / crash_seen) that those lines were expected. Any other
    crash line stays reported."""
    def logged():
        text = srv.stderr_text()
        return all(f"pid {p}" in text for p in pids)
    wait_for(logged, timeout=timeout, what=f"error lines about pids {pids}")
    if hasattr(srv, "crash_lines") and hasattr(srv, "stderr_mark"):
        mark = srv.stderr_mark()
        lines = srv.crash_lines(getattr(srv, "crash_seen", 0))
        other = [l for l in lines if not any(f"pid {p}" in l for p in pids)]
        assert not other, "unexpected crash lines:\n" + "\n".join(other)
        srv.crash_seen = mark


def socket_inodes(pid):
    """Inodes of the sockets pid holds open."""
    out = set()
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return out
    for fd in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(int(target[8:-1]))
    return out


def established_server_sockets(port, client_ports):
    """Inodes of the server ends of our connections (from /proc/net/tcp)."""
    found = {}
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            parts = line.split()
            local, remote, st, inode = parts[1], parts[2], parts[3], int(parts[9])
            lport = int(local.split(":")[1], 16)
            rport = int(remote.split(":")[1], 16)
            if st == "01" and lport == port and rport in client_ports:
                found[rport] = inode
    return found


# ------------------------------------------------------------ process tree

def test_two_workers_and_no_logger(server):
    srv = server("--workers", "2", "--status-path", STATUS)
    assert comm(srv.pid) == os.path.basename(HERD_BIN)[:15], comm(srv.pid)
    wait_tree(srv.pid, ["herd-w0", "herd-w1"])
    st = status_json(srv)
    assert st["master_pid"] == srv.pid
    assert st["workers"] == 2
    assert st["logger_pid"] == 0
    assert {s["pid"] for s in st["slots"]} == set(descendants(srv.pid))


def test_two_workers_and_a_logger(server, tmp_path):
    log = tmp_path / "access.log"
    srv = server("--workers", "2", "--access-log", log, "--status-path", STATUS)
    wait_tree(srv.pid, ["herd-logger", "herd-w0", "herd-w1"])
    st = status_json(srv)
    logger = kids_by_comm(srv.pid)["herd-logger"][0]
    assert st["logger_pid"] == logger
    # every child is a direct child of the master (workers never fork)
    for k in descendants(srv.pid):
        with open(f"/proc/{k}/stat") as f:
            stat = f.read()
        assert int(stat[stat.rfind(")") + 2:].split()[1]) == srv.pid, stat


def test_workers_count_honoured(server):
    srv = server("--workers", "3")
    wait_tree(srv.pid, ["herd-w0", "herd-w1", "herd-w2"])
    assert srv.get("/small.txt").status == 200


def test_model_single_is_one_process(server, site):
    srv = server("--model", "single")
    r = srv.get("/small.txt")
    assert r.status == 200 and r.body == site.files["small.txt"]
    time.sleep(0.2)
    assert descendants(srv.pid) == [], kids_by_comm(srv.pid)


def test_master_carries_no_traffic(server, site):
    srv = server("--workers", "2", "--status-path", STATUS)
    wait_tree(srv.pid, ["herd-w0", "herd-w1"])
    workers = descendants(srv.pid)
    conns = [srv.connect() for _ in range(8)]
    try:
        for c in conns:
            c.send(get_req("/small.txt"))
            r = c.read_response()
            assert r.status == 200 and r.body == site.files["small.txt"]
        client_ports = {c.sock.getsockname()[1] for c in conns}
        server_ends = established_server_sockets(srv.port, client_ports)
        assert len(server_ends) == len(conns), \
            f"found {len(server_ends)} of {len(conns)} server-side sockets"
        master_socks = socket_inodes(srv.pid)
        worker_socks = set()
        for w in workers:
            worker_socks |= socket_inodes(w)
        in_master = [p for p, ino in server_ends.items() if ino in master_socks]
        assert not in_master, f"the master holds client connections {in_master}"
        missing = [p for p, ino in server_ends.items() if ino not in worker_socks]
        assert not missing, f"connections held by no worker: {missing}"
    finally:
        for c in conns:
            c.close()
    st = status_json(srv)
    assert sum(s["requests"] for s in st["slots"]) == st["requests"] >= 8


# ------------------------------------------------------------ part-1 basics

@pytest.mark.parametrize("workers", ["1", "2"])
def test_basics_with_workers(server, site, workers):
    srv = server("--workers", workers)
    r = srv.get("/small.txt")
    assert r.status == 200 and r.body == site.files["small.txt"]
    check_common(r)
    assert srv.get("/missing.txt").status == 404
    r = srv.request(build_request("HEAD", "/index.html"), "HEAD")
    assert r.status == 200 and r.body == b""
    assert int(r.get("content-length")) == len(site.files["index.html"])

    names = ["index.html", "style.css", "pixel.png", "small.txt", "sub/page.txt",
             "empty.txt", "mime/a.json", "sub/index.html", "mime/a.js", "with space.txt"]
    with srv.connect() as c:
        c.send(b"".join(get_req("/" + n.replace(" ", "%20")) for n in names))
        for n in names:
            r = c.read_response()
            assert r.status == 200, (n, r)
            assert r.body == site.files[n], n
        assert c.nothing_within(0.2), "extra bytes after 10 pipelined responses"
        # the connection stays usable
        c.send(get_req("/small.txt"))
        assert c.read_response().body == site.files["small.txt"]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_big_file_with_workers(server, site, workers):
    srv = server("--workers", workers)
    h = hashlib.sha256()
    with srv.connect() as c:
        c.send(get_req("/big.bin"))
        r = c.read_response(sink=h.update)
    assert r.status == 200
    assert h.hexdigest() == site.big_sha


# ------------------------------------------------------------ worker death

class Load:
    """One client thread: sequential GETs on new connections, light load."""

    def __init__(self, srv, body, pause=0.01):
        self.srv, self.body, self.pause = srv, body, pause
        self.results = []            # (t_start, ok, detail)
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.is_set():
            t0 = time.monotonic()
            try:
                r = self.srv.request(get_req("/small.txt", headers=[("Connection", "close")]),
                                     timeout=5)
                ok = r.status == 200 and r.body == self.body
                detail = r.status
            except Exception as e:   # noqa: BLE001 - any failure counts
                ok, detail = False, repr(e)
            self.results.append((t0, ok, detail))
            time.sleep(self.pause)

    def __enter__(self):
        self.t.start()
        return self

    def __exit__(self, *a):
        self.stop.set()
        self.t.join(10)


def test_killed_worker_is_respawned(server, site):
    srv = server("--workers", "2", "--status-path", STATUS)
    wait_tree(srv.pid, ["herd-w0", "herd-w1"])
    st = status_json(srv)
    victim = next(s for s in st["slots"] if s["worker"] == 0)["pid"]
    other = next(s for s in st["slots"] if s["worker"] == 1)["pid"]
    with Load(srv, site.files["small.txt"]) as load:
        time.sleep(1.2)              # not a death at start (that one has a backoff)
        t_kill = time.monotonic()
        os.kill(victim, signal.SIGKILL)

        def respawned():
            st = status_json(srv)
            w0 = [s for s in st["slots"] if s["worker"] == 0 and s["state"] == "running"]
            if len(w0) == 1 and w0[0]["pid"] != victim and not gone(w0[0]["pid"]):
                return st, w0[0]["pid"]
            return None
        st, new_pid = wait_for(respawned, timeout=5, interval=0.02,
                               what="worker 0 respawned in the status slots")
        t_back = time.monotonic()
        accept_deaths(srv, [victim])
        assert t_back - t_kill < 2.0, f"worker 0 back only after {t_back - t_kill:.2f}s"
        wait_for(lambda: comm(new_pid) == "herd-w0", timeout=3, what="the new worker's name")
        assert st["worker_restarts"] == 1, st
        assert st["workers"] == 2, st
        assert any(s["pid"] == other for s in st["slots"]), "worker 1 must be untouched"
        time.sleep(1.0)
    wait_for(lambda: gone(victim), timeout=3, what="the killed worker reaped")
    after = [r for r in load.results if r[0] > t_back]
    assert len(after) >= 10, f"too little load after the respawn: {len(after)}"
    bad = [r for r in after if not r[1]]
    assert not bad, f"{len(bad)} of {len(after)} requests failed after the respawn: {bad[:5]}"
    for _ in range(40):
        r = srv.get("/small.txt")
        assert r.status == 200 and r.body == site.files["small.txt"]
    wait_tree(srv.pid, ["herd-w0", "herd-w1"])   # the new worker names itself after its fork
    # the death is in the error log, with the pid and how it died
    err = srv.stderr_text()
    lines = [l for l in err.splitlines() if str(victim) in l and "worker" in l]
    assert lines, f"no error line about the death of worker pid {victim}:\n{err}"
    assert any("signal 9" in l or "SIGKILL" in l or "killed" in l for l in lines), lines


def test_workers_die_with_the_master(server, tmp_path):
    srv = server("--workers", "2", "--access-log", tmp_path / "a.log")
    wait_tree(srv.pid, ["herd-logger", "herd-w0", "herd-w1"])
    kids = descendants(srv.pid)
    assert len(kids) == 3
    port = srv.port
    try:
        os.kill(srv.pid, signal.SIGKILL)
        assert srv.wait(5) == -signal.SIGKILL
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not all(gone(k) for k in kids):
            time.sleep(0.05)
        left = {k: (comm(k), proc_state(k)) for k in kids if not gone(k)}
        assert not left, f"children still alive 5s after the master was killed: {left}"
        # nobody holds the listen socket any more
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
    finally:
        for k in kids:
            if not gone(k) and (comm(k) or "").startswith("herd"):
                try:
                    os.kill(k, signal.SIGKILL)
                except ProcessLookupError:
                    pass


# ------------------------------------------------------------ pid file

def test_pid_file_holds_master_pid_and_is_removed(server, tmp_path):
    pf = tmp_path / "herd.pid"
    srv = server("--workers", "2", "--pid-file", pf)
    wait_for(lambda: pf.exists() and pf.read_text().strip(), timeout=5, what="the pid file")
    assert int(pf.read_text().strip()) == srv.pid
    wait_tree(srv.pid, ["herd-w0", "herd-w1"])
    kids = descendants(srv.pid)
    assert srv.stop() == 0
    assert not pf.exists(), "the pid file must be removed at exit"
    assert all(gone(k) for k in kids)
