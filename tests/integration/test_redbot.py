"""REDbot (issue 17): the HTTP linter finds nothing to warn about in herd's
responses for four resources of a small site with a cache rule set: an
HTML page through its directory, a stylesheet and an image with long-lived
immutable rules, and a script served from its gzip sidecar.

REDbot runs offline here (it only talks to the server on 127.0.0.1); it is
pinned with its dependencies in build/pydeps by scripts/deps.sh. Each file
is over 97 bytes: REDbot's range check asks for bytes 0-96, and on a
smaller file the 206 is the whole file, which it warns about.
"""

import gzip
import json
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

PYDEPS = Path(__file__).resolve().parents[2] / "build" / "pydeps"

RULES = ["--cache-control", "*.css=max-age=31536000, immutable",
         "--cache-control", "*.js=max-age=31536000, immutable",
         "--cache-control", "*.html=no-cache",
         "--cache-control", "/img/=max-age=86400"]
RESOURCES = ["/", "/css/site.css", "/js/app.js", "/img/logo.png"]

RUN_REDBOT = ("import sys; sys.path.insert(0, sys.argv[1]); from redbot.cli import main; "
              "sys.argv = ['redbot', '-o', 'har', sys.argv[2]]; sys.exit(main())")


def gradient_png(w=48, h=48):
    def chunk(t, data):
        c = struct.pack(">I", len(data)) + t + data
        return c + struct.pack(">I", zlib.crc32(t + data) & 0xffffffff)
    raw = b"".join(b"\x00" + b"".join(bytes([x * 5 & 255, y * 5 & 255, 128]) for x in range(w))
                   for y in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


@pytest.fixture
def cached_site(tmp_path):
    root = tmp_path / "www"
    for d in ("css", "js", "img"):
        (root / d).mkdir(parents=True)
    (root / "index.html").write_text(
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>site</title>'
        '<link rel="stylesheet" href="/css/site.css"></head>\n<body>\n'
        + "<p>A paragraph of the page, long enough to look like one.</p>\n" * 12
        + "</body></html>\n")
    (root / "css/site.css").write_text("body { color: #222; font: 16px/1.5 sans-serif; }\n" * 8)
    js = 'function greet(name) { return "hello " + name; }\n' * 30
    (root / "js/app.js").write_text(js)
    (root / "js/app.js.gz").write_bytes(gzip.compress(js.encode(), mtime=0))
    os.utime(root / "js/app.js", (1e9, 1e9))   # the sidecar is not older than the file
    (root / "img/logo.png").write_bytes(gradient_png())
    return root


def redbot_notes(url):
    if not (PYDEPS / "redbot").is_dir():
        pytest.fail(f"redbot is not in {PYDEPS}: run `sh scripts/deps.sh test`")
    p = subprocess.run([sys.executable, "-c", RUN_REDBOT, str(PYDEPS), url],
                       capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr[-2000:]
    har = json.loads(p.stdout)
    entries = har["log"]["entries"]
    assert len(entries) == 1, entries
    return entries[0]["response"]["status"], entries[0]["_red_messages"]


@pytest.mark.slow
def test_redbot_finds_no_warning(server, cached_site):
    srv = server("--workers", "1", *RULES, docroot=cached_site)
    problems = []
    for path in RESOURCES:
        status, notes = redbot_notes(srv.url(path))
        assert status == 200, (path, status)
        ids = {n["note_id"] for n in notes}
        # REDbot did check validation and ranges (else "no warning" means little)
        assert {"INM_304", "IMS_304", "RANGE_CORRECT"} <= ids, (path, sorted(ids))
        problems += [f"{path}: {n['level']} {n['note_id']}: {n['summary']}"
                     for n in notes if n["level"] not in ("GOOD", "INFO")]
        if path == "/js/app.js":
            assert "CONNEG_GZIP_GOOD" in ids, sorted(ids)
    assert problems == [], "\n".join(problems)
