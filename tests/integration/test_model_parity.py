"""Every concurrency model answers the same bytes the same way, however the
network splits them (found by a differential harness that sent one byte
sequence to each model and compared the answers). Each test runs on every
model, as test_proxy_framing.py runs on the proxying ones."""

import hashlib
import json
import time

import pytest

from conftest import HERD_ARGS
from herdtest import RawConn, wait_for
from proxy_backend import Backend, pattern_sha

pytestmark = pytest.mark.skipif(
    "--model" in HERD_ARGS, reason="picks its models itself")

MODELS = ["reuseport", "prefork", "dispatch", "threads", "coro", "coro2", "uring",
          "iterative", "single"]


@pytest.fixture(params=MODELS)
def model(request):
    if request.param == "coro2":
        return ["--model", "coro", "--threads", "2"]
    return ["--model", request.param]


def answer(srv, data):
    """The status of the one answer to data sent in one write, and that the
    connection closed after it."""
    with srv.connect() as c:
        c.send(data)
        c.shutdown_write()
        resp = c.read_response()
        c.expect_close()
    return resp.status


def test_bad_method_over_a_long_head_is_400_in_one_read(server, model):
    # The method is not a token: 400, as when the same bytes come in pieces
    # (uring's receive buffers, a slow client). It was 414 (or 431) when the
    # whole head, over --max-header-size, was in the first read.
    srv = server(*model, "--max-header-size", "4k")
    uri = b"/" + b"a" * 5000
    assert answer(srv, b"G\x00T " + uri + b" HTTP/1.1\r\nHost: x\r\n\r\n") == 400
    big = b"X-Big: " + b"y" * 5000 + b"\r\n"
    assert answer(srv, b"G\x00T / HTTP/1.1\r\nHost: x\r\n" + big + b"\r\n") == 400
    # a valid method keeps the size answers
    assert answer(srv, b"GET " + uri + b" HTTP/1.1\r\nHost: x\r\n\r\n") == 414
    assert answer(srv, b"GET / HTTP/1.1\r\nHost: x\r\n" + big + b"\r\n") == 431


def status_json(srv):
    with srv.connect() as c:
        c.send(b"GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        return json.loads(c.read_response().body)


def test_bytes_drained_by_a_lingering_close_are_counted(server, model):
    # Input behind a request that closes is read and dropped until the
    # client closes; it was read from the client all the same, and
    # bytes_in ("Bytes read from clients.") counted it on uring only: the
    # other models showed about one read's worth of it.
    srv = server(*model, "--status-path", "/status")
    before = status_json(srv)["bytes_in"]
    with srv.connect() as c:
        c.send(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" + b"x" * 200000)
        c.shutdown_write()
        assert c.read_response().status in (200, 403)
        c.expect_close()
    # the answer and our EOF come before the server has drained it all
    wait_for(lambda: status_json(srv)["bytes_in"] - before >= 200000, timeout=3,
             what="bytes_in to count the drained input")


BIG = 8 << 20   # more than the server's socket and ours hold: its write waits for us


def sent_on_after(srv, target):
    """The body of the answer to an HTTP/1.0 GET (it closes) whose client
    sends on while the answer is being written, then reads it."""
    with RawConn.open(srv.addr, rcvbuf=8192) as c:
        c.send(b"GET " + target + b" HTTP/1.0\r\nHost: x\r\n\r\n")
        time.sleep(0.2)
        c.send(b"\r\nx" * 10)
        time.sleep(0.1)
        resp = c.read_response()
        assert len(resp.body) == BIG
        c.read_to_close()
        return resp.body


# The answer planned no lingering close (no input was behind its request
# then), so the bytes that came while it was written were left unread, and
# the close on them reset the connection: the client lost what the socket
# had not sent yet (megabytes), on every model.
def test_input_sent_on_during_a_closing_answer_does_not_cut_it(server, model, tmp_path):
    (tmp_path / "big.bin").write_bytes(b"b" * BIG)
    srv = server(*model, docroot=tmp_path)
    assert sent_on_after(srv, b"/big.bin") == b"b" * BIG


def test_input_sent_on_during_a_closing_proxied_answer_does_not_cut_it(server, model,
                                                                       tmp_path):
    if "iterative" in model:
        pytest.skip("iterative does not proxy")
    b = Backend(f"unix:{tmp_path}/b.sock")
    try:
        srv = server(*model, "--upstream", f"b={b.address}", "--proxy", "/=b")
        body = sent_on_after(srv, b"/big?n=%d" % BIG)
        assert hashlib.sha256(body).hexdigest() == pattern_sha(BIG)
    finally:
        b.close()


# The same input behind a pipelined answer that waited: the first answer's
# write blocked (the client did not read), the request that closes behind
# it was then answered at once, and the bytes sent during the wait were
# still unread in the socket at the close.
def test_input_sent_on_behind_a_pipelined_closing_answer_does_not_cut_it(server, model,
                                                                         tmp_path):
    (tmp_path / "big.bin").write_bytes(b"b" * BIG)
    (tmp_path / "small.txt").write_bytes(b"small\n")
    srv = server(*model, docroot=tmp_path)
    with RawConn.open(srv.addr, rcvbuf=8192) as c:
        c.send(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n"
               b"GET /small.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        time.sleep(0.2)
        c.send(b"\r\nx" * 10)
        time.sleep(0.1)
        assert c.read_response().body == b"b" * BIG
        assert c.read_response().body == b"small\n"
        c.read_to_close()
