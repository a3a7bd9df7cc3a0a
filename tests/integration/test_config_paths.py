"""Paths in a config file and what --check-config checks (issue 18):
relative paths in a file resolve against the file's folder (flags and the
DOCROOT argument against the current directory); --check-config checks the
docroot and the folders of the logs and the pid file; a line without `=`
that is not a switch is reported as such."""

import pytest

from conftest import HERD_ARGS, Server, finish_all, herd_cmd, run_herd
from herdtest import get_req, log_lines, wait_for

pytestmark = pytest.mark.skipif(
    "--model" in HERD_ARGS, reason="drives the master/worker model itself")


def check(path, cwd=None):
    return run_herd(["serve", "--check-config", str(path)], extra=False, cwd=cwd)


@pytest.fixture
def started():
    """Factory: start(cwd, *serve args) -> Server run in cwd with exactly these
    args (it must listen on one address); stopped and checked at the end."""
    servers = []

    def start(cwd, *args):
        s = Server([], ["one"], None, cwd=cwd, cmd=herd_cmd("serve", *map(str, args)))
        servers.append(s)
        return s
    yield start
    finish_all(servers)


def body(srv, target="/"):
    r = srv.request(get_req(target, headers=[("Connection", "close")]), timeout=5)
    assert r.status == 200, r
    return r.body


@pytest.fixture
def layout(tmp_path):
    """tmp/conf/{herd.conf, site/, logs/} and tmp/cwd/site/: two folders
    named site, told apart by their index page."""
    conf, cwd = tmp_path / "conf", tmp_path / "cwd"
    for d, tag in ((conf, b"conf site\n"), (cwd, b"cwd site\n")):
        (d / "site").mkdir(parents=True)
        (d / "site" / "index.html").write_bytes(tag)
    (conf / "logs").mkdir()
    return conf, cwd


# ------------------------------------------------------------ relative paths

def test_relative_paths_in_a_file_resolve_against_its_folder(started, layout):
    conf, cwd = layout
    cfg = conf / "herd.conf"
    cfg.write_text("listen = 127.0.0.1:0\nworkers = 1\ndocroot = site\n"
                   "access-log = logs/access.log\npid-file = ./herd.pid\n")
    # the config named by a relative path, from another folder
    srv = started(cwd, "--config", "../conf/herd.conf")
    assert body(srv) == b"conf site\n"
    pid = wait_for(lambda: (conf / "herd.pid").exists() and (conf / "herd.pid").read_text(),
                   timeout=5, what="the pid file in the config's folder")
    assert int(pid) == srv.pid
    wait_for(lambda: any("GET / " in l for l in log_lines(conf / "logs" / "access.log")), timeout=5,
             what="the access log in conf/logs")
    assert not (cwd / "logs").exists() and not (cwd / "herd.pid").exists()


def test_command_line_paths_resolve_against_the_current_directory(started, layout):
    conf, cwd = layout
    cfg = conf / "herd.conf"
    cfg.write_text("workers = 1\ndocroot = site\n")
    srv = started(cwd, "site", "--config", cfg, "--listen", "127.0.0.1:0")
    assert body(srv) == b"cwd site\n"
    srv2 = started(cwd, "--docroot", "site", "--config", cfg, "--listen", "127.0.0.1:0")
    assert body(srv2) == b"cwd site\n"


def test_check_config_resolves_like_serve(layout):
    conf, cwd = layout
    cfg = conf / "herd.conf"
    cfg.write_text("docroot = site\naccess-log = logs/access.log\n")
    r = check("../conf/herd.conf", cwd=cwd)
    assert r.returncode == 0, r.stderr
    (cwd / "site").rename(cwd / "gone")     # the cwd's site does not matter
    assert check(cfg, cwd=cwd).returncode == 0
    (conf / "site").rename(conf / "gone")   # the config folder's does
    r = check(cfg, cwd=cwd)
    assert r.returncode == 2 and f"docroot {conf}/site:" in r.stderr, r.stderr


# ------------------------------------------------------------ --check-config paths

PATH_CASES = [
    ("missing docroot", "docroot = nowhere\n", "docroot {d}/nowhere: No such file or directory"),
    ("docroot is a file", "docroot = herd.conf\n", "docroot {d}/herd.conf: not a directory"),
    ("access log folder missing", "access-log = nolog/access.log\n",
     "access-log {d}/nolog/access.log: folder {d}/nolog: No such file or directory"),
    ("error log folder missing", "error-log = nolog/error.log\n",
     "error-log {d}/nolog/error.log: folder {d}/nolog: No such file or directory"),
    ("absolute path", "access-log = /nonexistent-herd/access.log\n",
     "access-log /nonexistent-herd/access.log: folder /nonexistent-herd: "
     "No such file or directory"),
    ("pid file folder missing", "pid-file = run/herd.pid\n",
     "pid-file {d}/run/herd.pid: folder {d}/run: No such file or directory"),
    ("access log is a directory", "access-log = logs\n", "access-log {d}/logs: is a directory"),
    ("log folder is a file", "error-log = herd.conf/error.log\n",
     "error-log {d}/herd.conf/error.log: Not a directory"),
]


@pytest.mark.parametrize("name,text,want", PATH_CASES, ids=[c[0] for c in PATH_CASES])
def test_check_config_checks_paths(layout, name, text, want):
    conf, _ = layout
    cfg = conf / "herd.conf"
    cfg.write_text("workers = 2\n" + text)
    r = check(cfg)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.strip() == f"{cfg}: " + want.format(d=conf), r.stderr
    assert "ok" not in r.stdout


def test_check_config_accepts_usable_paths(layout):
    conf, _ = layout
    (conf / "logs" / "access.log").write_text("")      # an existing log is fine too
    cfg = conf / "herd.conf"
    cfg.write_text(f"docroot = {conf / 'site'}\naccess-log = logs/access.log\n"
                   "error-log = logs/error.log\npid-file = herd.pid\n")
    r = check(cfg)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"{cfg}: ok"
    assert not (conf / "logs" / "error.log").exists(), "checking must not create files"


# ------------------------------------------------------------ name value without =

def test_line_without_equals_is_reported_as_such(tmp_path):
    cfg = tmp_path / "herd.conf"
    cfg.write_text("workers = 2\n\nlisten 127.0.0.1:80\n")
    r = check(cfg)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.strip() == f"{cfg}:3: expected `name = value`, got 'listen 127.0.0.1:80'"
    r = run_herd(["serve", "--config", str(cfg)], timeout=10, extra=False)
    assert r.returncode == 2 and f"{cfg}:3: expected `name = value`" in r.stderr, r.stderr
    cfg.write_text("serve-dotfiles\n\tserve-dotfiles   \n")     # switches stay fine
    assert check(cfg).returncode == 0
