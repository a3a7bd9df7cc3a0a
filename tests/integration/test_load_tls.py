"""herd load against https:// (issue 18): herd serve on a TLS listener with a
test CA made by the openssl CLI (test_tls's pki fixture). Keep-alive and a
new handshake per request, resumption, certificate checks, --insecure."""

import json
import shutil
import time

import pytest

from test_load import herd_load, no_figures, one_line_error
from test_tls import pki, run, start  # noqa: F401 - pki is a fixture

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None,
                                reason="no openssl CLI: apt-get install openssl")


def load_json(tmp_path, *args):
    out = tmp_path / f"r{time.monotonic_ns()}.json"
    r = herd_load(*args, "--json", out)
    assert r.returncode == 0, f"rc={r.returncode}\nstdout:{r.stdout}\nstderr:{r.stderr}"
    return r, json.loads(out.read_text())


def https(srv, path="/index.html", host="localhost"):
    return f"https://{host}:{srv.port}{path}"


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory):
    """A CA that signed nothing the server has."""
    d = tmp_path_factory.mktemp("otherca")
    run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout",
         "-out", str(d / "ca.key")])
    run(["openssl", "req", "-x509", "-new", "-key", str(d / "ca.key"), "-subj", "/CN=other CA",
         "-days", "2", "-out", str(d / "ca.pem")])
    return d / "ca.pem"


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
def test_keepalive_over_tls(server, pki, tmp_path, host):
    srv = start(server, pki)
    r, j = load_json(tmp_path, "-c", 4, "-t", 2, "-d", "1s", "--cacert", pki.ca,
                     https(srv, host=host))
    assert sum(j["errors"].values()) == 0, (j["errors"], r.stderr)
    assert j["requests"] > 50, r.stdout
    # one handshake per connection, then keep-alive (herd serve closes a
    # connection after --keepalive-requests, 10000)
    assert j["connects"] <= 4 + j["requests"] // 10000, j
    assert "Requests/sec:" in r.stdout


@pytest.mark.parametrize("close", [["-H", "Connection: close"], ["--no-keepalive"]])
def test_new_handshake_per_request_resumes_sessions(server, pki, tmp_path, close):
    srv = start(server, pki)
    r, j = load_json(tmp_path, "-c", 4, "-t", 2, "-d", "1s", "--cacert", pki.ca, *close,
                     https(srv))
    assert sum(j["errors"].values()) == 0, (j["errors"], r.stderr)
    assert j["requests"] > 20, r.stdout
    # one connection per request (the last ones may be cut by the end of the run)
    assert j["requests"] <= j["connects"] <= j["requests"] + 4, j
    # only a thread's first connections had no session to offer
    assert j["tls_resumed"] >= j["connects"] - 4, j
    assert "TLS sessions resumed" in r.stdout


def test_wrong_ca_gives_tls_errors_and_exit_1(server, pki, other_ca):
    srv = start(server, pki)
    r = herd_load("-c", 2, "-t", 1, "-d", "500ms", "--cacert", other_ca, https(srv))
    assert r.returncode == 1, r
    no_figures(r)
    line = one_line_error(r)
    assert "tls error" in line and "certificate verify failed" in line, line


def test_certificate_for_another_name_is_refused_unless_insecure(server, pki, tmp_path):
    srv = start(server, pki, cert=pki.other_cert, key=pki.other_key)
    r = herd_load("-c", 2, "-t", 1, "-d", "500ms", "--cacert", pki.ca, https(srv))
    assert r.returncode == 1, r
    line = one_line_error(r)
    assert "tls error" in line and "hostname mismatch" in line, line
    for flag in ("--insecure", "-k"):
        r, j = load_json(tmp_path, "-c", 2, "-t", 1, "-d", "500ms", flag, https(srv))
        assert sum(j["errors"].values()) == 0 and j["requests"] > 10, j


def test_system_cas_do_not_trust_the_test_ca(server, pki):
    srv = start(server, pki)
    r = herd_load("-c", 1, "-t", 1, "-d", "300ms", https(srv))
    assert r.returncode == 1, r
    assert "certificate verify failed" in one_line_error(r)


def test_tls_flags_usage(server, pki, tmp_path):
    srv = start(server, pki)
    r = herd_load("-d", "100ms", "--cacert", pki.ca, srv.url("/"))
    assert r.returncode == 2 and "--cacert is for https://" in one_line_error(r), r
    r = herd_load("-d", "100ms", "--insecure", "--cacert", pki.ca, https(srv))
    assert r.returncode == 2 and "contradict" in one_line_error(r), r
    r = herd_load("-d", "100ms", "--cacert", tmp_path / "missing.pem", https(srv))
    assert r.returncode == 1 and "cannot load CA certificates" in one_line_error(r), r
    no_figures(r)


def test_large_file_and_pipelining_over_tls(server, site, pki, tmp_path):
    """Responses span many TLS records, and records carry several responses."""
    srv = start(server, pki)
    r, j = load_json(tmp_path, "-c", 2, "-t", 1, "-d", "1s", "--cacert", pki.ca,
                     https(srv, "/big.bin"))
    assert sum(j["errors"].values()) == 0, (j["errors"], r.stderr)
    assert j["requests"] >= 2
    assert j["transfer_bytes"] >= j["requests"] * site.big_size
    r, j = load_json(tmp_path, "-c", 2, "-t", 1, "-d", "500ms", "--pipeline", 8, "--cacert",
                     pki.ca, https(srv))
    assert sum(j["errors"].values()) == 0, (j["errors"], r.stderr)
    assert j["requests"] > 100
