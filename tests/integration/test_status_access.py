"""Who may read the status page: `--status-allow ADDR[/BITS]|unix`
(repeatable), by default loopback and unix-socket clients only; anyone else
gets the usual 403, counted and logged like any other. The decision is made
once per connection from the client's address, the one a PROXY protocol
header declares when the listener expects one.

Runs on every model (each driver carries the decision to the handler)."""

import json
import socket
import struct
import time

import pytest

from conftest import HERD_ARGS, ipv6_available, run_herd
from herdtest import build_request, check_error, log_lines, wait_for

STATUS = "/herd-status"
NO_ACCESS_LOG = "single" in HERD_ARGS
V2_SIG = b"\r\n\r\n\x00\r\nQUIT\n"


def v1(src):
    proto, dst = ("TCP6", "2001:db8::1") if ":" in src else ("TCP4", "198.51.100.1")
    return f"PROXY {proto} {src} {dst} 40000 80\r\n".encode()


def v2_local():
    return V2_SIG + bytes([0x20, 0x00]) + struct.pack("!H", 0)


def status_of(srv, addr=None, prefix=b"", target=STATUS):
    r = srv.request(prefix + build_request("GET", target), addr=addr)
    if r.status == 200:
        json.loads(r.body)
    else:
        check_error(r, 403)
    return r.status


def unix_addr(srv):
    return next(a for fam, a in srv.listeners if fam == "unix")


def test_loopback_allowed_by_default(server):
    srv = server("--status-path", STATUS)
    assert status_of(srv) == 200
    # pipelined after a file, on one keep-alive connection
    with srv.connect() as c:
        c.send(build_request("GET", "/small.txt") + build_request("GET", STATUS))
        assert c.read_response().status == 200
        assert c.read_response().status == 200


@pytest.mark.skipif(not ipv6_available(), reason="no IPv6 loopback")
def test_ipv6_loopback_allowed_by_default(server):
    srv = server("--status-path", STATUS, listen=("[::1]:0",))
    assert status_of(srv) == 200


def test_unix_client_allowed_by_default(server, short_tmp):
    srv = server("--status-path", STATUS,
                 listen=("127.0.0.1:0", f"unix:{short_tmp}/s.sock"))
    assert status_of(srv, addr=unix_addr(srv)) == 200


def test_loopback_refused_when_not_listed(server, tmp_path):
    args = ["--status-path", STATUS, "--status-allow", "10.0.0.0/8"]
    if not NO_ACCESS_LOG:
        args += ["--access-log", tmp_path / "a.json", "--access-log-format", "json"]
    srv = server(*args)
    with srv.connect() as c:
        for target in (STATUS, STATUS + "?format=prometheus"):
            c.send(build_request("GET", target))
            r = c.read_response()
            check_error(r, 403)
            assert "close" not in r.conn_tokens(), "a 403 keeps the connection"
        c.send(build_request("HEAD", STATUS))
        r = c.read_response("HEAD")
        assert r.status == 403 and r.body == b""
        c.send(build_request("GET", "/small.txt"))
        assert c.read_response().status == 200, "only the status page is refused"
    if NO_ACCESS_LOG:
        return
    def logged():
        recs = [json.loads(l) for l in log_lines(tmp_path / "a.json")]
        mine = [r for r in recs if STATUS in r["request"]]
        return mine if len(mine) >= 3 else None
    recs = wait_for(logged, what="3 access-log lines")
    assert [r["status"] for r in recs] == [403, 403, 403], recs
    assert all(r["remote_addr"] == "127.0.0.1" for r in recs), recs


def test_refusals_are_counted(server, short_tmp):
    """Counted as 4xx: read through a unix listener that is allowed."""
    srv = server("--status-path", STATUS, "--status-allow", "10.0.0.0/8",
                 "--status-allow", "unix",
                 listen=("127.0.0.1:0", f"unix:{short_tmp}/s.sock"))
    ux = unix_addr(srv)
    def four_xx():
        r = srv.request(build_request("GET", STATUS), addr=ux)
        assert r.status == 200, r
        return json.loads(r.body)["responses"]["4xx"]
    before = four_xx()
    for _ in range(3):
        assert status_of(srv) == 403
    wait_for(lambda: four_xx() >= before + 3, what="three more 4xx")


def test_listed_address_allowed(server, short_tmp):
    srv = server("--status-path", STATUS, "--status-allow", "127.0.0.1",
                 listen=("127.0.0.1:0", f"unix:{short_tmp}/s.sock"))
    assert status_of(srv) == 200
    # listing an address drops the default, unix included
    assert status_of(srv, addr=unix_addr(srv)) == 403


def test_cidr_and_flag_forms(server):
    srv = server("--status-path", STATUS, "--status-allow=192.0.2.0/24",
                 "--status-allow", "127.0.0.0/30", "--status-allow", "::1")
    assert status_of(srv) == 200


def test_status_off_stays_404(server):
    srv = server("--status-allow", "10.0.0.0/8")
    r = srv.get(STATUS)
    assert r.status == 404, r


# ------------------------------------------------------------ PROXY protocol

def test_proxy_declared_client_refused_by_default(server):
    srv = server("--status-path", STATUS, "--proxy-protocol")
    assert status_of(srv, prefix=v1("203.0.113.7")) == 403
    assert status_of(srv, prefix=v1("2001:db8::7")) == 403
    # the declared address counts, not the balancer's (loopback) socket
    assert status_of(srv, prefix=v1("127.0.0.1")) == 200
    # LOCAL (a health check) keeps the socket's own address
    assert status_of(srv, prefix=v2_local()) == 200


def test_proxy_declared_client_allowed_when_listed(server):
    srv = server("--status-path", STATUS, "--proxy-protocol",
                 "--status-allow", "203.0.113.0/24")
    assert status_of(srv, prefix=v1("203.0.113.7")) == 200
    assert status_of(srv, prefix=v1("198.51.100.9")) == 403
    assert status_of(srv, prefix=v1("127.0.0.1")) == 403
    # several requests on one connection keep the declared client's answer
    with srv.connect() as c:
        c.send(v1("198.51.100.9") + build_request("GET", STATUS) * 2)
        assert c.read_response().status == 403
        assert c.read_response().status == 403


# ------------------------------------------------------------ configuration

@pytest.mark.parametrize("value", ["1.2.3.4/33", "::/129", "foo", "10.0.0.0/8x", "1.2.3",
                                   "unix:/x", "::1%lo"])
def test_bad_value_refused_by_check_config(tmp_path, value):
    cfg = tmp_path / "bad.conf"
    cfg.write_text(f"status-path = {STATUS}\nstatus-allow = {value}\n")
    r = run_herd(["serve", "--check-config", str(cfg)], extra=False)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    msg = r.stderr.strip()
    assert msg.startswith(f"herd: {cfg}:2: status-allow:") or \
        f"{cfg}:2: status-allow:" in msg, msg
    assert value in msg, msg
    assert len(msg.splitlines()) == 1, msg


@pytest.mark.parametrize("value", ["1.2.3.4/33", "::/129", "foo"])
def test_bad_value_refused_as_flag(site, value):
    r = run_herd(["serve", str(site.root), "--listen", "127.0.0.1:0", "--status-allow", value],
                 extra=False)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "status-allow" in r.stderr and value in r.stderr, r.stderr


def test_good_values_pass_check_config(tmp_path):
    cfg = tmp_path / "good.conf"
    cfg.write_text(f"status-path = {STATUS}\nstatus-allow = 10.0.0.0/8\n"
                   "status-allow = 2001:db8::/32\nstatus-allow = 192.0.2.1\n"
                   "status-allow = unix\n")
    r = run_herd(["serve", "--check-config", str(cfg)], extra=False)
    assert r.returncode == 0, (r.returncode, r.stderr)


def test_flags_replace_the_files_list(server, tmp_path):
    cfg = tmp_path / "s.conf"
    cfg.write_text(f"status-path = {STATUS}\nstatus-allow = 10.0.0.0/8\n")
    assert status_of(server("--config", cfg)) == 403
    assert status_of(server("--config", cfg, "--status-allow", "127.0.0.1")) == 200


# ------------------------------------------------------------ herd status

def test_herd_status_command(server):
    srv = server("--status-path", STATUS)
    r = run_herd(["status", srv.url(STATUS), "--json"], extra=False)
    assert r.returncode == 0, r.stderr
    json.loads(r.stdout)


def test_herd_status_command_refused(server):
    srv = server("--status-path", STATUS, "--status-allow", "10.0.0.0/8")
    r = run_herd(["status", srv.url(STATUS)], extra=False)
    assert r.returncode != 0
    assert "403" in r.stderr and "--status-allow" in r.stderr, r.stderr
