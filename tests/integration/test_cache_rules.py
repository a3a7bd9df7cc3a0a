"""Caching rules: --cache-control MATCH=VALUE and --expires MATCH=DUR
(MATCH *SUFFIX or /PREFIX, the longest wins, the first at a tie) on
200/206/304 of static files, one Cache-Control line, Expires = Date + DUR;
not on errors; values with control characters refused at config time; the
config-file lines and their replacement by flags."""

import email.utils
import gzip
import os

import pytest

from conftest import run_herd
from herdtest import etag_for

OLD = 1700000000


def write(root, rel, data, mtime=OLD):
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    os.utime(p, (mtime, mtime))


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "www"
    r.mkdir()
    write(r, "a.css", b"body{}\n" * 10)
    write(r, "a.css.gz", gzip.compress(b"body{}\n" * 10, mtime=0), OLD + 10)
    write(r, "static/b.css", b"b{}\n")
    write(r, "static/x.min.css", b"m{}\n")
    write(r, "p.png", b"\x89PNG not really")
    write(r, "img/q.png", b"\x89PNG not really either")
    write(r, "app.js", b"js\n")
    write(r, "dir/index.html", b"<p>i</p>\n")
    return r


RULES = ["--cache-control", "*.css=public, max-age=31536000, immutable",
         "--cache-control", "/static/=no-cache",
         "--cache-control", "*.min.css=public, immutable",
         "--cache-control", "*.html=no-store",
         "--expires", "*.png=1h",
         "--expires", "/img/=2h",
         "--expires", "*.min.css=10m"]


def expires_delta(r):
    date = email.utils.parsedate_to_datetime(r.get("date")).timestamp()
    exp = email.utils.parsedate_to_datetime(r.get("expires")).timestamp()
    return exp - date


def test_cache_control_on_200_206_304(server, root):
    srv = server(*RULES, docroot=root)
    want = "public, max-age=31536000, immutable"
    r = srv.get("/a.css")
    assert r.status == 200 and r.getall("cache-control") == [want]
    assert not r.has("expires")
    r = srv.get("/a.css", headers=[("Range", "bytes=0-3")])
    assert r.status == 206 and r.getall("cache-control") == [want]
    r = srv.get("/a.css", headers=[("If-None-Match", etag_for(root / "a.css"))])
    assert r.status == 304 and r.getall("cache-control") == [want]
    r = srv.get("/a.css", method="HEAD")
    assert r.status == 200 and r.getall("cache-control") == [want]
    # the gzip variant: matched by the file's own path
    r = srv.get("/a.css", headers=[("Accept-Encoding", "gzip")])
    assert r.get("content-encoding") == "gzip" and r.getall("cache-control") == [want]


def test_longest_match_wins(server, root):
    srv = server(*RULES, docroot=root)
    # "/static/" (8) beats "*.css" (4)
    assert srv.get("/static/b.css").getall("cache-control") == ["no-cache"]
    # "*.min.css" (8) ties "/static/" (8): the first given wins
    r = srv.get("/static/x.min.css")
    assert r.getall("cache-control") == ["no-cache, max-age=600"]
    assert expires_delta(r) == 600
    # a directory index is matched as /dir/index.html
    assert srv.get("/dir/").getall("cache-control") == ["no-store"]
    # nothing matches
    r = srv.get("/app.js")
    assert r.status == 200 and not r.has("cache-control") and not r.has("expires")


def test_expires_sets_expires_and_max_age(server, root):
    srv = server(*RULES, docroot=root)
    r = srv.get("/p.png")
    assert r.getall("cache-control") == ["max-age=3600"] and expires_delta(r) == 3600
    r = srv.get("/img/q.png")        # "/img/" (5) beats "*.png" (4)
    assert r.getall("cache-control") == ["max-age=7200"] and expires_delta(r) == 7200
    r = srv.get("/img/q.png", headers=[("If-Modified-Since", r.get("last-modified"))])
    assert r.status == 304 and expires_delta(r) == 7200


def test_errors_get_no_caching_headers(server, root):
    srv = server(*RULES, "--cache-control", "/=public", docroot=root)
    for path in ("/nope.css", "/img/", "/.hidden.png"):
        r = srv.get(path)
        assert r.status in (403, 404), (path, r)
        assert not r.has("cache-control") and not r.has("expires"), (path, r)
    r = srv.get("/p.png", headers=[("Range", "bytes=999-")])
    assert r.status == 416 and not r.has("cache-control")


BAD = [
    ("--cache-control", "*.css=public\r\nSet-Cookie: a=1", "control"),
    ("--cache-control", "*.css=pub\tlic", "control"),
    ("--cache-control", "*.css=", "printable"),
    ("--cache-control", "*.css", "MATCH=VALUE"),
    ("--cache-control", "css=public", "MATCH"),
    ("--cache-control", "/a*b=public", "MATCH"),
    ("--expires", "*.png=soon", "duration"),
    ("--expires", "*.png=1500ms", "duration"),
    ("--expires", "*.png=99999h", "duration"),
    ("--expires", "png=1h", "MATCH"),
]


@pytest.mark.parametrize("flag,value,word", BAD, ids=[b[1] for b in BAD])
def test_bad_rules_are_refused_at_start(root, flag, value, word):
    r = run_herd(["serve", str(root), "--listen", "127.0.0.1:0", flag, value], timeout=10)
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"herd: {flag[2:]}"), r.stderr
    assert word in lines[0], r.stderr
    assert "\r" not in r.stderr


def test_rule_given_twice_is_refused(root):
    r = run_herd(["serve", str(root), "--listen", "127.0.0.1:0",
                  "--cache-control", "*.css=a", "--cache-control", "*.css=b"], timeout=10)
    assert r.returncode == 2 and "twice" in r.stderr, r.stderr


def test_check_config_names_the_line(tmp_path, root):
    cfg = tmp_path / "herd.conf"
    cfg.write_bytes(b"docroot = " + str(root).encode() +
                    b"\ncache-control = *.css=public\ncache-control = *.js=pub\x01lic\n")
    r = run_herd(["serve", "--check-config", str(cfg)], extra=False)
    assert r.returncode == 2, r.stderr
    # the control byte is refused for the whole line, before the value is read
    assert r.stderr.startswith(f"{cfg}:3: control byte 0x01"), r.stderr
    cfg.write_text(f"docroot = {root}\nexpires = *.png=forever\n")
    r = run_herd(["serve", "--check-config", str(cfg)], extra=False)
    assert r.returncode == 2 and r.stderr.startswith(f"{cfg}:2: expires"), r.stderr
    cfg.write_text(f"docroot = {root}\ncache-control = *.css=public, max-age=60\n"
                   "expires = /img/=1h\n")
    r = run_herd(["serve", "--check-config", str(cfg)], extra=False)
    assert r.returncode == 0, r.stderr


def test_config_lines_and_flags_replacing_them(server, tmp_path, root):
    cfg = tmp_path / "herd.conf"
    cfg.write_text("cache-control = *.css=from-file\ncache-control = *.js=js-from-file\n"
                   "expires = *.png=1h\n")
    srv = server("--config", cfg, docroot=root)
    assert srv.get("/a.css").get("cache-control") == "from-file"
    assert srv.get("/app.js").get("cache-control") == "js-from-file"
    assert srv.get("/p.png").get("cache-control") == "max-age=3600"
    # a --cache-control flag replaces the file's cache-control lines (not its expires)
    srv2 = server("--config", cfg, "--cache-control", "*.css=from-flag", docroot=root)
    assert srv2.get("/a.css").get("cache-control") == "from-flag"
    assert not srv2.get("/app.js").has("cache-control")
    assert srv2.get("/p.png").get("cache-control") == "max-age=3600"


STATIC_OPTIONS = ["--no-precompressed", "--cache-control", "--expires", "--error-page",
                  "--autoindex"]


def test_help_spec_and_readme_name_the_static_site_options():
    r = run_herd(["serve", "--help"], extra=False)
    assert r.returncode == 0
    repo = os.path.join(os.path.dirname(__file__), "..", "..")
    with open(os.path.join(repo, "docs", "SPEC-serve.md")) as f:
        spec = f.read()
    with open(os.path.join(repo, "README.md")) as f:
        readme = f.read()
    for opt in STATIC_OPTIONS:
        assert opt in r.stdout, opt
        assert f"`{opt}" in spec, opt
        assert opt in readme, opt
