"""Precompressed sidecars: FILE.br, FILE.zst or FILE.gz served in place of
FILE when Accept-Encoding allows (q-values, "*", identity;q=0), with
Content-Encoding, Vary: Accept-Encoding on every response of a file that has
sidecars, an ETag per variant, Range, HEAD and 304 on the chosen variant;
stale (older) and missing sidecars are ignored; --no-precompressed turns it
off; a sidecar asked for by name is a plain file."""

import gzip
import os
import time

import pytest

from conftest import Server, require_binary
from herdtest import build_request, etag_for, get_req

OLD, NEW = 1700000000, 1700000100

CSS = b"body { color: #123456; } /* the identity bytes */\n" * 3
BR = b"BR-BYTES:" + b"b" * 20
ZST = b"ZSTD-BYTES:" + b"z" * 25
BIG = bytes(range(256)) * 400          # 100 KiB: sent with sendfile
BIG_GZ = gzip.compress(BIG, mtime=0) + os.urandom(40 * 1024)  # over 32 KiB too


def write(root, rel, data, mtime):
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    os.utime(p, (mtime, mtime))
    return p


@pytest.fixture(scope="module")
def docroot(tmp_path_factory):
    root = tmp_path_factory.mktemp("pre") / "www"
    root.mkdir()
    write(root, "a.css", CSS, OLD)
    write(root, "a.css.br", BR, NEW)
    write(root, "a.css.zst", ZST, NEW)
    write(root, "a.css.gz", gzip.compress(CSS, mtime=0), NEW)
    write(root, "only-gz.js", b"console.log('identity');\n", OLD)
    write(root, "only-gz.js.gz", gzip.compress(b"console.log('identity');\n", mtime=0), OLD)
    write(root, "stale.txt", b"edited after it was compressed\n", NEW)
    write(root, "stale.txt.gz", gzip.compress(b"old text\n", mtime=0), OLD)
    write(root, "plain.txt", b"no sidecars here\n", OLD)
    write(root, "big.bin", BIG, OLD)
    write(root, "big.bin.gz", BIG_GZ, NEW)
    write(root, "archive.tar.gz", b"\x1f\x8b not really a tarball", OLD)
    write(root, "dir/index.html", b"<p>index</p>\n" * 10, OLD)
    write(root, "dir/index.html.br", b"BR-INDEX", NEW)
    (root / "gzdir.txt.gz").mkdir()          # a directory is no sidecar
    write(root, "gzdir.txt", b"sidecar is a directory\n", OLD)
    return root


@pytest.fixture(scope="module")
def pre(docroot):
    require_binary()
    srv = Server([], ["127.0.0.1:0"], docroot)
    yield srv
    problems = srv.finish()
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


def get(srv, path, ae=None, method="GET", extra=None):
    headers = [] if ae is None else [("Accept-Encoding", ae)]
    return srv.get(path, headers=headers + list(extra or []), method=method)


def variant_etag(root, rel, coding):
    return etag_for(root / rel)[:-1] + "-" + coding + '"'


# (Accept-Encoding or None for no header, the coding expected or None)
TABLE = [
    (None, None),
    ("", None),
    ("gzip", "gzip"),
    ("x-gzip", "gzip"),
    ("br", "br"),
    ("zstd", "zstd"),
    ("gzip, deflate, br", "br"),
    ("gzip, deflate, br, zstd", "br"),
    ("gzip, zstd", "zstd"),
    ("br;q=0.5, gzip", "gzip"),
    ("br;q=0.5, gzip;q=0.4, zstd;q=0.6", "zstd"),
    ("br;q=0, gzip;q=0, zstd;q=0", None),
    ("deflate, compress", None),
    ("identity", None),
    ("identity, gzip;q=0.5", None),
    ("identity;q=0.5, gzip", "gzip"),
    ("identity;q=0, gzip", "gzip"),
    ("*", "br"),
    ("*;q=0.1, identity", None),
    ("br;q=0, *", "zstd"),
    ("*;q=0, gzip", "gzip"),
    ("GZip;Q=1.0", "gzip"),
    ("gzip;q=7", None),          # malformed element: ignored
]
BODIES = {"br": BR, "zstd": ZST, None: CSS}


@pytest.mark.parametrize("ae,coding", TABLE, ids=[repr(a) for a, _ in TABLE])
def test_negotiation_table(pre, docroot, ae, coding):
    r = get(pre, "/a.css", ae)
    assert r.status == 200, r
    assert r.get("content-type") == "text/css; charset=utf-8"   # the original's
    assert r.get("vary") == "Accept-Encoding"
    assert r.get("content-encoding") == coding
    if coding == "gzip":
        assert gzip.decompress(r.body) == CSS
    else:
        assert r.body == BODIES[coding]
    assert int(r.get("content-length")) == len(r.body)
    ext = {"br": ".br", "zstd": ".zst", "gzip": ".gz"}.get(coding)
    want_etag = variant_etag(docroot, "a.css" + ext, coding) if coding else \
        etag_for(docroot / "a.css")
    assert r.get("etag") == want_etag
    assert r.get("accept-ranges") == "bytes"


def test_identity_refused_without_acceptable_sidecar_is_406(pre):
    for ae in ("identity;q=0", "*;q=0", "deflate, identity;q=0"):
        r = get(pre, "/a.css", ae)
        assert r.status == 406, (ae, r)
        assert r.get("vary") == "Accept-Encoding"
        assert b"406 Not Acceptable" in r.body
        assert r.conn_tokens() != {"close"}
    r = get(pre, "/only-gz.js", "br, identity;q=0")
    assert r.status == 406


def test_identity_refused_on_a_file_without_sidecars_sends_the_file(pre):
    """Not subject to negotiation (RFC 9110 12.1): the header is disregarded."""
    r = get(pre, "/plain.txt", "identity;q=0")
    assert r.status == 200 and r.body == b"no sidecars here\n"
    assert not r.has("vary") and not r.has("content-encoding")


def test_missing_sidecar_falls_back_to_identity(pre, docroot):
    r = get(pre, "/only-gz.js", "br")
    assert r.status == 200 and r.body == b"console.log('identity');\n"
    assert r.get("vary") == "Accept-Encoding" and not r.has("content-encoding")
    r = get(pre, "/only-gz.js", "br, gzip")
    assert r.get("content-encoding") == "gzip"
    assert gzip.decompress(r.body) == b"console.log('identity');\n"
    # same mtime as the file: not older, so it counts
    assert r.get("content-type") == "text/javascript; charset=utf-8"


def test_stale_sidecar_is_ignored(pre):
    r = get(pre, "/stale.txt", "gzip")
    assert r.status == 200 and r.body == b"edited after it was compressed\n"
    assert not r.has("content-encoding")
    assert not r.has("vary")     # no usable sidecar: not variant-capable


def test_sidecar_that_is_a_directory_is_ignored(pre):
    r = get(pre, "/gzdir.txt", "gzip")
    assert r.status == 200 and r.body == b"sidecar is a directory\n"
    assert not r.has("content-encoding") and not r.has("vary")


def test_no_vary_on_files_without_sidecars(pre):
    for ae in (None, "gzip, br"):
        r = get(pre, "/plain.txt", ae)
        assert r.status == 200 and not r.has("vary") and not r.has("content-encoding")


def test_sidecar_by_name_is_a_plain_file(pre, docroot):
    r = get(pre, "/a.css.gz", "gzip")
    assert r.status == 200
    assert r.get("content-type") == "application/gzip"
    assert not r.has("content-encoding") and not r.has("vary")
    assert r.body == (docroot / "a.css.gz").read_bytes()
    assert r.get("etag") == etag_for(docroot / "a.css.gz")
    r = get(pre, "/archive.tar.gz", "gzip")
    assert r.status == 200 and not r.has("content-encoding")


def test_directory_index_has_variants(pre):
    r = get(pre, "/dir/", "br")
    assert r.status == 200 and r.body == b"BR-INDEX"
    assert r.get("content-encoding") == "br"
    assert r.get("content-type") == "text/html; charset=utf-8"
    r = get(pre, "/dir/", None)
    assert r.body == b"<p>index</p>\n" * 10 and r.get("vary") == "Accept-Encoding"


def test_head_matches_get_per_variant(pre):
    for ae in (None, "gzip", "br"):
        with pre.connect() as c:
            hdrs = [] if ae is None else [("Accept-Encoding", ae)]
            c.send(build_request("HEAD", "/a.css", headers=hdrs) +
                   build_request("GET", "/a.css", headers=hdrs) + get_req("/plain.txt"))
            h = c.read_response("HEAD")
            g = c.read_response()
            nxt = c.read_response()
        assert h.status == 200 and h.body == b""
        for name in ("content-type", "content-encoding", "vary", "etag", "last-modified",
                     "content-length", "accept-ranges"):
            assert h.get(name) == g.get(name), (ae, name)
        assert nxt.status == 200 and nxt.body == b"no sidecars here\n"


def test_304_per_variant(pre, docroot):
    gz_tag = variant_etag(docroot, "a.css.gz", "gzip")
    br_tag = variant_etag(docroot, "a.css.br", "br")
    plain_tag = etag_for(docroot / "a.css")
    assert len({gz_tag, br_tag, plain_tag}) == 3
    r = get(pre, "/a.css", "gzip", extra=[("If-None-Match", gz_tag)])
    assert r.status == 304 and r.body == b""
    assert r.get("etag") == gz_tag and r.get("vary") == "Accept-Encoding"
    r = get(pre, "/a.css", None, extra=[("If-None-Match", plain_tag)])
    assert r.status == 304 and r.get("etag") == plain_tag
    assert r.get("vary") == "Accept-Encoding"
    # the gzip tag does not validate the br variant, nor the identity one
    r = get(pre, "/a.css", "br", extra=[("If-None-Match", gz_tag)])
    assert r.status == 200 and r.get("content-encoding") == "br" and r.body == BR
    r = get(pre, "/a.css", None, extra=[("If-None-Match", gz_tag)])
    assert r.status == 200 and r.body == CSS
    r = get(pre, "/a.css", "gzip", extra=[("If-None-Match", f'{br_tag}, W/{gz_tag}')])
    assert r.status == 304 and r.get("etag") == gz_tag


def test_if_match_per_variant(pre, docroot):
    """If-Match compares with the ETag of the variant served; a 412 of a
    file with variants says Vary, as its 304 and 416 do."""
    gz_tag = variant_etag(docroot, "a.css.gz", "gzip")
    plain_tag = etag_for(docroot / "a.css")
    r = get(pre, "/a.css", "gzip", extra=[("If-Match", gz_tag)])
    assert r.status == 200 and r.get("content-encoding") == "gzip"
    r = get(pre, "/a.css", None, extra=[("If-Match", plain_tag)])
    assert r.status == 200 and r.body == CSS
    for ae, tag in (("gzip", plain_tag), ("br", gz_tag), (None, gz_tag), ("gzip", "W/" + gz_tag)):
        r = get(pre, "/a.css", ae, extra=[("If-Match", tag)])
        assert r.status == 412, (ae, tag, r)
        assert r.get("vary") == "Accept-Encoding" and not r.has("etag")
        assert not r.has("content-encoding")
    r = get(pre, "/big.bin", "gzip", extra=[("If-Match", etag_for(docroot / "big.bin")),
                                            ("Range", "bytes=0-9")])
    assert r.status == 412 and not r.has("content-range")
    r = get(pre, "/plain.txt", None, extra=[("If-Match", '"nope"')])
    assert r.status == 412 and not r.has("vary")


def test_range_on_a_variant(pre, docroot):
    r = get(pre, "/big.bin", "gzip", extra=[("Range", "bytes=100-199")])
    assert r.status == 206
    assert r.get("content-encoding") == "gzip" and r.get("vary") == "Accept-Encoding"
    assert r.get("content-range") == f"bytes 100-199/{len(BIG_GZ)}"
    assert r.body == BIG_GZ[100:200]
    r = get(pre, "/big.bin", "gzip", extra=[("Range", "bytes=-10")])
    assert r.status == 206 and r.body == BIG_GZ[-10:]
    r = get(pre, "/big.bin", None, extra=[("Range", "bytes=100-199")])
    assert r.status == 206 and r.get("content-range") == f"bytes 100-199/{len(BIG)}"
    assert r.body == BIG[100:200] and not r.has("content-encoding")
    # small file from memory
    r = get(pre, "/a.css", "br", extra=[("Range", "bytes=3-5")])
    assert r.status == 206 and r.body == BR[3:6]
    assert r.get("content-range") == f"bytes 3-5/{len(BR)}"
    # unsatisfiable against the variant's size, not the file's
    r = get(pre, "/big.bin", "gzip", extra=[("Range", f"bytes={len(BIG_GZ)}-")])
    assert r.status == 416 and r.get("content-range") == f"bytes */{len(BIG_GZ)}"
    assert r.get("vary") == "Accept-Encoding"


def test_if_range_with_the_variant_etag(pre, docroot):
    gz_tag = variant_etag(docroot, "big.bin.gz", "gzip")
    r = get(pre, "/big.bin", "gzip", extra=[("Range", "bytes=0-9"), ("If-Range", gz_tag)])
    assert r.status == 206 and r.body == BIG_GZ[:10]
    r = get(pre, "/big.bin", "gzip",
            extra=[("Range", "bytes=0-9"), ("If-Range", etag_for(docroot / "big.bin"))])
    assert r.status == 200 and r.body == BIG_GZ


def test_whole_big_variant_by_sendfile(pre):
    r = get(pre, "/big.bin", "gzip")
    assert r.status == 200 and r.body == BIG_GZ


def test_several_accept_encoding_lines_are_one_list(pre):
    r = pre.get("/a.css", headers=[("Accept-Encoding", "identity;q=0"),
                                   ("Accept-Encoding", "gzip")])
    assert r.status == 200 and r.get("content-encoding") == "gzip"


def test_keepalive_mix_of_variants(pre):
    """One connection, pipelined: each response is the right variant."""
    order = ["br", None, "gzip", "zstd", "identity;q=0", None]
    with pre.connect() as c:
        c.send(b"".join(build_request("GET", "/a.css", headers=[] if ae is None else
                                      [("Accept-Encoding", ae)]) for ae in order))
        got = [c.read_response() for _ in order]
    assert [r.get("content-encoding") for r in got] == ["br", None, "gzip", "zstd", None, None]
    assert [r.status for r in got] == [200, 200, 200, 200, 406, 200]


def test_no_precompressed_flag(server, docroot):
    srv = server("--no-precompressed", docroot=docroot)
    r = get(srv, "/a.css", "br, gzip, zstd")
    assert r.status == 200 and r.body == CSS
    assert not r.has("content-encoding") and not r.has("vary")
    r = get(srv, "/a.css", "identity;q=0")
    assert r.status == 200


def test_new_and_edited_sidecars_are_seen_within_a_few_seconds(server, tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    write(root, "f.txt", b"identity\n", OLD)
    srv = server(docroot=root)
    r = get(srv, "/f.txt", "gzip")
    assert r.body == b"identity\n" and not r.has("vary")
    write(root, "f.txt.gz", gzip.compress(b"identity\n", mtime=0), NEW)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        r = get(srv, "/f.txt", "gzip")
        if r.has("content-encoding"):
            break
        time.sleep(0.2)
    assert r.get("content-encoding") == "gzip" and r.get("vary") == "Accept-Encoding"
    # the file is edited after its sidecar: the stale sidecar is dropped (each
    # worker has its own cache, revalidated at most once a second)
    write(root, "f.txt", b"identity, edited\n", NEW + 100)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        r = get(srv, "/f.txt", "gzip")
        if r.body == b"identity, edited\n":
            break
        time.sleep(0.2)
    assert r.body == b"identity, edited\n" and not r.has("content-encoding")
    assert not r.has("vary")
