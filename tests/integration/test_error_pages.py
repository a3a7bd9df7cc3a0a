"""Custom error pages: --error-page CODE=/path serves a file below the
docroot with the error status (its own Content-Type, no validators); a page
that is missing or not a file falls back to the built-in page (never a
loop); keep-alive and Connection: close are those of the error; HEAD has no
body; bad settings are refused."""

import os

import pytest

from conftest import run_herd
from herdtest import build_request, check_common, check_error, get_req

P404 = b"<!doctype html><h1>Custom: not here</h1>\n"
P403 = b"<!doctype html><h1>Custom: forbidden</h1>\n"
BIG = b"<!-- big error page -->" + b"x" * (100 * 1024) + b"\n"


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "www"
    (r / "errors").mkdir(parents=True)
    (r / "errors" / "404.html").write_bytes(P404)
    (r / "errors" / "403.html").write_bytes(P403)
    (r / "errors" / "big.html").write_bytes(BIG)
    (r / "errors" / "plain.txt").write_bytes(b"text error page\n")
    (r / "errors" / "adir").mkdir()
    (r / ".errors").mkdir()
    (r / ".errors" / "404.html").write_bytes(b"hidden-dir page\n")
    (r / "noindex").mkdir()
    (r / "ok.txt").write_bytes(b"ok\n")
    (r / ".secret").write_bytes(b"dotfile\n")
    return r


def custom(server, root, *pages):
    return server(*sum((["--error-page", p] for p in pages), []), docroot=root)


def test_404_and_403_pages(server, root):
    srv = custom(server, root, "404=/errors/404.html", "403=/errors/403.html")
    for path in ("/nope", "/nope/deeper.html", "/.secret"):
        r = srv.get(path)
        assert r.status == 404 and r.body == P404, path
        check_common(r)
        assert r.get("content-type") == "text/html; charset=utf-8"
        assert not r.has("etag") and not r.has("last-modified") and not r.has("accept-ranges")
    r = srv.get("/noindex/")
    assert r.status == 403 and r.body == P403
    # the page itself, asked for by name, is an ordinary file
    r = srv.get("/errors/404.html")
    assert r.status == 200 and r.body == P404


def test_keepalive_and_head(server, root):
    srv = custom(server, root, "404=/errors/404.html")
    with srv.connect() as c:
        c.send(get_req("/nope") + build_request("HEAD", "/nope") + get_req("/ok.txt"))
        g = c.read_response()
        h = c.read_response("HEAD")
        ok = c.read_response()
    assert g.status == 404 and g.body == P404 and "close" not in g.conn_tokens()
    assert h.status == 404 and h.body == b"" and h.get("content-length") == str(len(P404))
    assert ok.status == 200 and ok.body == b"ok\n"


def test_big_page_and_its_own_type(server, root):
    srv = custom(server, root, "404=/errors/big.html", "403=/errors/plain.txt")
    r = srv.get("/nope")
    assert r.status == 404 and r.body == BIG
    r = srv.get("/noindex/")
    assert r.status == 403 and r.body == b"text error page\n"
    assert r.get("content-type") == "text/plain; charset=utf-8"


@pytest.mark.parametrize("page", ["/errors/missing.html", "/errors/adir", "/nope/x.html"])
def test_unusable_page_falls_back_to_the_built_in_one(server, root, page):
    srv = custom(server, root, f"404={page}", f"403={page}")
    r = srv.get("/nope")
    check_error(r, 404, "Not Found")
    r = srv.get("/noindex/")
    check_error(r, 403, "Forbidden")
    assert srv.get("/ok.txt").status == 200


def test_page_in_a_dot_directory_is_served_as_configured(server, root):
    """The operator named it; the dotfile rule applies to request paths."""
    srv = custom(server, root, "404=/.errors/404.html")
    r = srv.get("/nope")
    assert r.status == 404 and r.body == b"hidden-dir page\n"
    r = srv.get("/.errors/404.html")
    assert r.status == 404 and r.body == b"hidden-dir page\n"   # not served as a file


def test_other_error_codes(server, root):
    srv = custom(server, root, "405=/errors/plain.txt", "400=/errors/404.html",
                 "501=/errors/403.html")
    r = srv.request(build_request("POST", "/ok.txt", headers={"Content-Length": "2"},
                                  body=b"hi"))
    assert r.status == 405 and r.body == b"text error page\n"
    assert r.get("allow") == "GET, HEAD"
    r = srv.request(build_request("FOO", "/ok.txt"))
    assert r.status == 501 and r.body == P403
    with srv.connect() as c:   # a bad path: 400 and the connection closes
        c.send(get_req("/%zz"))
        r = c.read_response()
        assert r.status == 400 and r.body == P404 and "close" in r.conn_tokens()
        c.expect_close()


def test_412_page(server, root):
    """A failed If-Match or If-Unmodified-Since is an error answer like the
    others: the configured page, keep-alive, head alone for HEAD."""
    srv = custom(server, root, "412=/errors/plain.txt")
    with srv.connect() as c:
        c.send(get_req("/ok.txt", headers=[("If-Match", '"nope"')])
               + build_request("HEAD", "/ok.txt",
                               headers=[("If-Unmodified-Since", "Thu, 01 Jan 1970 00:00:00 GMT")])
               + get_req("/ok.txt"))
        g = c.read_response()
        h = c.read_response("HEAD")
        ok = c.read_response()
    assert g.status == 412 and g.body == b"text error page\n" and "close" not in g.conn_tokens()
    assert not g.has("etag") and not g.has("last-modified")
    assert h.status == 412 and h.body == b"" and h.get("content-length") == "16"
    assert ok.status == 200 and ok.body == b"ok\n"


def test_unconfigured_codes_keep_the_built_in_page(server, root):
    srv = custom(server, root, "404=/errors/404.html")
    check_error(srv.get("/noindex/"), 403, "Forbidden")


BAD = ["404", "404=", "404=errors/404.html", "404=/errors/", "404=/a/../b.html",
       "200=/ok.txt", "302=/ok.txt", "999=/x.html", "abc=/x.html", "404=/a%20b.html"]


@pytest.mark.parametrize("value", BAD)
def test_bad_error_page_is_refused(root, value):
    r = run_herd(["serve", str(root), "--listen", "127.0.0.1:0", "--error-page", value],
                 timeout=10)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.startswith("herd: error-page") and len(r.stderr.splitlines()) == 1, r.stderr


def test_config_file_line(server, tmp_path, root):
    cfg = tmp_path / "herd.conf"
    cfg.write_text("error-page = 404=/errors/404.html\nerror-page = 403=/errors/403.html\n")
    srv = server("--config", cfg, docroot=root)
    assert srv.get("/nope").body == P404
    # a flag replaces the file's error-page lines
    srv2 = server("--config", cfg, "--error-page", "403=/errors/plain.txt", docroot=root)
    check_error(srv2.get("/nope"), 404, "Not Found")
    assert srv2.get("/noindex/").body == b"text error page\n"
    cfg.write_text(f"docroot = {root}\n\nerror-page = 404=/x/../y.html\n")
    r = run_herd(["serve", "--check-config", str(cfg)], extra=False)
    assert r.returncode == 2 and r.stderr.startswith(f"{cfg}:3: error-page"), r.stderr
