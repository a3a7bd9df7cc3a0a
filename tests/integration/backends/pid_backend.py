"""A tiny HTTP backend for `herd spawn` tests: accepts on the inherited
socket (fd 0, or fd 3 when LISTEN_FDS=1 is for this pid) and answers every
request with a JSON description of itself. Options (argv): --ignore-term
(survive SIGTERM, for the stop timeout), --exit-after N (exit 0 after N
requests).
"""
import fcntl
import json
import os
import signal
import socket
import sys

with open("/proc/self/status") as f:
    SIG_BLOCKED = next(l.split()[1] for l in f if l.startswith("SigBlk:"))

hups = 0


def on_hup(signum, frame):
    global hups
    hups += 1


def main():
    ignore_term = "--ignore-term" in sys.argv
    exit_after = 0
    if "--exit-after" in sys.argv:
        exit_after = int(sys.argv[sys.argv.index("--exit-after") + 1])
    signal.signal(signal.SIGHUP, on_hup)
    signal.signal(signal.SIGTERM, signal.SIG_IGN if ignore_term else lambda *a: sys.exit(0))
    systemd = os.environ.get("LISTEN_FDS") == "1" and \
        os.environ.get("LISTEN_PID") == str(os.getpid())
    fd = 3 if systemd else 0
    blocking = not (fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK)
    lsock = socket.socket(fileno=fd)
    lsock.setblocking(True)
    served = 0
    while True:
        try:
            conn, _ = lsock.accept()
        except InterruptedError:
            continue
        with conn:
            conn.settimeout(5)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                data += chunk
            if not data:
                continue
            served += 1
            body = json.dumps({
                "pid": os.getpid(), "fd": fd, "systemd": systemd,
                "listen_fds": os.environ.get("LISTEN_FDS"),
                "listen_pid": os.environ.get("LISTEN_PID"),
                "sigblk": SIG_BLOCKED, "hups": hups,
                "blocking": blocking, "served": served,
            }).encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        if exit_after and served >= exit_after:
            return 0


if __name__ == "__main__":
    sys.exit(main())
