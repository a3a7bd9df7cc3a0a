"""`herd status` against status endpoints that are slow, stuck or hostile
(red-team 4, findings 1 and 8): one deadline for the whole fetch (connect,
request, answer), connects that cannot hang on a full listen queue, an
answer capped at 1 MiB, a body exactly as long as its Content-Length, and
--watch samples whose counters must be unsigned numbers.

Each case is a small fake endpoint in this process (a thread per
connection on a free 127.0.0.1 port, or a unix socket in a tmp dir); the
client is the real binary, run with a timeout and killed by its own pid.
"""

import json
import os
import socket
import subprocess
import threading
import time

import pytest

from conftest import HERD_ARGS, HERD_BIN, herd_cmd

DEFAULT_TIMEOUT_S = 5           # herd status's deadline without --timeout
RUN_TIMEOUT_S = 15              # generous bound on any one run of the client
ANSWER_MAX = 1 << 20            # STATUS_ANSWER_MAX (cmd/status_fetch.h)

GOOD = (b'{"master_pid":1,"requests":5,"bytes_in":1,"bytes_out":2,'
        b'"responses":{"1xx":0,"2xx":5,"3xx":0,"4xx":0,"5xx":0}}\n')


def answer(body, extra=b""):
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + extra +
            b"Content-Length: %d\r\n\r\n" % len(body) + body)


class FakeStatus:
    """Serves every connection with serve(conn, stop) in its own thread.
    close() stops them all: every wait in serve() must watch `stop`."""

    def __init__(self, serve, unix_path=None):
        self.serve = serve
        self.stop = threading.Event()
        self.conns, self.threads = [], []
        if unix_path:
            self.sock = socket.socket(socket.AF_UNIX)
            self.sock.bind(str(unix_path))
            self.url = f"unix:{unix_path}:/herd-status"
        else:
            self.sock = socket.socket()
            self.sock.bind(("127.0.0.1", 0))
            self.url = "http://127.0.0.1:%d/herd-status" % self.sock.getsockname()[1]
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.acceptor = threading.Thread(target=self._accept, daemon=True)
        self.acceptor.start()

    def _accept(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            conn.settimeout(1)
            self.conns.append(conn)
            t = threading.Thread(target=self._run, args=(conn,), daemon=True)
            self.threads.append(t)
            t.start()

    def _run(self, conn):
        try:
            conn.recv(4096)
            self.serve(conn, self.stop)
        except OSError:
            pass            # the client gave up and closed: what these tests want
        finally:
            conn.close()

    def close(self):
        self.stop.set()
        self.acceptor.join(5)
        for t in self.threads:
            t.join(5)
        self.sock.close()


@pytest.fixture
def fake():
    made = []

    def start(serve, unix_path=None):
        f = FakeStatus(serve, unix_path)
        made.append(f)
        return f
    yield start
    for f in made:
        f.close()


def run_status(*args, timeout=RUN_TIMEOUT_S, limit_as=None):
    """The client to its end, its wall time in seconds; under `prlimit
    --as` when limit_as (bytes) is given."""
    cmd = herd_cmd("status", *args)
    if limit_as:
        cmd = ["prlimit", f"--as={limit_as}", "--"] + cmd
    t0 = time.monotonic()
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=timeout)
    return r, time.monotonic() - t0


# ------------------------------------------------------------ serve() behaviours


def sleep_or_stop(stop, s):
    stop.wait(s)
    return not stop.is_set()


def drip(every_s):
    """A valid answer, one byte every every_s seconds (each under any
    per-read timeout, the whole far past the deadline)."""
    def serve(conn, stop):
        for b in answer(GOOD):
            conn.sendall(bytes([b]))
            if not sleep_or_stop(stop, every_s):
                return
    return serve


def endless_after(head):
    """head, then body bytes for as long as the client takes them."""
    def serve(conn, stop):
        conn.sendall(head)
        chunk = b',"x":' + b"1" * 65536
        while not stop.is_set():
            conn.sendall(chunk)
    return serve


def send_then_close(data):
    def serve(conn, stop):
        conn.sendall(data)
    return serve


def send_then_hold(data):
    """data, then the connection kept open (until the test ends)."""
    def serve(conn, stop):
        conn.sendall(data)
        stop.wait(RUN_TIMEOUT_S)
    return serve


def full_listen_queue(family, addr):
    """A listener with listen(0) whose queue is filled by connections it
    never accepts; returns (listener, the connections holding the queue)."""
    lst = socket.socket(family)
    lst.bind(addr)
    lst.listen(0)
    addr = lst.getsockname()
    held = []
    for _ in range(3):
        c = socket.socket(family)
        c.setblocking(False)
        try:
            c.connect(addr)
        except (BlockingIOError, InterruptedError):
            pass            # unix: queue full (EAGAIN); tcp: pending or dropped SYN
        held.append(c)
    time.sleep(0.2)         # the handshakes that can complete, completed
    return lst, held


# ------------------------------------------------------------ deadline


def test_a_dripping_answer_ends_at_the_default_deadline(fake):
    # a byte every 0.3 s: about 45 s for the whole answer
    f = fake(drip(0.3))
    r, took = run_status("--json", f.url)
    port = f.url.split(":")[2].split("/")[0]
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert (f"timed out after {DEFAULT_TIMEOUT_S}s reading the status page from "
            f"127.0.0.1:{port}") in r.stderr, r.stderr
    assert r.stdout == ""
    assert DEFAULT_TIMEOUT_S - 0.5 <= took < RUN_TIMEOUT_S - 3, took


def test_timeout_option_shortens_the_deadline(fake):
    f = fake(drip(0.3))
    r, took = run_status("--json", "--timeout", "1500ms", f.url)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "timed out after 1500ms reading the status page from 127.0.0.1:" in r.stderr, r.stderr
    assert 1.2 <= took < 4, took
    r, _ = run_status("--timeout", "0", f.url)
    assert r.returncode == 2 and "--timeout" in r.stderr, r.stderr


def test_a_full_unix_listen_queue_times_out_the_connect(short_tmp):
    path = str(short_tmp / "full.sock")
    lst, held = full_listen_queue(socket.AF_UNIX, path)
    try:
        probe = socket.socket(socket.AF_UNIX)
        probe.setblocking(False)
        with pytest.raises(BlockingIOError):    # the queue is indeed full
            probe.connect(path)
        probe.close()
        r, took = run_status("--json", f"unix:{path}:/herd-status")
    finally:
        for c in held:
            c.close()
        lst.close()
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert f"timed out after {DEFAULT_TIMEOUT_S}s connecting to unix:{path}" in r.stderr, r.stderr
    assert took < RUN_TIMEOUT_S - 3, took


def test_a_full_tcp_listen_queue_says_timed_out():
    lst, held = full_listen_queue(socket.AF_INET, ("127.0.0.1", 0))
    port = lst.getsockname()[1]
    try:
        r, took = run_status("--json", f"http://127.0.0.1:{port}/herd-status")
    finally:
        for c in held:
            c.close()
        lst.close()
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert (f"timed out after {DEFAULT_TIMEOUT_S}s connecting to 127.0.0.1:{port}"
            in r.stderr), r.stderr
    assert "in progress" not in r.stderr
    assert took < RUN_TIMEOUT_S - 3, took


def test_a_silent_server_says_timed_out_not_eagain(fake):
    f = fake(lambda conn, stop: stop.wait(RUN_TIMEOUT_S))
    r, took = run_status("--json", f.url)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert f"timed out after {DEFAULT_TIMEOUT_S}s reading the status page" in r.stderr, r.stderr
    assert "Resource temporarily unavailable" not in r.stderr
    assert took < RUN_TIMEOUT_S - 3, took


# ------------------------------------------------------------ size cap


# Far more address space than a correct client needs, far less than the
# gigabytes an uncapped one reaches: it must stop on its own, and fast.
# An ASan build reserves terabytes of shadow memory at start, so it runs
# without the limit; the cap's message and the time bound still check it.
SANITIZED = os.path.basename(os.path.dirname(os.path.abspath(HERD_BIN))).endswith("asan")
AS_LIMIT = None if SANITIZED else 256 << 20


@pytest.mark.parametrize("head", [
    # declares more than the cap: refused as soon as the head is read
    b"HTTP/1.1 200 OK\r\nContent-Length: 10000000000\r\n\r\n",
    # a head that never ends
    b"HTTP/1.1 200 OK\r\nX-Filler: ",
], ids=["huge-content-length", "endless-head"])
def test_an_endless_answer_stops_at_the_cap(fake, head):
    f = fake(endless_after(head + GOOD[:-2]))
    r, took = run_status("--json", f.url, limit_as=AS_LIMIT)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert f"is larger than {ANSWER_MAX} bytes" in r.stderr, r.stderr
    assert r.stdout == ""
    assert took < 5, took


def test_an_overflowing_length_is_not_shown_as_a_number(fake):
    f = fake(send_then_close(b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999"
                             b"\r\n\r\n" + GOOD))
    r, _ = run_status("--json", f.url)
    assert r.returncode == 1, (r.returncode, r.stdout)
    assert "Content-Length is past 2^62" in r.stderr, r.stderr


def test_an_endless_body_without_a_length_is_refused(fake):
    # the red team's endless mode: no Content-Length, body forever
    f = fake(endless_after(b"HTTP/1.1 200 OK\r\n\r\n" + GOOD[:-2]))
    r, took = run_status("--json", f.url, limit_as=AS_LIMIT)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "no usable Content-Length" in r.stderr, r.stderr
    assert took < 5, took


def test_a_page_just_under_the_cap_is_taken(fake):
    # the cap leaves room: 900 KB of JSON (30 times herd's largest page)
    body = GOOD[:-2] + b',"pad":"' + b"p" * 900_000 + b'"}\n'
    f = fake(send_then_close(answer(body)))
    r, _ = run_status("--json", f.url)
    assert r.returncode == 0, r.stderr
    assert r.stdout.encode() == body


# ------------------------------------------------------------ Content-Length


def test_a_body_cut_short_of_its_content_length_fails(fake):
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(GOOD)
    f = fake(send_then_close(head + GOOD[:40]))
    r, _ = run_status("--json", f.url)
    assert r.returncode == 1, (r.returncode, r.stdout)
    assert f"was cut short (40 of {len(GOOD)} bytes)" in r.stderr, r.stderr
    assert r.stdout == ""


def test_a_cut_body_without_a_length_fails(fake):
    # the red team's truncated mode: no Content-Length at all
    f = fake(send_then_close(b"HTTP/1.1 200 OK\r\n\r\n" + GOOD[:40]))
    r, _ = run_status("--json", f.url)
    assert r.returncode == 1, (r.returncode, r.stdout)
    assert "no usable Content-Length" in r.stderr, r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("extra", [
    b"Content-Length: -5\r\n",
    b"Content-Length: 5, 5\r\n",
    b"Content-Length: 7\r\n",           # disagrees with the one answer() adds
    b"Transfer-Encoding: chunked\r\n",
], ids=["negative", "list", "conflicting", "chunked"])
def test_a_doubtful_length_is_refused(fake, extra):
    f = fake(send_then_close(answer(GOOD, extra)))
    r, _ = run_status("--json", f.url)
    assert r.returncode == 1, (r.returncode, r.stdout)
    assert "no usable Content-Length" in r.stderr, r.stderr


def test_the_answer_ends_at_its_length_even_if_the_connection_stays(fake):
    # Content-Length says where the page ends: no wait for the close
    f = fake(send_then_hold(answer(GOOD, b"Content-length:  %d \r\n" % len(GOOD))))
    r, took = run_status("--json", f.url)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["requests"] == 5
    assert took < 2, took


def test_a_body_with_a_nul_is_not_the_status_page(fake):
    f = fake(send_then_close(answer(b'{"master_pid":1\x00' + GOOD)))
    r, _ = run_status("--json", f.url)
    assert r.returncode == 1 and "not with herd's status page" in r.stderr, r.stderr


@pytest.mark.skipif("--model" in HERD_ARGS, reason="the status page needs the master's scoreboard")
def test_herds_own_page_passes_every_check(server, short_tmp):
    # the real server's answers (Content-Length, every format, a unix
    # listener) are what the checks above must let through
    sock = f"{short_tmp}/st.sock"
    srv = server("--status-path", "/st", listen=("127.0.0.1:0", f"unix:{sock}"))
    for url in (srv.url("/st"), f"unix:{sock}:/st"):
        r, _ = run_status("--json", url)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["workers"] >= 1
        r, _ = run_status("--prometheus", url)
        assert r.returncode == 0 and r.stdout.startswith("# HELP herd_"), r.stderr
        r, _ = run_status(url)
        assert r.returncode == 0 and r.stdout.startswith("herd: master "), r.stderr


# ------------------------------------------------------------ --watch samples


def watch(url, timeout=RUN_TIMEOUT_S):
    """--watch until it exits on its own; a run still going after timeout
    (a bad sample printed as if it were good) is killed and fails."""
    p = subprocess.Popen(herd_cmd("status", "--watch", url), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate(timeout=5)
        pytest.fail(f"--watch kept going on a bad sample: {out[:300]!r} {err[:300]!r}")
    return p.returncode, out, err


@pytest.mark.parametrize("counters, bad", [
    (b'"requests":-5,"bytes_in":1,"bytes_out":2', "requests"),
    (b'"requests":+5,"bytes_in":1,"bytes_out":2', "requests"),
    (b'"requests":5,"bytes_in":99999999999999999999999,"bytes_out":2', "bytes_in"),
    (b'"requests":5,"bytes_in":1,"bytes_out":"x"', "bytes_out"),
    (b'"requests":5,"bytes_in":1', "bytes_out"),
    (b'"requests":5,"bytes_in":1,"bytes_out":2,"2xx":7', "1xx"),
], ids=["negative", "plus", "overflow", "string", "missing", "class-missing"])
def test_watch_refuses_a_bad_sample(fake, counters, bad):
    classes = b"{}" if bad == "1xx" else b'{"1xx":0,"2xx":5,"3xx":0,"4xx":0,"5xx":0}'
    body = b'{"master_pid":1,' + counters + b',"responses":' + classes + b"}\n"
    f = fake(send_then_close(answer(body)))
    rc, out, err = watch(f.url)
    assert rc == 1, (rc, out, err)
    assert f'has no usable "{bad}"' in err, err
    assert "18446744073709551611" not in out
    assert out == "", out


def test_watch_prints_a_good_sample(fake):
    f = fake(send_then_close(answer(GOOD)))
    p = subprocess.Popen(herd_cmd("status", "--watch", f.url), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)
    finally:
        p.kill()
        out, err = p.communicate(timeout=5)
    assert "requests 5" in out, (out, err)


# ------------------------------------------------------------ the URL itself

@pytest.mark.parametrize("url, why", [
    ("http://127.0.0.1:{wrap}/herd-status", "port must be a number from 1 to 65535"),
    ("127.0.0.1:0", "port must be a number"),
    ("127.0.0.1:-1", "port must be a number"),
    ("127.0.0.1:", "port must be a number"),
    ("127.0.0.1:80x", "port must be a number"),
    ("https://127.0.0.1:{port}/herd-status", "plain HTTP"),
    ("ftp://127.0.0.1:{port}/", "plain HTTP"),
    ("http://127.0.0.1:{port}/herd status", "space or a control byte"),
    ("http://127.0.0.1:{port}/a\tb", "space or a control byte"),
    ("http://:{port}/", "no host"),
    ("http://[::1/", "brackets"),
    ("http://[::1]x/", "brackets"),
    ("unix:/tmp/x.sock:/a b", "space or a control byte"),
])
def test_a_url_it_would_not_send_as_written_is_a_usage_error(fake, url, why):
    # a live page on the port itself, so that a URL taken anyway would
    # succeed (the wrapped port is this port + 65536)
    f = fake(lambda conn, stop: conn.sendall(answer(GOOD)))
    port = f.sock.getsockname()[1]
    r, _ = run_status(url.format(port=port, wrap=port + 65536))
    assert r.returncode == 2 and why in r.stderr, (r.returncode, r.stderr, r.stdout)
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_the_fake_page_itself_is_taken(fake):
    f = fake(lambda conn, stop: conn.sendall(answer(GOOD)))
    r, _ = run_status(f.url, "--json")
    assert r.returncode == 0, r.stderr


# ------------------------------------------------------------ server bytes on the terminal

HOSTILE = b"\x1b]0;PWNED\x07\x1b[2J\x1b[31m\x9b31m\x7f"


def run_status_bytes(*args):
    cmd = herd_cmd("status", *args)
    return subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True,
                          timeout=RUN_TIMEOUT_S)


def no_controls(data, keep=b""):
    bad = [c for c in data if (c < 0x20 and bytes([c]) not in keep) or c >= 0x7f]
    assert not bad, data


def test_a_status_line_with_controls_is_shown_without_them(fake):
    """The reason of a failed fetch quotes the server's status line: an ESC
    (window title, screen clear, colours), C1 bytes or a bare LF from the
    server must not reach the terminal as they are (red-team pass 14)."""
    f = fake(send_then_close(b"HTTP/1.1 404 " + HOSTILE + b"gone\nfake: line\r\n"
                             b"Content-Length: 0\r\n\r\n"))
    r = run_status_bytes(f.url)
    assert r.returncode == 1, r.stderr
    assert b"no status page" in r.stderr and b"HTTP/1.1 404" in r.stderr, r.stderr
    assert b"fake: line" not in r.stderr, r.stderr
    no_controls(r.stderr, keep=b"\n")
    assert r.stderr.count(b"\n") == 1, r.stderr


@pytest.mark.parametrize("fmt, start", [
    ("table", b"herd: master 1 "),
    ("json", b'{"master_pid":1,"x":"'),
])
def test_a_page_with_controls_is_printed_without_them(fake, fmt, start):
    body = start + HOSTILE + b"\n  line two\tx\n"
    f = fake(send_then_close(answer(body)))
    args = [f.url] if fmt == "table" else ["--json", f.url]
    r = run_status_bytes(*args)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(start), r.stdout
    assert b"line two\tx\n" in r.stdout, r.stdout
    no_controls(r.stdout, keep=b"\n\t")
