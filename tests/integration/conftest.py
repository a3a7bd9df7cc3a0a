"""Fixtures for the herd integration suite.

The suite starts the real binary (env HERD_BIN, default <repo>/build/herd) on a
temporary docroot, with `--listen 127.0.0.1:0`, and learns the port from the
"listening on" line on stderr. Extra args from env HERD_ARGS (shlex-split) are
appended to every server command line, so CI can run the same suite once per
concurrency model (`HERD_ARGS='--model prefork'`).

With env HERD_ACCESS_LOG=DIR (`make asan-test` sets it), every server the
`server` and `shared` fixtures start also writes an access log into DIR, and
`server` ones take `--max-header-size 64k` (`shared` keeps the default
limits its tests check), so a memory error anywhere in the log path shows up
under ASan. A test's own --access-log, --max-header-size or --config wins.
At teardown such a log must hold only whole, well-formed Combined Log Format
lines of at most 8 KiB.
"""

import hashlib
import itertools
import os
import re
import resource
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zlib
import struct
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from herdtest import OP_TIMEOUT, RawConn, build_request, wait_for  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
HERD_BIN = os.environ.get("HERD_BIN") or str(REPO_ROOT / "build" / "herd")
if not os.path.isabs(HERD_BIN):
    HERD_BIN = str((REPO_ROOT / HERD_BIN).resolve())
HERD_ARGS = shlex.split(os.environ.get("HERD_ARGS", ""))
HERD_ACCESS_LOG = os.environ.get("HERD_ACCESS_LOG")

READY_TIMEOUT = 10.0
STOP_TIMEOUT = 5.0
FIXED_MTIME = 1700000000          # Tue, 14 Nov 2023 22:13:20 GMT
BIG_SIZE = 50 * 1024 * 1024

READY_RE = re.compile(
    r"\[notice\] listening on (?:http://(\[[^\]]*\]|[^/:\s]+):(\d+)/|unix:(\S+))")
# A crash anywhere in the process tree: sanitizer reports, or the master's
# note that a worker/logger died on a signal (the master survives and
# respawns it, so the exit code alone would not show it).
CRASH_RE = re.compile(
    r"ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|"
    r"ThreadSanitizer|WARNING: MemorySanitizer|killed by signal|dumped core|respawning")

# A record of the access log (SPEC-serve.md: at most 8 KiB with its newline;
# client bytes escaped, so printable ASCII only and no raw quote in a field).
LOG_RECORD_MAX = 8192
LOG_LINE_RE = re.compile(
    rb'^\S+ - - \[[^\]]+\] "[^"]*" \d{3} \d+ "[^"]*" "[^"]*"$')
LOG_RAW_BYTE = re.compile(rb"[^\x20-\x7e]")

# Many tests hold hundreds of sockets: use the whole hard limit.
_soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if _soft < _hard:
    resource.setrlimit(resource.RLIMIT_NOFILE, (_hard, _hard))


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes seconds (still run by default)")
    config.addinivalue_line(
        "markers", "concurrency: needs the server to handle several connections at once "
        "(deselect with -m 'not concurrency' for a one-connection-at-a-time model)")


def herd_cmd(*args):
    return [HERD_BIN, *args]


def require_binary():
    if not (os.path.isfile(HERD_BIN) and os.access(HERD_BIN, os.X_OK)):
        pytest.fail(f"herd binary not found or not executable: {HERD_BIN} "
                    f"(run `make build` or set HERD_BIN)", pytrace=False)


def run_herd(args, timeout=OP_TIMEOUT, cwd=None, extra=True):
    """Run herd to completion (CLI tests). HERD_ARGS appended when extra."""
    require_binary()
    cmd = herd_cmd(*args) + (HERD_ARGS if extra else [])
    return subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True,
                          timeout=timeout, cwd=cwd, text=True, errors="replace")


# --------------------------------------------------------------- /proc helpers

def fd_count(pid, sockets_only=False):
    """Number of open fds of one process (entries of /proc/PID/fd);
    sockets_only counts only sockets (ignores an open-file cache)."""
    names = os.listdir(f"/proc/{pid}/fd")
    if not sockets_only:
        return len(names)
    n = 0
    for name in names:
        try:
            if os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:"):
                n += 1
        except OSError:
            pass
    return n


def descendants(pid):
    """PIDs of all descendants of pid (from /proc/*/stat)."""
    parent = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # comm may contain spaces/parens: ppid is the 2nd field after ')'
        fields = stat[stat.rfind(")") + 2:].split()
        parent[int(d)] = int(fields[1])
    out, frontier = [], [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out.extend(kids)
        frontier.extend(kids)
    return out


def comm(pid):
    """The process's name (/proc/PID/comm), "" once it is gone."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def worker_pids(srv):
    """The pids of the server's worker processes (named herd-wN)."""
    return {k for k in descendants(srv.pid) if comm(k).startswith("herd-w")}


def tree_fd_count(pid, sockets_only=False):
    """Open fds of pid and its descendants (workers, logger...)."""
    total = 0
    for p in [pid] + descendants(pid):
        try:
            total += fd_count(p, sockets_only)
        except FileNotFoundError:
            pass
    return total


def tree_fds(pid):
    """(pid, fd, target) of every fd of pid and its descendants, e.g.
    (1234, '7', 'socket:[5678]'); processes and fds that go meanwhile are
    skipped."""
    for p in [pid] + descendants(pid):
        try:
            names = os.listdir(f"/proc/{p}/fd")
        except OSError:
            continue
        for name in names:
            try:
                yield p, name, os.readlink(f"/proc/{p}/fd/{name}")
            except OSError:
                continue


def shim_env(name, **settings):
    """The environment that preloads the test shim tests/tools/<name>.c
    (built as build/<name>.so) into herd, with its settings."""
    shim = REPO_ROOT / "build" / f"{name}.so"
    if not shim.exists():
        pytest.fail(f"{shim} missing: run `make build/{name}.so`", pytrace=False)
    env = {"LD_PRELOAD": str(shim), **{k: str(v) for k, v in settings.items()}}
    if "asan" in HERD_BIN:   # the shim is loaded before ASan's runtime
        env["ASAN_OPTIONS"] = ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"),
                                                      "verify_asan_link_order=0"]))
    return env


def tcp_sockets(tables=("/proc/net/tcp",)):
    """(local port, remote port, fields) of every TCP socket in tables
    (fields: the line split; [3] the state, [4] tx:rx queues, [9] the
    inode)."""
    for table in tables:
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    yield (int(fields[1].rsplit(":", 1)[1], 16),
                           int(fields[2].rsplit(":", 1)[1], 16), fields)
        except FileNotFoundError:
            pass


def fd_targets(pid):
    """Counter of (pid, fd target) over pid and its descendants, e.g.
    (1234, 'socket:[5678]') or (1234, '/srv/www/big.bin')."""
    from collections import Counter
    out = Counter()
    for p, _, t in tree_fds(pid):
        out[(p, re.sub(r"\[\d+\]$", "[]", t) if t.startswith(("socket:", "pipe:"))
             else t)] += 1
    return out


def socket_inode(server_port, client_port):
    """Inode of the server-side TCP socket of one connection (from
    /proc/net/tcp{,6}); 0 or None once the server closed it."""
    for lport, rport, fields in tcp_sockets(("/proc/net/tcp", "/proc/net/tcp6")):
        if lport == server_port and rport == client_port:
            return int(fields[9])
    return None


def tree_holds_socket(pid, inode):
    """True if pid or a descendant has an fd on socket:[inode]."""
    if not inode:
        return False
    target = f"socket:[{inode}]"
    return any(t == target for _, _, t in tree_fds(pid))


# --------------------------------------------------------------- server

_log_seq = itertools.count()


def _has_flag(args, name):
    return any(a == name or a.startswith(name + "=") for a in args)


def env_log_args(args, big_heads):
    """(extra args to put first, log path or None) under HERD_ACCESS_LOG."""
    args = args + HERD_ARGS
    if not HERD_ACCESS_LOG or _has_flag(args, "--config"):
        return [], None
    extra, log = [], None
    if not _has_flag(args, "--access-log"):
        d = Path(HERD_ACCESS_LOG).resolve()
        d.mkdir(parents=True, exist_ok=True)
        log = d / f"access-{os.getpid()}-{next(_log_seq)}.log"
        extra += ["--access-log", str(log)]
    if big_heads and not _has_flag(args, "--max-header-size"):
        extra += ["--max-header-size", "64k"]
    return extra, log


def bad_log_lines(path, killed):
    """Problems of an access log the fixtures asked for: lines that are not
    one whole, well-formed record of at most LOG_RECORD_MAX bytes. A server
    killed hard may have left its last line half-written."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return []                    # no logger (--model single) or no request
    lines = data.split(b"\n")
    if lines[-1] and not killed:
        return [f"access log {path} ends in a partial line: {lines[-1][-200:]!r}"]
    bad = [l for l in lines[:-1] if len(l) + 1 > LOG_RECORD_MAX or not LOG_LINE_RE.match(l)
           or LOG_RAW_BYTE.search(l)]
    return [f"access log {path}: {len(bad)} malformed or oversized lines, e.g. "
            f"({len(bad[0]) + 1} bytes) {bad[0][:300]!r}"] if bad else []


class Server:
    """With cmd, runs that instead (e.g. a launcher that execs herd) and waits
    for len(listen) "listening on" lines; popen adds subprocess.Popen
    arguments (env, pass_fds)."""

    def __init__(self, args, listen, docroot, cwd=None, cmd=None, popen=None, env_log=None):
        self.env_log = env_log       # an access log the fixture asked for: checked at the end
        self.listen = list(listen)
        self.docroot = docroot
        self.cmd = cmd or herd_cmd("serve", *([str(docroot)] if docroot is not None else []),
                                   *sum((["--listen", a] for a in self.listen), []),
                                   *args, *HERD_ARGS)
        self.lines = []
        self.cond = threading.Condition()
        self.stopped = False
        self.killed = False
        self.crash_seen = 0          # stderr lines already reported
        self.ignore_crashes = False  # a test that kills workers on purpose sets this
        self.rc = None
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, cwd=cwd, **(popen or {}))
        self.pid = self.proc.pid
        self.reader = threading.Thread(target=self._read_stderr, daemon=True)
        self.reader.start()
        self.listeners = self._wait_ready()
        tcp = [l for l in self.listeners if l[0] != "unix"]
        self.addr = tcp[0][1] if tcp else self.listeners[0][1]
        self.host, self.port = (tcp[0][1] if tcp else (None, None))

    def _read_stderr(self):
        for raw in iter(self.proc.stderr.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self.cond:
                self.lines.append(line)
                self.cond.notify_all()
        with self.cond:
            self.lines.append(None)      # EOF marker
            self.cond.notify_all()

    def _wait_ready(self):
        deadline = time.monotonic() + READY_TIMEOUT
        want = len(self.listen)
        with self.cond:
            while True:
                found = []
                for line in self.lines:
                    if line is None:
                        continue
                    m = READY_RE.search(line)
                    if m:
                        if m.group(3):
                            found.append(("unix", m.group(3)))
                        else:
                            host = m.group(1).strip("[]")
                            fam = "inet6" if ":" in host else "inet"
                            found.append((fam, (host, int(m.group(2)))))
                if len(found) >= want:
                    return found
                if None in self.lines or self.proc.poll() is not None:
                    self._kill_hard()
                    pytest.fail(f"server exited before ready (rc={self.proc.poll()}); "
                                f"cmd={self.cmd}\nstderr:\n" + self.stderr_text(),
                                pytrace=False)
                left = deadline - time.monotonic()
                if left <= 0:
                    self._kill_hard()
                    pytest.fail(f"server not ready within {READY_TIMEOUT}s; cmd={self.cmd}"
                                f"\nstderr:\n" + self.stderr_text(), pytrace=False)
                self.cond.wait(min(left, 0.5))

    def crash_lines(self, since=0):
        with self.cond:
            lines = [l for l in self.lines[since:] if l is not None]
        if self.ignore_crashes:
            return []
        # a SIGKILL/SIGSTOP comes from outside (a test killing a worker on purpose)
        return [l for l in lines if CRASH_RE.search(l)
                and not re.search(r"signal (9|19)\b|SIGKILL|SIGSTOP", l)]

    def stderr_mark(self):
        with self.cond:
            return len(self.lines)

    def stderr_text(self):
        with self.cond:
            return "\n".join(l for l in self.lines if l is not None)

    def wait_stderr(self, pattern, since=0, timeout=5.0):
        """The server's stderr from line since on, once a line matches the
        regex pattern or timeout seconds passed: a line the server writes
        after an answer may reach the reader thread after that answer."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                text = "\n".join(l for l in self.lines[since:] if l is not None)
                left = deadline - time.monotonic()
                if re.search(pattern, text) or left <= 0:
                    return text
                self.cond.wait(min(left, 0.2))

    # -- clients
    def connect(self, addr=None, **kw):
        return RawConn.open(addr or self.addr, **kw)

    def request(self, data, method="GET", addr=None, **kw):
        with self.connect(addr, **kw) as c:
            c.send(data)
            return c.read_response(method)

    def get(self, target="/", headers=None, method="GET", **kw):
        return self.request(build_request(method, target, headers=headers, **kw), method)

    def url(self, path="/"):
        host = self.host if ":" not in self.host else f"[{self.host}]"
        return f"http://{host}:{self.port}{path}"

    # -- process
    def alive(self):
        return self.proc.poll() is None

    def fd_count(self):
        return fd_count(self.pid)

    def tree_fd_count(self, sockets_only=False):
        return tree_fd_count(self.pid, sockets_only)

    def holds_connection(self, conn):
        """True while the server still has an fd for this client's TCP
        connection (found by 4-tuple in /proc/net/tcp)."""
        inode = socket_inode(self.port, conn.sock.getsockname()[1])
        return tree_holds_socket(self.pid, inode)

    def socket_count(self):
        return tree_fd_count(self.pid, sockets_only=True)

    def send_signal(self, sig):
        os.kill(self.pid, sig)

    def wait(self, timeout):
        """Wait for exit; return rc or None on timeout."""
        try:
            self.rc = self.proc.wait(timeout)
            self.stopped = True
            return self.rc
        except subprocess.TimeoutExpired:
            return None

    def stop(self, sig=signal.SIGTERM, timeout=STOP_TIMEOUT):
        """Signal by PID, wait, SIGKILL if needed. Returns rc."""
        if self.proc.poll() is None:
            os.kill(self.pid, sig)
        rc = self.wait(timeout)
        if rc is None:
            self.killed = True
            self._kill_hard()
            rc = self.proc.poll()
        self.stopped = True
        self.rc = rc
        self.reader.join(5)
        return rc

    def _kill_hard(self):
        kids = descendants(self.pid) if self.proc.poll() is None else []
        for p in [self.pid] + kids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass

    def finish(self):
        """Teardown: the server must still be alive, then exit 0 on TERM."""
        problems = []
        if not self.stopped:
            rc = self.proc.poll()
            if rc is not None:
                problems.append(f"server died during the test (rc={rc})")
                self.stopped = True
                self.reader.join(5)
            else:
                rc = self.stop()
                if self.killed:
                    problems.append(f"server did not exit within {STOP_TIMEOUT}s of "
                                    f"SIGTERM (killed)")
                elif rc != 0:
                    problems.append(f"exit code after SIGTERM was {rc}, expected 0")
        else:
            self.reader.join(5)
        err = self.stderr_text()
        crashes = self.crash_lines(self.crash_seen)
        if crashes:
            problems.append("crash reported on stderr: " + " | ".join(crashes[:5]))
        if self.env_log:
            problems += bad_log_lines(self.env_log, self.killed)
        if problems:
            tail = "\n".join(err.splitlines()[-40:])
            return [f"{'; '.join(problems)}\ncmd: {self.cmd}\nstderr tail:\n{tail}"]
        return []


def finish_all(servers):
    """Stop every server of a fixture by its PID; fail the test with what
    any of them did wrong (crash, bad exit, bad log lines)."""
    problems = []
    for s in servers:
        problems += s.finish()
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


@pytest.fixture
def server(site):
    """Factory: server(*args, docroot=site.root, listen=('127.0.0.1:0',), cwd=None,
    env=None); env: variables added to the server's environment."""
    require_binary()
    started = []

    def start(*args, docroot=site.root, listen=("127.0.0.1:0",), cwd=None, env=None):
        args = [str(a) for a in args]
        extra, log = env_log_args(args, big_heads=True)
        popen = {"env": dict(os.environ, **env)} if env else None
        s = Server(extra + args, listen, docroot, cwd=cwd, env_log=log, popen=popen)
        started.append(s)
        return s

    yield start
    finish_all(started)


def healthy(srv, timeout=5.0):
    """The server is alive and answers a simple GET within timeout."""
    if not srv.alive():
        return False
    try:
        with srv.connect(timeout=timeout) as c:
            c.send(build_request("GET", "/small.txt"))
            return c.read_response().status == 200
    except Exception:
        return False


@pytest.fixture(scope="module")
def _shared_holder(site):
    holder = {"srv": None}
    yield holder
    if holder["srv"] is not None:
        problems = holder["srv"].finish()
        if problems:
            pytest.fail("\n\n".join(problems), pytrace=False)


@pytest.fixture
def shared(_shared_holder, site):
    """A default-config server shared by a module's read-only tests. It is
    health-checked after each test; a test that leaves it dead or unresponsive
    fails, and the next test gets a fresh server (no cascade of timeouts)."""
    require_binary()
    if _shared_holder["srv"] is None:
        extra, log = env_log_args([], big_heads=False)
        _shared_holder["srv"] = Server(extra, ["127.0.0.1:0"], site.root, env_log=log)
    srv = _shared_holder["srv"]
    mark = srv.stderr_mark()
    yield srv
    ok = healthy(srv)
    crashes = srv.crash_lines(mark)
    srv.crash_seen = srv.stderr_mark()
    if crashes:
        # keep it only if it is otherwise fine; the crash is this test's failure
        pytest.fail("server process crashed during this test:\n" + "\n".join(crashes[:10]),
                    pytrace=False)
    if not ok:
        _shared_holder["srv"] = None
        alive = srv.alive()
        problems = srv.finish()
        state = "alive but not answering" if alive else f"dead (rc={srv.proc.returncode})"
        pytest.fail(f"shared server is {state} after this test\n" + "\n".join(problems)
                    + "\nstderr tail:\n" + srv.stderr_text()[-3000:], pytrace=False)


# --------------------------------------------------------------- docroot

def make_png(w=2, h=2):
    def chunk(t, data):
        c = struct.pack(">I", len(data)) + t + data
        return c + struct.pack(">I", zlib.crc32(t + data) & 0xffffffff)
    raw = b"".join(b"\x00" + b"\xff\x00\x00" * w for _ in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


MIME_CASES = {
    "a.html": "text/html; charset=utf-8",
    "a.css": "text/css; charset=utf-8",
    "a.js": "text/javascript; charset=utf-8",
    "a.txt": "text/plain; charset=utf-8",
    "a.json": "application/json",
    "a.png": "image/png",
    "a.jpg": "image/jpeg",
    "a.jpeg": "image/jpeg",
    "a.gif": "image/gif",
    "a.svg": "image/svg+xml",
    "a.ico": "image/x-icon",
    "a.webp": "image/webp",
    "a.woff2": "font/woff2",
    "a.pdf": "application/pdf",
    "a.wasm": "application/wasm",
    "a.mp4": "video/mp4",
    "a.xyz": "application/octet-stream",
    "noextension": "application/octet-stream",
}


class Site:
    pass


@pytest.fixture(scope="session")
def site(tmp_path_factory):
    """The shared docroot. Layout (base = a session tmp dir):
    base/secret.txt            outside the docroot, reachable by '..'
    base/www/                  the DOCROOT
    <other tmp>/target.txt     target of the escaping symlink
    """
    base = tmp_path_factory.mktemp("site")
    outside = tmp_path_factory.mktemp("outside")
    root = base / "www"
    root.mkdir()
    s = Site()
    s.base, s.root, s.outside = base, root, outside
    s.secret = b"TOPSECRET-dotdot-8c1f"
    s.outside_secret = b"TOPSECRET-symlink-77ad"
    (base / "secret.txt").write_bytes(s.secret)
    (outside / "target.txt").write_bytes(s.outside_secret)
    (outside / "dir").mkdir()
    (outside / "dir" / "inner.txt").write_bytes(s.outside_secret)

    files = {
        "index.html": b"<!doctype html><title>herd test</title><p>root index</p>\n",
        "style.css": b"body { color: #123456; }\n",
        "pixel.png": make_png(),
        "small.txt": b"0123456789abcdefghijklmnopqrstuvwxyz",
        "empty.txt": b"",
        "sub/index.html": b"<!doctype html><p>sub index</p>\n",
        "sub/page.txt": b"a page in sub\n",
        "sub/deeper/index.html": b"<p>deeper</p>\n",
        ".hidden": b"hidden dotfile contents\n",
        ".git/config": b"[core]\n\trepositoryformatversion = 0\n",
        "sub/.secretdot": b"nested dotfile\n",
        "with space.txt": b"file with a space in its name\n",
        "caf\u00e9 \u65e5\u672c.txt": b"utf-8 named file\n",
        "%2e%2e": b"literal percent name\n",
    }
    for name, ctype in MIME_CASES.items():
        files["mime/" + name] = f"mime test {name}\n".encode()
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    (root / "empty").mkdir()
    (root / "escape_link").symlink_to(outside / "target.txt")
    (root / "escape_dir_link").symlink_to(outside / "dir")
    (root / "inside_link.txt").symlink_to("small.txt")
    (root / "sub" / "up_link.html").symlink_to("../index.html")

    # 50 MiB of random bytes, hashed while written.
    h = hashlib.sha256()
    with open(root / "big.bin", "wb") as f:
        left = BIG_SIZE
        while left:
            chunk = os.urandom(min(left, 1 << 20))
            h.update(chunk)
            f.write(chunk)
            left -= len(chunk)
    s.big_sha = h.hexdigest()
    s.big_size = BIG_SIZE

    for dirpath, dirnames, filenames in os.walk(root):
        for n in filenames:
            p = os.path.join(dirpath, n)
            if not os.path.islink(p):
                os.utime(p, (FIXED_MTIME, FIXED_MTIME))
    s.files = files
    s.fixed_mtime = FIXED_MTIME
    return s


@pytest.fixture(scope="session")
def big_bytes(site):
    """The 50 MiB file's bytes (for slicing in range tests)."""
    return (site.root / "big.bin").read_bytes()


def ipv6_available():
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.fixture
def short_tmp():
    """A short tmp dir under /tmp (unix socket paths must be < 108 bytes)."""
    d = tempfile.mkdtemp(prefix="herd-", dir="/tmp")
    yield Path(d)
    for p in Path(d).iterdir():
        try:
            p.unlink()
        except OSError:
            pass
    try:
        os.rmdir(d)
    except OSError:
        pass
