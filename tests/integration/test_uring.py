"""The io_uring model (--model uring, issue 15): what the HTTP suite run on
it (HERD_ARGS='--model uring') does not show: many requests and connections
in a row with the fds back to where they were, a pipelining client that
does not read while it sends (input held while answers are on their way),
and a clear refusal where io_uring is not permitted."""

import os
import subprocess
import threading

import pytest

from conftest import HERD_ARGS, HERD_BIN, require_binary
from herdtest import get_req, wait_for

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
    """2,000 pipelined requests sent before a byte is read: the server holds
    what arrives while its answers wait, and misses none."""
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
