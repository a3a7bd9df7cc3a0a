"""A backend for herd spawn's process-group tests: forks a helper that
keeps the inherited socket (fd 0) and accepts on it, writes the helper's
pid to PIDFILE, then stays (until TERM) or exits after 1.2 s (late enough
not to count as dying at start).

usage: forking_backend.py PIDFILE stay|exit [--helper-ignores-term]
                          [--helper-setsid] [--double-fork]

--helper-setsid: the helper starts a session of its own, so it is in
  neither the child's process group nor its session (as a daemonizing
  helper is).
--double-fork: the helper is forked by an intermediate process that exits
  at once, so it is orphaned while the child still runs.

The helper answers "helper PID" to each connection and lives at most 60 s,
so a failed test leaves nothing behind for long."""
import os
import signal
import socket
import sys
import time


def helper(ignore_term, new_session):
    if new_session:
        os.setsid()
    if ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    lsock = socket.socket(fileno=0)
    lsock.settimeout(0.5)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            conn, _ = lsock.accept()
        except (socket.timeout, InterruptedError):
            continue
        with conn:
            conn.sendall(b"helper %d\n" % os.getpid())
    os._exit(0)


def write_pid(pidfile, pid):
    tmp = pidfile + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{pid}\n")
    os.rename(tmp, pidfile)


def start_helper(pidfile, ignore_term, new_session, double_fork):
    """Forks the helper (through an intermediate that exits at once when
    double_fork) and writes its pid to pidfile."""
    if not double_fork:
        pid = os.fork()
        if pid == 0:
            helper(ignore_term, new_session)
        write_pid(pidfile, pid)
        return
    middle = os.fork()
    if middle == 0:
        pid = os.fork()
        if pid == 0:
            helper(ignore_term, new_session)
        write_pid(pidfile, pid)
        os._exit(0)
    os.waitpid(middle, 0)


def main():
    pidfile, mode = sys.argv[1], sys.argv[2]
    start_helper(pidfile, "--helper-ignores-term" in sys.argv, "--helper-setsid" in sys.argv,
                 "--double-fork" in sys.argv)
    if mode == "exit":
        time.sleep(1.2)
        return 0
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    while True:
        signal.pause()


if __name__ == "__main__":
    sys.exit(main())
