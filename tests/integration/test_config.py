"""Config file (issue 3): `name = value` lines, switches alone, # comments;
--check-config validates (FILE: ok / FILE:LINE: reason, exit 2); a file's
listen/workers/docroot are honoured; flags override the file."""

import os
import re
import shutil
import signal
import subprocess
import threading
import time

import pytest

from conftest import HERD_ARGS, HERD_BIN, comm, descendants, herd_cmd, require_binary, run_herd
from herdtest import RawConn, get_req, wait_for

pytestmark = pytest.mark.skipif(
    "--model" in HERD_ARGS, reason="drives the master/worker model itself")

READY = re.compile(r"listening on (?:http://127\.0\.0\.1:(\d+)/|unix:(\S+))")


# ------------------------------------------------------------ helpers


def worker_comms(pid):
    return sorted(c for c in (comm(k) for k in descendants(pid)) if c and c.startswith("herd-w"))


class Proc:
    """herd serve started with exactly the given args (no --listen added):
    waits for the ready line, stops by PID with TERM (KILL as a last resort)."""

    def __init__(self, args):
        require_binary()
        self.cmd = herd_cmd("serve", *[str(a) for a in args])
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.pid = self.proc.pid
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.ports = []
        self.unix = []

    def _read(self):
        for raw in iter(self.proc.stderr.readline, b""):
            self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def text(self):
        return "\n".join(self.lines)

    def wait_ready(self, n=1, timeout=10):
        def ready():
            if self.proc.poll() is not None:
                raise AssertionError(f"herd exited (rc={self.proc.returncode}):\n{self.text()}")
            found = [READY.search(l) for l in list(self.lines)]
            found = [m for m in found if m]
            return found if len(found) >= n else None
        found = wait_for(ready, timeout=timeout, what="the listening line")
        self.ports = [int(m.group(1)) for m in found if m.group(1)]
        self.unix = [m.group(2) for m in found if m.group(2)]
        return self

    def get(self, target, addr=None):
        with RawConn.open(addr or ("127.0.0.1", self.ports[0]), timeout=5) as c:
            c.send(get_req(target))
            return c.read_response()

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
            try:
                return self.proc.wait(5)
            except subprocess.TimeoutExpired:
                kids = descendants(self.pid)
                for p in [self.pid] + kids:
                    try:
                        os.kill(p, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                self.proc.wait(5)
                raise AssertionError("herd did not stop within 5s of SIGTERM")
        return self.proc.returncode


@pytest.fixture
def herd_proc():
    started = []

    def start(*args):
        p = Proc(args)
        started.append(p)
        return p
    yield start
    problems = []
    for p in started:
        if p.proc.poll() is not None:
            continue                 # exited on its own: the test judged that
        try:
            rc = p.stop()
            if rc != 0:
                problems.append(f"exit {rc} after SIGTERM: {p.cmd}\n{p.text()[-2000:]}")
        except AssertionError as e:
            problems.append(str(e))
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def check(path):
    return run_herd(["serve", "--check-config", str(path)], extra=False)


# ------------------------------------------------------------ --check-config

def test_threads_need_a_connection_each():
    # --model threads splits --max-connections among its threads: fewer
    # than one each would leave a thread's listen socket unserved
    r = run_herd(["serve", "--model", "threads", "--threads", "4", "--max-connections", "3",
                  "--listen", "127.0.0.1:0"], extra=False)
    assert r.returncode == 2, r.stderr
    assert "max-connections 3 is below the 4 threads" in r.stderr, r.stderr


@pytest.mark.parametrize("value, ok", [("0", True), ("0s", True), ("0ms", True), ("250ms", True),
                                       ("-1", False), ("never", False)])
def test_upstream_stall_zero_is_never(tmp_path, value, ok):
    # the help and SPEC say "0: never": it must be taken
    cfg = tmp_path / "stall.conf"
    cfg.write_text(f"upstream = a=127.0.0.1:9\nproxy = /=a\nupstream-stall = {value}\n")
    r = check(cfg)
    assert r.returncode == (0 if ok else 2), r.stderr
    r = run_herd(["serve", "--upstream", "a=127.0.0.1:9", "--proxy", "/=a",
                  "--upstream-stall", value, "--listen", "127.0.0.1:0", "--workers", "0"],
                 extra=False)
    # --workers 0 stops it right after the flags: the stall value got through
    assert ("upstream-stall" in r.stderr) != ok, r.stderr


def test_check_config_ok(tmp_path, site):
    cfg = tmp_path / "good.conf"
    cfg.write_text(
        "# herd settings\n"
        "\n"
        "listen = 127.0.0.1:0\n"
        "listen = unix:/tmp/herd-check.sock\n"
        f"docroot = {site.root}   # trailing comment\n"
        "workers = 2\n"
        "keepalive-timeout = 5s\n"
        "header-timeout = 500ms\n"
        "body-timeout = 30s\n"
        "body-min-rate = 1k\n"
        "max-header-size = 16k\n"
        "max-body-size = 2m\n"
        "access-log-format = json\n"
        "status-path = /herd-status\n"
        "serve-dotfiles\n"
        "   shutdown-timeout   =   3s   \n")
    r = check(cfg)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"{cfg}: ok", r.stdout
    assert not r.stderr.strip(), r.stderr


def test_check_config_reads_past_a_byte_order_mark(tmp_path):
    cfg = tmp_path / "bom.conf"
    cfg.write_bytes(b"\xef\xbb\xbfworkers = 2\n")
    r = check(cfg)
    assert r.returncode == 0, r.stderr


def test_check_config_empty_file_is_ok(tmp_path):
    cfg = tmp_path / "empty.conf"
    cfg.write_text("# nothing but a comment\n\n")
    r = check(cfg)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"{cfg}: ok"


BAD_CASES = [
    ("no name", "workers = 2\n = 5\n", 2, "a value with no setting name"),
    ("long status-path", "status-path = /" + "a" * 100 + "\n", 1, "longer than 63 bytes"),
    ("unknown setting", "workers = 2\n# ok so far\nfrobnicate = yes\n", 3, "frobnicate"),
    ("bad workers", "listen = 127.0.0.1:0\nworkers = many\n", 2, "many"),
    ("zero workers", "workers = 0\n", 1, "workers"),
    ("bad duration", "\n\n\n\nkeepalive-timeout = 5 parsecs\n", 5, "keepalive-timeout"),
    ("bad listen", "# a\nlisten = not-an-address\n", 2, "not-an-address"),
    ("bad port", "listen = 127.0.0.1:99999\n", 1, "99999"),
    ("switch with value", "workers = 1\nserve-dotfiles = yes\n", 2, "serve-dotfiles"),
    ("value missing", "workers = 1\nworkers\n", 2, "workers"),
    ("empty value", "docroot =\n", 1, "docroot"),
    ("bad format", "access-log-format = xml\n", 1, "xml"),
    ("bad size", "max-header-size = huge\n", 1, "huge"),
    ("bad model", "model = threads-of-gold\n", 1, "threads-of-gold"),
    # a NUL is named as such (it was "line too long", or ignored on the last line)
    ("NUL byte", "workers = 2\nlisten = 127.0.0.1:0\x00junk\n", 2, "NUL byte at column 21"),
    ("NUL on the last line", "workers = 2\n\x00", 2, "NUL byte at column 1"),
    ("line too long", "workers = 2\n#" + "x" * 5000 + "\n", 2, "line too long"),
]


@pytest.mark.parametrize("name,text,line,word", BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_check_config_bad(tmp_path, name, text, line, word):
    cfg = tmp_path / "bad.conf"
    cfg.write_text(text)
    r = check(cfg)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    err = r.stderr.strip()
    assert err.startswith(f"{cfg}:{line}: "), f"want '{cfg}:{line}: reason', got {err!r}"
    assert word in err, f"the reason should name {word!r}: {err!r}"
    assert "ok" not in r.stdout


def test_check_config_missing_file(tmp_path):
    cfg = tmp_path / "nope.conf"
    r = check(cfg)
    assert r.returncode == 2
    assert str(cfg) in r.stderr and "No such file" in r.stderr, r.stderr


def test_check_config_directory_is_an_error(tmp_path):
    """A directory is not a config file: reading it fails (EISDIR)."""
    r = check(tmp_path)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert str(tmp_path) in r.stderr, r.stderr


def test_serve_with_unreadable_config_exits_2(tmp_path):
    cfg = tmp_path / "absent.conf"
    r = run_herd(["serve", "--config", str(cfg), "--listen", "127.0.0.1:0"], timeout=10)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert str(cfg) in r.stderr and "No such file" in r.stderr, r.stderr
    assert "listening" not in r.stderr


def test_serve_with_directory_as_config_exits_2(herd_proc, tmp_path):
    p = herd_proc("--config", tmp_path, "--listen", "127.0.0.1:0", "--workers", "1")
    try:
        rc = p.proc.wait(3)
    except subprocess.TimeoutExpired:
        rc = None
    if rc is None:
        p.stop()
        pytest.fail(f"herd serves with a directory as its config file:\n{p.text()}")
    p.reader.join(2)
    assert rc == 2, (rc, p.text())
    assert str(tmp_path) in p.text(), p.text()


def test_serve_with_bad_config_exits_2(tmp_path):
    cfg = tmp_path / "bad.conf"
    cfg.write_text("listen = 127.0.0.1:0\nworkers = 2\nbogus = 1\n")
    r = run_herd(["serve", "--config", str(cfg)], timeout=10)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert f"{cfg}:3:" in r.stderr, r.stderr
    assert "listening" not in r.stderr


@pytest.mark.parametrize("setting", ["user", "group"])
def test_check_config_unknown_user_or_group(tmp_path, setting):
    """The names are resolved when the config is read: a user or group that
    does not exist is a config error, not a worker that dies at start."""
    cfg = tmp_path / "user.conf"
    cfg.write_text(f"workers = 1\n{setting} = herd-no-such-{setting}\n")
    r = check(cfg)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert f"unknown {setting} 'herd-no-such-{setting}'" in r.stderr, r.stderr
    assert "ok" not in r.stdout
    # found once every line is read, so no line is named, but the file is
    # (--help: FILE:LINE or FILE); it printed the bare reason
    assert r.stderr.startswith(f"{cfg}: unknown {setting}"), r.stderr


def test_serve_with_unknown_user_exits_2_before_binding(tmp_path):
    """It was: the port bound, each worker exited 'unknown user' and was
    respawned forever, and clients hung."""
    cfg = tmp_path / "user.conf"
    cfg.write_text("listen = 127.0.0.1:0\nworkers = 1\nuser = herd-no-such-user\n")
    try:
        r = run_herd(["serve", "--config", str(cfg)], timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail("herd serve kept running with a user that does not exist")
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "unknown user 'herd-no-such-user'" in r.stderr, r.stderr
    assert "listening" not in r.stderr and "respawning" not in r.stderr, r.stderr


def test_serve_with_a_user_but_not_as_root_exits_2(tmp_path):
    """--user needs a start as root: started by anyone else, herd says so
    and exits before binding, where each worker died at start ("need
    root") and was respawned forever."""
    if os.geteuid() != 0:
        as_other = []
    elif shutil.which("setpriv"):
        as_other = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    else:
        pytest.skip("needs setpriv (util-linux) to start as another user")
    if as_other and subprocess.run([*as_other, HERD_BIN, "--version"], capture_output=True,
                                   timeout=10).returncode != 0:
        pytest.skip("nobody may not run the binary here (a checkout under /root)")
    r = subprocess.run([*as_other, HERD_BIN, "serve", "/tmp", "--listen", "127.0.0.1:0",
                        "--user", "nobody"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "need herd to start as root" in r.stderr, r.stderr
    assert "listening" not in r.stderr, r.stderr


# ------------------------------------------------------------ serving from a file

def test_config_listen_workers_docroot_honoured(herd_proc, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "index.html").write_bytes(b"from the config docroot\n")
    (root / ".dot").write_bytes(b"dot\n")
    cfg = tmp_path / "herd.conf"
    cfg.write_text(
        "# no --listen flag: the file's address is used\n"
        "listen = 127.0.0.1:0\n"
        "workers = 3\n"
        f"docroot = {root}\n"
        "serve-dotfiles\n"
        "status-path = /st\n")
    p = herd_proc("--config", cfg).wait_ready()
    assert len(p.ports) == 1, p.text()
    wait_for(lambda: worker_comms(p.pid) == ["herd-w0", "herd-w1", "herd-w2"], timeout=5,
             what="3 workers")
    for _ in range(12):              # new connections spread over the 3 workers
        r = p.get("/")
        assert r.status == 200 and r.body == b"from the config docroot\n"
    assert p.get("/.dot").status == 200
    assert p.get("/st").status == 200


def test_config_unix_and_tcp_listeners_with_workers(herd_proc, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "index.html").write_bytes(b"two listeners\n")
    sock = f"/tmp/herd-cfg-{os.getpid()}.sock"
    cfg = tmp_path / "herd.conf"
    cfg.write_text(f"listen = 127.0.0.1:0\nlisten = unix:{sock}\nworkers = 3\n"
                   f"docroot = {root}\n")
    p = herd_proc("--config", cfg).wait_ready(n=2)
    try:
        assert len(p.ports) == 1 and p.unix == [sock], p.text()
        time.sleep(0.5)
        dead = [l for l in p.lines if "respawning" in l or "[crit]" in l]
        assert not dead, "workers die at start:\n" + "\n".join(dead[:6])
        wait_for(lambda: worker_comms(p.pid) == ["herd-w0", "herd-w1", "herd-w2"], timeout=5,
                 what="three workers named herd-w0 to herd-w2")
        for _ in range(12):
            assert p.get("/").body == b"two listeners\n"
            assert p.get("/", addr=sock).body == b"two listeners\n"
    finally:
        p.stop()
    assert not os.path.exists(sock), "the unix socket should be removed at exit"


def test_flags_override_the_file(server, tmp_path):
    a = tmp_path / "a"
    b = tmp_path / "b"
    for d, tag in ((a, b"A\n"), (b, b"B\n")):
        d.mkdir()
        (d / "index.html").write_bytes(tag)
    cfg = tmp_path / "herd.conf"
    # the file's listen address must be replaced by the flag's, not added to
    sock = f"/tmp/herd-ovr-{os.getpid()}.sock"
    cfg.write_text(f"listen = unix:{sock}\nworkers = 3\ndocroot = {a}\n"
                   "keepalive-timeout = 1h\n")
    srv = server("--config", cfg, "--workers", "1", "--keepalive-timeout", "300ms",
                 docroot=b)
    assert srv.get("/").body == b"B\n", "the docroot argument overrides the file"
    ready = [l for l in srv.stderr_text().splitlines() if "listening on" in l]
    assert len(ready) == 1, f"the --listen flag must replace the file's: {ready}"
    assert not os.path.exists(sock)
    wait_for(lambda: worker_comms(srv.pid) == ["herd-w0"], timeout=5, what="1 worker")
    with srv.connect() as c:
        c.send(get_req("/"))
        assert c.read_response().status == 200
        closed, elapsed, _ = c.closed_within(3)
        assert closed and elapsed < 2, "keepalive-timeout flag (300ms) should win over 1h"


def test_config_equals_form_and_file_settings_used(server, tmp_path):
    cfg = tmp_path / "herd.conf"
    cfg.write_text("workers = 2\nstatus-path = /cfg-status\n")
    srv = server(f"--config={cfg}")
    r = srv.get("/cfg-status")
    assert r.status == 200, "status-path from the file"
    wait_for(lambda: worker_comms(srv.pid) == ["herd-w0", "herd-w1"], timeout=5,
             what="2 workers")


def test_a_config_line_with_a_control_byte_is_refused(tmp_path):
    """A file of CR-only lines reads as one line, and the reason quoted it
    with its raw CRs, which mangle a terminal (red-team pass 17)."""
    cfg = tmp_path / "mac.conf"
    cfg.write_bytes(b"docroot = /nonexistent\rworkers = 2\r\x1b]0;title\x07\r")
    r = run_herd(["serve", "--check-config", str(cfg)], extra=False)
    assert r.returncode == 2, r
    assert "\r" not in r.stderr and "\x1b" not in r.stderr and "\x07" not in r.stderr, r.stderr
    assert f"{cfg}:1: control byte 0x0d at column 23" in r.stderr, r.stderr
    # a comment hid the rest of such a "line": every setting was dropped
    cfg.write_bytes(b"# c\rworkers = 999\r")
    r = run_herd(["serve", "--check-config", str(cfg)], extra=False)
    assert r.returncode == 2 and f"{cfg}:1: control byte 0x0d at column 4" in r.stderr, r.stderr
    cfg.write_bytes(b"workers = 2\r\nstatus-path = /s\t\r\n")  # CRLF and tabs are fine
    assert run_herd(["serve", "--check-config", str(cfg)], extra=False).returncode == 0
