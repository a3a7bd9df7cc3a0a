#!/bin/bash
# Reverse proxy: herd against nginx, both proxying to the same herd backend
# on a unix socket, keep-alive to the upstream on both sides.
#
#   bash bench/proxy.sh            # ROUNDS=2 DURATION=10s CONNS=50
#
# The proxy and the backend share CPU 0 (one worker each); wrk runs on
# CPU 1. The runs alternate herd, nginx, herd, nginx... Prints one TSV line
# per run: proxy, req/s, proxy CPU µs per request, backend CPU µs/req.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-50}
FILE=${FILE:-/index.html}
HERD=${HERD:-build/herd}
TMP=$(mktemp -d /tmp/herd-proxy-bench.XXXXXX)
SOCK=$TMP/backend.sock
. "$(dirname "$0")/lib.sh" # free_port, tree_ticks, PIDS killed at exit
command -v wrk >/dev/null || { echo "wrk not installed" >&2; exit 1; }
command -v nginx >/dev/null || { echo "nginx not installed" >&2; exit 1; }

wait_http() {
    for _ in $(seq 100); do
        curl -sf -o /dev/null "http://127.0.0.1:$1$FILE" && return 0
        sleep 0.05
    done
    echo "proxy on port $1 does not answer" >&2; for f in "$TMP"/*.log "$TMP"/*.err "$TMP"/nginx/error.log; do echo "== $f"; tail -n 5 "$f"; done >&2
    exit 1
}

taskset -c 0 "$HERD" serve www --listen "unix:$SOCK" --workers 1 \
    --keepalive-requests 100000000 2>"$TMP/backend.log" &
BACKEND=$!
PIDS+=("$BACKEND")
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done

HPORT=$(free_port)
taskset -c 0 "$HERD" serve www --listen "127.0.0.1:$HPORT" --workers 1 \
    --keepalive-requests 100000000 --upstream "b=unix:$SOCK" --proxy /=b \
    2>"$TMP/herd.log" &
HERD_PID=$!
PIDS+=("$HERD_PID")

NPORT=$(free_port)
mkdir -p "$TMP/nginx"
cat >"$TMP/nginx.conf" <<EOF
worker_processes 1;
user $(id -un);  # reach the backend socket in our private temp dir
daemon off;
pid $TMP/nginx.pid;
error_log $TMP/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $TMP/nginx/body;
    proxy_temp_path $TMP/nginx/proxy;
    fastcgi_temp_path $TMP/nginx/fastcgi;
    uwsgi_temp_path $TMP/nginx/uwsgi;
    scgi_temp_path $TMP/nginx/scgi;
    keepalive_requests 100000000;
    upstream b { server unix:$SOCK; keepalive 32; keepalive_requests 100000000; }
    server {
        listen 127.0.0.1:$NPORT;
        location / {
            proxy_pass http://b;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host \$host;
            proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto \$scheme;
        }
    }
}
EOF
taskset -c 0 nginx -c "$TMP/nginx.conf" -p "$TMP/nginx" 2>"$TMP/nginx.err" &
NGINX_PID=$!
PIDS+=("$NGINX_PID")
wait_http "$HPORT"
wait_http "$NPORT"

HZ=$(getconf CLK_TCK)
run() { # name port pid
    taskset -c 1 wrk -t1 -c"$CONNS" -d2s "http://127.0.0.1:$2$FILE" >/dev/null
    local p0 b0 p1 b1 out
    p0=$(tree_ticks "$3"); b0=$(tree_ticks "$BACKEND")
    out=$(taskset -c 1 wrk -t1 -c"$CONNS" -d"$DURATION" "http://127.0.0.1:$2$FILE")
    p1=$(tree_ticks "$3"); b1=$(tree_ticks "$BACKEND")
    if echo "$out" | grep -q "Non-2xx\|Socket errors"; then
        echo "$1: errors during the run:" >&2
        echo "$out" >&2
        exit 1
    fi
    local reqs
    reqs=$(echo "$out" | awk '/requests in/ {print $1}')
    python3 - "$1" "$reqs" "$DURATION" "$((p1 - p0))" "$((b1 - b0))" "$HZ" <<'EOF'
import sys
name, reqs, dur, pt, bt, hz = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
secs = float(dur.rstrip("s"))
print(f"{name}\t{reqs / secs:.0f}\t{pt / hz * 1e6 / reqs:.2f}\t{bt / hz * 1e6 / reqs:.2f}")
EOF
}

printf "proxy\treq/s\tproxy_cpu_us_per_req\tbackend_cpu_us_per_req\n"
for _ in $(seq "$ROUNDS"); do
    run herd "$HPORT" "$HERD_PID"
    run nginx "$NPORT" "$NGINX_PID"
done
