#!/bin/bash
# TLS: herd against nginx with the same ECDSA P-256 certificate, the same
# protocols (TLS 1.2 + 1.3) and TLS 1.2 ciphers, one worker each.
#
#   bash bench/tls.sh            # ROUNDS=2 DURATION=10s CONNS=50
#
# Two loads, each with wrk on CPU 1 and the server on CPU 0:
#   close      a new TLS connection per request (Connection: close)
#   keepalive  requests on CONNS kept-alive TLS connections
# Prints one TSV line per run: server, load, req/s, server CPU µs per
# request (= per handshake for `close`), from utime + stime in /proc.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-50}
FILE=${FILE:-/index.html}
HERD=${HERD:-build/herd}
TMP=$(mktemp -d /tmp/herd-tls-bench.XXXXXX)
. "$(dirname "$0")/lib.sh" # free_port, tree_ticks, PIDS killed at exit
command -v wrk >/dev/null || { echo "wrk not installed" >&2; exit 1; }
command -v nginx >/dev/null || { echo "nginx not installed" >&2; exit 1; }

wait_https() {
    for _ in $(seq 100); do
        curl -sfk -o /dev/null "https://127.0.0.1:$1$FILE" && return 0
        sleep 0.05
    done
    echo "server on port $1 does not answer" >&2
    tail -n 5 "$TMP"/*.log "$TMP"/nginx/error.log >&2 || true
    exit 1
}

openssl ecparam -name prime256v1 -genkey -noout -out "$TMP/key.pem"
openssl req -x509 -new -key "$TMP/key.pem" -subj /CN=localhost -days 2 -out "$TMP/cert.pem" \
    2>/dev/null
CIPHERS="ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

HPORT=$(free_port)
taskset -c 0 "$HERD" serve www --listen "127.0.0.1:$HPORT tls" --workers 1 \
    --tls-cert "$TMP/cert.pem" --tls-key "$TMP/key.pem" --status-path /herd-status \
    --keepalive-requests 100000000 2>"$TMP/herd.log" &
HERD_PID=$!
PIDS+=("$HERD_PID")

NPORT=$(free_port)
mkdir -p "$TMP/nginx"
cat >"$TMP/nginx.conf" <<EOF
worker_processes 1;
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
    server {
        listen 127.0.0.1:$NPORT ssl;
        ssl_certificate $TMP/cert.pem;
        ssl_certificate_key $TMP/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_ciphers $CIPHERS;
        ssl_prefer_server_ciphers on;
        root $PWD/www;
    }
}
EOF
taskset -c 0 nginx -c "$TMP/nginx.conf" -p "$TMP/nginx" 2>"$TMP/nginx.err" &
NGINX_PID=$!
PIDS+=("$NGINX_PID")
wait_https "$HPORT"
wait_https "$NPORT"

HZ=$(getconf CLK_TCK)
run() { # name port pid load
    local hdr=()
    [ "$4" = close ] && hdr=(-H "Connection: close")
    taskset -c 1 wrk -t1 -c"$CONNS" -d2s "${hdr[@]}" "https://127.0.0.1:$2$FILE" >/dev/null
    local p0 p1 out
    p0=$(tree_ticks "$3")
    out=$(taskset -c 1 wrk -t1 -c"$CONNS" -d"$DURATION" "${hdr[@]}" "https://127.0.0.1:$2$FILE")
    p1=$(tree_ticks "$3")
    if echo "$out" | grep -q "Non-2xx\|Socket errors"; then
        echo "$1 $4: errors during the run:" >&2
        echo "$out" >&2
        exit 1
    fi
    local reqs
    reqs=$(echo "$out" | awk '/requests in/ {print $1}')
    python3 - "$1" "$4" "$reqs" "$DURATION" "$((p1 - p0))" "$HZ" <<'EOF'
import sys
name, load, reqs, dur, pt, hz = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
if reqs == 0:
    sys.exit(f"{name} {load}: no requests completed")
secs = float(dur.rstrip("s"))
print(f"{name}\t{load}\t{reqs / secs:.0f}\t{pt / hz * 1e6 / reqs:.2f}")
EOF
}

printf "server\tload\treq/s\tserver_cpu_us_per_req\n"
for _ in $(seq "$ROUNDS"); do
    for load in close keepalive; do
        run herd "$HPORT" "$HERD_PID" "$load"
        run nginx "$NPORT" "$NGINX_PID" "$load"
    done
done
# whether wrk's new connections resumed sessions (the same client for both)
curl -sk "https://127.0.0.1:$HPORT/herd-status" | python3 -c \
    'import json,sys; t=json.load(sys.stdin)["tls"]; print("# herd: %d handshakes, %d resumed" % (t["handshakes"], t["resumed"]))'
