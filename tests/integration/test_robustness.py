"""Hostile clients: garbage, resets, slowloris, floods. The server survives,
keeps serving others, and leaks no file descriptors."""

import hashlib
import os
import random
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import fd_targets
from herdtest import (OP_TIMEOUT, ConnClosed, RawConn, build_request, get_req, wait_for)

pytestmark = pytest.mark.slow

ERROR_STATUSES = {400, 405, 413, 414, 431, 501, 505}


def statuses_in(data):
    out = []
    for line in data.split(b"\r\n"):
        if line.startswith(b"HTTP/1.") and len(line) >= 12:
            try:
                out.append(int(line[9:12]))
            except ValueError:
                pass
    return out


def garbage_conn(addr, seed):
    """Send random bytes; return (statuses seen, closed). Half the conns end
    the garbage with CRLFCRLF, the other half half-close instead."""
    rnd = random.Random(seed)
    data = bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 4096)))
    c = RawConn.open(addr)
    try:
        if seed % 2:
            c.send_ignore_errors(data + b"\r\n\r\n")
        else:
            c.send_ignore_errors(data)
            try:
                c.shutdown_write()
            except OSError:
                pass
        try:
            rest = c.read_to_close(timeout=10)
        except AssertionError:
            return None, False
        return statuses_in(rest), True
    finally:
        c.close()


@pytest.mark.concurrency
def test_garbage_on_200_connections(shared, site):
    with ThreadPoolExecutor(max_workers=50) as ex:
        results = list(ex.map(lambda i: garbage_conn(shared.addr, i), range(200)))
    hung = [i for i, (st, closed) in enumerate(results) if not closed]
    assert not hung, f"{len(hung)} garbage connections never closed (seeds {hung[:10]})"
    for i, (st, closed) in enumerate(results):
        assert len(st) <= 1, f"seed {i}: several responses to garbage: {st}"
        assert set(st) <= ERROR_STATUSES, f"seed {i}: unexpected status {st}"
    assert sum(1 for st, _ in results if st == [400]) >= 50, \
        "expected most CRLF-terminated garbage to be answered 400"
    r = shared.get("/index.html")
    assert r.status == 200 and r.body == site.files["index.html"]


@pytest.mark.concurrency
def test_reset_mid_download_does_not_disturb_other(shared, site):
    a = shared.connect(rcvbuf=65536)
    b = shared.connect(rcvbuf=65536)
    try:
        a.send(get_req("/big.bin"))
        b.send(get_req("/big.bin"))
        for c in (a, b):
            c.read_until(b"\r\n\r\n")
        a.read_exact(1 << 20)
        first = b.read_exact(1 << 20)
        a.reset()                       # SO_LINGER 0: RST mid-download
        h = hashlib.sha256(first)
        b.read_exact(site.big_size - len(first), sink=h.update)
        assert h.hexdigest() == site.big_sha
        b.send(get_req("/small.txt"))
        assert b.read_response().body == site.files["small.txt"]
    finally:
        b.close()
    assert shared.get("/small.txt").status == 200


@pytest.mark.concurrency
def test_many_resets_mid_download(shared, site):
    conns = []
    for _ in range(20):
        c = shared.connect(rcvbuf=32768)
        c.send(get_req("/big.bin"))
        conns.append(c)
    for c in conns:
        c.read_until(b"\r\n\r\n")
        c.read_exact(100_000)
    for i, c in enumerate(conns):
        c.reset() if i % 2 else c.close()
    r = shared.get("/small.txt")
    assert r.status == 200 and r.body == site.files["small.txt"]


@pytest.mark.concurrency
def test_slowloris_does_not_block_others(shared, site):
    hold = []
    try:
        for i in range(100):
            c = shared.connect()
            c.send(b"GET /small.txt HTTP/1.1\r\nHost: t\r\nX-Partial: " + str(i).encode())
            hold.append(c)
        t0 = time.monotonic()
        r = shared.get("/index.html")
        assert r.status == 200 and r.body == site.files["index.html"]
        assert time.monotonic() - t0 < 3, "partial heads delayed another client"
        # the partial ones are still alive and complete fine
        for c in hold[:10]:
            c.send(b"\r\n\r\n")
            assert c.read_response().status == 200
    finally:
        for c in hold:
            c.close()


def test_close_without_reading_big_responses(shared, site):
    for i in range(30):
        c = shared.connect()
        c.send(get_req("/big.bin") * 3)
        if i % 3 == 0:
            c.read_until(b"\r\n\r\n")
        c.reset() if i % 2 else c.close()
    r = shared.get("/small.txt")
    assert r.status == 200 and r.body == site.files["small.txt"]


def test_connect_and_close_flood(shared, site):
    for i in range(300):
        s = socket.create_connection(shared.addr, timeout=OP_TIMEOUT)
        if i % 2:
            RawConn(s).reset()
        else:
            s.close()
    r = shared.get("/small.txt")
    assert r.status == 200 and r.body == site.files["small.txt"]


def hostile_round(srv, site, rnd):
    """One pass of assorted abuse. Every socket is closed on return."""
    addr = srv.addr
    # garbage
    for i in range(30):
        garbage_conn(addr, rnd.randint(0, 1 << 30))
    # resets / closes mid-download, pipelined big requests
    for i in range(10):
        c = srv.connect(rcvbuf=32768)
        c.send(get_req("/big.bin") + get_req("/big.bin"))
        c.read_until(b"\r\n\r\n")
        c.read_exact(rnd.randint(1, 500_000))
        c.reset() if i % 2 else c.close()
    # silent connections, partial heads closed or reset
    for i in range(20):
        c = srv.connect()
        if i % 3:
            c.send(b"GET /small.txt HTTP/1.1\r\nHost: t\r\nX-A: " + b"b" * rnd.randint(0, 500))
        c.reset() if i % 2 else c.close()
    # oversized heads and URIs, big bodies, errors that close (the first
    # two are no errors under a --max-header-size of 64k, which the access
    # log runs use: a 200 and a 404 that keep the connection unless told)
    for data in (get_req("/small.txt", headers=[("X-Big", "a" * 20000), ("Connection", "close")]),
                 get_req("/" + "u" * 20000, headers=[("Connection", "close")]),
                 build_request("GET", "/small.txt", headers=[("Content-Length", str(3 << 20))],
                               body=b"q" * (3 << 20)),
                 build_request("GET", "/%00"),
                 build_request("GET", "/small.txt", version="HTTP/2.0"),
                 build_request("GET", "/small.txt", host=None),
                 build_request("GET", "/small.txt", headers=[("Transfer-Encoding", "gzip")]),
                 build_request("GET", "/small.txt", body=b"zz\r\n",
                               headers=[("Transfer-Encoding", "chunked")]),
                 # a TLS ClientHello (no CRLF: the server may wait for more, so
                 # the client half-closes like one that gives up)
                 b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(200)):
        c = srv.connect()

        def send_all(c=c, data=data):
            c.send_ignore_errors(data)
            if data.startswith(b"\x16"):
                try:
                    c.shutdown_write()
                except OSError:
                    pass
        sender = threading.Thread(target=send_all)
        sender.start()
        try:
            c.read_to_close(timeout=10)
        except (AssertionError, OSError):
            pass              # hangs/timeouts are asserted in the focused tests
        finally:
            sender.join(OP_TIMEOUT)
            c.close()
    # pipelined requests, read half, then close
    c = srv.connect()
    c.send(get_req("/index.html") * 200 + build_request("FOO", "/") + get_req("/big.bin"))
    for _ in range(100):
        c.read_response()
    c.reset()
    # a 413 on a keep-alive-looking request and a 405 with a body left unsent
    c = srv.connect()
    c.send(build_request("POST", "/x", headers=[("Content-Length", "100000")], body=b"p" * 10))
    c.close()
    c = srv.connect()
    c.send(build_request("GET", "/small.txt", headers=[("Transfer-Encoding", "chunked")],
                         body=b"10\r\nabc"))
    c.reset()


def test_hostile_mix_then_serves_and_no_fd_leak(server, site):
    srv = server("--max-body-size", "1m")
    # warm up: anything lazily opened (file cache, log) is in the baseline;
    # many connections so that every worker of a multi-process model sees them
    for _ in range(24):
        with srv.connect() as c:
            for t in ("/index.html", "/small.txt", "/big.bin", "/missing"):
                c.send(get_req(t, headers=[("Range", "bytes=0-0")]))
                c.read_response()
    base = srv.tree_fd_count()
    base_targets = fd_targets(srv.pid)
    rnd = random.Random(1234)
    t0 = time.monotonic()
    for _ in range(5):
        hostile_round(srv, site, rnd)
    assert time.monotonic() - t0 < 60
    assert srv.alive(), "server died under abuse:\n" + srv.stderr_text()[-3000:]
    # still serving, correctly
    r = srv.get("/index.html")
    assert r.status == 200 and r.body == site.files["index.html"]
    h = hashlib.sha256()
    with srv.connect() as c:
        c.send(get_req("/big.bin"))
        c.read_response(sink=h.update)
    assert h.hexdigest() == site.big_sha
    # fds settle back to the baseline (closed conns may take a moment).
    # Allowed growth: one cached fd per (file cache, docroot file), e.g. a
    # worker that saw no warm-up request now caching big.bin; the threads and
    # coro models keep a cache per kernel thread, so a process may hold a
    # file once per thread. Anything else (sockets, pipes, a file open more
    # often than that) is a leak.
    root = str(site.root)

    def caches(pid):
        try:
            return len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            return 1

    def leaks():
        now = fd_targets(srv.pid)
        return {k: (base_targets.get(k, 0), v) for k, v in now.items()
                if v > base_targets.get(k, 0)
                and not (k[1].startswith(root + "/") and v <= caches(k[0]))}
    # Within the header timeout (15 s by default): a connection whose end
    # the worker has not seen yet is closed by it at the latest, while a
    # leaked fd never comes back. (A fresh-machine run once saw a uring
    # worker hold one socket past 10 s; 25 runs under load here did not.)
    try:
        wait_for(lambda: not leaks(), timeout=20, interval=0.1, what="fds to settle")
    except AssertionError:
        raise AssertionError(f"fd leak after abuse: {srv.tree_fd_count()} fds vs {base}; "
                             f"(pid, target): (before, after) = {leaks()}") from None


def test_a_file_that_shrinks_while_it_is_sent(server, tmp_path):
    """The file is cut to 1 MiB while its 16 MiB answer goes to a client
    that reads slowly: Content-Length was a promise the server can no
    longer keep, so it closes the connection after what the file still
    had, says so in the error log, and goes on serving others. On uring the file is also evicted
    from the page cache first, so its reads go through the ring."""
    root = tmp_path / "www"
    root.mkdir()
    path = root / "shrinks.bin"
    data = os.urandom(16 << 20)
    path.write_bytes(data)
    (root / "small.txt").write_bytes(b"still here\n")
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    srv = server(docroot=root)
    with srv.connect(rcvbuf=65536) as c:
        c.send(get_req("/shrinks.bin"))
        got = c.read_until(b"\r\n\r\n")
        assert got.startswith(b"HTTP/1.1 200")
        time.sleep(0.2)  # the server fills the socket and waits
        os.truncate(path, 1 << 20)
        rest = c.read_to_close(timeout=10)
    assert len(rest) < len(data), "the answer must be cut"
    assert rest == data[:len(rest)], "what came is the file's bytes"
    r = srv.get("/small.txt")
    assert r.status == 200 and r.body == b"still here\n"
    # and the error log says why, as nginx's "was truncated at"
    wait_for(lambda: '"shrinks.bin" was truncated at ' in srv.stderr_text(),
             what="the truncation in the error log")
