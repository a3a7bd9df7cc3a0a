"""The io_uring model (--model uring, issue 15): what the HTTP suite run on
it (HERD_ARGS='--model uring') does not show: many requests and connections
in a row with the fds back to where they were, a pipelining client that
does not read while it sends (input waits while answers are on their way),
requests piling up behind a large answer, and a clear refusal where
io_uring is not permitted. Files not in the page cache: test_large_files.py."""

import hashlib
import os
import subprocess
import threading

import pytest

from conftest import HERD_ARGS, HERD_BIN, require_binary
from herdtest import ConnClosed, build_request, get_req, wait_for

pytestmark = pytest.mark.skipif("--model" in HERD_ARGS, reason="sets --model itself")

N = 1000


def test_keepalive_and_close_requests_and_fds_back_to_baseline(server, site):
    srv = server("--model", "uring", "--workers", "1")
    body = site.files["small.txt"]
    with srv.connect() as c:
        c.send(get_req("/small.txt"))
        assert c.read_response().status == 200
    wait_for(lambda: srv.tree_fd_count(sockets_only=True) ==
             srv.tree_fd_count(sockets_only=True), what="fds settle")
    base = srv.tree_fd_count(sockets_only=True)

    with srv.connect() as c:
        for i in range(N):
            c.send(get_req("/small.txt"))
            r = c.read_response()
            assert r.status == 200 and r.body == body, (i, r)
    for i in range(N):
        with srv.connect() as c:
            c.send(get_req("/small.txt", headers={"Connection": "close"}))
            r = c.read_response()
            assert r.status == 200 and r.body == body, (i, r)
            c.expect_close(timeout=5)  # the server closes: no FIN held back by the ring
    wait_for(lambda: srv.tree_fd_count(sockets_only=True) <= base, timeout=5,
             what=f"server sockets back to {base}")


def test_pipelining_client_that_reads_late_gets_every_answer(server, site):
    """2,000 pipelined requests sent before a byte is read: the server
    takes what its buffer has room for while its answers wait, and misses
    none."""
    srv = server("--model", "uring", "--workers", "1")
    n = 2000
    body = site.files["small.txt"]
    with srv.connect(timeout=20) as c:
        sender = threading.Thread(target=c.sock.sendall,
                                  args=(get_req("/small.txt") * n,), daemon=True)
        sender.start()
        sender.join(1.0)  # let input pile up before reading anything
        for i in range(n):
            r = c.read_response()
            assert r.status == 200 and r.body == body, (i, r)
        sender.join(10)
        assert not sender.is_alive()


def test_clear_error_where_io_uring_is_not_permitted(tmp_path):
    require_binary()
    env = dict(os.environ, HERD_TEST_NO_URING="1")
    r = subprocess.run([HERD_BIN, "serve", "--model", "uring", "--listen", "127.0.0.1:0",
                        str(tmp_path)], env=env, capture_output=True, text=True, timeout=10,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 1, r
    assert "io_uring is not permitted here" in r.stderr, r.stderr
    assert "use --model reuseport" in r.stderr, r.stderr
    assert "Operation not permitted" in r.stderr, r.stderr


# Requests of ~1 KiB each sent behind a 50 MiB answer: 600 KB, far past
# what a connection buffers (16 KiB) or holds (64 receive buffers of 4 KiB).
PILE = 600


def test_small_bodies_copied_behind_their_heads_arrive_whole(server, tmp_path):
    """Bodies up to 1 KiB are copied behind their heads so that a batch
    goes out as one buffer (one IORING_OP_SEND); larger ones stay in the
    file cache and the batch goes by SENDMSG. Pipelined answers on both
    sides of the limit, ranges, HEAD, 404s and a slow reader (short sends
    of one buffer) all arrive whole and in order."""
    sizes = [0, 1, 64, 1023, 1024, 1025, 4096]
    files = {n: bytes((i * 7 + n) % 251 for i in range(n)) for n in sizes}
    for n, data in files.items():
        (tmp_path / f"f{n}.bin").write_bytes(data)
    srv = server("--model", "uring", "--workers", "1", docroot=tmp_path)
    reqs = []
    for n, data in files.items():
        reqs.append((get_req(f"/f{n}.bin"), "GET", 200, data))
        reqs.append((build_request("HEAD", f"/f{n}.bin"), "HEAD", 200, b""))
        if n > 2:
            reqs.append((get_req(f"/f{n}.bin", headers=[("Range", "bytes=1-")]), "GET", 206,
                         data[1:]))
        reqs.append((get_req(f"/missing{n}"), "GET", 404, None))
    burst = b"".join(r[0] for r in reqs)
    with srv.connect(timeout=20) as c:
        c.send(burst)
        for i, (_, method, status, body) in enumerate(reqs):
            r = c.read_response(method)
            assert r.status == status, (i, r)
            if body is not None:
                assert r.body == body, (i, len(r.body))
    # 1,500 answers of 1,023 bytes each before a byte is read: the one
    # buffer a batch makes goes out in parts
    with srv.connect(timeout=20) as c:
        sender = threading.Thread(target=c.sock.sendall,
                                  args=(get_req("/f1023.bin") * 1500,), daemon=True)
        sender.start()
        sender.join(1.0)
        for i in range(1500):
            r = c.read_response()
            assert r.status == 200 and r.body == files[1023], (i, r)
        sender.join(10)
        assert not sender.is_alive()


@pytest.mark.parametrize("variant", ["bounded", "unbounded", "refused"])
def test_requests_piling_up_behind_a_large_answer(server, site, variant):
    """A multishot receive goes on delivering while an answer is on its
    way. Where the kernel bounds a receive (6.18 does), it takes no more than
    the connection's buffer has room for and the rest waits in the socket:
    every request is answered (before, 132 of 600 were). Without the bound
    (an older kernel, or one that refuses it) input past the held buffers
    is dropped and the connection closes after the answer on its way,
    which must arrive whole; every answer that comes is right and in
    order."""
    env = {"bounded": None, "unbounded": {"HERD_TEST_UNBOUNDED_RECV": "1"},
           "refused": {"HERD_TEST_UNBOUNDED_RECV": "refused"}}[variant]
    srv = server("--model", "uring", "--workers", "1", env=env)
    pad = "x" * 1000
    small = site.files["small.txt"]
    burst = get_req("/big.bin") + b"".join(
        get_req(f"/small.txt?{i}", headers=[("X-Pad", pad)]) for i in range(PILE))
    with srv.connect(timeout=20) as c:
        sender = threading.Thread(target=c.send_ignore_errors, args=(burst,), daemon=True)
        sender.start()
        sender.join(0.3)  # the burst is in the sockets before the answer is read
        h = hashlib.sha256()
        r = c.read_response(sink=h.update)
        assert r.status == 200 and h.hexdigest() == site.big_sha
        answered = 0
        while answered < PILE:
            try:
                r = c.read_response()
            except ConnClosed:
                break
            assert r.status == 200 and r.body == small, (answered, r)
            answered += 1
        sender.join(10)
        assert not sender.is_alive()
        if variant == "bounded":
            assert answered == PILE
            c.send(get_req("/small.txt"))
            assert c.read_response().body == small
        # unbounded, how much is dropped depends on how far the receive ran
        # before its cancel landed: sometimes nothing
    refused_note = "cannot bound a multishot receive" in srv.stderr_text()
    assert refused_note == (variant == "refused"), srv.stderr_text()


def test_pipelined_requests_behind_a_proxied_answer_given_at_once(server, site, tmp_path):
    """A proxied request whose answer comes at once (its group's only
    server is down: a 502 before the round ends), and the client's next
    requests arriving as segments of their own: a receive completion of
    that same round used to start the next exchange before the ended one
    had handed the socket back to the ring (its epoll registration was
    still there), and the connection closed with its requests unanswered."""
    srv = server("--model", "uring", "--workers", "1",
                 "--upstream", f"down=unix:{tmp_path}/none.sock", "--proxy", "/down/=down/")
    body = site.files["small.txt"]
    for i in range(200):
        with srv.connect() as c:
            c.send(get_req("/down/a"))  # each its own segment (TCP_NODELAY)
            c.send(get_req("/down/b"))
            c.send(get_req("/small.txt", headers={"Connection": "close"}))
            got = []
            try:
                for _ in range(3):
                    got.append(c.read_response().status)
            except (ConnClosed, OSError) as e:
                got.append(type(e).__name__)
            assert got == [502, 502, 200], (i, got)
            c.expect_close(timeout=5)
