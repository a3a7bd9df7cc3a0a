"""Conditional requests (If-None-Match, If-Modified-Since) and ranges."""

import email.utils
import hashlib
import subprocess

import pytest

from herdtest import build_request, check_common, etag_for, get_req

SMALL = b"0123456789abcdefghijklmnopqrstuvwxyz"
N = len(SMALL)


@pytest.fixture
def etag(site):
    return etag_for(site.root / "small.txt")


@pytest.fixture
def lastmod(site):
    return email.utils.formatdate(site.fixed_mtime, usegmt=True)


def cond_get(srv, headers, target="/small.txt", method="GET"):
    """Send the conditional request followed by a pipelined GET: a 304 that
    carried body bytes would corrupt the second response."""
    with srv.connect() as c:
        c.send(build_request(method, target, headers=headers) + get_req("/style.css"))
        r = c.read_response(method)
        nxt = c.read_response()
        assert nxt.status == 200 and nxt.body == b"body { color: #123456; }\n", \
            "response after the conditional one misparsed (body on 304?)"
        return r


# ------------------------------------------------------------ If-None-Match

def test_if_none_match_exact(shared, etag):
    r = cond_get(shared, [("If-None-Match", etag)])
    assert r.status == 304 and r.body == b""
    assert r.get("server") == "herd/0.1.0" and r.has("date")


def test_304_has_no_content_length(shared, etag):
    """SPEC: a 304 repeats the validators and carries no body and no
    Content-Length (RFC 9110 15.4.5; nginx does the same)."""
    r = cond_get(shared, [("If-None-Match", etag)])
    assert r.status == 304 and r.body == b""
    assert not r.has("content-length")
    assert r.get("etag") == etag


@pytest.mark.parametrize("fmt", [
    '"nope", {e}',
    '{e}, "other"',
    '"a","b",{e}',
    '*',
    'W/{e}',
    '"x", W/{e}',
])
def test_if_none_match_forms(shared, etag, fmt):
    r = cond_get(shared, [("If-None-Match", fmt.format(e=etag))])
    assert r.status == 304, (fmt, r)


@pytest.mark.parametrize("value", ['"nope"', '"abc-123", "def-456"', 'W/"zzz"'])
def test_if_none_match_mismatch_is_200(shared, value):
    r = cond_get(shared, [("If-None-Match", value)])
    assert r.status == 200 and r.body == SMALL


def test_if_none_match_on_head(shared, etag):
    r = cond_get(shared, [("If-None-Match", etag)], method="HEAD")
    assert r.status == 304


def test_if_none_match_missing_file_is_404(shared):
    r = shared.get("/nope.txt", headers=[("If-None-Match", "*")])
    assert r.status == 404


# ------------------------------------------------------------ If-Modified-Since

def test_if_modified_since_equal(shared, lastmod):
    r = cond_get(shared, [("If-Modified-Since", lastmod)])
    assert r.status == 304


def test_if_modified_since_later(shared, site):
    later = email.utils.formatdate(site.fixed_mtime + 86400, usegmt=True)
    r = cond_get(shared, [("If-Modified-Since", later)])
    assert r.status == 304


def test_if_modified_since_earlier_is_200(shared, site):
    earlier = email.utils.formatdate(site.fixed_mtime - 1, usegmt=True)
    r = cond_get(shared, [("If-Modified-Since", earlier)])
    assert r.status == 200 and r.body == SMALL


def test_if_modified_since_garbage_is_200(shared):
    r = cond_get(shared, [("If-Modified-Since", "not a date")])
    assert r.status == 200 and r.body == SMALL


def test_if_none_match_takes_precedence(shared, lastmod):
    # INM present and not matching: IMS is ignored -> 200
    r = cond_get(shared, [("If-None-Match", '"nope"'), ("If-Modified-Since", lastmod)])
    assert r.status == 200 and r.body == SMALL


def test_curl_conditional(shared, etag):
    out = subprocess.run(["curl", "-sS", "--max-time", "10", "-o", "/dev/null", "-w",
                          "%{http_code}", "-H", f"If-None-Match: {etag}",
                          shared.url("/small.txt")], capture_output=True, text=True, timeout=20)
    assert out.stdout == "304", out


# ------------------------------------------------------------ Range

@pytest.mark.parametrize("spec,first,last", [
    ("bytes=0-9", 0, 9),
    ("bytes=10-", 10, N - 1),
    ("bytes=-5", N - 5, N - 1),
    ("bytes=5-5", 5, 5),
    ("bytes=0-", 0, N - 1),
    ("bytes=30-1000", 30, N - 1),          # last clamped to size-1
    ("bytes=-1000", 0, N - 1),             # suffix longer than file
    ("bytes=35-35", 35, 35),
])
def test_range_206(shared, spec, first, last):
    r = cond_get(shared, [("Range", spec)])
    assert r.status == 206, (spec, r)
    check_common(r)
    assert r.get("content-range") == f"bytes {first}-{last}/{N}"
    assert r.body == SMALL[first:last + 1]
    assert int(r.get("content-length")) == last - first + 1


@pytest.mark.parametrize("spec", ["bytes=36-", "bytes=100-200", "bytes=36-40"])
def test_range_unsatisfiable_416(shared, spec):
    r = cond_get(shared, [("Range", spec)])
    assert r.status == 416, (spec, r)
    assert r.get("content-range") == f"bytes */{N}"
    check_common(r)


def test_range_on_empty_file_unsatisfiable(shared):
    r = shared.get("/empty.txt", headers=[("Range", "bytes=0-")])
    assert r.status == 416 and r.get("content-range") == "bytes */0"


@pytest.mark.parametrize("spec", ["bytes=0-1,3-4", "bytes=0-0, -1", "bytes=1-2,5-9,20-"])
def test_multiple_ranges_give_full_200(shared, spec):
    r = cond_get(shared, [("Range", spec)])
    assert r.status == 200 and r.body == SMALL
    assert not r.has("content-range")


@pytest.mark.parametrize("spec", ["bytes=abc", "bytes=", "chars=0-1", "bytes=--1",
                                  "bytes 0-1", "0-1", "bytes=1-2-3", "bytes=x-"])
def test_malformed_range_ignored(shared, spec):
    r = cond_get(shared, [("Range", spec)])
    assert r.status == 200, (spec, r)
    assert r.body == SMALL


def test_range_head(shared):
    r = cond_get(shared, [("Range", "bytes=0-9")], method="HEAD")
    assert r.status == 206 and r.get("content-range") == f"bytes 0-9/{N}"
    assert r.get("content-length") == "10"


def test_if_range_matching_etag(shared, etag):
    r = cond_get(shared, [("Range", "bytes=0-3"), ("If-Range", etag)])
    assert r.status == 206 and r.body == SMALL[:4]


def test_if_range_matching_date(shared, lastmod):
    r = cond_get(shared, [("Range", "bytes=0-3"), ("If-Range", lastmod)])
    assert r.status == 206 and r.body == SMALL[:4]


@pytest.mark.parametrize("value", ['"not-the-etag"', "Mon, 01 Jan 2001 00:00:00 GMT"])
def test_if_range_mismatch_gives_full(shared, value):
    r = cond_get(shared, [("Range", "bytes=0-3"), ("If-Range", value)])
    assert r.status == 200 and r.body == SMALL
    assert not r.has("content-range")


@pytest.mark.slow
def test_range_in_big_file(shared, site, big_bytes):
    a, b = 30_000_000, 30_999_999
    h = hashlib.sha256()
    with shared.connect() as c:
        c.send(get_req("/big.bin", headers=[("Range", f"bytes={a}-{b}")])
               + get_req("/big.bin", headers=[("Range", "bytes=-100")]))
        r = c.read_response(sink=h.update)
        assert r.status == 206
        assert r.get("content-range") == f"bytes {a}-{b}/{site.big_size}"
        assert h.hexdigest() == hashlib.sha256(big_bytes[a:b + 1]).hexdigest()
        r = c.read_response()
        assert r.status == 206 and r.body == big_bytes[-100:]


def test_curl_range(shared, site):
    out = subprocess.run(["curl", "-sS", "--max-time", "10", "-r", "3-7",
                          "-w", "|%{http_code}", shared.url("/small.txt")],
                         capture_output=True, timeout=20)
    assert out.stdout == SMALL[3:8] + b"|206", out
