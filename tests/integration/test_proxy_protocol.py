"""PROXY protocol v1/v2 on listeners (`--proxy-protocol`, or `--listen
'ADDR proxy_protocol'`): the client address a load balancer reports appears
in the access log; a connection without a valid header is closed unanswered.
Runs on every model (it is listener behaviour in each driver)."""
import json
import socket
import struct
import time

import pytest

from conftest import HERD_ARGS, run_herd
from herdtest import OP_TIMEOUT, RawConn, build_request, log_lines, wait_for

V2_SIG = b"\r\n\r\n\x00\r\nQUIT\n"


def v1(src="203.0.113.7", dst="198.51.100.1", sport=40000, dport=80, proto="TCP4"):
    return f"PROXY {proto} {src} {dst} {sport} {dport}\r\n".encode()


def v2_tcp6(src="2001:db8::7", dst="2001:db8::1", sport=40000, dport=443, cmd=1, tlv=b""):
    addr = socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst) + \
        struct.pack("!HH", sport, dport) + tlv
    return V2_SIG + bytes([0x20 | cmd, 0x21]) + struct.pack("!H", len(addr)) + addr


def v2_local():
    return V2_SIG + bytes([0x20, 0x00]) + struct.pack("!H", 0)


# --model single has no logger: there the address cannot be seen, only the
# answers (and the refusals) are checked.
NO_ACCESS_LOG = "single" in HERD_ARGS


def log_records(path, marker, count, timeout=10):
    if NO_ACCESS_LOG:
        pytest.skip("no access log on --model single (the requests above were checked)")
    def ready():
        lines = [l for l in log_lines(path) if marker in l]
        return lines if len(lines) >= count else None
    return [json.loads(l) for l in wait_for(ready, timeout, what=f"{count} log lines")]


@pytest.fixture
def pp_server(server, tmp_path):
    log = tmp_path / "access.json"
    srv = server("--proxy-protocol", "--access-log", log, "--access-log-format", "json",
                 "--header-timeout", "2s")
    srv.log = log
    return srv


def test_v1_header_names_the_client(pp_server):
    m = f"v1-{time.monotonic_ns()}"
    r = pp_server.request(v1() + build_request("GET", f"/small.txt?m={m}"))
    assert r.status == 200
    [rec] = log_records(pp_server.log, m, 1)
    assert rec["remote_addr"] == "203.0.113.7"


def test_v2_header_with_tlv_names_the_ipv6_client(pp_server):
    m = f"v2-{time.monotonic_ns()}"
    hdr = v2_tcp6(tlv=b"\x04\x00\x03abc")  # a NOOP TLV is skipped
    r = pp_server.request(hdr + build_request("GET", f"/small.txt?m={m}"))
    assert r.status == 200
    [rec] = log_records(pp_server.log, m, 1)
    assert rec["remote_addr"] == "2001:db8::7"


def test_v2_local_keeps_the_socket_address(pp_server):
    m = f"local-{time.monotonic_ns()}"
    r = pp_server.request(v2_local() + build_request("GET", f"/small.txt?m={m}"))
    assert r.status == 200
    [rec] = log_records(pp_server.log, m, 1)
    assert rec["remote_addr"] == "127.0.0.1"


def test_header_in_pieces_and_pipelined_requests(pp_server):
    m = f"pieces-{time.monotonic_ns()}"
    data = v1(src="192.0.2.55") + b"".join(
        build_request("GET", f"/small.txt?m={m}&n={i}") for i in range(3))
    with pp_server.connect() as c:
        for i in range(0, 60):
            c.send(data[i:i + 1])
            time.sleep(0.002)
        c.send(data[60:])
        for _ in range(3):
            assert c.read_response().status == 200
        # still a keep-alive connection: the header is not expected again
        c.send(build_request("GET", f"/small.txt?m={m}&n=3"))
        assert c.read_response().status == 200
    recs = log_records(pp_server.log, m, 4)
    assert {r["remote_addr"] for r in recs} == {"192.0.2.55"}


@pytest.mark.parametrize("data", [
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    b"PROXY TCP4 1.2.3.4 5.6.7.8 99999 1\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
    b"PROXY TCP4 ::1 ::1 1 2\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
    V2_SIG + b"\x22\x11\x00\x0c" + bytes(12) + b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    b"PROXY " + b"x" * 200 + b"\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS ClientHello
], ids=["plain-http", "bad-port", "v6-under-tcp4", "v2-bad-command", "too-long", "tls"])
def test_connection_without_a_valid_header_is_closed_unanswered(pp_server, data):
    with pp_server.connect() as c:
        c.send_ignore_errors(data)
        assert c.read_to_close(timeout=OP_TIMEOUT) == b""
    r = pp_server.request(v1() + build_request("GET", "/small.txt"))
    assert r.status == 200


def test_incomplete_header_times_out(pp_server):
    with pp_server.connect() as c:
        c.send(b"PROXY TCP4 1.2.3.4")
        t0 = time.monotonic()
        assert c.read_to_close(timeout=10) == b""
        assert time.monotonic() - t0 < 8


def test_only_the_marked_listener_expects_the_header(server, tmp_path):
    log = tmp_path / "access.json"
    srv = server("--access-log", log, "--access-log-format", "json",
                 listen=("127.0.0.1:0 proxy_protocol", "127.0.0.1:0"))
    (_, pp_addr), (_, plain_addr) = srv.listeners[0], srv.listeners[1]
    m = f"mixed-{time.monotonic_ns()}"
    for _ in range(3):
        with RawConn.open(pp_addr) as c:
            c.send(v1(src="198.51.100.9") + build_request("GET", f"/small.txt?m={m}&l=pp"))
            assert c.read_response().status == 200
        with RawConn.open(plain_addr) as c:
            c.send(build_request("GET", f"/small.txt?m={m}&l=plain"))
            assert c.read_response().status == 200
        with RawConn.open(pp_addr) as c:
            c.send_ignore_errors(build_request("GET", "/small.txt"))
            assert c.read_to_close() == b""
    recs = log_records(log, m, 6)
    by = {(r["request"].split("&l=")[1].split()[0], r["remote_addr"]) for r in recs}
    assert by == {("pp", "198.51.100.9"), ("plain", "127.0.0.1")}


def test_unknown_listen_option_is_refused():
    r = run_herd(["serve", ".", "--listen", "127.0.0.1:0 proxy"])
    assert r.returncode == 2
    assert "unknown listen option 'proxy'" in r.stderr
