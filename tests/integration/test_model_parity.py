"""Every concurrency model answers the same bytes the same way, however the
network splits them (found by a differential harness that sent one byte
sequence to each model and compared the answers). Each test runs on every
model, as test_proxy_framing.py runs on the proxying ones."""

import pytest

from conftest import HERD_ARGS

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
