#!/usr/bin/env python3
"""Memory per idle keep-alive connection: starts `herd serve` with the given
args, reads the RSS of its processes, opens N connections that each make one
request (so the connection has served a request and sits idle in keep-alive),
reads the RSS again and prints the difference per connection.

    python3 bench/idle_rss.py N -- --model coro --threads 1

The server is pinned to CPU 0, this client to CPU 1; the server is stopped
by its PID."""
import os
import socket
import subprocess
import sys
import time

HERD = os.environ.get("HERD_BIN", "build/herd")


def tree(pid):
    pids = [pid]
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        pids += tree(int(p))
            except OSError:
                pass
    return pids


def rss_kb(pid):
    total = 0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def main():
    n = int(sys.argv[1])
    args = sys.argv[sys.argv.index("--") + 1:]
    os.sched_setaffinity(0, {1})
    srv = subprocess.Popen(["taskset", "-c", "0", HERD, "serve", "www", "--listen", "127.0.0.1:0",
                            "--keepalive-timeout", "120s", *args],
                           stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        port = None
        deadline = time.monotonic() + 10
        while port is None and time.monotonic() < deadline:
            line = srv.stderr.readline().decode()
            if "listening on http://" in line:
                port = int(line.rsplit(":", 1)[1].strip().rstrip("/"))
        assert port, "server did not start"
        req = b"GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n"
        warm = socket.create_connection(("127.0.0.1", port), timeout=5)
        warm.sendall(req)
        warm.recv(65536)
        time.sleep(0.5)
        before = rss_kb(srv.pid)
        conns = []
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(req)
            got = b""
            while b"</html>" not in got:
                d = s.recv(65536)
                assert d, "closed"
                got += d
            conns.append(s)
        time.sleep(0.5)
        after = rss_kb(srv.pid)
        print(f"{' '.join(args)}: {n} idle keep-alive connections: RSS {before} kB -> {after} kB, "
              f"{(after - before) * 1024 / n:.0f} bytes per connection")
        for s in conns:
            s.close()
        warm.close()
    finally:
        srv.terminate()
        srv.wait(10)


main()
