"""The live status page (issue 17): `--status-path` with ?format=html, or
an Accept header that prefers HTML, serves one self-contained page that
polls the JSON. It carries a Content-Security-Policy that allows only its
own inline script and style (by hash) and requests to this server, and its
bytes are constant: nothing a client sends is echoed in it.

The browser test drives the system chromium through Playwright (pinned in
build/pydeps by scripts/deps.sh; it never downloads a browser): the page
loads without a console error and its numbers move while a bounded load
runs.
"""

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import HERD_ARGS, herd_cmd
from herdtest import build_request, wait_for

PYDEPS = Path(__file__).resolve().parents[2] / "build" / "pydeps"
CHROMIUM = "/usr/bin/chromium"

pytestmark = pytest.mark.skipif(
    "--model" in HERD_ARGS, reason="drives the master/worker model itself")

STATUS = "/herd-status"
BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


def csp_hash(body, tag):
    m = re.search(rb"<%s>(.*?)</%s>" % (tag, tag), body, re.S)
    assert m, f"no <{tag}> in the page"
    return "'sha256-%s'" % base64.b64encode(hashlib.sha256(m.group(1)).digest()).decode()


@pytest.fixture
def srv(server):
    return server("--workers", "2", "--status-path", STATUS)


def test_format_html_serves_the_page_with_a_csp(srv):
    r = srv.get(STATUS + "?format=html")
    assert r.status == 200, r
    assert r.get("content-type") == "text/html; charset=utf-8"
    assert r.get("cache-control") == "no-store"
    assert r.get("x-content-type-options") == "nosniff"
    csp = r.get("content-security-policy", "")
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp, csp
    # a stale hash means a browser refuses the script: say which one is right
    for tag, directive in ((b"script", "script-src"), (b"style", "style-src")):
        want = f"{directive} {csp_hash(r.body, tag)}"
        assert want in csp, f"CSP of src/http/status_html.c wants: {want}"
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    body = r.body.decode()
    assert body.startswith("<!doctype html>") and body.endswith("</html>\n")
    # no external asset: nothing to fetch but the JSON
    assert not re.search(r"""(src|href)\s*=\s*["'](?!data:)""", body), \
        re.findall(r"""(?:src|href)\s*=\s*["'][^"']*""", body)
    assert "?format=json" in body


def test_accept_header_picks_the_page(srv):
    page = srv.get(STATUS, headers={"Accept": BROWSER})
    assert page.status == 200 and page.get("content-type").startswith("text/html"), page
    for accept in ("*/*", "application/json", "text/html;q=0.5, application/json"):
        r = srv.get(STATUS, headers={"Accept": accept})
        assert r.get("content-type") == "application/json", (accept, r)
        json.loads(r.body)
    r = srv.get(STATUS + "?format=json", headers={"Accept": BROWSER})
    assert r.get("content-type") == "application/json", r
    r = srv.get(STATUS + "?format=prometheus", headers={"Accept": BROWSER})
    assert r.get("content-type").startswith("text/plain"), r


def test_page_echoes_no_client_bytes(srv):
    plain = srv.get(STATUS + "?format=html").body
    marker = "zq9marker"
    evil = f"<script>{marker}</script>"
    r = srv.get(STATUS + f"?format=html&x=%3Cscript%3E{marker}&y={marker}",
                headers={"Accept": BROWSER, "Referer": evil, "User-Agent": evil,
                         "X-Forwarded-Host": evil})
    assert r.status == 200 and r.body == plain
    assert marker.encode() not in r.body and marker.encode() not in bytes(r.head)


def test_head_has_no_body(srv):
    with srv.connect() as c:
        c.send(build_request("HEAD", STATUS + "?format=html"))
        r = c.read_response("HEAD")
        assert r.status == 200 and r.body == b""
        n = int(r.get("content-length"))
        c.send(build_request("GET", STATUS + "?format=html"))   # same connection goes on
        assert len(c.read_response().body) == n


def test_status_allow_still_applies_to_the_page(server):
    srv = server("--workers", "1", "--status-path", STATUS, "--status-allow", "10.0.0.0/8")
    assert srv.get(STATUS + "?format=html").status == 403


# ---------------------------------------------------------------- browser

def playwright_or_skip():
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is missing: apt-get install chromium "
                    "(or sh scripts/deps.sh test)")
    sys.path.insert(0, str(PYDEPS))
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip(f"playwright is not in {PYDEPS}: run sh scripts/deps.sh test")
    return sync_playwright


def as_int(s):
    s = (s or "").strip()
    return int(s) if s.isdigit() else None


@pytest.mark.slow
def test_page_in_chromium_moves_under_load(srv):
    sync_playwright = playwright_or_skip()
    problems = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, timeout=30000)
        try:
            page = browser.new_page()
            page.set_default_timeout(10000)
            page.on("console", lambda m: m.type in ("error", "warning") and
                    problems.append(f"console {m.type}: {m.text}"))
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("requestfailed", lambda rq: problems.append(f"request failed: {rq.url}"))
            page.goto(srv.url(STATUS + "?format=html"))
            # polled from here: page.wait_for_function evaluates strings in
            # the page, which its CSP (rightly) refuses
            wait_for(lambda: page.text_content("#state").startswith("live"), timeout=10,
                     interval=0.1, what="the page to go live")
            wait_for(lambda: page.locator("#slots tbody tr").count() == 2, timeout=5,
                     interval=0.1, what="two worker rows")
            start = as_int(page.text_content("#requests"))
            assert start is not None

            # a bounded load: 4 connections for 4 s, stopped by PID at worst
            load = subprocess.Popen(
                herd_cmd("load", srv.url("/small.txt"), "-c", "4", "-t", "1", "-d", "4s"),
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                def moving():
                    req = as_int(page.text_content("#requests"))
                    rps = as_int(page.text_content("#rps"))
                    return req and rps and req > start + 100 and rps > 20 and (req, rps)
                seen = wait_for(moving, timeout=8, interval=0.2, what="the page's numbers to move")
                # the charts have drawn a line (two samples or more)
                wait_for(lambda: len(page.get_attribute("#c-rps polyline", "points").split()) >= 2,
                         timeout=5, interval=0.2, what="a line on the req/s chart")
                assert page.text_content("#p99") not in ("", "-")
            finally:
                try:
                    load.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    load.kill()
                    load.wait()
            assert load.returncode == 0, load.stderr.read()
            after = as_int(page.text_content("#requests"))
            assert after >= seen[0]
        finally:
            browser.close()
    assert problems == [], problems
