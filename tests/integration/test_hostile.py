"""Hostile clients against a server with the access log and the reverse proxy
on: mutated heads, oversized heads, chunked bodies with trailers and broken
framing, long non-ASCII Referers and methods, slow bytes. Afterwards every
worker still answers, nothing crashed or respawned, the fd count is back to
its baseline, and the access log holds exactly one well-formed line per
response the clients received.

Seeded: HERD_HOSTILE_SEED picks another run; the seed is in the failure."""

import os
import random
import re
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import HERD_ARGS, descendants
from herdtest import RawConn, build_request, get_req, wait_for
from proxy_backend import Backend
from test_accesslog import read_lines

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    "--model" in HERD_ARGS, reason="proxy routes need an event-loop model; runs on the default")]

SEED = int(os.environ.get("HERD_HOSTILE_SEED", "20261123"))
CONNS = 200

# One combined-format line: inside quotes only printable ASCII without '"' or
# '\', and \xHH escapes.
Q = r'"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\x[0-9a-f]{2})*"'
LINE_RE = re.compile(r'^(?:\S+) - - \[[^\]]+\] ' + Q + r' (\d{3}) (\d+) ' + Q + ' ' + Q + r'$')


# ---------------------------------------------------------------- requests

def valid_request(rnd, i):
    target = rnd.choice(["/small.txt", "/index.html", "/missing", f"/api/echo?i={i}",
                         "/api/chunked", "/sub"])
    # no HEAD: after mutation the client could not tell which answer has no body
    method = rnd.choice(["GET", "GET", "POST"])
    headers = [("X-Id", str(i))]
    body = b""
    if method == "POST":
        body = bytes(rnd.getrandbits(8) for _ in range(rnd.randint(0, 300)))
        headers.append(("Content-Length", str(len(body))))
    return build_request(method, target, headers=headers, body=body)


def mutate(rnd, data):
    """A few byte-level mutations that hit the parser's edges."""
    b = bytearray(data)
    for _ in range(rnd.randint(1, 4)):
        op = rnd.randrange(6)
        pos = rnd.randrange(len(b) + 1)
        if op == 0:
            b[pos:pos] = rnd.choice([b"\r", b"\n", b"\0", b" ", b"\t", b"\r\n", b"\x7f",
                                     b":", b"\xff", b"\r\n\r\n"])
        elif op == 1 and b:
            del b[pos:pos + rnd.randint(1, 4)]
        elif op == 2 and b:
            b[min(pos, len(b) - 1)] = rnd.getrandbits(8)
        elif op == 3:
            b[pos:pos] = rnd.choice([b"Content-Length: 5\r\n", b"Transfer-Encoding: chunked\r\n",
                                     b"Host: x\r\n", b"Expect: 100-continue\r\n",
                                     b"Connection: close\r\n"])
        elif op == 4:
            b[pos:pos] = b"A" * rnd.choice([1, 100, 4096])
        else:
            b += b"5\r\nhello\r\n0\r\n\r\n"
    return bytes(b)


def chunked_request(rnd, target):
    """A chunked upload, valid or with broken framing, and trailers."""
    good = rnd.random() < 0.5
    parts = []
    for _ in range(rnd.randint(0, 4)):
        data = bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 200)))
        ext = rnd.choice([b"", b";a=b", b';q="x y"'])
        parts.append(b"%x" % len(data) + ext + b"\r\n" + data + b"\r\n")
    last = b"0\r\n" + rnd.choice([b"", b"X-T: 1\r\n", b"X-Forwarded-For: 6.6.6.6\r\n"]) + b"\r\n"
    body = b"".join(parts) + last
    if not good:
        body = rnd.choice([
            body.replace(b"\r\n", b"\n", 1),                     # bare LF
            b"5\r\nhello\n0\r\n\r\n",                             # LF after data
            b"5;a\nb\r\nhello\r\n0\r\n\r\n",                      # LF in an extension
            b"0" * 30 + b"5\r\nhello\r\n0\r\n\r\n",               # 30 hex digits
            b"0\r\nX: a\rb\r\n\r\n",                              # bare CR in a trailer
            b"0\r\nno colon\r\n\r\n",                             # trailer without a colon
            b"1;" + b"e" * 5000 + b"\r\nx\r\n0\r\n\r\n",          # 5 KB extension
            b"7fffffffffffffff\r\n",                              # huge size
            b"1\r\nx\r\n0\r\n" + b"T: " + b"v" * 70000 + b"\r\n\r\n",  # huge trailer
        ])
    return build_request("POST", target, headers=[("Transfer-Encoding", "chunked")], body=body)


def log_bomb(rnd):
    """The access-log overflow: long non-ASCII Referers, then a long method."""
    ref = bytes(rnd.randrange(0x80, 0x100) for _ in range(1700))
    reqs = [build_request("GET", "/small.txt", headers=[("Referer", ref), ("User-Agent", ref)])
            for _ in range(8)]
    reqs.append(b"A" * 7600 + b" /small.txt HTTP/1.1\r\nHost: t\r\nReferer: " + ref + b"\r\n\r\n")
    return b"".join(reqs)


def oversized(rnd):
    n = rnd.choice([16 * 1024 - 40, 16 * 1024, 16 * 1024 + 1, 70000])
    return rnd.choice([
        get_req("/small.txt", headers=[("X-Big", "a" * n)]),
        get_req("/" + "u" * n),
        build_request("GET", "/small.txt", headers=[("Referer", "\x80" * (n // 2))]),
    ])


# ---------------------------------------------------------------- responses

def count_responses(data):
    """Responses in data (none of them to HEAD)."""
    n, pos = 0, 0
    while pos < len(data):
        end = data.find(b"\r\n\r\n", pos)
        if end < 0 or not data.startswith(b"HTTP/1.", pos):
            break
        head = data[pos:end].decode("latin-1")
        status = int(head[9:12])
        pos = end + 4
        if status == 100:
            continue
        n += 1
        if status in (204, 304):
            continue
        m = re.search(r"(?im)^content-length:\s*(\d+)", head)
        if m:
            pos += int(m.group(1))
        elif re.search(r"(?im)^transfer-encoding:\s*chunked", head):
            while True:
                eol = data.find(b"\r\n", pos)
                if eol < 0:
                    return n
                size = int(data[pos:eol].split(b";")[0], 16)
                pos = eol + 2 + size + 2
                if size == 0:
                    break
        else:
            break
    return n


def one_client(addr, seed):
    """One hostile connection. Returns (responses received, ended cleanly)."""
    rnd = random.Random(seed)
    kind = rnd.randrange(6)
    if kind == 0:
        data = mutate(rnd, b"".join(valid_request(rnd, seed * 10 + k)
                                    for k in range(rnd.randint(1, 3))))
    elif kind == 1:
        data = oversized(rnd)
    elif kind == 2:
        data = chunked_request(rnd, rnd.choice(["/api/up", "/small.txt"]))
    elif kind == 3:
        data = log_bomb(rnd)
    else:
        data = valid_request(rnd, seed)
    c = RawConn.open(addr)
    try:
        if kind == 5:
            # slow bytes: the head a few bytes at a time
            for k in range(0, len(data), 7):
                c.send_ignore_errors(data[k:k + 7])
                time.sleep(0.01)
        else:
            c.send_ignore_errors(data)
        try:
            c.shutdown_write()
        except OSError:
            pass
        try:
            got = c.read_to_close(timeout=20)
        except (AssertionError, OSError):
            return 0, False
        return count_responses(got), True
    finally:
        c.close()


# ---------------------------------------------------------------- the test

def test_hostile_clients_with_log_and_proxy(server, site, tmp_path):
    (site.root / "sub").mkdir(exist_ok=True)
    b = Backend(f"unix:{tmp_path}/b.sock", "b")
    log = tmp_path / "access.log"
    try:
        srv = server("--workers", "2", "--access-log", log, "--upstream", f"b={b.address}",
                     "--proxy", "/api/=b", "--upstream-keepalive", "1", "--max-header-size", "16k",
                     "--max-body-size", "64k", "--header-timeout", "5s")
        # warm-up: every worker opens what it caches and pools its one
        # upstream connection (--upstream-keepalive 1), so the fd baseline
        # holds them
        for _ in range(20):
            with srv.connect() as c:
                for t in ("/small.txt", "/index.html", "/api/warm"):
                    c.send(get_req(t))
                    assert c.read_response().status == 200
        wait_for(lambda: len(read_lines(log)) == 60, what="the warm-up's 60 log lines")
        base = srv.tree_fd_count()
        workers = set(wait_for(lambda: len(descendants(srv.pid)) == 3 and descendants(srv.pid),
                               what="two workers and the logger"))

        with ThreadPoolExecutor(max_workers=50) as ex:
            results = list(ex.map(lambda i: one_client(srv.addr, SEED + i), range(CONNS)))

        assert srv.alive(), f"seed {SEED}: server died:\n" + srv.stderr_text()[-3000:]
        assert not srv.crash_lines(), f"seed {SEED}: " + "\n".join(srv.crash_lines()[:10])
        assert set(descendants(srv.pid)) == workers, f"seed {SEED}: a worker was replaced"
        hung = [SEED + i for i, (_, clean) in enumerate(results) if not clean]
        assert not hung, f"connections that never ended (seeds {hung[:10]})"
        answered = sum(n for n, _ in results)

        # every worker still answers (reuseport spreads 40 connections over both)
        for _ in range(40):
            with srv.connect() as c:
                c.send(get_req("/small.txt"))
                assert c.read_response().status == 200
        answered += 40

        want = 60 + answered
        try:
            wait_for(lambda: len(read_lines(log)) >= want, timeout=10, what="log lines")
        except AssertionError:
            pass
        time.sleep(0.3)
        lines = read_lines(log)
        bad = [l for l in lines if not LINE_RE.match(l)]
        assert not bad, f"seed {SEED}: malformed log lines:\n" + "\n".join(x[:300] for x in bad[:5])
        # A proxied request whose client half-closed (as these clients do
        # after sending) is aborted and logged 499, as nginx does, with no
        # response: one line each, on top of the responses received.
        gone = [l for l in lines if '" 499 ' in l]
        assert all('/api/' in l for l in gone), "a 499 for a static request:\n" + "\n".join(gone[:5])
        assert len(lines) == want + len(gone), \
            f"seed {SEED}: {len(lines)} log lines for {want} responses received and {len(gone)} 499s"
        wait_for(lambda: srv.tree_fd_count() <= base, timeout=10,
                 what=f"fds back to {base} (now {srv.tree_fd_count()})")
    finally:
        b.close()
