"""Static files: headers, MIME types, directories, errors, big files."""

import email.utils
import hashlib
import http.client
import os
import subprocess
import time
import urllib.parse

import pytest

from conftest import MIME_CASES
from herdtest import (IMF_FIXDATE, RawConn, build_request, check_common, check_error,
                      etag_for, get_req, sha256, wait_for)


def test_get_file_headers(shared, site):
    r = shared.get("/index.html")
    assert r.status == 200
    assert r.body == site.files["index.html"]
    check_common(r)
    assert r.get("content-type") == "text/html; charset=utf-8"
    assert int(r.get("content-length")) == len(site.files["index.html"])
    assert r.get("last-modified") == email.utils.formatdate(site.fixed_mtime, usegmt=True)
    assert IMF_FIXDATE.match(r.get("last-modified"))
    assert r.get("etag") == '"%x-%x"' % (site.fixed_mtime, len(site.files["index.html"]))
    assert r.get("etag") == etag_for(site.root / "index.html")
    assert r.get("accept-ranges") == "bytes"


def test_date_is_now(shared):
    r = shared.get("/small.txt")
    when = email.utils.parsedate_to_datetime(r.get("date")).timestamp()
    assert abs(when - time.time()) < 30, r.get("date")


@pytest.mark.parametrize("name,ctype", sorted(MIME_CASES.items()))
def test_mime_types(shared, site, name, ctype):
    r = shared.get("/mime/" + name)
    assert r.status == 200
    assert r.get("content-type") == ctype
    assert r.body == site.files["mime/" + name]


def test_png(shared, site):
    r = shared.get("/pixel.png")
    assert r.status == 200 and r.get("content-type") == "image/png"
    assert r.body == site.files["pixel.png"]
    assert r.body.startswith(b"\x89PNG")


def test_empty_file(shared):
    r = shared.get("/empty.txt")
    assert r.status == 200
    assert r.get("content-length") == "0" and r.body == b""


def test_head_same_headers_no_body(shared, site):
    with shared.connect() as c:
        c.send(get_req("/style.css"))
        g = c.read_response()
        # HEAD then GET pipelined: if HEAD leaked a body the GET would misparse
        c.send(build_request("HEAD", "/style.css") + get_req("/small.txt"))
        h = c.read_response("HEAD")
        nxt = c.read_response()
    assert h.status == 200 and h.body == b""
    assert h.get("content-length") == str(len(site.files["style.css"]))
    for name in ("content-type", "etag", "last-modified", "accept-ranges", "server"):
        assert h.get(name) == g.get(name), name
    assert nxt.status == 200 and nxt.body == site.files["small.txt"]


def test_head_of_404_has_no_body(shared):
    with shared.connect() as c:
        c.send(build_request("HEAD", "/nope.html") + get_req("/small.txt"))
        h = c.read_response("HEAD")
        assert h.status == 404 and h.body == b""
        check_common(h)
        assert c.read_response().status == 200


def test_root_serves_index(shared, site):
    r = shared.get("/")
    assert r.status == 200 and r.body == site.files["index.html"]
    assert r.get("content-type") == "text/html; charset=utf-8"


def test_query_string_ignored_for_files(shared, site):
    r = shared.get("/small.txt?x=1&y=%2F..")
    assert r.status == 200 and r.body == site.files["small.txt"]


@pytest.mark.parametrize("target,location", [
    ("/sub", "/sub/"),
    ("/sub?a=1&b=2", "/sub/?a=1&b=2"),
    ("/sub/deeper", "/sub/deeper/"),
    ("/empty", "/empty/"),
])
def test_directory_redirect(shared, target, location):
    r = shared.get(target)
    assert r.status == 301, r
    assert r.get("location") == location
    check_common(r)


def test_directory_redirect_head(shared):
    with shared.connect() as c:
        c.send(build_request("HEAD", "/sub") + get_req("/small.txt"))
        r = c.read_response("HEAD")
        assert r.status == 301 and r.get("location") == "/sub/" and r.body == b""
        assert c.read_response().status == 200


def test_directory_index(shared, site):
    r = shared.get("/sub/")
    assert r.status == 200 and r.body == site.files["sub/index.html"]
    assert r.get("content-type") == "text/html; charset=utf-8"
    r = shared.get("/sub/deeper/")
    assert r.status == 200 and r.body == site.files["sub/deeper/index.html"]


def test_directory_without_index_is_403(shared):
    r = shared.get("/empty/")
    check_error(r, 403)


def test_missing_is_404_with_html_page(shared):
    r = shared.get("/no/such/file.html")
    check_error(r, 404, "404 Not Found")
    assert r.get("content-type", "").startswith("text/html")
    assert int(r.get("content-length")) == len(r.body)


def test_404_keeps_connection(shared, site):
    with shared.connect() as c:
        c.send(get_req("/missing"))
        assert c.read_response().status == 404
        c.send(get_req("/small.txt"))
        r = c.read_response()
        assert r.status == 200 and r.body == site.files["small.txt"]


@pytest.mark.parametrize("target", ["/.hidden", "/.git/config", "/.git/", "/.git",
                                    "/sub/.secretdot", "/%2ehidden", "/.git%2fconfig"])
def test_dotfiles_hidden_by_default(shared, target):
    r = shared.get(target)
    assert r.status in (404, 400), r
    assert b"hidden dotfile" not in r.body and b"repositoryformat" not in r.body
    if target in ("/.hidden", "/.git/config", "/sub/.secretdot"):
        check_error(r, 404, "404 Not Found")


def test_serve_dotfiles_flag(server, site):
    srv = server("--serve-dotfiles")
    r = srv.get("/.hidden")
    assert r.status == 200 and r.body == site.files[".hidden"]
    r = srv.get("/.git/config")
    assert r.status == 200 and r.body == site.files[".git/config"]
    r = srv.get("/sub/.secretdot")
    assert r.status == 200
    # still no escape with dotfiles on
    r = srv.get("/../secret.txt")
    assert r.status in (400, 404) and site.secret not in r.body


def test_name_with_space(shared, site):
    r = shared.get("/with%20space.txt")
    assert r.status == 200 and r.body == site.files["with space.txt"]


def test_utf8_name(shared, site):
    name = "caf\u00e9 \u65e5\u672c.txt"
    r = shared.get("/" + urllib.parse.quote(name))
    assert r.status == 200 and r.body == site.files[name]


def test_percent_decoding_of_plain_chars(shared, site):
    r = shared.get("/%69ndex.%68tml")
    assert r.status == 200 and r.body == site.files["index.html"]


def test_percent_decoding_is_done_once(shared, site):
    # a file literally named "%2e%2e": /%252e%252e must reach it
    r = shared.get("/%252e%252e")
    assert r.status == 200 and r.body == site.files["%2e%2e"]


def test_symlink_inside_docroot_is_served(shared, site):
    r = shared.get("/inside_link.txt")
    assert r.status == 200 and r.body == site.files["small.txt"]
    r = shared.get("/sub/up_link.html")
    assert r.status == 200 and r.body == site.files["index.html"]


def test_http_client_keepalive_reuse(shared, site):
    conn = http.client.HTTPConnection(shared.host, shared.port, timeout=10)
    try:
        socks = set()
        for name in ("index.html", "style.css", "pixel.png", "small.txt", "sub/page.txt"):
            conn.request("GET", "/" + name)
            resp = conn.getresponse()
            body = resp.read()
            assert resp.status == 200 and body == site.files[name]
            assert resp.getheader("Server") == "herd/0.1.0"
            socks.add(id(conn.sock))
            assert conn.sock is not None, "server closed a keep-alive connection"
        assert len(socks) == 1
    finally:
        conn.close()


def test_curl_get_and_head(shared, site):
    out = subprocess.run(["curl", "-sS", "-f", "--max-time", "10", shared.url("/style.css")],
                         capture_output=True, timeout=20)
    assert out.returncode == 0, out.stderr
    assert out.stdout == site.files["style.css"]
    out = subprocess.run(["curl", "-sS", "-I", "--max-time", "10", shared.url("/pixel.png")],
                         capture_output=True, timeout=20, text=True)
    assert out.returncode == 0, out.stderr
    assert "content-type: image/png" in out.stdout.lower()


def test_curl_http10(shared, site):
    out = subprocess.run(["curl", "-sS", "--http1.0", "-f", "--max-time", "10",
                          shared.url("/small.txt")], capture_output=True, timeout=20)
    assert out.returncode == 0 and out.stdout == site.files["small.txt"], out.stderr


@pytest.mark.slow
def test_big_file_curl_sha256(shared, site, tmp_path):
    dest = tmp_path / "big.out"
    out = subprocess.run(["curl", "-sS", "-f", "--max-time", "30", "-o", str(dest),
                          "-w", "%{size_download}", shared.url("/big.bin")],
                         capture_output=True, timeout=40, text=True)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) == site.big_size
    h = hashlib.sha256()
    with open(dest, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    assert h.hexdigest() == site.big_sha


@pytest.mark.slow
def test_big_file_slow_reader_sha256(shared, site):
    """Small receive buffer and pauses: the server sees EAGAIN/partial writes
    many times and must resume correctly."""
    c = shared.connect(rcvbuf=16384)
    try:
        c.send(get_req("/big.bin"))
        head = c.read_until(b"\r\n\r\n")
        assert b" 200 " in head.split(b"\r\n")[0], head
        assert f"content-length: {site.big_size}".encode() in head.lower()
        h = hashlib.sha256(bytes(c.buf))
        got = len(c.buf)
        c.buf.clear()
        t0 = time.monotonic()
        # slow phase: ~6 MiB in 16 KiB reads with pauses (bounded to ~8 s)
        while got < 6 * (1 << 20) and time.monotonic() - t0 < 8:
            data = c.sock.recv(16384)
            assert data, f"EOF after {got} bytes"
            h.update(data)
            got += len(data)
            if (got // 16384) % 8 == 0:
                time.sleep(0.01)
        # then the rest at full speed
        c.read_exact(site.big_size - got, sink=h.update)
        assert h.hexdigest() == site.big_sha
        # connection still usable after a big sendfile
        c.send(get_req("/small.txt"))
        r = c.read_response()
        assert r.status == 200 and r.body == site.files["small.txt"]
    finally:
        c.close()


@pytest.mark.slow
def test_big_file_then_pipelined_small(shared, site):
    with shared.connect() as c:
        c.send(get_req("/big.bin") + get_req("/small.txt") + build_request("HEAD", "/big.bin"))
        h = hashlib.sha256()
        r1 = c.read_response(sink=h.update)
        assert r1.status == 200 and h.hexdigest() == site.big_sha
        r2 = c.read_response()
        assert r2.status == 200 and r2.body == site.files["small.txt"]
        r3 = c.read_response("HEAD")
        assert r3.status == 200 and r3.get("content-length") == str(site.big_size)


def test_etag_changes_with_file(server, tmp_path):
    (tmp_path / "f.txt").write_bytes(b"one")
    os.utime(tmp_path / "f.txt", (1600000000, 1600000000))
    srv = server(docroot=tmp_path)
    r1 = srv.get("/f.txt")
    assert r1.get("etag") == '"%x-%x"' % (1600000000, 3)
    (tmp_path / "f.txt").write_bytes(b"second")
    os.utime(tmp_path / "f.txt", (1600000100, 1600000100))
    # an open-file cache may revalidate lazily: poll briefly
    r2 = wait_for(lambda: (lambda r: r if r.body == b"second" else None)(srv.get("/f.txt")),
                  timeout=5, what="changed file to be served")
    assert r2.get("etag") == '"%x-%x"' % (1600000100, 6)
    assert r2.get("last-modified") == email.utils.formatdate(1600000100, usegmt=True)


def test_a_same_second_same_size_rewrite_gets_a_new_etag(server, tmp_path):
    """The ETag carries the mtime's nanoseconds: a file rewritten in place
    within the same second at the same size kept nginx's "<mtime>-<size>",
    so an If-Range with the old ETag got a 206 of the new bytes, spliced
    onto the client's copy of the old ones (red-team pass 16)."""
    f = tmp_path / "f.txt"
    f.write_bytes(b"AAAA")
    os.utime(f, ns=(1600000000_000000000, 1600000000_000000000))
    srv = server(docroot=tmp_path)
    old = srv.get("/f.txt").get("etag")
    assert old == '"%x-%x"' % (1600000000, 4)
    f.write_bytes(b"BBBB")
    os.utime(f, ns=(1600000000_500000000, 1600000000_500000000))
    new = '"%x.%x-%x"' % (1600000000, 500000000, 4)
    # each worker's open-file cache looks at the file again within a second
    r = wait_for(lambda: (lambda r: r if r.get("etag") == new else None)(srv.get("/f.txt")),
                 timeout=5, what="the rewritten file's new ETag")
    assert r.body == b"BBBB"
    # once every worker has seen it: the old ETag no longer resumes
    resumed = wait_for(lambda: (lambda r: r if r.status == 200 else None)(
        srv.get("/f.txt", headers=[("Range", "bytes=2-"), ("If-Range", old)])),
        timeout=5, what="If-Range with the old ETag to get the whole new file")
    assert resumed.body == b"BBBB" and resumed.get("etag") == new, resumed


def test_deleted_file_becomes_404(server, tmp_path):
    (tmp_path / "gone.txt").write_bytes(b"here")
    srv = server(docroot=tmp_path)
    assert srv.get("/gone.txt").status == 200
    (tmp_path / "gone.txt").unlink()
    wait_for(lambda: srv.get("/gone.txt").status == 404, timeout=5,
             what="deleted file to become 404")
