#!/usr/bin/env bash
# bench/anchors.sh - herd beside nginx, h2o and lighttpd (each when
# installed) on the same small docroot: every server pinned to one CPU, the
# load generator to another, 127.0.0.1 only, one worker each, access logs
# off. Writes OUTDIR/results.tsv and OUTDIR/results.md and prints the table.
# Needs only this repository (build/herd) and, optionally, the servers and
# wrk from Debian (apt-get install nginx-light h2o lighttpd wrk).
#
#   bash bench/anchors.sh
#   SERVERS="herd nginx" TESTS=keepalive DURATION=5s bash bench/anchors.sh
#   LOADGEN=wrk bash bench/anchors.sh
#
# Environment (defaults):
#   SERVERS="herd nginx h2o lighttpd"   absent ones are skipped (and listed)
#   TESTS="keepalive close large"       keepalive: 64 B file, 50 connections;
#                                       close: the same, a connection per
#                                       request; large: 1 MiB file, 10 connections
#   DURATION=10s WARMUP=2s              per run, after a warm-up run
#   LOADGEN=herd                        herd (herd load) or wrk
#   SERVER_CPU=0 CLIENT_CPU=1           taskset CPUs; never the same one
#   PORT=18480                          first port (one per server)
#   HERD_BIN=<repo>/build/herd  HERD_ARGS (extra `herd serve` options)
#   OUTDIR=<repo>/bench/out/anchors-<date>
# For the whole model x concurrency sweep with charts, use `herd lab`
# (docs/LAB.md), which runs the same anchors when they are installed.
#
# Server CPU is the utime+stime of the server's process tree over the run,
# read from /proc: where the load generator's core is saturated, CPU µs per
# request ranks servers better than req/s. Exit 1 when a run failed.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SERVERS=${SERVERS-"herd nginx h2o lighttpd"}
TESTS=${TESTS:-"keepalive close large"}
DURATION=${DURATION:-10s} WARMUP=${WARMUP:-2s} LOADGEN=${LOADGEN:-herd}
SERVER_CPU=${SERVER_CPU:-0} CLIENT_CPU=${CLIENT_CPU:-1} PORT=${PORT:-18480}
HERD_BIN=${HERD_BIN:-$REPO/build/herd} HERD_ARGS=${HERD_ARGS:-}
OUTDIR=${OUTDIR:-$REPO/bench/out/anchors-$(date +%Y%m%d-%H%M%S)}
TICK_US=$(( 1000000 / $(getconf CLK_TCK) ))

say() { printf '[anchors %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { say "$*"; exit 2; }
[[ $SERVER_CPU != "$CLIENT_CPU" ]] || die "SERVER_CPU and CLIENT_CPU must differ"
[[ -x $HERD_BIN ]] || die "$HERD_BIN is missing: run make build first"
[[ $LOADGEN == herd || $LOADGEN == wrk ]] || die "LOADGEN is herd or wrk"
[[ $DURATION =~ ^[0-9]+s$ && $WARMUP =~ ^[0-9]+s$ ]] || die "DURATION and WARMUP are whole seconds (10s)"
[[ $LOADGEN == herd ]] || command -v wrk >/dev/null || die "LOADGEN=wrk: wrk not installed"

mkdir -p "$OUTDIR" && OUTDIR=$(cd "$OUTDIR" && pwd)
WORK=$OUTDIR/work DOCROOT=$OUTDIR/work/www
mkdir -p "$DOCROOT" && chmod 755 "$OUTDIR" "$WORK" "$DOCROOT"  # nginx's workers read it
head -c 64 /dev/zero | tr '\0' 'h' > "$DOCROOT/index.html"
head -c 1048576 /dev/urandom > "$DOCROOT/1m.bin"
printf 'server\ttest\treq_per_s\tp50_us\tp99_us\tserver_cpu_us_per_req\terrors\n' > "$OUTDIR/results.tsv"

# ---- the servers: each writes its config into WORK and runs in the foreground
server_cmd() { # name port -> the command line, or nothing when not installed
    local name=$1 port=$2 conf=$WORK/$1.conf
    case $name in
    herd) echo "$HERD_BIN serve $DOCROOT --listen 127.0.0.1:$port --workers 1 --keepalive-requests 100000000 $HERD_ARGS" ;;
    nginx)
        command -v nginx >/dev/null || return 0
        mkdir -p "$WORK/nginx"
        cat > "$conf" <<EOF
worker_processes 1; daemon off; pid $WORK/nginx.pid; error_log $WORK/nginx.err;
$( [[ $(id -u) == 0 ]] && echo "user root;" )
events { worker_connections 4096; }
http { access_log off; sendfile on; tcp_nopush on; keepalive_requests 100000000;
       types { text/html html; } default_type application/octet-stream;
       server { listen 127.0.0.1:$port; root $DOCROOT; } }
EOF
        echo "nginx -p $WORK/nginx -c $conf" ;;
    h2o)
        command -v h2o >/dev/null || return 0
        cat > "$conf" <<EOF
listen: {host: 127.0.0.1, port: $port}
num-threads: 1
$( [[ $(id -u) == 0 ]] && echo "user: root" )
http1-request-timeout: 60
hosts: {"default": {paths: {"/": {file.dir: "$DOCROOT"}}}}
EOF
        echo "h2o -c $conf" ;;
    lighttpd)
        command -v lighttpd >/dev/null || return 0
        cat > "$conf" <<EOF
server.document-root = "$DOCROOT"
server.bind = "127.0.0.1"
server.port = $port
server.max-keep-alive-requests = 100000000
server.network-backend = "sendfile"
index-file.names = ("index.html")
EOF
        echo "lighttpd -D -f $conf" ;;
    *) die "unknown server $name (herd, nginx, h2o, lighttpd)" ;;
    esac
}

answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

tree_pids() { # pid and its descendants
    local kid
    echo "$1"
    for kid in $(ps -o pid= --ppid "$1" 2>/dev/null); do tree_pids "$kid"; done
}

tree_ticks() { # utime+stime of a process tree, in clock ticks
    local pid sum=0 f
    for pid in $(tree_pids "$1"); do
        f=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null) || continue
        read -r -a f <<<"$f"    # fields from 3 (state): utime is 14th, stime 15th
        sum=$(( sum + f[11] + f[12] ))
    done
    echo "$sum"
}

# ---- one load run: prints "req/s p50_us p99_us errors"
run_load() { # test url duration json
    local test=$1 url=$2 dur=$3 out=$4 conns=50 close=
    [[ $test == large ]] && conns=10
    [[ $test == close ]] && close=1
    if [[ $LOADGEN == herd ]]; then
        taskset -c "$CLIENT_CPU" "$HERD_BIN" load "$url" -t 1 -c "$conns" -d "$dur" \
            ${close:+--no-keepalive} --json "$out" >/dev/null 2>"$out.err" || true
        [[ -s $out ]] || { echo "0 0 0 failed"; return; }
        python3 - "$out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(r["requests_per_sec"], r["latency_us"]["p50"], r["latency_us"]["p99"],
      sum(r["errors"].values()))
PY
    else
        taskset -c "$CLIENT_CPU" wrk -t1 -c "$conns" -d "$dur" --latency \
            ${close:+-H "Connection: close"} "$url" > "$out" 2>&1 || true
        awk '/Requests\/sec/ {rps=$2} / 50%/ {p50=$2} / 99%/ {p99=$2}
             /Socket errors|Non-2xx/ {err=1}
             function us(v) { if (v ~ /ms$/) return v * 1000; if (v ~ /us$/) return v + 0;
                              if (v ~ /s$/) return v * 1000000; return v }
             END { if (rps == "") print "0 0 0 failed";
                   else print rps, us(p50), us(p99), err ? "see-raw" : 0 }' "$out"
    fi
}

# ---- one server through every test
FAILED=() SKIPPED=()
measure() { # name port
    local name=$1 port=$2 cmd pid
    cmd=$(server_cmd "$name" "$port")
    [[ -n $cmd ]] || { say "$name: not installed, skipped"; SKIPPED+=("$name"); return; }
    say "$name: $cmd (CPU $SERVER_CPU)"
    taskset -c "$SERVER_CPU" $cmd >"$WORK/$name.out" 2>&1 &
    pid=$!
    local i; for i in $(seq 50); do answers "$port" && break; sleep 0.1; done
    if ! answers "$port"; then
        say "$name: not answering on 127.0.0.1:$port (see $WORK/$name.out)"
        kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
        FAILED+=("$name"); return
    fi
    local test path t0 t1 rps p50 p99 err cpu
    for test in $TESTS; do
        path=/index.html; [[ $test == large ]] && path=/1m.bin
        [[ $test =~ ^(keepalive|close|large)$ ]] || die "unknown test $test"
        run_load "$test" "http://127.0.0.1:$port$path" "$WARMUP" "$WORK/$name-$test-warmup.json" >/dev/null
        t0=$(tree_ticks "$pid")
        read -r rps p50 p99 err < <(run_load "$test" "http://127.0.0.1:$port$path" "$DURATION" \
                                             "$WORK/$name-$test.json")
        t1=$(tree_ticks "$pid")
        cpu=$(python3 -c "r=float('$rps'); d=float('${DURATION%s}'); \
print('%.2f' % (($t1 - $t0) * $TICK_US / (r * d)) if r > 0 else '-')")
        [[ $err == 0 ]] || FAILED+=("$name/$test")
        printf '%s\t%s\t%.0f\t%.0f\t%.0f\t%s\t%s\n' "$name" "$test" "$rps" "$p50" "$p99" "$cpu" \
            "$err" >> "$OUTDIR/results.tsv"
        say "$name $test: $rps req/s, p99 $p99 us, $cpu CPU us/req, errors $err"
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(uname -srm), $(nproc) CPUs"
    echo "herd: $("$HERD_BIN" --version 2>&1 | head -1)  commit: $(git -C "$REPO" describe --always --dirty 2>/dev/null || echo none)"
    echo "load: $LOADGEN, $DURATION per run after $WARMUP, server CPU $SERVER_CPU, load CPU $CLIENT_CPU"
} > "$OUTDIR/meta.txt"

n=0
for s in $SERVERS; do measure "$s" $(( PORT + n )); n=$(( n + 1 )); done

{
    cat "$OUTDIR/meta.txt"; echo
    echo "| server | test | req/s | p50 µs | p99 µs | server CPU µs/req | errors |"
    echo "| --- | --- | --- | --- | --- | --- | --- |"
    tail -n +2 "$OUTDIR/results.tsv" | sed 's/\t/ | /g; s/^/| /; s/$/ |/'
    (( ${#SKIPPED[@]} )) && echo && echo "not installed: ${SKIPPED[*]}"
    true
} > "$OUTDIR/results.md"
cat "$OUTDIR/results.md"
say "results: $OUTDIR/results.md"
(( ${#FAILED[@]} == 0 )) || { say "failed: ${FAILED[*]}"; exit 1; }
