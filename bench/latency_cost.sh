#!/usr/bin/env bash
# bench/latency_cost.sh - what the latency histogram costs a warm keep-alive
# request, in instructions (valgrind's callgrind: the count does not move
# with the machine's load, which wall-clock CPU figures do on a shared box).
# Each binary serves N1 and then N2 keep-alive requests of a 64-byte file on
# one connection (one worker, reuseport); (Ir(N2) - Ir(N1)) / (N2 - N1) is
# the worker's user-space instructions per request, start-up cancelled out.
# Callgrind does not see the vDSO clock read as the CPU runs it (under
# valgrind glibc makes the syscall instead), so add its cost, measured
# apart, by hand.
#
#   bash bench/latency_cost.sh BASE_BIN NEW_BIN [N1 N2]
set -euo pipefail
BASE=$1 NEW=$2 N1=${3:-5000} N2=${4:-15000} PORT=${PORT:-18493}
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/www" && head -c 64 /dev/zero | tr '\0' h > "$WORK/www/index.html"
cat > "$WORK/client.py" <<'PY'
import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
deadline = time.monotonic() + 60
while True:
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=60)
        break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit("no server")
        time.sleep(0.1)
req, buf = b"GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n", b""
for _ in range(n):
    s.sendall(req)
    while True:
        k = buf.find(b"\r\n\r\n")
        if k >= 0 and len(buf) >= k + 4 + 64:
            buf = buf[k + 4 + 64:]
            break
        d = s.recv(65536)
        if not d:
            sys.exit("closed")
        buf += d
PY
worker_ir() { # bin n -> the worker's total instructions
    local out=$WORK/cg.$RANDOM
    valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$out.%p" \
        "$1" serve "$WORK/www" --listen 127.0.0.1:$PORT --workers 1 --model reuseport \
        --keepalive-requests 100000000 >"$WORK/server.log" 2>&1 &
    local pid=$!
    python3 "$WORK/client.py" $PORT "$2"
    kill -TERM $pid; wait $pid || true
    # the worker is the profile with the most instructions (the master idles)
    grep -h '^summary:' "$out".* | awk '{print $2}' | sort -n | tail -1
    rm -f "$out".*
}
for bin in "$BASE" "$NEW"; do
    a=$(worker_ir "$bin" "$N1"); b=$(worker_ir "$bin" "$N2")
    echo "$bin: $(( (b - a) / (N2 - N1) )) instructions per request"
done
