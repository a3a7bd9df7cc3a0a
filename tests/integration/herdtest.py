"""Client-side helpers for the herd integration suite (stdlib only).

Everything here has a timeout: a hung server makes a test fail, never hang.
"""

import ctypes
import hashlib
import os
import re
import select
import socket
import struct
import threading
import time

# Per-operation timeout; generous so the suite also passes on an ASan build.
OP_TIMEOUT = float(os.environ.get("HERD_TEST_TIMEOUT", "10"))

IMF_FIXDATE = re.compile(
    r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} "
    r"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} "
    r"\d{2}:\d{2}:\d{2} GMT$"
)

SERVER_HEADER = "herd/0.1.0"


def wait_for(cond, timeout=OP_TIMEOUT, interval=0.02, what="condition"):
    """Poll cond() until it returns a truthy value; return it or raise."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def log_lines(path):
    """The whole lines of a log a server is still writing: none while the
    file does not exist, and not the last line while it is being written.
    The writer writes whole lines, but Linux does not make a write(2)
    atomic to a concurrent read(2): the file grows a page at a time, so a
    read can end inside a line (a test that took that part for the whole
    line, or parsed it, failed in CI)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    return data[:data.rfind(b"\n") + 1].decode("utf-8", "replace").splitlines()


def build_request(method="GET", target="/", version="HTTP/1.1", headers=None,
                  body=b"", host="test"):
    """Build request bytes. headers: list of (name, value) or dict.
    host=None leaves Host out (headers may still add one)."""
    def enc(x):
        return x if isinstance(x, bytes) else str(x).encode("utf-8")

    lines = [enc(method) + b" " + enc(target) + b" " + enc(version)]
    if host is not None:
        lines.append(b"Host: " + enc(host))
    if headers:
        items = headers.items() if isinstance(headers, dict) else headers
        for name, value in items:
            lines.append(enc(name) + b": " + enc(value))
    return b"\r\n".join(lines) + b"\r\n\r\n" + enc(body)


def get_req(target="/", **kw):
    return build_request("GET", target, **kw)


class Response:
    def __init__(self, version, status, reason, headers, body, head):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers          # list of (name, value), order kept
        self.body = body                # bytes, or None when a sink was used
        self.head = head                # raw head bytes

    def getall(self, name):
        name = name.lower()
        return [v for n, v in self.headers if n.lower() == name]

    def get(self, name, default=None):
        values = self.getall(name)
        return values[0] if values else default

    def has(self, name):
        return bool(self.getall(name))

    def conn_tokens(self):
        toks = set()
        for v in self.getall("connection"):
            toks.update(t.strip().lower() for t in v.split(",") if t.strip())
        return toks

    def __repr__(self):
        return f"<Response {self.status} {self.reason!r} headers={self.headers!r}>"


def parse_head(head):
    """Parse a response head (without the final blank line)."""
    text = head.decode("latin-1")
    lines = text.split("\r\n")
    m = re.match(r"^(HTTP/\d\.\d) (\d{3}) ?(.*)$", lines[0])
    if not m:
        raise AssertionError(f"bad status line: {lines[0]!r}")
    headers = []
    for line in lines[1:]:
        if not line:
            continue
        if ":" not in line:
            raise AssertionError(f"bad response header line: {line!r}")
        n, v = line.split(":", 1)
        if n != n.strip():
            raise AssertionError(f"whitespace in response header name: {line!r}")
        headers.append((n, v.strip()))
    return m.group(1), int(m.group(2)), m.group(3), headers


class ConnClosed(Exception):
    """The peer closed (EOF or reset) while a response was expected."""


class RawConn:
    """A socket with a read buffer and an HTTP/1.1 response reader."""

    def __init__(self, sock, timeout=OP_TIMEOUT):
        self.sock = sock
        self.sock.settimeout(timeout)
        self.buf = bytearray()
        self.eof = False

    @classmethod
    def open(cls, addr, family=None, timeout=OP_TIMEOUT, rcvbuf=None, nodelay=True):
        if family is None:
            family = socket.AF_UNIX if isinstance(addr, str) else (
                socket.AF_INET6 if ":" in addr[0] else socket.AF_INET)
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(timeout)
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if nodelay and family != socket.AF_UNIX:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            s.connect(addr)
        except Exception:
            s.close()
            raise
        return cls(s, timeout)

    # -- sending
    def send(self, data):
        self.sock.sendall(data)

    def send_ignore_errors(self, data):
        """Send, tolerating a peer that already closed (EPIPE/ECONNRESET)."""
        try:
            self.sock.sendall(data)
            return True
        except OSError:          # EPIPE, ECONNRESET, or our timeout
            return False

    # -- receiving
    def _fill(self, n=262144):
        if self.eof:
            raise ConnClosed("connection already closed by peer")
        try:
            data = self.sock.recv(n)
        except ConnectionResetError:
            self.eof = True
            raise ConnClosed("connection reset by peer")
        if not data:
            self.eof = True
            raise ConnClosed("connection closed by peer (EOF)")
        self.buf += data

    def read_until(self, delim, limit=1 << 20):
        while True:
            i = self.buf.find(delim)
            if i >= 0:
                out = bytes(self.buf[:i + len(delim)])
                del self.buf[:i + len(delim)]
                return out
            if len(self.buf) > limit:
                raise AssertionError(f"no {delim!r} within {limit} bytes")
            self._fill()

    def read_exact(self, n, sink=None):
        if sink is None:
            while len(self.buf) < n:
                self._fill()
            out = bytes(self.buf[:n])
            del self.buf[:n]
            return out
        left = n
        if self.buf:
            take = min(left, len(self.buf))
            sink(bytes(self.buf[:take]))
            del self.buf[:take]
            left -= take
        while left > 0:
            try:
                data = self.sock.recv(min(left, 1 << 20))
            except ConnectionResetError:
                self.eof = True
                raise ConnClosed(f"reset with {left} body bytes missing")
            if not data:
                self.eof = True
                raise ConnClosed(f"EOF with {left} body bytes missing")
            sink(data)
            left -= len(data)
        return None

    def read_response(self, method="GET", sink=None):
        """Read one response. No body for HEAD, 1xx, 204, 304."""
        head = self.read_until(b"\r\n\r\n")[:-4]
        version, status, reason, headers = parse_head(head)
        resp = Response(version, status, reason, headers, b"", head)
        if method.upper() == "HEAD" or status in (204, 304) or 100 <= status < 200:
            return resp
        te = resp.get("transfer-encoding")
        cl = resp.getall("content-length")
        if te and "chunked" in te.lower():
            body = bytearray()
            while True:
                line = self.read_until(b"\r\n")
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    while self.read_until(b"\r\n") != b"\r\n":
                        pass
                    break
                body += self.read_exact(size)
                self.read_exact(2)
            resp.body = bytes(body)
        elif cl:
            if len(set(cl)) != 1:
                raise AssertionError(f"conflicting Content-Length in response: {cl}")
            n = int(cl[0])
            resp.body = self.read_exact(n, sink=sink)
        else:
            resp.body = self.read_to_close()
        return resp

    def read_to_close(self, timeout=OP_TIMEOUT):
        """Read until EOF or reset; return everything read. Fails on timeout."""
        deadline = time.monotonic() + timeout
        out = bytearray(self.buf)
        self.buf.clear()
        while not self.eof:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"server did not close the connection within {timeout}s "
                    f"(got {len(out)} more bytes: {bytes(out[:200])!r})")
            self.sock.settimeout(min(left, OP_TIMEOUT))
            try:
                data = self.sock.recv(262144)
            except ConnectionResetError:
                break
            except socket.timeout:
                continue
            if not data:
                break
            out += data
        self.eof = True
        self.sock.settimeout(OP_TIMEOUT)
        return bytes(out)

    def expect_close(self, timeout=OP_TIMEOUT):
        """Assert the server closes with no further response bytes."""
        rest = self.read_to_close(timeout)
        assert rest == b"", f"unexpected bytes before close: {rest[:300]!r}"

    def closed_within(self, timeout):
        """Return (closed, elapsed, extra_bytes) waiting up to timeout."""
        t0 = time.monotonic()
        try:
            rest = self.read_to_close(timeout)
            return True, time.monotonic() - t0, rest
        except AssertionError:
            return False, time.monotonic() - t0, b""

    def nothing_within(self, wait):
        """True if no byte arrives and the conn stays open for `wait` s."""
        if self.buf:
            return False
        r, _, _ = select.select([self.sock], [], [], wait)
        if not r:
            return True
        return False

    def is_open(self):
        """Non-blocking check: conn is not closed by the peer (no EOF/RST)
        and has no unread data."""
        if self.eof:
            return False
        r, _, _ = select.select([self.sock], [], [], 0)
        if not r:
            return True
        try:
            data = self.sock.recv(65536, socket.MSG_PEEK)
        except (ConnectionResetError, BlockingIOError):
            return False
        return bool(data)

    def shutdown_write(self):
        self.sock.shutdown(socket.SHUT_WR)

    def reset(self):
        """Close with SO_LINGER {1, 0}: the kernel sends RST."""
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                 struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.sock.close()

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


def request(addr, data, method="GET", **kw):
    """One request on a fresh connection; return the response."""
    with RawConn.open(addr, **kw) as c:
        c.send(data)
        return c.read_response(method)


def check_common(resp):
    """Headers every response carries per SPEC."""
    assert resp.get("server") == SERVER_HEADER, resp
    date = resp.get("date")
    assert date and IMF_FIXDATE.match(date), f"bad Date: {date!r}"
    assert len(resp.getall("content-length")) == 1, f"need one Content-Length: {resp}"
    assert re.fullmatch(r"\d+", resp.get("content-length")), resp


def check_error(resp, status, text=None):
    assert resp.status == status, f"expected {status}, got {resp.status} {resp.reason}: {resp.body[:300]!r}"
    check_common(resp)
    if resp.body:
        body = resp.body.decode("utf-8", "replace")
        assert str(status) in body, f"error page for {status} lacks the code: {body[:300]!r}"
        if text:
            assert text in body, f"error page lacks {text!r}: {body[:300]!r}"


def segments_without_data(sock):
    """Segments the client's socket took that carried no payload (Linux
    tcp_info: tcpi_segs_in at 140, tcpi_data_segs_in at 152)."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    segs_in = struct.unpack_from("I", info, 140)[0]
    data_segs_in = struct.unpack_from("I", info, 152)[0]
    return segs_in - data_segs_in


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def etag_for(path):
    """herd's ETag of a file: nginx's "<mtime hex>-<size hex>", with the
    mtime's nanoseconds after a dot when it has them."""
    st = os.stat(path)
    sec, nsec = divmod(st.st_mtime_ns, 10**9)
    return ('"%x.%x-%x"' % (sec, nsec, st.st_size) if nsec else
            '"%x-%x"' % (sec, st.st_size))


# ---- files not in the page cache

_libc = ctypes.CDLL(None, use_errno=True)
SYS_CACHESTAT = 451  # x86_64, Linux 6.5+


def cached_pages(fd):
    """Pages of the file in the page cache (cachestat(2)), or None where the
    kernel has no cachestat."""
    rng = (ctypes.c_uint64 * 2)(0, 0)  # offset 0, length 0: the whole file
    stat = (ctypes.c_uint64 * 5)()     # nr_cache comes first
    if _libc.syscall(SYS_CACHESTAT, fd, rng, stat, 0) != 0:
        return None
    return stat[0]


def receive_on_every_cpu():
    """A byte over loopback from each CPU in turn. Over loopback the CPU
    that sends also receives, and its receive first frees the socket
    buffers that other CPUs finished with and handed back to it (up to 32
    of them wait there until then): sendfile's buffers hold pages of the
    file they carried, which no eviction can drop while they wait."""
    ls = socket.create_server(("127.0.0.1", 0))
    old = os.sched_getaffinity(0)
    try:
        with socket.create_connection(ls.getsockname()) as a:
            b, _ = ls.accept()
            with b:
                for cpu in sorted(old):
                    os.sched_setaffinity(0, {cpu})
                    a.sendall(b"x")
                    b.recv(1)
    finally:
        os.sched_setaffinity(0, old)
        ls.close()


def evict(path):
    """Drops a file's pages from the page cache (written back first: dirty
    pages stay), and checks that they went, so that no test finds the file
    half cached."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        for _ in range(100):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            left = cached_pages(fd)
            if not left:  # 0, or no cachestat to ask
                return
            receive_on_every_cpu()
            time.sleep(0.01)
        raise AssertionError(f"{path}: {left} pages stay in the page cache")
    finally:
        os.close(fd)


class ThreadedListener:
    """A loopback TCP listener on a free port that serves each connection
    in a thread of its own: subclasses write _serve(sock). address is
    "127.0.0.1:PORT"; close() stops the accepting."""

    def listen(self):
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(16)
        self.address = "127.0.0.1:%d" % self.ls.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                s, _ = self.ls.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(s,), daemon=True).start()

    def close(self):
        self.ls.close()
