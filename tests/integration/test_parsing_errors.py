"""Request parsing: the SPEC's error table, body handling and size limits."""

import socket
import threading

import pytest

from herdtest import OP_TIMEOUT, ConnClosed, RawConn, build_request, check_error, get_req

SMALL = b"0123456789abcdefghijklmnopqrstuvwxyz"


def send_expect(srv, data, status, close, text=None):
    """Send raw bytes; expect `status`; then expect close, or keep-alive
    (proved by a second request on the same connection)."""
    with srv.connect() as c:
        c.send(data)
        r = c.read_response()
        check_error(r, status, text)
        if close:
            c.expect_close()
        else:
            assert "close" not in r.conn_tokens(), r
            c.send(get_req("/small.txt"))
            r2 = c.read_response()
            assert r2.status == 200 and r2.body == SMALL
        return r


# ------------------------------------------------------------ request line

@pytest.mark.parametrize("line", [
    b"GET / HTTP/1.1 extra",
    b"GET  /small.txt HTTP/1.1",
    b"GET /small.txt  HTTP/1.1",
    b"GET",
    b"GET small.txt HTTP/1.1",
    b" GET /small.txt HTTP/1.1",
    b"GET /a b HTTP/1.1",
    b"GET /a\x01b HTTP/1.1",
    b"GET /a\rb HTTP/1.1",
    b"G(T /small.txt HTTP/1.1",
], ids=repr)
def test_malformed_request_line_400_close(shared, line):
    send_expect(shared, line + b"\r\nHost: t\r\n\r\n", 400, close=True)


@pytest.mark.parametrize("line", [b"GET /small.txt", b"GET /small.txt HTTP/1",
                                  b"GET /small.txt HTTP/1.1\x00", b"GET /small.txt HTTP/x.y",
                                  b"GET /small.txt FTP/1.1", b"GET /small.txt http/1.1"],
                         ids=repr)
def test_garbled_version_rejected(shared, line):
    """0.9-ish or garbled version: the SPEC allows 400 (malformed) or 505."""
    with shared.connect() as c:
        c.send(line + b"\r\nHost: t\r\n\r\n")
        r = c.read_response()
        assert r.status in (400, 505), r
        assert SMALL not in r.body
        c.expect_close()


@pytest.mark.parametrize("version", ["HTTP/2.0", "HTTP/1.2", "HTTP/3.0", "HTTP/0.9"])
def test_unsupported_version_505_close(shared, version):
    send_expect(shared, build_request("GET", "/small.txt", version=version), 505, close=True)


@pytest.mark.parametrize("method", ["FOO", "BREW", "get", "PROPFIND"])
def test_unknown_method_501_keepalive(shared, method):
    send_expect(shared, build_request(method, "/small.txt"), 501, close=False)


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_disallowed_method_with_body_405_keepalive(shared, method):
    r = send_expect(shared, build_request(method, "/small.txt", body=b"hello",
                                          headers=[("Content-Length", "5")]),
                    405, close=False)
    assert r.get("allow") == "GET, HEAD"


@pytest.mark.parametrize("method", ["TRACE", "CONNECT", "POST", "DELETE"])
def test_disallowed_method_no_body_405(shared, method):
    r = send_expect(shared, build_request(method, "/index.html"), 405, close=False)
    assert r.get("allow") == "GET, HEAD"


@pytest.mark.parametrize("target", ["example.org:443", "127.0.0.1:80", "[::1]:8443"])
def test_connect_to_an_authority_405_close(shared, target):
    """CONNECT's own target form (host:port) is valid syntax; herd does
    not tunnel: 405 as for any CONNECT, and the connection closes, since
    the tunnel's bytes would follow."""
    r = send_expect(shared, build_request("CONNECT", target), 405, close=True)
    assert r.get("allow") == "GET, HEAD"


@pytest.mark.parametrize("target", ["example.org:443", "x:1"])
def test_other_methods_with_an_authority_target_400(shared, target):
    send_expect(shared, build_request("GET", target), 400, close=True)


def test_405_with_chunked_body_discarded(shared):
    body = b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    r = send_expect(shared, build_request("POST", "/x", body=body,
                                          headers=[("Transfer-Encoding", "chunked")]),
                    405, close=False)
    assert r.get("allow") == "GET, HEAD"


# ------------------------------------------------------------ Host

def test_http11_without_host_400(shared):
    send_expect(shared, build_request("GET", "/small.txt", host=None), 400, close=True)


def test_two_host_headers_400(shared):
    send_expect(shared, build_request("GET", "/small.txt", headers=[("Host", "other")]),
                400, close=True)


@pytest.mark.parametrize("host", ["a/b", "user@a", "a b", "a?b", "a#b", "a\\b"])
def test_invalid_host_value_400(shared, host):
    send_expect(shared, build_request("GET", "/small.txt", host=host), 400, close=True)


@pytest.mark.parametrize("target", [
    "http://user@a.example/small.txt",
    "http://user:pw@a.example/small.txt",
    "http://a.example@evil.example/small.txt",
    "http://a.example:99999/small.txt",
    "http://[::1/small.txt",
])
def test_absolute_form_bad_authority_400(shared, target):
    send_expect(shared, build_request("GET", target, host="a.example"), 400, close=True)


def test_absolute_form_with_another_host_is_served(shared):
    """RFC 9112 3.2.2: the target's authority is the host; Host (which a 1.1
    request still needs) is ignored, so it may disagree."""
    with shared.connect() as c:
        c.send(build_request("GET", "http://a.example:8080/small.txt?x", host="b.example"))
        r = c.read_response()
        assert r.status == 200 and r.body == SMALL, r


# ------------------------------------------------------------ header syntax

@pytest.mark.parametrize("hdr", [
    b"NoColonHere",
    b"X-Space : value",
    b"X-Tab\t: value",
    b": no-name",
    b"X Bad: value",
    b"X-Ctl: a\x01b",
    b"X-Esc: a\x1bb",
    b"X-Del: a\x7fb",
    b"X-Nul: a\x00b",
    b"X-N\x00ul: v",
    b"X-CR: a\rb",
    b"X-Fold: a\r\n  folded",
    b"X-Fold2: a\r\n\tfolded",
], ids=repr)
def test_bad_header_400_close(shared, hdr):
    data = b"GET /small.txt HTTP/1.1\r\nHost: t\r\n" + hdr + b"\r\nAccept: */*\r\n\r\n"
    send_expect(shared, data, 400, close=True)


def test_first_header_folded_400(shared):
    data = b"GET /small.txt HTTP/1.1\r\n Host: t\r\n\r\n"
    send_expect(shared, data, 400, close=True)


def test_valid_header_whitespace_accepted(shared):
    data = (b"GET /small.txt HTTP/1.1\r\nHost: t\r\nX-Tab: a\tb\r\nX-Ows:   padded   \r\n"
            b"X-Empty:\r\nx-lower-case: v\r\nhost-not: x\r\n\r\n")
    r = shared.request(data)
    assert r.status == 200 and r.body == SMALL


def test_obs_text_in_header_value_accepted(shared):
    """Bytes >= 0x80 are obs-text (RFC 9110), not control characters."""
    data = b"GET /small.txt HTTP/1.1\r\nHost: t\r\nX-Obs: caf\xc3\xa9\r\n\r\n"
    r = shared.request(data)
    assert r.status == 200 and r.body == SMALL


# ------------------------------------------------------------ Content-Length / TE

@pytest.mark.parametrize("cls", [
    [("Content-Length", "3"), ("Content-Length", "4")],
    [("Content-Length", "-1")],
    [("Content-Length", "abc")],
    [("Content-Length", "1x")],
    [("Content-Length", "+3")],
    [("Content-Length", "3, 4")],
    [("Content-Length", "")],
], ids=repr)
def test_bad_content_length_400_close(shared, cls):
    send_expect(shared, build_request("GET", "/small.txt", headers=cls, body=b"abcd"),
                400, close=True)


def test_overflowing_content_length_rejected(shared):
    with shared.connect() as c:
        c.send(build_request("GET", "/small.txt", body=b"abcd",
                             headers=[("Content-Length", "99999999999999999999999999")]))
        r = c.read_response()
        assert r.status in (400, 413), r
        c.expect_close()


@pytest.mark.parametrize("te", [
    [("Transfer-Encoding", "chunked"), ("Content-Length", "5")],
    [("Content-Length", "5"), ("Transfer-Encoding", "chunked")],
    [("Transfer-Encoding", "gzip")],
    [("Transfer-Encoding", "chunked, gzip")],
    [("Transfer-Encoding", "identity")],
], ids=repr)
def test_bad_transfer_encoding_400_close(shared, te):
    send_expect(shared, build_request("GET", "/small.txt", headers=te,
                                      body=b"5\r\nhello\r\n0\r\n\r\n"), 400, close=True)


def test_get_with_content_length_body_then_pipelined(shared, site):
    # the body looks like a request: it must be skipped, not parsed
    smuggled = b"GET /.hidden HTTP/1.1\r\nHost: t\r\n\r\n"
    data = (build_request("GET", "/small.txt", body=smuggled,
                          headers=[("Content-Length", str(len(smuggled)))])
            + get_req("/index.html", headers=[("Connection", "close")]))
    with shared.connect() as c:
        c.send(data)
        r1 = c.read_response()
        assert r1.status == 200 and r1.body == SMALL
        r2 = c.read_response()
        assert r2.status == 200 and r2.body == site.files["index.html"]
        c.expect_close()          # no third response for the smuggled bytes


def test_get_with_chunked_body_then_pipelined(shared, site):
    body = (b"4;ext=1\r\nGET \r\n19\r\n/.hidden HTTP/1.1\r\nHost: \r\n"
            b"0\r\nX-Trailer: yes\r\n\r\n")
    data = (build_request("GET", "/small.txt", body=body,
                          headers=[("Transfer-Encoding", "chunked")])
            + get_req("/index.html", headers=[("Connection", "close")]))
    with shared.connect() as c:
        c.send(data)
        r1 = c.read_response()
        assert r1.status == 200 and r1.body == SMALL
        r2 = c.read_response()
        assert r2.status == 200 and r2.body == site.files["index.html"]
        c.expect_close()


def test_chunked_body_in_small_pieces(shared, site):
    body = b"3\r\nabc\r\nA\r\n0123456789\r\n0\r\n\r\n"
    data = build_request("GET", "/small.txt", body=body,
                         headers=[("Transfer-Encoding", "chunked")]) + get_req("/style.css")
    with shared.connect() as c:
        head_len = data.index(b"\r\n\r\n") + 4
        c.send(data[:head_len])
        for i in range(head_len, len(data), 3):
            c.send(data[i:i + 3])
        r1 = c.read_response()
        r2 = c.read_response()
        assert r1.status == 200 and r1.body == SMALL
        assert r2.status == 200 and r2.body == site.files["style.css"]


def test_bad_chunked_encoding_closes(shared):
    data = build_request("GET", "/small.txt", body=b"zz\r\nhello\r\n0\r\n\r\n",
                         headers=[("Transfer-Encoding", "chunked")]) + get_req("/small.txt")
    with shared.connect() as c:
        c.send(data)
        rest = c.read_to_close()
    statuses = [int(l.split(b" ")[1]) for l in rest.split(b"\r\n") if l.startswith(b"HTTP/1.")]
    assert statuses in ([400], [200, 400], [200], []), statuses


# ------------------------------------------------------------ percent-encoding in path

@pytest.mark.parametrize("target", ["/%zz", "/small%2", "/small.txt%", "/a%g0", "/%00",
                                    "/small.txt%00", "/small.txt%00.png", "/%00/../small.txt"])
def test_bad_percent_encoding_or_nul_400_close(shared, target):
    send_expect(shared, build_request("GET", target), 400, close=True)


# ------------------------------------------------------------ size limits

def test_header_over_default_8k_431(shared):
    r = send_expect(shared, get_req("/small.txt", headers=[("X-Big", "a" * 9000)]),
                    431, close=True)


def test_many_headers_over_8k_431(shared):
    hdrs = [(f"X-H{i}", "v" * 80) for i in range(120)]
    send_expect(shared, get_req("/small.txt", headers=hdrs), 431, close=True)


def test_header_under_8k_ok(shared):
    r = shared.request(get_req("/small.txt", headers=[("X-Big", "a" * 7000)]))
    assert r.status == 200 and r.body == SMALL


def test_uri_over_default_8k_414(shared):
    send_expect(shared, get_req("/" + "a" * 9000), 414, close=True)


def test_uri_under_8k_is_parsed(shared):
    r = shared.get("/" + "abcdefghi/" * 300 + "x")      # 3 KB, short segments
    assert r.status == 404


def test_limits_with_1k_header_size(server):
    srv = server("--max-header-size", "1k")
    send_expect(srv, get_req("/small.txt", headers=[("X-Big", "a" * 1500)]), 431, close=True)
    send_expect(srv, get_req("/" + "a" * 1500), 414, close=True)
    hdrs = [(f"X-H{i}", "v" * 40) for i in range(30)]           # ~1.4k in small pieces
    send_expect(srv, get_req("/small.txt", headers=hdrs), 431, close=True)
    # under the limit: accepted
    r = srv.request(get_req("/small.txt", headers=[("X-Pad", "a" * 700)]))
    assert r.status == 200 and r.body == SMALL
    assert srv.get("/" + "b" * 700).status == 404


def test_huge_head_still_gets_431(server):
    """The client keeps sending a much larger head; the 431 must still be
    readable (no RST eating the response)."""
    srv = server("--max-header-size", "1k")
    with srv.connect() as c:
        c.send(b"GET /small.txt HTTP/1.1\r\nHost: t\r\nX-Big: ")
        sender = threading.Thread(target=c.send_ignore_errors, args=(b"a" * 200_000,))
        sender.start()
        r = c.read_response()
        sender.join(OP_TIMEOUT)
        assert r.status == 431


# ------------------------------------------------------------ body size

def test_body_over_max_body_size_413(server):
    srv = server("--max-body-size", "1k")
    send_expect(srv, build_request("GET", "/small.txt", body=b"x" * 2048,
                                   headers=[("Content-Length", "2048")]), 413, close=True)


def test_body_under_max_body_size_ok(server):
    srv = server("--max-body-size", "1k")
    with srv.connect() as c:
        c.send(build_request("GET", "/small.txt", body=b"x" * 1000,
                             headers=[("Content-Length", "1000")]) + get_req("/small.txt"))
        assert c.read_response().status == 200
        assert c.read_response().status == 200


def test_chunked_body_over_max_closes(server):
    """SPEC: a chunked body's size is unknown when the answer goes out; past
    --max-body-size the connection is closed, so a request smuggled after it
    is never answered."""
    srv = server("--max-body-size", "1k")
    chunk = b"200\r\n" + b"y" * 512 + b"\r\n"
    body = chunk * 4 + b"0\r\n\r\n"
    with srv.connect() as c:
        c.send(build_request("GET", "/small.txt", body=body,
                             headers=[("Transfer-Encoding", "chunked")]) + get_req("/small.txt"))
        r = c.read_response()
        assert r.status == 200
        c.read_to_close()


def test_chunked_body_over_max_drains_before_closing(server):
    """The body outgrows --max-body-size while the client still sends it:
    the answer arrives and the close is a FIN after a drain, never a reset
    (which can destroy the answer before it is read). coro closed at once
    (a reset in 8 rounds of 10), and iterative closed without its FIN."""
    srv = server("--max-body-size", "64k")
    big = 0x40000
    body = f"{big:x}\r\n".encode() + b"x" * big + b"\r\n0\r\n\r\n"
    data = build_request("POST", "/small.txt", body=body,
                         headers=[("Transfer-Encoding", "chunked")]) + get_req("/small.txt")
    for _ in range(3):
        with srv.connect(timeout=10) as c:
            sender = threading.Thread(target=c.send_ignore_errors, args=(data,))
            sender.start()
            got, how = b"", "timeout"
            try:
                while True:
                    chunk = c.sock.recv(65536)
                    if not chunk:
                        how = "fin"
                        break
                    got += chunk
            except ConnectionResetError:
                how = "reset"
            except socket.timeout:
                pass
            sender.join(10)
        assert b" 405 " in got.split(b"\r\n", 1)[0], got[:200]
        assert how == "fin", how


def test_big_body_still_reads_413(server):
    """Client streams a 4 MiB body; the server answers 413 early; the client
    must still be able to read it."""
    srv = server("--max-body-size", "1k")
    size = 4 << 20
    with srv.connect() as c:
        c.send(build_request("GET", "/small.txt", headers=[("Content-Length", str(size))]))
        sender = threading.Thread(target=c.send_ignore_errors, args=(b"z" * size,))
        sender.start()
        try:
            r = c.read_response()
        finally:
            sender.join(OP_TIMEOUT)
        check_error(r, 413)
        c.read_to_close()


def test_body_over_default_1m_413(shared):
    size = (1 << 20) + 4096
    with shared.connect() as c:
        c.send(build_request("GET", "/small.txt", headers=[("Content-Length", str(size))]))
        sender = threading.Thread(target=c.send_ignore_errors, args=(b"z" * size,))
        sender.start()
        try:
            r = c.read_response()
        finally:
            sender.join(OP_TIMEOUT)
        assert r.status == 413
