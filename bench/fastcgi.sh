#!/bin/bash
# FastCGI: herd against nginx, both in front of the same php-fpm pool
# (pm = static) on a unix socket, a hello-world script, keep-alive to the
# pool on both sides (herd: its per-worker pool; nginx: an upstream block
# with `keepalive` and `fastcgi_keep_conn on`).
#
#   bash bench/fastcgi.sh          # ROUNDS=3 DURATION=10s CONNS=8 CHILDREN=16
#
# Each pooled connection holds a php-fpm child, and both front ends keep
# up to CONNS of them while the other runs: CHILDREN must be at least
# 2 x CONNS, or one front end's requests queue behind the children the
# other one's idle connections hold (0 req/s in a first try). The
# front end (one worker) and php-fpm share CPU 0; wrk runs on CPU 1. Runs
# alternate herd, nginx, herd... Prints one TSV line per run: front end,
# req/s, front-end CPU µs per request, php-fpm CPU µs per request.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-8}
CHILDREN=${CHILDREN:-$((2 * CONNS))}
HERD=${HERD:-build/herd}
FPM=${FPM:-$(command -v php-fpm8.2 || command -v php-fpm || true)}
TMP=$(mktemp -d /tmp/herd-fastcgi-bench.XXXXXX)
SOCK=$TMP/fpm.sock
. "$(dirname "$0")/lib.sh" # free_port, tree_ticks, PIDS killed at exit
command -v wrk >/dev/null || { echo "wrk not installed (apt-get install wrk)" >&2; exit 1; }
command -v nginx >/dev/null || { echo "nginx not installed (apt-get install nginx-light)" >&2; exit 1; }
[ -n "$FPM" ] || { echo "php-fpm not installed (apt-get install php8.2-fpm)" >&2; exit 1; }
[ "$CHILDREN" -ge $((2 * CONNS)) ] || { echo "CHILDREN must be at least 2 x CONNS" >&2; exit 1; }

wait_http() {
    for _ in $(seq 100); do
        curl -sf -o /dev/null "http://127.0.0.1:$1/hello.php" && return 0
        sleep 0.05
    done
    echo "front end on port $1 does not answer" >&2
    for f in "$TMP"/*.log "$TMP"/*.err; do echo "== $f"; tail -n 5 "$f"; done >&2
    exit 1
}

mkdir -p "$TMP/www"
echo '<?php echo "Hello, world!\n";' > "$TMP/www/hello.php"
cat >"$TMP/fpm.conf" <<EOF
[global]
error_log = $TMP/fpm.log
daemonize = no
[pool]
listen = $SOCK
pm = static
pm.max_children = $CHILDREN
pm.max_requests = 0
EOF
ROOT=()
[ "$(id -u)" = 0 ] && ROOT=(-R)
taskset -c 0 "$FPM" -F -n -y "$TMP/fpm.conf" "${ROOT[@]}" 2>"$TMP/fpm.err" &
FPM_PID=$!
PIDS+=("$FPM_PID")
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done

HPORT=$(free_port)
taskset -c 0 "$HERD" serve "$TMP/www" --listen "127.0.0.1:$HPORT" --workers 1 \
    --keepalive-requests 100000000 --upstream "php=unix:$SOCK" --fastcgi '*.php=php' \
    --upstream-keepalive "$CONNS" 2>"$TMP/herd.log" &
HERD_PID=$!
PIDS+=("$HERD_PID")

NPORT=$(free_port)
mkdir -p "$TMP/nginx"
cat >"$TMP/nginx.conf" <<EOF
worker_processes 1;
user $(id -un);
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
    upstream php { server unix:$SOCK; keepalive $CONNS; keepalive_requests 100000000; }
    server {
        listen 127.0.0.1:$NPORT;
        root $TMP/www;
        location ~ \.php\$ {
            try_files \$uri =404;
            include /etc/nginx/fastcgi.conf;
            fastcgi_pass php;
            fastcgi_keep_conn on;
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
    taskset -c 1 wrk -t1 -c"$CONNS" -d2s "http://127.0.0.1:$2/hello.php" >/dev/null
    local p0 b0 p1 b1 out
    p0=$(tree_ticks "$3"); b0=$(tree_ticks "$FPM_PID")
    out=$(taskset -c 1 wrk -t1 -c"$CONNS" -d"$DURATION" "http://127.0.0.1:$2/hello.php")
    p1=$(tree_ticks "$3"); b1=$(tree_ticks "$FPM_PID")
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

printf "front\treq/s\tfront_cpu_us_per_req\tphp_fpm_cpu_us_per_req\n"
for _ in $(seq "$ROUNDS"); do
    run herd "$HPORT" "$HERD_PID"
    run nginx "$NPORT" "$NGINX_PID"
done
