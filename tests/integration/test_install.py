"""make install (issue 18): the binary, the docs, the systemd units, the
logrotate snippet and a sample config land where the units and the config
say they are, and what was installed runs: the installed binary checks the
installed config (pointed at a test docroot) and serves with it, and the
unit's ExecReload line reports a refused reload."""

import http.client
import os
import re
import shlex
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import HERD_ARGS, REPO_ROOT, Server
from herdtest import get_req, wait_for

pytestmark = pytest.mark.skipif(
    "--model" in HERD_ARGS, reason="installs and runs the binary itself")

PREFIX = "/usr/local"
BIN = f"{PREFIX}/bin/herd"
CONF = "/etc/herd/herd.conf"
UNITDIR = f"{PREFIX}/lib/systemd/system"
DOCDIR = f"{PREFIX}/share/doc/herd"
UNITS = ("herd.service", "herd.socket", "herd-spawn@.service")


def make_install(*assignments):
    """`make install` of the already built binary (-o: never recompile here)."""
    assert (REPO_ROOT / "build" / "herd").exists(), "build herd first (make build)"
    return subprocess.run(["make", "-s", "-C", str(REPO_ROOT), "-o", "build/herd", "install",
                           *assignments], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=60)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    dest = tmp_path_factory.mktemp("destdir")
    r = make_install(f"DESTDIR={dest}")
    assert r.returncode == 0, r.stderr
    return dest


def under(root, path):
    return root / path.lstrip("/")


def unit_lines(root, unit):
    """(key, value) of every setting line of an installed unit file."""
    text = under(root, f"{UNITDIR}/{unit}").read_text()
    return [tuple(l.split("=", 1)) for l in text.splitlines()
            if "=" in l and not l.startswith(("#", "["))]


def test_install_puts_every_file_in_place(root):
    for path in (BIN, CONF, "/etc/logrotate.d/herd", f"{DOCDIR}/README.md",
                 f"{DOCDIR}/SPEC-serve.md", f"{DOCDIR}/DESIGN.md",
                 *(f"{UNITDIR}/{u}" for u in UNITS)):
        assert under(root, path).is_file(), path
    assert os.access(under(root, BIN), os.X_OK)
    r = subprocess.run([str(under(root, BIN)), "--version"], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 0 and r.stdout.startswith("herd"), (r.stdout, r.stderr)


def test_units_name_paths_that_exist_under_the_install_root(root):
    named = set()
    for unit in UNITS:
        for key, value in unit_lines(root, unit):
            if key == "Documentation":
                assert value.startswith("file://"), value
                named.add(value[len("file://"):])
            elif key.startswith("Exec") or key == "PIDFile":
                named.update(w for w in shlex.split(value) if w.startswith("/"))
    installed = {p for p in named if p.startswith((PREFIX, "/etc/"))}
    assert {BIN, CONF, f"{DOCDIR}/README.md"} <= installed, named
    for path in installed:
        assert under(root, path).exists(), f"{path} is named by a unit but not installed"
    for path in named - installed:      # the system's own (kill) or made at run time
        assert path.startswith(("/run/herd/", "/bin/", "/usr/bin/")), path


def test_service_checks_the_config_and_reloads_through_herd_reload(root):
    service = unit_lines(root, "herd.service")
    setting = {}
    for key, value in service:
        setting.setdefault(key, []).append(value)
    pid_file = setting["PIDFile"][0]
    assert setting["ExecStartPre"] == [f"{BIN} serve --check-config {CONF}"]
    start = shlex.split(setting["ExecStart"][0])
    assert start[:4] == [BIN, "serve", "--config", CONF]
    assert start[start.index("--pid-file") + 1] == pid_file and "--daemon" in start
    assert setting["ExecReload"] == [f"{BIN} reload --pid-file {pid_file}"]


def test_logrotate_reopens_both_logs_of_the_installed_config(root):
    conf = under(root, CONF).read_text()
    logs = re.findall(r"^(?:access|error)-log = (\S+)$", conf, re.M)
    assert len(logs) == 2, conf
    snippet = under(root, "/etc/logrotate.d/herd").read_text()
    head = snippet[:snippet.index("{")]
    assert all(log in head.split() for log in logs), snippet
    post = snippet[snippet.index("postrotate"):snippet.index("endscript")]
    assert "kill -USR1" in post and "/run/herd/herd.pid" in post, post


PAGE = b"<p>installed herd</p>\n"


@pytest.fixture
def docroot(tmp_path):
    www = tmp_path / "www"
    www.mkdir()
    (www / "index.html").write_bytes(PAGE)
    return www


def local_config(root, docroot, tmp_path, error_log=True):
    """The installed config with its system paths moved into tmp_path."""
    moved = {"listen": "127.0.0.1:0", "docroot": str(docroot),
             "access-log": str(tmp_path / "access.log"),
             "error-log": str(tmp_path / "error.log")}
    out = []
    for line in under(root, CONF).read_text().splitlines():
        name = line.split("=", 1)[0].strip()
        if name in ("user", "group") or (name == "error-log" and not error_log):
            continue                   # the test docroot may be closed to www-data
        out.append(f"{name} = {moved[name]}" if name in moved else line)
    path = tmp_path / "herd.conf"
    path.write_text("\n".join(out) + "\n")
    return path


def test_installed_binary_checks_and_serves_the_installed_config(root, docroot, tmp_path):
    herd = str(under(root, BIN))
    conf = local_config(root, docroot, tmp_path)
    r = subprocess.run([herd, "serve", "--check-config", str(conf)], capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 0 and r.stdout.strip() == f"{conf}: ok", (r.stdout, r.stderr)
    # Serve with it (error log on stderr, where the fixture reads the port).
    conf = local_config(root, docroot, tmp_path, error_log=False)
    srv = Server([], ["127.0.0.1:0"], None, cmd=[herd, "serve", "--config", str(conf)])
    try:
        r = srv.request(get_req("/", headers=[("Connection", "close")]), timeout=5)
        assert r.status == 200 and r.body == PAGE
        r = srv.request(get_req("/herd-status", headers=[("Connection", "close")]), timeout=5)
        assert r.status == 200, r
        wait_for(lambda: "GET / " in _read(tmp_path / "access.log"), timeout=5,
                 what="the access log line")
    finally:
        problems = srv.finish()
    assert not problems, problems


def fetch(port, target):
    """One GET on a fresh connection, no retry; the status code."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        c.request("GET", target)
        return c.getresponse().status
    finally:
        c.close()


def gone(pid):
    """pid exited (a zombie nobody reaped counts: it serves nothing)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def _read(path):
    return path.read_text() if path.exists() else ""


def test_the_units_reload_line_reports_a_refused_config(root, docroot, tmp_path):
    herd = str(under(root, BIN))
    conf = local_config(root, docroot, tmp_path)
    pid_file = tmp_path / "herd.pid"
    # The unit's ExecStart and ExecReload, with the pid file moved here.
    setting = dict(unit_lines(root, "herd.service"))
    start = [herd if w == BIN else str(conf) if w == CONF else w
             for w in shlex.split(setting["ExecStart"].replace("/run/herd/herd.pid", str(pid_file)))]
    reload_cmd = [herd if w == BIN else w
                  for w in shlex.split(setting["ExecReload"].replace("/run/herd/herd.pid", str(pid_file)))]
    r = subprocess.run(start, capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    wait_for(lambda: _read(pid_file).strip().isdigit(), timeout=5, what="the pid file")
    pid = int(_read(pid_file))
    try:
        r = subprocess.run(reload_cmd, capture_output=True, text=True, timeout=20)
        assert r.returncode == 0, r.stderr
        conf.write_text(conf.read_text() + "workers = lots\n")
        r = subprocess.run(reload_cmd, capture_output=True, text=True, timeout=20)
        assert r.returncode == 1 and "refused" in r.stderr, (r.stdout, r.stderr)
    finally:
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: gone(pid), timeout=10, what="the master's exit")


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze not installed")
def test_systemd_analyze_verifies_the_installed_units(tmp_path):
    # Installed under a prefix (no DESTDIR) so the units' paths are real ones.
    units = tmp_path / "units"
    r = make_install(f"PREFIX={tmp_path}", f"SYSCONFDIR={tmp_path}/etc", f"UNITDIR={units}")
    assert r.returncode == 0, r.stderr
    shutil.copy(units / "herd-spawn@.service", units / "herd-spawn@app.service")
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", "./herd.service", "./herd.socket",
                        "./herd-spawn@app.service"], cwd=units, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and not re.search(r"^herd", r.stderr, re.M), r.stderr


@pytest.mark.skipif(not shutil.which("logrotate"), reason="logrotate not installed")
def test_logrotate_snippet_rotates_a_running_servers_logs(root, docroot, tmp_path):
    herd = str(under(root, BIN))
    conf = local_config(root, docroot, tmp_path)
    pid_file = tmp_path / "herd.pid"
    # The installed snippet, its paths moved where the config's logs are.
    snippet = tmp_path / "logrotate.conf"
    snippet.write_text(under(root, "/etc/logrotate.d/herd").read_text()
                       .replace("/var/log/herd/", f"{tmp_path}/")
                       .replace("/run/herd/herd.pid", str(pid_file)))
    r = subprocess.run([herd, "serve", "--config", str(conf), "--daemon", "--pid-file",
                        str(pid_file), "--listen", "127.0.0.1:0"], capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    wait_for(lambda: _read(pid_file).strip().isdigit(), timeout=5, what="the pid file")
    pid = int(_read(pid_file))
    try:
        wait_for(lambda: re.search(r"listening on http://127\.0\.0\.1:(\d+)/",
                                   _read(tmp_path / "error.log")), timeout=5, what="the port")
        port = int(re.search(r"listening on http://127\.0\.0\.1:(\d+)/",
                             _read(tmp_path / "error.log")).group(1))
        fetch(port, "/before")
        wait_for(lambda: "/before" in _read(tmp_path / "access.log"), timeout=5,
                 what="the first line")
        r = subprocess.run(["logrotate", "-f", "-s", str(tmp_path / "state"), str(snippet)],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        assert "/before" in _read(tmp_path / "access.log.1")
        fetch(port, "/after")
        # USR1 from postrotate: the logger writes to the new file.
        wait_for(lambda: "/after" in _read(tmp_path / "access.log"), timeout=5,
                 what="the line after rotation in the new access log")
        assert "/after" not in _read(tmp_path / "access.log.1")
    finally:
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: gone(pid), timeout=10, what="the master's exit")
