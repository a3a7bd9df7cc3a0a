"""Conditional requests (If-Match, If-Unmodified-Since, If-None-Match,
If-Modified-Since, in RFC 9110 13.2.2's order) and ranges."""

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


# ------------------------------------------------------------ If-Match, If-Unmodified-Since

def check_412(r, method="GET"):
    """412 is an error answer: the page (head alone for HEAD), keep-alive,
    no validators or Content-Range."""
    assert r.status == 412, r
    assert r.reason == "Precondition Failed"
    check_common(r)
    assert r.get("content-type") == "text/html; charset=utf-8"
    assert not r.has("etag") and not r.has("content-range")
    if method == "HEAD":
        assert r.body == b""
    else:
        assert b"412 Precondition Failed" in r.body
        assert int(r.get("content-length")) == len(r.body)


@pytest.mark.parametrize("method", ["GET", "HEAD"])
@pytest.mark.parametrize("fmt", ['"nope"', '"a", "b"', 'W/{e}', '"x", W/{e}', ''])
def test_if_match_false_is_412(shared, etag, method, fmt):
    """Strong comparison (RFC 9110 13.1.1): a weak tag never matches."""
    r = cond_get(shared, [("If-Match", fmt.format(e=etag))], method=method)
    check_412(r, method)
    assert not r.has("connection")


@pytest.mark.parametrize("method", ["GET", "HEAD"])
@pytest.mark.parametrize("fmt", ['{e}', '*', '"nope", {e}', 'W/"x", {e}'])
def test_if_match_true_is_200(shared, etag, method, fmt):
    r = cond_get(shared, [("If-Match", fmt.format(e=etag))], method=method)
    assert r.status == 200 and r.get("etag") == etag
    assert r.body == (b"" if method == "HEAD" else SMALL)


def test_if_match_on_several_lines_is_one_list(shared, etag):
    r = cond_get(shared, [("If-Match", '"nope"'), ("If-Match", etag)])
    assert r.status == 200 and r.body == SMALL
    r = cond_get(shared, [("If-Match", etag), ("If-Match", '"nope"')])
    assert r.status == 200 and r.body == SMALL
    r = cond_get(shared, [("If-Match", '"nope"'), ("If-Match", '"other"')])
    check_412(r)


def test_if_match_false_keeps_connection_close(shared):
    with shared.connect() as c:
        c.send(build_request("GET", "/small.txt",
                             headers=[("If-Match", '"nope"'), ("Connection", "close")]))
        r = c.read_response()
        check_412(r)
        assert "close" in r.conn_tokens()
        c.expect_close()


def test_if_match_missing_file_is_404(shared):
    """Preconditions apply only where the answer would be 2xx (13.2.1)."""
    r = shared.get("/nope.txt", headers=[("If-Match", "*")])
    assert r.status == 404


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_if_unmodified_since_earlier_is_412(shared, site, method):
    earlier = email.utils.formatdate(site.fixed_mtime - 1, usegmt=True)
    check_412(cond_get(shared, [("If-Unmodified-Since", earlier)], method=method), method)
    check_412(cond_get(shared, [("If-Unmodified-Since", "Thu, 01 Jan 1970 00:00:00 GMT")],
                       method=method), method)


@pytest.mark.parametrize("delta", [0, 1, 86400])
def test_if_unmodified_since_not_earlier_is_200(shared, site, delta):
    date = email.utils.formatdate(site.fixed_mtime + delta, usegmt=True)
    r = cond_get(shared, [("If-Unmodified-Since", date)])
    assert r.status == 200 and r.body == SMALL


@pytest.mark.parametrize("value", ["not a date", "",
                                   "Thu, 01 Jan 1970 00:00:00 GMT, Thu, 01 Jan 1970 00:00:00 GMT"])
def test_if_unmodified_since_invalid_is_ignored(shared, value):
    r = cond_get(shared, [("If-Unmodified-Since", value)])
    assert r.status == 200 and r.body == SMALL


def test_if_unmodified_since_on_two_lines_is_ignored(shared, site):
    """Two lines are not one HTTP-date: an invalid field, ignored (13.1.4)."""
    earlier = email.utils.formatdate(site.fixed_mtime - 1, usegmt=True)
    r = cond_get(shared, [("If-Unmodified-Since", earlier), ("If-Unmodified-Since", earlier)])
    assert r.status == 200 and r.body == SMALL


def test_if_match_true_wins_over_if_unmodified_since(shared, site, etag):
    """With If-Match present, If-Unmodified-Since is not evaluated (13.2.2)."""
    earlier = email.utils.formatdate(site.fixed_mtime - 1, usegmt=True)
    r = cond_get(shared, [("If-Match", etag), ("If-Unmodified-Since", earlier)])
    assert r.status == 200 and r.body == SMALL
    r = cond_get(shared, [("If-Unmodified-Since", earlier), ("If-Match", "*"),
                          ("Range", "bytes=0-1")])
    assert r.status == 206 and r.body == SMALL[:2]


def test_if_match_false_wins_over_later_if_unmodified_since(shared, site):
    later = email.utils.formatdate(site.fixed_mtime + 86400, usegmt=True)
    check_412(cond_get(shared, [("If-Match", '"nope"'), ("If-Unmodified-Since", later)]))


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_if_match_false_with_range_is_412(shared, method):
    """A resumed download whose validator no longer holds must fail, not
    splice bytes of another representation on (red-team item 4)."""
    r = cond_get(shared, [("If-Match", '"nope"'), ("Range", "bytes=0-1")], method=method)
    check_412(r, method)


def test_if_unmodified_since_false_with_range_is_412(shared, site, lastmod):
    earlier = email.utils.formatdate(site.fixed_mtime - 1, usegmt=True)
    check_412(cond_get(shared, [("If-Unmodified-Since", earlier), ("Range", "bytes=0-1"),
                                ("If-Range", lastmod)]))


def test_if_match_true_with_range_is_206(shared, etag):
    r = cond_get(shared, [("If-Match", etag), ("Range", "bytes=0-1"), ("If-Range", etag)])
    assert r.status == 206 and r.body == SMALL[:2]


def test_412_comes_before_304(shared, etag, lastmod):
    check_412(cond_get(shared, [("If-Match", '"nope"'), ("If-None-Match", etag)]))
    check_412(cond_get(shared, [("If-None-Match", etag), ("If-Match", '"nope"')]))
    r = cond_get(shared, [("If-Match", etag), ("If-None-Match", etag)])
    assert r.status == 304
    r = cond_get(shared, [("If-Unmodified-Since", lastmod), ("If-Modified-Since", lastmod)])
    assert r.status == 304


def test_if_none_match_on_several_lines_is_one_list(shared, etag):
    r = cond_get(shared, [("If-None-Match", '"nope"'), ("If-None-Match", etag)])
    assert r.status == 304
    r = cond_get(shared, [("If-None-Match", etag), ("If-None-Match", '"nope"')])
    assert r.status == 304


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
    ("bytes=0-99999999999999999999", 0, N - 1),   # past 64 bits: past the end
    ("bytes=-99999999999999999999", 0, N - 1),
])
def test_range_206(shared, spec, first, last):
    r = cond_get(shared, [("Range", spec)])
    assert r.status == 206, (spec, r)
    check_common(r)
    assert r.get("content-range") == f"bytes {first}-{last}/{N}"
    assert r.body == SMALL[first:last + 1]
    assert int(r.get("content-length")) == last - first + 1


@pytest.mark.parametrize("spec", ["bytes=36-", "bytes=100-200", "bytes=36-40",
                                  "bytes=99999999999999999999-"])
def test_range_unsatisfiable_416(shared, spec):
    r = cond_get(shared, [("Range", spec)])
    assert r.status == 416, (spec, r)
    assert r.get("content-range") == f"bytes */{N}"
    check_common(r)


def test_range_on_empty_file_unsatisfiable(shared):
    r = shared.get("/empty.txt", headers=[("Range", "bytes=0-")])
    assert r.status == 416 and r.get("content-range") == "bytes */0"


@pytest.mark.parametrize("spec", ["bytes=0-9,", "bytes=, 0-9", "bytes=0-9 , ,"])
def test_empty_list_elements_are_no_ranges(shared, spec):
    """RFC 9110 5.6.1.2: a recipient ignores empty list elements, so these
    hold one range (they got the whole file; red-team pass 16)."""
    r = cond_get(shared, [("Range", spec)])
    assert r.status == 206, (spec, r)
    assert r.get("content-range") == f"bytes 0-9/{N}" and r.body == SMALL[:10]


@pytest.mark.parametrize("spec", ["bytes=0-1,3-4", "bytes=0-0, -1", "bytes=1-2,5-9,20-",
                                  "bytes=0-1,,3-4"])
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


def test_two_range_lines_are_ignored(shared):
    """Range is a singleton: two lines join into no valid ranges-specifier,
    which is ignored like any malformed Range (red-team item 5)."""
    for specs in (["bytes=0-9", "bytes=10-19"], ["bytes=0-9", "bytes=0-9"],
                  ["bytes=0-1", "bytes=2-3", "bytes=4-5"], ["bytes=0-9", "bytes=100-"]):
        for method in ("GET", "HEAD"):
            r = cond_get(shared, [("Range", s) for s in specs], method=method)
            assert r.status == 200, (specs, method, r)
            assert not r.has("content-range")
            assert r.get("content-length") == str(N)
            assert r.body == (b"" if method == "HEAD" else SMALL)


def test_two_if_range_lines_give_full(shared, etag):
    r = cond_get(shared, [("Range", "bytes=0-3"), ("If-Range", etag), ("If-Range", etag)])
    assert r.status == 200 and r.body == SMALL


def test_two_if_modified_since_lines_are_ignored(shared, site):
    """RFC 9110 13.1.3: more than one member -> ignored, whatever the order."""
    old = "Thu, 01 Jan 1970 00:00:00 GMT"
    new = email.utils.formatdate(site.fixed_mtime + 86400, usegmt=True)
    for dates in ([old, new], [new, old], [new, new]):
        for method in ("GET", "HEAD"):
            r = cond_get(shared, [("If-Modified-Since", d) for d in dates], method=method)
            assert r.status == 200, (dates, method, r)
            assert r.body == (b"" if method == "HEAD" else SMALL)


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
