"""A small HTTP/1.1 backend for the proxy tests (stdlib only, raw sockets).

Listens on a unix socket or 127.0.0.1:PORT, one thread per connection,
keep-alive. It records every connection and request (headers, body length
and SHA-256, streamed: a 100 MiB upload is never held whole) and answers by
path:

  /slow?s=SECONDS   sleep, then echo          /malformed   a broken status line
  /badcl            two different lengths      /chunked     a chunked body
  /closedelim       a body ended by close      /big?n=N     N pattern bytes
  /hop              hop-by-hop headers         /nocontent   204
  /software         its own Server and Date headers
  /notmod           304                        /thenclose   ok, then close idle
  /early            413 before the body is read, then close
  /dropnext         echo, then close on the next request without answering
                    (that request is recorded in .dropped, by path)
  /chunkext         a chunked body with chunk extensions and trailers
  /chunkbig?n=N     N pattern bytes in chunks of many sizes, each with an
                    extension, then a trailer
  /health           status .health (200 at start; a test sets 503 to fail it),
                    after .health_delay seconds
  anything else: echo as JSON

Also runnable as a process (for the test that SIGKILLs it):
    python3 proxy_backend.py unix:/path NAME
prints "ready" once listening.
"""

import hashlib
import json
import os
import socket
import sys
import threading
import time
from urllib.parse import parse_qs, urlsplit

PATTERN = bytes(range(256)) * 1024  # 256 KiB


def pattern_bytes(n):
    """The first n bytes of the endless PATTERN stream, as a generator of pieces."""
    while n > 0:
        piece = PATTERN[:min(n, len(PATTERN))]
        yield piece
        n -= len(piece)


def pattern_sha(n):
    h = hashlib.sha256()
    for p in pattern_bytes(n):
        h.update(p)
    return h.hexdigest()


class Reader:
    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()

    def fill(self):
        data = self.sock.recv(1 << 18)
        if not data:
            raise EOFError
        self.buf += data

    def until(self, delim, limit=1 << 16):
        while True:
            i = self.buf.find(delim)
            if i >= 0:
                out = bytes(self.buf[:i])
                del self.buf[:i + len(delim)]
                return out
            if len(self.buf) > limit:
                raise ValueError("line too long")
            self.fill()

    def exact(self, n, sink):
        while n > 0:
            if not self.buf:
                self.fill()
            take = min(n, len(self.buf))
            sink(bytes(self.buf[:take]))
            del self.buf[:take]
            n -= take


class Backend:
    def __init__(self, addr, name="b"):
        """addr: 'unix:/path' or 'tcp' (127.0.0.1, a free port)."""
        self.name = name
        self.lock = threading.Lock()
        self.conns = 0
        self.requests = []
        self.dropped = []
        self.health = 200
        self.health_delay = 0.0     # seconds before /health answers
        self.socks = []
        self.closed = False
        if addr.startswith("unix:"):
            self.path = addr[5:]
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            self.ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.ls.bind(self.path)
            self.address = addr
        else:
            self.path = None
            self.ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.ls.bind(("127.0.0.1", 0))
            self.address = "127.0.0.1:%d" % self.ls.getsockname()[1]
        self.ls.listen(128)
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while True:
            try:
                s, _ = self.ls.accept()
            except OSError:
                return
            with self.lock:
                if self.closed:
                    s.close()
                    return
                self.conns += 1
                cid = self.conns
                self.socks.append(s)
            threading.Thread(target=self._serve, args=(s, cid), daemon=True).start()

    def close(self):
        with self.lock:
            self.closed = True
            socks = list(self.socks)
        try:
            self.ls.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.ls.close()
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        if self.path:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass

    def paths(self):
        with self.lock:
            return [r["path"] for r in self.requests]

    # ---- one connection
    def _serve(self, s, cid):
        r = Reader(s)
        drop_next = False
        try:
            while True:
                head = r.until(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, target, version = lines[0].split(" ")
                headers = [tuple(x.split(": ", 1)) for x in lines[1:]]
                low = {k.lower(): v for k, v in headers}
                if urlsplit(target).path.endswith("/early"):
                    # answer before reading the body, then close
                    s.sendall(b"HTTP/1.1 413 Too Big\r\nContent-Length: 7\r\n"
                              b"Connection: close\r\n\r\ntoo big")
                    break
                h = hashlib.sha256()
                size = [0]
                exts, trailers = 0, []  # framing a proxy should not pass on

                def sink(b):
                    h.update(b)
                    size[0] += len(b)

                if "content-length" in low:
                    r.exact(int(low["content-length"]), sink)
                elif low.get("transfer-encoding", "").lower() == "chunked":
                    while True:
                        line = r.until(b"\r\n")
                        exts += b";" in line
                        n = int(line.split(b";")[0], 16)
                        if n == 0:
                            while (t := r.until(b"\r\n")) != b"":
                                trailers.append(t.decode("latin-1"))
                            break
                        r.exact(n, sink)
                        r.until(b"\r\n")
                if drop_next:
                    with self.lock:
                        self.dropped.append(urlsplit(target).path)
                    break  # as if the idle connection had timed out just now
                drop_next = urlsplit(target).path.endswith("/dropnext")
                req = {"method": method, "target": target, "version": version,
                       "path": urlsplit(target).path, "headers": headers,
                       "body_len": size[0], "body_sha": h.hexdigest(), "conn": cid,
                       "backend": self.name, "chunk_exts": exts, "trailers": trailers}
                with self.lock:
                    self.requests.append(req)
                if not self._answer(s, req, low):
                    break
                if low.get("connection", "").lower() == "close" or version == "HTTP/1.0":
                    break
        except (EOFError, OSError, ValueError):
            pass
        finally:
            try:
                s.close()
            except OSError:
                pass

    def _answer(self, s, req, low):
        """Sends the response; False to close the connection after it."""
        path = req["path"]
        q = parse_qs(urlsplit(req["target"]).query)
        head_only = req["method"] == "HEAD"
        if path == "/health":
            time.sleep(self.health_delay)
            s.sendall(b"HTTP/1.1 %d Health\r\nContent-Length: 0\r\n\r\n" % self.health)
            return True
        if path.endswith("/slow"):
            time.sleep(float(q.get("s", ["3"])[0]))
        if path.endswith("/malformed"):
            s.sendall(b"HTTP/1.1 2x0 Nope\r\nContent-Length: 0\r\n\r\n")
            return False
        if path.endswith("/badcl"):
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!")
            return False
        if path.endswith("/chunked"):
            s.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                      b"Content-Type: text/plain\r\n\r\n")
            if not head_only:
                for part in (b"hello ", b"chunked ", b"world"):
                    s.sendall(b"%x\r\n%s\r\n" % (len(part), part))
                s.sendall(b"0\r\n\r\n")
            return True
        if path.endswith("/chunkext"):
            s.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n")
            if not head_only:
                s.sendall(b"005;name=\"v;1\"\r\nhello\r\n8; ext \r\n chunked\r\n"
                          b"6;a=b;c\r\n world\r\n0;end=1\r\nX-Sum: 1f2e\r\nX-Other: x\r\n\r\n")
            return True
        if path.endswith("/chunkbig"):
            n = int(q["n"][0])
            s.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            if not head_only:
                sizes, i = (1, 7, 300, 65536, 70000, 2, 4096), 0
                for piece in pattern_bytes(n):
                    while piece:
                        k = sizes[i % len(sizes)]
                        i += 1
                        s.sendall(b"%x;i=%d\r\n%s\r\n" % (min(k, len(piece)), i, piece[:k]))
                        piece = piece[k:]
                s.sendall(b"0\r\nX-Done: yes\r\n\r\n")
            return True
        if path.endswith("/closedelim"):
            s.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"
                      + (b"" if head_only else b"the end is the close"))
            return False
        if path.endswith("/big"):
            n = int(q["n"][0])
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                      b"Content-Length: %d\r\n\r\n" % n)
            if not head_only:
                for piece in pattern_bytes(n):
                    s.sendall(piece)
            return True
        if path.endswith("/hop"):
            s.sendall(b"HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Secret\r\n"
                      b"Keep-Alive: timeout=5\r\nX-Secret: 1\r\nX-Kept: yes\r\n"
                      b"Content-Length: 2\r\n\r\n" + (b"" if head_only else b"ok"))
            return True
        if path.endswith("/software"):
            s.sendall(b"HTTP/1.1 200 OK\r\nServer: BaseHTTP/0.6 Python/3.11\r\n"
                      b"Date: Mon, 01 Jan 2001 00:00:00 GMT\r\nX-Kept: yes\r\n"
                      b"Content-Length: 2\r\n\r\n" + (b"" if head_only else b"ok"))
            return True
        if path.endswith("/thenclose"):
            # keep-alive in words, then the server drops the idle connection
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            time.sleep(0.1)
            return False
        if path.endswith("/nocontent"):
            s.sendall(b"HTTP/1.1 204 No Content\r\nX-Kept: yes\r\n\r\n")
            return True
        if path.endswith("/notmod"):
            s.sendall(b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n")
            return True
        body = json.dumps({k: req[k] for k in ("method", "target", "version", "headers",
                                                "body_len", "body_sha", "conn",
                                                "backend", "chunk_exts", "trailers")}).encode()
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + (b"" if head_only else body))
        return True


if __name__ == "__main__":
    b = Backend(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "b")
    print("ready", flush=True)
    while True:
        time.sleep(3600)
