"""The directory redirect (301 to add the missing slash) must never send a
browser elsewhere: its Location is built from the normalised path, encoded
again, so it never starts with "//", never holds "." or ".." segments and
never a raw CR, LF or NUL; the query string is kept as sent (as nginx does).

Raw sockets: the targets below are exactly what a hostile client sends.
"""

import pytest

from conftest import Server, require_binary
from herdtest import RawConn, build_request, check_error

DEPTH, NAME = 16, 248          # 3984-byte directory path, every byte escaped
LONG_DIR = "".join("/" + "{" * NAME for _ in range(DEPTH))
LONG_LOCATION = "".join("/" + "%7B" * NAME for _ in range(DEPTH)) + "/"


@pytest.fixture(scope="module")
def redir_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("redirects") / "www"
    root.mkdir()
    for name in ("about", "b", "x", "evil", "\\evil", "a\r\nSet-Cookie: x=1", "sp ace%"):
        (root / name).mkdir()
    (root / "b" / "index.html").write_bytes(b"<p>b</p>\n")
    (root / "small.txt").write_bytes(b"small\n")
    d = root
    for _ in range(DEPTH):
        d = d / ("{" * NAME)
        d.mkdir()
    return root


@pytest.fixture(scope="module")
def redir(redir_root):
    """One server for the module, with a 4k head limit so the long path
    below is near it."""
    require_binary()
    srv = Server(["--max-header-size", "4k"], ["127.0.0.1:0"], redir_root)
    yield srv
    problems = srv.finish()
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


def fetch(srv, target, method="GET"):
    with srv.connect() as c:
        c.send(build_request(method, target))
        return c.read_response(method)


def assert_local(location):
    path = location.split("?", 1)[0]
    assert location.startswith("/") and not location.startswith("//"), location
    assert not location.startswith("/\\"), location
    segs = path.split("/")
    assert "." not in segs and ".." not in segs, location
    assert all(0x20 < ord(ch) < 0x7f for ch in location), repr(location)
    assert "\\" not in location, location


@pytest.mark.parametrize("target,location", [
    ("//evil.example/../about", "/about/"),
    ("//evil.example/..//about", "/about/"),
    ("/%2F%2Fevil", "/evil/"),
    ("/%2f%2fevil.example/%2e%2e/about", "/about/"),
    ("/%5Cevil", "/%5Cevil/"),
    ("/./x", "/x/"),
    ("/a/../b", "/b/"),
    ("/x/.//../about?q=//evil", "/about/?q=//evil"),
    ("/b?x=1&y=2", "/b/?x=1&y=2"),
    ("/sp%20ace%25", "/sp%20ace%25/"),
    ("/a%0D%0ASet-Cookie:%20x=1", "/a%0D%0ASet-Cookie:%20x=1/"),
])
def test_location_is_the_normalised_path(redir, target, location):
    r = fetch(redir, target)
    assert r.status == 301, r
    assert r.getall("location") == [location], r
    assert_local(location)
    assert not r.has("set-cookie"), r


def test_head_gets_the_same_location(redir):
    r = fetch(redir, "//evil.example/../about?q", method="HEAD")
    assert r.status == 301 and r.get("location") == "/about/?q" and r.body == b"", r


@pytest.mark.parametrize("target,status", [
    ("/%2F%2Fevil/", 403),         # the directory itself, no index: no redirect
    ("/a/../b/", 200),
    ("/\\evil", 400),              # a raw backslash is no target character
    ("//evil.example/../../about", 400),
    ("/about%00", 400),
    ("/a%0Dx", 404),
])
def test_no_location_on_other_answers(redir, target, status):
    r = fetch(redir, target)
    assert r.status == status, r
    assert not r.has("location"), r


def test_long_path_near_the_head_limit(redir):
    """A 3984-byte directory path of characters that all need escaping (a
    12 KB Location), pipelined with a request after it, under a 4k
    --max-header-size: the answers are whole and in order."""
    req = build_request("GET", LONG_DIR)
    assert 3900 < len(req) < 4096
    with redir.connect() as c:
        c.send(req + req + build_request("GET", "/small.txt"))
        for _ in range(2):
            r = c.read_response()
            assert r.status == 301, r
            assert r.get("location") == LONG_LOCATION
        r = c.read_response()
        assert r.status == 200 and r.body == b"small\n", r


def test_path_over_the_head_limit(redir):
    with redir.connect() as c:
        c.send(build_request("GET", LONG_DIR + "/" + "{" * 200))
        r = c.read_response()
        check_error(r, 414)
        assert not r.has("location")
