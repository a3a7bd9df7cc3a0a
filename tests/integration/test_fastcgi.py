"""FastCGI and PHP behind herd (issue 14), with real PHP: php-cgi children
under `herd spawn --listen unix:PATH -n 2 -- php-cgi` (the socket as fd 0,
as spawn-fcgi does) and a php-fpm pool (pm = static) from a config this
file writes. Both run as their own processes and are stopped by PID.

Every case runs on the default model and on coro (which proxies through
the same pump); test_other_models runs a smaller set on the rest of the
models that proxy. Skipped when php-cgi is not installed."""

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import HERD_ARGS, HERD_BIN, descendants, run_herd
from herdtest import RawConn, build_request, wait_for

PHP_CGI = shutil.which("php-cgi")
PHP_FPM = shutil.which("php-fpm8.2") or shutil.which("php-fpm")
APT = "apt-get install php8.2-cgi php8.2-fpm"

pytestmark = pytest.mark.skipif("--model" in HERD_ARGS, reason="picks its models itself")

MiB = 1 << 20

SCRIPTS = {
    "env.php": r"""<?php
header('Content-Type: application/json');
echo json_encode(['server' => $_SERVER, 'get' => $_GET, 'post' => $_POST,
                  'pid' => getmypid()]);
""",
    "upload.php": r"""<?php
$h = hash_init('sha256');
$in = fopen('php://input', 'rb');
$n = 0;
while (!feof($in)) { $b = fread($in, 65536); $n += strlen($b); hash_update($h, $b); }
echo $n, ' ', hash_final($h);
""",
    "big.php": r"""<?php
$chunk = str_repeat('0123456789abcdef', 4096);
for ($i = 0; $i < 320; $i++) { echo $chunk; flush(); }
""",
    "headers.php": r"""<?php
header('X-Test: yes');
http_response_code(418);
setcookie('a', '1');
setcookie('b', '2');
echo 'teapot';
""",
    "redirect.php": r"""<?php
header('Location: /elsewhere');
""",
    "sleep.php": r"""<?php
sleep((int)($_GET['s'] ?? 3));
echo 'slept';
""",
    "die.php": r"""<?php
header('Content-Length: 4194304');
echo str_repeat('x', 1048576);
flush();
posix_kill(posix_getpid(), 9);
""",
    "stderr.php": r"""<?php
for ($i = 0; $i < 100; $i++) error_log("boom $i from php");
echo 'ok';
""",
    "stderr_flood.php": r"""<?php
for ($i = 0; $i < 2000; $i++) error_log("flood $i " . str_repeat('x', 100));
echo 'done';
""",
    "stderr_escape.php": r"""<?php
error_log("paint \x1b[31mred\x1b[0m bell \x07 tail");
echo 'ok';
""",
    "uploads/x.php": r"""<?php
echo 'x.php ran';
""",
    "app/index.php": r"""<?php
echo 'front controller: ', $_SERVER['REQUEST_URI'];
""",
    "dir/index.php": r"""<?php
echo 'index of dir';
""",
}


@pytest.fixture
def docroot(tmp_path):
    """Scripts, a static file, an upload that holds PHP code (it must never
    run: it would leave a marker file), and a symlink to a script outside
    the docroot."""
    root = tmp_path / "www"
    for name, text in SCRIPTS.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "static.txt").write_text("static\n")
    marker = tmp_path / "ran"
    evil = f"<?php file_put_contents('{marker}', 'ran'); echo 'EVIL'; ?>"
    (root / "uploads" / "evil.jpg").write_text(evil)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.php").write_text(evil)
    (root / "link.php").symlink_to(outside / "secret.php")
    return root


class Proc:
    """A process of this test, stopped by its PID (its process group)."""

    def __init__(self, cmd, ready_path, log, env=None):
        self.log = open(log, "w+")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True, env=env)
        wait_for(lambda: os.path.exists(ready_path) or self.proc.poll() is not None,
                 timeout=10, what=f"{cmd[0]} to listen")
        assert self.proc.poll() is None, self.text()

    def text(self):
        self.log.seek(0)
        return self.log.read()

    def children(self):
        return descendants(self.proc.pid)

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        self.log.close()


@pytest.fixture
def php_cgi(tmp_path):
    """Factory: php_cgi(children=2, backlog=None) -> (socket path, Proc)."""
    if not PHP_CGI:
        pytest.skip(f"php-cgi is not installed ({APT})")
    made = []

    def start(children=2, backlog=None):
        sock = tmp_path / f"php-{len(made)}.sock"
        cmd = [HERD_BIN, "spawn", "--listen", f"unix:{sock}", "-n", str(children),
               "--respawn"]
        if backlog is not None:
            cmd += ["--backlog", str(backlog)]
        cmd += ["--", PHP_CGI, "-d", "post_max_size=0", "-d", "memory_limit=64M"]
        env = dict(os.environ, PHP_FCGI_MAX_REQUESTS="0")
        p = Proc(cmd, sock, tmp_path / f"spawn-{len(made)}.log", env=env)
        made.append(p)
        return str(sock), p

    yield start
    for p in made:
        p.stop()


@pytest.fixture
def php_fpm(tmp_path):
    """A php-fpm pool of two static children on a unix socket, in the
    foreground (-F) with this config (-y), as root allowed with -R."""
    if not PHP_FPM:
        pytest.skip(f"php-fpm is not installed ({APT})")
    sock = tmp_path / "fpm.sock"
    conf = tmp_path / "fpm.conf"
    conf.write_text(f"""[global]
error_log = {tmp_path}/fpm-error.log
pid = {tmp_path}/fpm.pid
daemonize = no
[pool]
listen = {sock}
pm = static
pm.max_children = 2
catch_workers_output = yes
php_admin_value[post_max_size] = 0
""")
    cmd = [PHP_FPM, "-F", "-y", str(conf), "-n"]
    if os.geteuid() == 0:
        cmd.append("-R")
    p = Proc(cmd, sock, tmp_path / "fpm.log")
    yield str(sock)
    p.stop()


@pytest.fixture(params=["event-loop", "coro", "uring"])
def herd(request, server, docroot):
    """Factory: herd(socket, *args) -> a server whose *.php go to the
    socket's group; on coro with two threads, and on uring, for the other
    params."""
    def start(sock, *args, **kw):
        more = {"coro": ["--model", "coro", "--threads", "2"],
                "uring": ["--model", "uring"]}.get(request.param, [])
        return server("--upstream", f"php=unix:{sock}", "--fastcgi", "*.php=php",
                      "--upstream-keepalive", "0", *more, *args, docroot=docroot, **kw)
    return start


def get(srv, target, headers=None, method="GET", body=None):
    with srv.connect() as c:
        c.send(build_request(method, target, headers=headers or [], body=body or b""))
        return c.read_response(method=method)


def env_of(resp):
    assert resp.status == 200, resp
    return json.loads(resp.body)


def test_env_dump(herd, php_cgi, docroot):
    sock, _ = php_cgi()
    srv = herd(sock)
    r = get(srv, "/env.php/extra/pa%20th?a=%41b&c=d%26e",
            headers=[("X-A", "1"), ("X_A", "2"), ("Content-Type", "text/x-test")])
    e = env_of(r)
    s = e["server"]
    assert s["SCRIPT_FILENAME"] == str(docroot.resolve() / "env.php")
    assert s["SCRIPT_NAME"] == "/env.php"
    assert s["PATH_INFO"] == "/extra/pa th"
    assert s["QUERY_STRING"] == "a=%41b&c=d%26e"
    assert e["get"] == {"a": "Ab", "c": "d&e"}
    assert s["REQUEST_METHOD"] == "GET"
    assert s["REQUEST_URI"] == "/env.php/extra/pa%20th?a=%41b&c=d%26e"
    assert s["DOCUMENT_URI"] == "/env.php/extra/pa th"
    assert s["DOCUMENT_ROOT"] == str(docroot.resolve())
    assert s["SERVER_PROTOCOL"] == "HTTP/1.1"
    assert s["GATEWAY_INTERFACE"] == "CGI/1.1"
    assert s["SERVER_SOFTWARE"] == "herd"
    assert s["REMOTE_ADDR"] == "127.0.0.1" and int(s["REMOTE_PORT"]) > 0
    assert s["SERVER_ADDR"] == "127.0.0.1" and int(s["SERVER_PORT"]) == srv.port
    assert s["SERVER_NAME"] == "test"        # the Host header's name
    assert s["REDIRECT_STATUS"] == "200"
    assert s["CONTENT_TYPE"] == "text/x-test"
    assert s["HTTP_X_A"] == "1"           # X_A (with '_') was dropped
    assert "HTTPS" not in s


@pytest.mark.parametrize("order", ["spoof first", "real first"])
def test_a_header_php_reads_as_another_is_dropped(herd, php_cgi, order):
    """PHP turns '.' in a parameter name into '_', as it does '_' itself:
    `X.Forwarded.For: 6.6.6.6` became HTTP_X.FORWARDED.FOR, which the
    script read as $_SERVER['HTTP_X_FORWARDED_FOR'], the address a front
    proxy vouches for (red-team pass 32). Only names of letters, digits
    and '-' become parameters (nginx's ignore_invalid_headers)."""
    sock, _ = php_cgi()
    srv = herd(sock)
    spoof = [("X.Forwarded.For", "6.6.6.6"), ("X-Real.IP", "6.6.6.6"), ("X~Real-IP", "6.6.6.6")]
    real = [("X-Forwarded-For", "192.0.2.1")]
    s = env_of(get(srv, "/env.php", headers=spoof + real if order == "spoof first"
                   else real + spoof))["server"]
    http = {k: v for k, v in s.items() if k.startswith("HTTP_")}
    assert http.get("HTTP_X_FORWARDED_FOR") == "192.0.2.1", http
    assert "6.6.6.6" not in json.dumps(http), http


def test_env_proxy_protocol_and_params(herd, php_cgi):
    sock, _ = php_cgi()
    srv = herd(sock, "--proxy-protocol", "--fastcgi-param", "APP_ENV=test",
               "--fastcgi-param", "SERVER_SOFTWARE=mine")
    with srv.connect() as c:
        c.send(b"PROXY TCP4 192.0.2.7 192.0.2.1 4711 80\r\n" +
               build_request("GET", "/env.php", headers=[("Proxy", "http://evil:1")]))
        s = env_of(c.read_response())["server"]
    assert s["REMOTE_ADDR"] == "192.0.2.7" and s["REMOTE_PORT"] == "4711"
    assert s["APP_ENV"] == "test" and s["SERVER_SOFTWARE"] == "mine"
    assert "HTTP_PROXY" not in s   # httpoxy


def test_post_form(herd, php_cgi):
    sock, _ = php_cgi()
    srv = herd(sock)
    body = b"name=J%C3%B6rg&list%5B%5D=1&list%5B%5D=2"
    r = get(srv, "/env.php", method="POST", body=body,
            headers=[("Content-Type", "application/x-www-form-urlencoded"),
                     ("Content-Length", len(body))])
    e = env_of(r)
    assert e["post"] == {"name": "Jörg", "list": ["1", "2"]}
    assert e["server"]["CONTENT_LENGTH"] == str(len(body))


def test_chunked_body_411(herd, php_cgi):
    """PHP reads a body by its CONTENT_LENGTH only; herd streams bodies
    rather than buffer them to count: a chunked one is refused, not lost."""
    sock, _ = php_cgi()
    srv = herd(sock)
    with srv.connect() as c:
        c.send(build_request("POST", "/upload.php", headers=[("Transfer-Encoding", "chunked")],
                             body=b"3\r\nabc\r\n0\r\n\r\n"))
        r = c.read_response()
        assert r.status == 411
    assert get(srv, "/upload.php", method="POST", body=b"abc",
               headers=[("Content-Length", 3)]).status == 200


@pytest.mark.slow
def test_upload_50mib_sha256(herd, php_cgi):
    sock, _ = php_cgi()
    srv = herd(sock, "--max-body-size", "100m")
    size = 50 * MiB
    block = hashlib.sha256(b"seed").digest() * 2048    # 64 KiB
    h = hashlib.sha256()
    with srv.connect(timeout=60) as c:
        c.send(build_request("POST", "/upload.php",
                             headers=[("Content-Length", size),
                                      ("Content-Type", "application/octet-stream")]))
        for _ in range(size // len(block)):
            c.send(block)
            h.update(block)
        r = c.read_response()
    assert r.status == 200, r
    assert r.body.decode() == f"{size} {h.hexdigest()}"


def rss_kib(pids):
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass
    return total


@pytest.mark.slow
def test_20mib_output_streams_with_bounded_memory(herd, php_cgi):
    sock, _ = php_cgi()
    srv = herd(sock)
    get(srv, "/env.php")                        # warm up: buffers exist
    before = rss_kib([srv.proc.pid] + descendants(srv.proc.pid))
    with srv.connect(timeout=30) as c:
        c.send(build_request("GET", "/big.php"))
        head = c.read_until(b"\r\n\r\n")
        assert b" 200 " in head and b"chunked" in head.lower()
        time.sleep(1.0)                         # the client is slow: back-pressure
        peak = rss_kib([srv.proc.pid] + descendants(srv.proc.pid))
        c.sock.settimeout(30)
        rest = c.read_until(b"\r\n0\r\n\r\n", limit=24 * MiB)
    data, pos = bytearray(), 0
    while True:                                 # herd's chunks, undone
        eol = rest.index(b"\r\n", pos)
        n = int(rest[pos:eol], 16)
        if not n:
            break
        data += rest[eol + 2:eol + 2 + n]
        pos = eol + 4 + n
    assert data == b"0123456789abcdef" * (20 * MiB // 16)
    # holding the script's output would cost 20 MiB; ASan's own bookkeeping
    # costs ~9 MiB here
    assert peak - before < 12 * 1024, f"herd grew {peak - before} KiB for 20 MiB of output"


def test_headers_status_cookies_redirect_head(herd, php_cgi):
    sock, _ = php_cgi()
    srv = herd(sock)
    r = get(srv, "/headers.php")
    assert r.status == 418 and r.body == b"teapot"
    assert r.get("X-Test") == "yes"
    assert sorted(v.split(";")[0] for v in r.getall("Set-Cookie")) == ["a=1", "b=2"]
    assert not r.has("Status")
    r = get(srv, "/redirect.php")
    assert r.status == 302 and r.get("Location") == "/elsewhere"
    r = get(srv, "/headers.php", method="HEAD")
    assert r.status == 418 and r.body == b""


def test_stderr_to_the_error_log_rate_limited(herd, php_cgi):
    sock, _ = php_cgi()
    srv = herd(sock)
    r = get(srv, "/stderr.php")
    assert r.status == 200 and r.body == b"ok"
    wait_for(lambda: "boom 0 from php" in srv.stderr_text(), timeout=5,
             what="the script's STDERR in the error log")
    text = srv.stderr_text()
    assert "FastCGI stderr from /stderr.php" in text
    # at most 20 lines a second (the burst may straddle two seconds)
    assert text.count(" from php") <= 40, text.count(" from php")


def test_stderr_flood_before_the_output_is_not_the_head(herd, php_cgi):
    """220 KB of STDERR before the first byte of output: logged (still rate
    limited) and dropped as it comes, so it neither counts toward the 16 KiB
    CGI head nor costs the script its answer."""
    sock, _ = php_cgi()
    srv = herd(sock)
    r = get(srv, "/stderr_flood.php")
    assert r.status == 200 and r.body == b"done", r
    wait_for(lambda: "flood 0 " in srv.stderr_text(), timeout=5,
             what="the script's STDERR in the error log")
    text = srv.stderr_text()
    assert text.count("FastCGI stderr from /stderr_flood.php") <= 40
    assert "CGI head too large" not in text and "head too large" not in text
    r = get(srv, "/stderr_flood.php")  # and again: nothing stays behind
    assert r.status == 200 and r.body == b"done", r


def test_stderr_control_bytes_are_escaped(herd, php_cgi):
    """A script's STDERR is a writer of untrusted bytes into the error log:
    no escape sequence or control byte reaches it raw."""
    sock, _ = php_cgi()
    srv = herd(sock)
    r = get(srv, "/stderr_escape.php")
    assert r.status == 200 and r.body == b"ok"
    wait_for(lambda: "paint " in srv.stderr_text(), timeout=5,
             what="the script's STDERR in the error log")
    line = next(l for l in srv.stderr_text().splitlines() if "paint " in l)
    assert "\x1b" not in line and "\x07" not in line, repr(line)
    assert "\\x1b[31mred" in line and "\\x07 tail" in line, repr(line)


def test_read_timeout_504(herd, php_cgi):
    sock, _ = php_cgi()
    srv = herd(sock, "--proxy-read-timeout", "1s")
    t0 = time.monotonic()
    r = get(srv, "/sleep.php?s=4")
    assert r.status == 504
    assert time.monotonic() - t0 < 3.5


def test_read_timeout_marks_the_server_down(server, php_cgi, docroot):
    """A server that timed out is skipped for --upstream-fail-timeout, as
    one that cannot be connected: the next requests go to the other one
    (one worker: one round-robin position and one set of down marks)."""
    a, pa = php_cgi()
    b, pb = php_cgi()
    srv = server("--workers", "1", "--upstream", f"php=unix:{a},unix:{b}", "--fastcgi",
                 "*.php=php", "--upstream-keepalive", "0", "--proxy-read-timeout", "1s",
                 "--upstream-fail-timeout", "30s", docroot=docroot)
    # a POST: a GET that timed out would be re-sent to the other server
    # (idempotent, no byte of an answer), time out there too and mark
    # both down
    assert get(srv, "/sleep.php?s=3", method="POST", body=b"x=1").status == 504
    pids = {env_of(get(srv, "/env.php"))["pid"] for _ in range(4)}
    sides = [set(pa.children()), set(pb.children())]
    assert any(pids <= side for side in sides), (pids, sides)
    assert "read timed out; skipped for 30000 ms" in srv.stderr_text()


def test_child_killed_mid_response(herd, php_cgi):
    sock, _ = php_cgi()
    srv = herd(sock)
    with srv.connect() as c:
        c.send(build_request("GET", "/die.php"))
        head = c.read_until(b"\r\n\r\n")
        assert b" 200 " in head and b"Content-Length: 4194304" in head
        got = c.read_to_close()
        assert len(got) < 4 * MiB                 # truncated, and closed
    r = get(srv, "/static.txt")
    assert r.status == 200
    wait_for(lambda: get(srv, "/env.php").status == 200, timeout=10,
             what="the next PHP request served")


@pytest.mark.concurrency
def test_all_children_busy_503(herd, php_cgi):
    """Two children sleep; the socket's listen queue (backlog 1) fills; the
    rest are answered 503 with Retry-After at once, and nothing hangs."""
    sock, _ = php_cgi(children=2, backlog=1)
    srv = herd(sock)
    results = []

    def one():
        t0 = time.monotonic()
        try:
            r = get(srv, "/sleep.php?s=2")
            results.append((r.status, r.get("Retry-After"), time.monotonic() - t0))
        except Exception as e:                    # noqa: BLE001
            results.append((str(e), None, time.monotonic() - t0))
    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=15)
    assert len(results) == 8, results
    busy = [r for r in results if r[0] == 503]
    assert busy, results
    assert all(r[1] == "1" and r[2] < 1.5 for r in busy), results
    assert all(r[0] in (200, 503) for r in results), results
    assert get(srv, "/env.php").status == 200
    assert "busy (listen queue full)" in srv.stderr_text()


def test_scripts_must_be_files_below_the_docroot(herd, php_cgi, docroot):
    sock, _ = php_cgi()
    srv = herd(sock)
    for target in ("/uploads/evil.jpg/x.php", "/uploads/evil.jpg/", "/link.php",
                   "/missing.php", "/missing.php/info", "/uploads/../../outside/secret.php"):
        r = get(srv, target)
        assert r.status in (404, 400), (target, r)
        assert b"EVIL" not in r.body and b"Primary script" not in r.body
    assert get(srv, "/uploads/evil.jpg").body.startswith(b"<?php")   # static, not run
    assert not (docroot.parent / "ran").exists()
    assert get(srv, "/uploads/x.php").body == b"x.php ran"


def test_index_and_fallback(herd, php_cgi):
    sock, _ = php_cgi()
    srv = herd(sock, "--fastcgi-fallback", "/app/index.php")
    assert get(srv, "/dir/").body == b"index of dir"
    r = get(srv, "/no/such/page?x=1")
    assert r.status == 200 and r.body == b"front controller: /no/such/page?x=1"
    assert get(srv, "/static.txt").body == b"static\n"      # files stay static


def test_pipelined_static_and_php_in_order(herd, php_cgi):
    sock, _ = php_cgi()
    srv = herd(sock)
    reqs = [("GET", "/static.txt"), ("GET", "/headers.php"), ("GET", "/static.txt"),
            ("POST", "/upload.php"), ("GET", "/redirect.php")]
    with srv.connect() as c:
        c.send(b"".join(build_request(m, t, headers=[("Content-Length", 3)] if m == "POST"
                                      else [], body=b"abc" if m == "POST" else b"")
                        for m, t in reqs))
        got = [c.read_response() for _ in reqs]
    assert [r.status for r in got] == [200, 418, 200, 200, 302]
    assert got[0].body == got[2].body == b"static\n"
    assert got[3].body.decode() == "3 " + hashlib.sha256(b"abc").hexdigest()


def test_php_fpm(herd, php_fpm):
    srv = herd(php_fpm)
    body = b"a=1&b=%20"
    e = env_of(get(srv, "/env.php/p?q=1", method="POST", body=body,
                   headers=[("Content-Type", "application/x-www-form-urlencoded"),
                            ("Content-Length", len(body))]))
    assert e["post"] == {"a": "1", "b": " "} and e["server"]["PATH_INFO"] == "/p"
    r = get(srv, "/headers.php")
    assert r.status == 418 and len(r.getall("Set-Cookie")) == 2
    assert get(srv, "/missing.php").status == 404


class FakeFastCGI:
    """A FastCGI application in a thread: answers a head and a little body,
    then waits, recording the record types it reads."""

    def __init__(self, path):
        self.types = []
        self.ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.ls.bind(path)
        self.ls.listen(8)
        self.ls.settimeout(10)
        threading.Thread(target=self.run, daemon=True).start()

    def record(self, conn):
        head = b""
        while len(head) < 8:
            more = conn.recv(8 - len(head))
            if not more:
                return None
            head += more
        n = (head[4] << 8 | head[5]) + head[6]
        while n:
            n -= len(conn.recv(n))
        return head[1]

    def run(self):
        conn, _ = self.ls.accept()
        conn.settimeout(10)
        while True:
            t = self.record(conn)
            self.types.append(t)
            if t in (None, 5):                 # the empty STDIN (no body), or closed
                break
        out = b"Content-Type: text/plain\r\n\r\nstarted"
        conn.sendall(bytes([1, 6, 0, 1, len(out) >> 8, len(out) & 255, 0, 0]) + out)
        while True:
            t = self.record(conn)
            self.types.append(t)
            if t is None:
                break
        conn.close()


def test_abort_request_when_the_client_leaves(server, docroot, tmp_path):
    app = FakeFastCGI(str(tmp_path / "fake.sock"))
    srv = server("--upstream", f"php=unix:{tmp_path}/fake.sock", "--fastcgi", "*.php=php",
                 docroot=docroot)
    c = srv.connect()
    c.send(build_request("GET", "/env.php"))
    assert b" 200 " in c.read_until(b"\r\n\r\n")
    c.reset()                              # gone for good (a half-close still waits)
    wait_for(lambda: app.types and app.types[-1] is None, timeout=5,
             what="the upstream connection closed")
    assert 2 in app.types, app.types       # FCGI_ABORT_REQUEST, then the close


@pytest.mark.parametrize("model", ["prefork", "dispatch", "threads"])
def test_other_models(server, php_cgi, docroot, model):
    sock, _ = php_cgi()
    srv = server("--model", model, "--upstream", f"php=unix:{sock}", "--fastcgi", "*.php=php",
                 "--upstream-keepalive", "0", docroot=docroot)
    with srv.connect() as c:
        for i in range(3):
            c.send(build_request("GET", f"/env.php?i={i}"))
            assert env_of(c.read_response())["get"] == {"i": str(i)}
    assert get(srv, "/uploads/evil.jpg/x.php").status == 404


def test_config_file_and_bad_values(tmp_path):
    cfg = tmp_path / "php.conf"
    cfg.write_text("upstream = php=unix:/run/php.sock\nfastcgi = *.php=php\n"
                   "fastcgi = /app/=php\nfastcgi-index = main.php\n"
                   "fastcgi-fallback = /index.php\nfastcgi-param = APP_ENV=prod\n")
    r = run_herd(["serve", "--check-config", str(cfg)], extra=False)
    assert r.returncode == 0, r.stderr
    cfg.write_text("upstream = php=unix:/run/php.sock\nfastcgi = *.php=nope\n")
    r = run_herd(["serve", "--check-config", str(cfg)], extra=False)
    assert r.returncode == 2 and f"{cfg}:2:" in r.stderr and "nope" in r.stderr, r.stderr
    for args, word in [(["--fastcgi", "php"], "fastcgi"),
                       (["--fastcgi", "*.p/hp=php"], "fastcgi"),
                       (["--fastcgi", "app/=php"], "fastcgi"),
                       (["--fastcgi-fallback", "index.php"], "fastcgi-fallback"),
                       (["--fastcgi-index", "a/b.php"], "fastcgi-index"),
                       (["--fastcgi-param", "NOVALUE"], "fastcgi-param"),
                       (["--proxy", "/api/=php"], "both proxy and fastcgi")]:
        r = run_herd(["serve", str(tmp_path), "--listen", "127.0.0.1:0", "--upstream",
                      "php=unix:/run/php.sock", "--fastcgi", "*.php=php", *args], extra=False)
        assert r.returncode == 2 and word in r.stderr, (args, r.stderr)


def test_a_script_body_shorter_than_its_content_length_is_named_so(server, docroot, tmp_path):
    """A script that says Content-Length: 10 and ends after 3 bytes, all in
    one read with its head: nothing went out yet, so the client gets a clean
    502, and the error log says what happened; it said "broken chunked
    body" (red-team pass 18)."""
    path = str(tmp_path / "short.sock")
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ls.bind(path)
    ls.listen(1)
    ls.settimeout(10)

    def app():
        conn, _ = ls.accept()
        conn.settimeout(10)
        while FakeFastCGI.record(None, conn) not in (None, 5):
            pass
        out = b"Content-Type: text/plain\r\nContent-Length: 10\r\n\r\nabc"
        conn.sendall(bytes([1, 6, 0, 1, 0, len(out), 0, 0]) + out +
                     bytes([1, 3, 0, 1, 0, 8, 0, 0]) + bytes(8))   # END_REQUEST
        conn.recv(1)
        conn.close()

    t = threading.Thread(target=app, daemon=True)
    t.start()
    try:
        srv = server("--upstream", f"php=unix:{path}", "--fastcgi", "*.php=php",
                     docroot=docroot)
        with srv.connect(timeout=10) as c:
            c.send(build_request("GET", "/env.php"))
            assert c.read_response().status == 502
        wait_for(lambda: "fewer bytes than its Content-Length" in srv.stderr_text(), timeout=5,
                 what="the log line")
        assert "chunked" not in srv.stderr_text()
    finally:
        ls.close()
        t.join(5)
