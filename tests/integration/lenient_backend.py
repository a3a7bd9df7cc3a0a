"""An upstream with a lenient HTTP/1.1 parser, for the smuggling tests: it
reads framing the way old parsers did, so bytes a strict proxy lets through
unchanged can split differently here. Stdlib only, one thread per
connection, keep-alive.

How it reads (each a leniency some deployed parser had):
  - lines end at LF; a CR before it is dropped (bare-LF lines accepted)
  - header lines without a colon are skipped
  - a chunk line is read up to LF; the size is the hex before ';' (any
    number of digits), the extension is ignored
  - the line end after chunk data, and after the last chunk, is LF, CRLF
    or a bare CR; anything else: the next two bytes are taken unchecked
    (h11 before 0.15 did that after chunk data, CVE-2025-43859). There is
    no trailer support: the two bytes after the last chunk line end the
    body, whatever follows is the next request.

Each request is answered 200 with a JSON body naming what it saw: method,
path, X-Req-Id, the body's length and SHA-256, the connection number. A
request line it cannot read gets 400 and the connection closes.
"""

import hashlib
import json
import socket
import threading


class Lenient:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = []
        self.conns = 0
        self.socks = []
        self.closed = False
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(64)
        self.address = "127.0.0.1:%d" % self.ls.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

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

    def seen(self):
        with self.lock:
            return list(self.requests)

    # ---- one connection
    def _serve(self, s, cid):
        r = _Reader(s)
        try:
            while True:
                req = self._read_request(r)
                if req is None:
                    s.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
                              b"Connection: close\r\n\r\n")
                    break
                req["conn"] = cid
                with self.lock:
                    self.requests.append(req)
                body = json.dumps(req).encode()
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(body) + body)
                if req["connection"] == "close" or req["version"] == "HTTP/1.0":
                    break
        except (EOFError, OSError, ValueError):
            pass
        finally:
            s.close()

    def _read_request(self, r):
        line = r.line()
        while line == b"":
            line = r.line()  # empty lines before a request
        parts = line.split(b" ")
        if len(parts) != 3 or not parts[0].isalpha():
            return None
        method, target, version = (p.decode("latin-1") for p in parts)
        headers = {}
        while True:
            h = r.line()
            if h == b"":
                break
            if b":" in h:
                k, v = h.split(b":", 1)
                headers[k.strip().lower().decode("latin-1")] = v.strip().decode("latin-1")
        digest = hashlib.sha256()
        size = 0
        if "chunked" in headers.get("transfer-encoding", "").lower():
            while True:
                n = int(r.line().split(b";")[0].strip() or b"0", 16)
                if n == 0:
                    r.eol()
                    break
                data = r.exact(n)
                digest.update(data)
                size += n
                r.eol()
        elif "content-length" in headers:
            data = r.exact(int(headers["content-length"]))
            digest.update(data)
            size = len(data)
        return {"method": method, "path": target.split("?")[0], "version": version,
                "id": headers.get("x-req-id", ""), "body_len": size,
                "body_sha": digest.hexdigest(), "connection": headers.get("connection", ""),
                "headers": sorted(headers)}


class _Reader:
    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise EOFError
        self.buf += data

    def line(self):
        while b"\n" not in self.buf:
            if len(self.buf) > 65536:
                raise ValueError("line too long")
            self._fill()
        i = self.buf.index(b"\n")
        out = bytes(self.buf[:i])
        del self.buf[:i + 1]
        return out[:-1] if out.endswith(b"\r") else out

    def exact(self, n):
        while len(self.buf) < n:
            self._fill()
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def eol(self):
        """LF, CRLF or a bare CR; else two bytes, unchecked."""
        while len(self.buf) < 2:
            self._fill()
        if self.buf[0:1] == b"\n":
            del self.buf[:1]
        elif self.buf[0:2] == b"\r\n":
            del self.buf[:2]
        elif self.buf[0:1] == b"\r":
            del self.buf[:1]
        else:
            del self.buf[:2]
