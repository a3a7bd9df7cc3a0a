"""herd reload (issue 18): HUP to the master a pid file names, then wait for
the master's answer (PIDFILE.reload): exit 0 when a new generation started
(with the warnings about settings that need a restart), 1 with the reason
when the reload was refused, the master is gone or does not answer."""

import json
import os
import signal
import subprocess
import sys

import pytest

from conftest import HERD_ARGS, HERD_BIN, comm, descendants, run_herd
from herdtest import get_req, wait_for

pytestmark = pytest.mark.skipif(
    "--model" in HERD_ARGS, reason="drives the master/worker model itself")

STATUS = "/herd-status"


def reload(*args, timeout=15):
    return run_herd(["reload", *map(str, args)], timeout=timeout, extra=False)


def generation(srv):
    r = srv.request(get_req(STATUS, headers=[("Connection", "close")]), timeout=5)
    assert r.status == 200, r
    return json.loads(r.body)["generation"]


def fetch(srv, target):
    return srv.request(get_req(target, headers=[("Connection", "close")]), timeout=5)


def from_config(server, tmp_path, text):
    """A server run from tmp/herd.conf holding text (its pid-file line
    relative, herd.pid), once its pid file names it: (srv, cfg, pidfile)."""
    cfg = tmp_path / "herd.conf"
    cfg.write_text(text)
    srv = server("--config", cfg)
    pidfile = tmp_path / "herd.pid"
    wait_for(lambda: pidfile.exists() and pidfile.read_text() == f"{srv.pid}\n", timeout=5,
             what="the pid file")
    return srv, cfg, pidfile


@pytest.fixture
def configured(server, tmp_path):
    """A server run from tmp/herd.conf, whose pid-file line is relative."""
    base = f"workers = 2\nstatus-path = {STATUS}\npid-file = herd.pid\n"
    srv, cfg, pidfile = from_config(server, tmp_path, base)
    return srv, cfg, pidfile, base


def test_reload_reports_the_new_generation(configured):
    srv, cfg, pidfile, base = configured
    assert fetch(srv, "/.hidden").status == 404
    cfg.write_text(base + "serve-dotfiles\n")
    r = reload("--pid-file", pidfile)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "reloaded: generation 2, 2 workers\n", r.stdout
    assert generation(srv) == 2       # answered once the generation started
    wait_for(lambda: all(fetch(srv, "/.hidden").status == 200 for _ in range(4)), timeout=5,
             what="the new settings served")
    # the pid file can come from the config file (its relative path resolved)
    r = reload("--config", cfg)
    assert r.returncode == 0 and r.stdout == "reloaded: generation 3, 2 workers\n", r


def test_refused_reload_exits_1_with_the_reason(configured):
    srv, cfg, pidfile, base = configured
    cfg.write_text(base + "# a mistake on line 5\nkeepalive-timeout = soon\n")
    r = reload("--pid-file", pidfile)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    assert "reload refused" in r.stderr and f"{cfg}:5:" in r.stderr and "soon" in r.stderr, \
        r.stderr
    assert generation(srv) == 1
    assert fetch(srv, "/small.txt").status == 200
    # asked with --config, the file is found wrong before the master is asked
    r = reload("--config", cfg)
    assert r.returncode == 1 and f"{cfg}:5:" in r.stderr, r.stderr
    cfg.write_text(base)
    assert reload("--pid-file", pidfile).returncode == 0
    assert generation(srv) == 2


def test_settings_that_need_a_restart_are_named(configured):
    srv, cfg, pidfile, base = configured
    cfg.write_text(base.replace("workers = 2", "workers = 3").replace("herd.pid", "new.pid"))
    r = reload("--pid-file", pidfile)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ("reload: the error log and pid file change only on restart\n"
                        "reloaded: generation 2, 3 workers\n"), r.stdout
    # the master keeps its pid file, and answers there
    assert pidfile.read_text() == f"{srv.pid}\n"
    assert not (pidfile.parent / "new.pid").exists()
    assert reload("--pid-file", pidfile).returncode == 0


def test_answer_file_goes_with_the_master(configured):
    srv, cfg, pidfile, base = configured
    assert reload("--pid-file", pidfile).returncode == 0
    answer = pidfile.with_name("herd.pid.reload")
    assert answer.read_text().startswith(f"herd-reload {srv.pid} ")
    assert srv.stop() == 0
    assert not answer.exists() and not pidfile.exists()
    r = reload("--pid-file", pidfile)
    assert r.returncode == 1 and "No such file" in r.stderr, r.stderr


def test_no_master_is_an_error(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    pidfile = tmp_path / "stale.pid"
    pidfile.write_text(f"{gone.pid}\n")
    r = reload("--pid-file", pidfile)
    assert r.returncode == 1 and f"cannot signal pid {gone.pid}" in r.stderr, r.stderr


def test_a_master_that_does_not_answer_times_out(server, tmp_path):
    """--model single has no master and does not reload: no answer."""
    pidfile = tmp_path / "single.pid"
    srv = server("--model", "single", "--pid-file", pidfile)
    wait_for(lambda: pidfile.exists(), timeout=5, what="the pid file")
    r = reload("--pid-file", pidfile, "--timeout", "300ms")
    assert r.returncode == 1 and "no answer from pid" in r.stderr, r.stderr
    assert fetch(srv, "/small.txt").status == 200


def test_usage_errors_exit_2(tmp_path):
    assert reload().returncode == 2
    assert reload("--pid-file", "a", "--config", "b").returncode == 2
    assert reload("--pid-file", "a", "--timeout", "soon").returncode == 2
    cfg = tmp_path / "nopid.conf"
    cfg.write_text("workers = 1\n")
    r = reload("--config", cfg)
    assert r.returncode == 2 and "no pid-file line" in r.stderr, r.stderr
    r = run_herd(["reload", "--help"], extra=False)
    assert r.returncode == 0 and "usage: herd reload" in r.stdout


# What kill() would make of each if it were taken: a pid past 32 bits wraps
# (2^32 + P is P, 2^32 the caller's process group, 2^32 - 1 every process);
# a saturated number is LONG_MAX, which wraps to -1 too.
@pytest.mark.parametrize("text", [
    "{wrapped}\n", "4294967295\n", "99999999999999999999999\n", "0\n", "-1\n", "-{sleeper}\n",
    "{sleeper}abc\n", "{sleeper} {sleeper}\n", "\n", "", " {sleeper}\n", "0x10\n",
    "{sleeper}\n\n", "{sleeper}\x00\n", "{sleeper}\r\n"], ids=["wrapped", "2^32-1", "saturated", "zero", "minus-one", "negative",
                           "trailing-text", "two", "newline", "empty", "leading-space", "hex",
                           "two-newlines", "nul", "crlf"])
def test_a_pid_file_that_is_not_one_pid_signals_nothing(tmp_path, text):
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        pidfile = tmp_path / "odd.pid"
        pidfile.write_text(text.format(wrapped=2**32 + sleeper.pid, sleeper=sleeper.pid))
        for cmd in (["reload", "--pid-file", pidfile, "--timeout", "300ms"],
                    ["status", "--pid-file", pidfile]):
            r = run_herd(list(map(str, cmd)), timeout=10, extra=False)
            assert r.returncode in (1, 2) and "holds no pid" in r.stderr, (cmd, r.stderr)
        assert sleeper.poll() is None, "the sleeper got a signal"
    finally:
        sleeper.kill()
        sleeper.wait()


# ------------------------------------------------------------ red-team pass 17

def test_a_pid_file_naming_another_program_signals_nothing(tmp_path):
    """A stale pid file whose pid now belongs to another program: herd
    reload refuses to send it HUP (which kills most programs) and says why.
    It killed the program and blamed it for not answering."""
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        pidfile = tmp_path / "stale.pid"
        pidfile.write_text(f"{sleeper.pid}\n")
        r = reload("--pid-file", pidfile, "--timeout", "300ms")
        assert r.returncode == 1, r
        assert r.stderr == (f"herd reload: pid {sleeper.pid} from {pidfile} is not herd serve "
                            "(it runs 'sleep 30'): not signalled (a stale pid file?)\n"), r.stderr
        assert sleeper.poll() is None, "the sleeper got a signal"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_fifo_in_place_of_a_file_is_an_error_at_once(tmp_path):
    """A FIFO with no writer where a pid file or a config file should be:
    herd reload and herd status refuse it at once (their --timeout did not
    even start: the open waited for a writer)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    tls = tmp_path / "tls.conf"
    tls.write_text(f"listen = 127.0.0.1:1 tls\ntls-cert = {fifo}\ntls-key = {fifo}\n")
    r = run_herd(["serve", "--check-config", str(tls)], timeout=10, extra=False)
    assert r.returncode == 2 and f"certificate {fifo}: not a regular file" in r.stderr, r
    for cmd in (["serve", "--check-config", fifo],
                ["reload", "--pid-file", fifo, "--timeout", "1s"],
                ["reload", "--config", fifo],
                ["status", "--pid-file", fifo, "--timeout", "1s"],
                ["status", "--config", fifo, "--timeout", "1s"]):
        r = run_herd(list(map(str, cmd)), timeout=10, extra=False)
        assert r.returncode in (1, 2), (cmd, r)
        assert f"{fifo}: not a regular file" in r.stderr, (cmd, r.stderr)


def test_a_master_reloading_a_config_that_became_a_fifo_refuses_and_keeps_serving(configured):
    srv, cfg, pidfile, base = configured
    cfg.unlink()
    os.mkfifo(cfg)
    r = reload("--pid-file", pidfile, "--timeout", "5s")
    assert r.returncode == 1 and "not a regular file" in r.stderr, r.stderr
    assert fetch(srv, "/small.txt").status == 200
    assert srv.stop() == 0     # the master still takes its signals


@pytest.mark.parametrize("which", ["herd.pid.tmp", "herd.pid.reload.tmp"])
def test_the_masters_temporary_files_are_not_written_through_a_symlink(server, tmp_path,
                                                                         which):
    """The pid file and the reload answer are written to NAME.tmp and
    renamed: a symlink planted at NAME.tmp (a shared folder like /tmp) made
    the master, often root, overwrite the file it points at."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    os.symlink(victim, tmp_path / which)
    srv, cfg, pidfile = from_config(server, tmp_path,
                                    f"workers = 1\nstatus-path = {STATUS}\npid-file = herd.pid\n")
    assert reload("--pid-file", pidfile).returncode == 0
    assert victim.read_text() == "precious\n"
    assert pidfile.read_text() == f"{srv.pid}\n" and not pidfile.is_symlink()
    assert (tmp_path / "herd.pid.reload").read_text().startswith(f"herd-reload {srv.pid} ")


def test_a_reload_to_an_access_log_that_cannot_be_opened_is_refused(server, tmp_path):
    """As a start is: the reload was taken, and the master then restarted a
    logger that could not open its log ten times a second, for good."""
    base = f"workers = 1\nstatus-path = {STATUS}\npid-file = herd.pid\n"
    srv, cfg, pidfile = from_config(server, tmp_path, base + f"access-log = {tmp_path}/a.log\n")
    cfg.write_text(base + f"access-log = {tmp_path}\n")   # a directory
    r = reload("--pid-file", pidfile)
    assert r.returncode == 1, r
    assert f"reload refused, old workers keep serving: access log {tmp_path}: Is a directory" \
        in r.stdout + r.stderr, (r.stdout, r.stderr)
    assert generation(srv) == 1
    assert fetch(srv, "/small.txt").status == 200
    wait_for(lambda: "/small.txt" in (tmp_path / "a.log").read_text(), timeout=5,
             what="the old log still written")
    assert "restarting it" not in srv.stderr_text()


def test_a_reload_to_an_access_log_fifo_with_no_reader_is_refused_at_once(server, tmp_path):
    """Opening a FIFO for writing waits for a reader: the master's check of
    the new access log sat in open(2), taking no signal, no answer and
    (dispatch) no connection, until something read the FIFO (red-team
    pass 19)."""
    base = f"workers = 1\nstatus-path = {STATUS}\npid-file = herd.pid\n"
    srv, cfg, pidfile = from_config(server, tmp_path, base)
    fifo = tmp_path / "access.fifo"
    os.mkfifo(fifo)
    cfg.write_text(base + f"access-log = {fifo}\n")
    r = reload("--pid-file", pidfile, "--timeout", "3s")
    assert r.returncode == 1, r
    assert f"access log {fifo}: No such device or address" in r.stdout + r.stderr, r
    assert generation(srv) == 1
    assert srv.stop() == 0     # the master still takes its signals


def test_an_access_log_pipe_nobody_reads_does_not_hold_the_logger(server, tmp_path):
    """A log shipper that holds the FIFO open and stops reading: the logger
    sat in write(2) for good. A reload to a file then reported "reloaded"
    while the old logger never exited and no new one started (the new file
    got no line), and the stop waited out the whole shutdown timeout. Now
    the logger waits for room at most a second, and a signal ends the wait
    at once (red-team pass 19)."""
    import time
    fifo = tmp_path / "access.fifo"
    os.mkfifo(fifo)
    shipper = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)   # holds it, never reads
    try:
        base = (f"workers = 1\nstatus-path = {STATUS}\npid-file = herd.pid\n"
                "shutdown-timeout = 20s\n")
        srv, cfg, pidfile = from_config(server, tmp_path, base + f"access-log = {fifo}\n")
        # about 150 KB of log lines: more than the FIFO holds (64 KiB)
        batch = get_req("/small.txt?" + "q" * 100) * 100
        for _ in range(10):
            with srv.connect() as c:
                c.send(batch + get_req("/small.txt", headers=[("Connection", "close")]))
                c.read_to_close(timeout=10)
        log = tmp_path / "a.log"
        cfg.write_text(base + f"access-log = {log}\n")
        r = reload("--pid-file", pidfile)
        assert r.returncode == 0, r
        def logged():
            fetch(srv, "/small.txt?after-the-reload")
            return log.exists() and "after-the-reload" in log.read_text()
        wait_for(logged, timeout=8, what="a line in the new access log")
        t0 = time.monotonic()
        assert srv.stop(timeout=30) == 0
        assert time.monotonic() - t0 < 8, "the stop waited for the stalled pipe"
    finally:
        os.close(shipper)


def test_a_reload_to_another_access_log_is_not_a_logger_death(server, tmp_path):
    """The master stops the old logger and starts one for the new log: that
    was logged `[error] logger (pid N) exited with status 0; restarting it in
    100 ms`, counted in logger_restarts, and the new log waited for the
    backoff (red-team pass 33). It is the reload's own doing: no error, no
    restart counted, the new logger at once."""
    base = f"workers = 1\nstatus-path = {STATUS}\npid-file = herd.pid\n"
    srv, cfg, pidfile = from_config(server, tmp_path, base + f"access-log = {tmp_path}/a.log\n")
    assert fetch(srv, "/small.txt?before").status == 200
    for n in (2, 3):   # twice: a second change within 10 s was a "quick death" too
        log = tmp_path / f"a{n}.log"
        cfg.write_text(base + f"access-log = {log}\n")
        r = reload("--pid-file", pidfile)
        assert r.returncode == 0, r

        def logged():
            fetch(srv, f"/small.txt?after-{n}")
            return log.exists() and f"after-{n}" in log.read_text()
        wait_for(logged, timeout=5, interval=0.1, what=f"a line in {log.name}")
    st = json.loads(fetch(srv, STATUS).body)
    assert st["logger_restarts"] == 0, st["logger_restarts"]
    text = srv.stderr_text()
    assert "[error]" not in text and "restarting it" not in text, text


def kill_logger_into_a_backoff(status):
    """Kills the logger within 10 s of its start, four times, so that its
    next restart waits out a backoff of 800 ms; status() is the status
    page as JSON."""
    for _ in range(4):
        pid = wait_for(lambda: (lambda s: s["logger_pid"] if s["logger_pid"] and
                                comm(s["logger_pid"]) == "herd-logger" else None)(status()),
                       timeout=5, interval=0.05, what="a running logger")
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: status()["logger_pid"] != pid, timeout=5, interval=0.02,
                 what="the death seen")


def test_a_reload_during_the_loggers_restart_backoff_leaves_one_logger(server, tmp_path):
    """A logger that died quickly (killed) waits out a backoff before its
    restart; a reload to another access log meanwhile started one at once,
    and the backoff's end started a second: two loggers read the workers'
    records, the master knew only one, and a rotation's USR1 reached only
    that one, so the other went on writing into the rotated file (red-team
    pass 33)."""
    import time
    base = f"workers = 1\nstatus-path = {STATUS}\npid-file = herd.pid\n"
    srv, cfg, pidfile = from_config(server, tmp_path, base + f"access-log = {tmp_path}/a.log\n")

    def loggers():
        return [p for p in descendants(srv.pid) if comm(p) == "herd-logger"]

    def status():
        return json.loads(fetch(srv, STATUS).body)
    kill_logger_into_a_backoff(status)
    log = tmp_path / "b.log"
    cfg.write_text(base + f"access-log = {log}\n")
    assert reload("--pid-file", pidfile).returncode == 0
    time.sleep(1.5)                    # past the backoff
    assert len(loggers()) == 1, loggers()
    # a rotation: every line after it goes to the new file
    os.rename(log, tmp_path / "b.log.1")
    os.kill(srv.pid, signal.SIGUSR1)
    time.sleep(0.3)
    for i in range(40):
        assert fetch(srv, f"/small.txt?after-rotation-{i}").status == 200
    wait_for(lambda: log.exists() and log.read_text().count("after-rotation-") == 40,
             timeout=5, what="the 40 lines in the new file")
    assert "after-rotation-" not in (tmp_path / "b.log.1").read_text()


def test_a_reload_that_turns_the_access_log_off_during_the_backoff(server, tmp_path):
    """The same backoff, and a reload that turns the access log off: the
    backoff's end still started a logger, for no path, which logged
    `[crit] access log : No such file or directory` (red-team pass 33)."""
    import time
    base = f"workers = 1\nstatus-path = {STATUS}\npid-file = herd.pid\n"
    srv, cfg, pidfile = from_config(server, tmp_path, base + f"access-log = {tmp_path}/a.log\n")

    def status():
        return json.loads(fetch(srv, STATUS).body)
    kill_logger_into_a_backoff(status)
    cfg.write_text(base)
    assert reload("--pid-file", pidfile).returncode == 0
    time.sleep(1.5)                    # past the backoff
    assert not [p for p in descendants(srv.pid) if comm(p) == "herd-logger"]
    assert "[crit]" not in srv.stderr_text(), srv.stderr_text()


def test_a_master_whose_binary_has_another_name_is_still_reloaded(tmp_path):
    """What makes a process herd's is `serve` after its binary, whatever the
    binary is called (a copy, or an upgrade to another file)."""
    import shutil
    binary = tmp_path / "webserver"
    shutil.copy(HERD_BIN, binary)
    (tmp_path / "www").mkdir()
    pidfile = tmp_path / "herd.pid"
    p = subprocess.Popen([str(binary), "serve", str(tmp_path / "www"), "--listen",
                          "127.0.0.1:0", "--workers", "1", "--pid-file", str(pidfile)],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: pidfile.exists() and pidfile.read_text() == f"{p.pid}\n", timeout=5,
                 what="the pid file")
        r = reload("--pid-file", pidfile)
        assert r.returncode == 0 and r.stdout.startswith("reloaded: generation 2"), r
    finally:
        p.terminate()
        assert p.wait(timeout=10) == 0
