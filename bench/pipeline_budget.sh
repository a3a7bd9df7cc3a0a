#!/bin/bash
# Pipelined throughput of two herd binaries, alternating in one run: did the
# output budget (src/models/conn.c OUT_BUDGET) cost anything?
#
#   BASE=/path/to/main/build/herd bash bench/pipeline_budget.sh
#
# Server (one process, --model single) on CPU 0, `herd load --pipeline 16`
# on CPU 1, 50 connections; a 64-byte file and a 32 KiB one (the largest
# kept in memory, so the batch is cut by the budget, not by its iovecs).
# Prints one line per run: binary, file, req/s, server CPU µs per request,
# sendmsg calls per request (from perf, when it can trace syscalls).
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${BASE:?set BASE to the herd binary to compare against}
NEW=${NEW:-build/herd}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
CONNS=${CONNS:-50}
LOAD=${LOAD:-$NEW}
TMP=$(mktemp -d /tmp/herd-pipe-bench.XXXXXX)
. "$(dirname "$0")/lib.sh" # free_port, tree_ticks, PIDS killed at exit
head -c 64 /dev/zero | tr '\0' 'x' > "$TMP/small.html"
head -c 32768 /dev/urandom > "$TMP/f32k.bin"
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TCK=$(getconf CLK_TCK)
PERF=
perf stat -e syscalls:sys_enter_sendmsg true >/dev/null 2>&1 && PERF=1

run() { # binary path
    local port pid t0 t1 out n rps sm=-
    port=$(free_port)
    taskset -c 0 "$1" serve "$TMP" --listen "127.0.0.1:$port" --model single \
        --keepalive-requests 100000000 >/dev/null 2>&1 &
    pid=$!
    PIDS+=("$pid")
    sleep 0.5
    taskset -c 1 "$LOAD" load "http://127.0.0.1:$port$2" -c "$CONNS" -t 1 --pipeline 16 \
        -d 1s --cpus 1 >/dev/null 2>&1
    if [ -n "$PERF" ]; then
        perf stat -x, -e syscalls:sys_enter_sendmsg -p "$pid" -o "$TMP/perf" &
        local ppid=$!
    fi
    t0=$(ticks "$pid")
    out=$(taskset -c 1 "$LOAD" load "http://127.0.0.1:$port$2" -c "$CONNS" -t 1 \
        --pipeline 16 -d "${DURATION}s" --cpus 1 2>&1)
    t1=$(ticks "$pid")
    if [ -n "$PERF" ]; then
        kill -INT "$ppid"
        wait "$ppid" 2>/dev/null || true
        sm=$(awk -F, '/sendmsg/ {print $1}' "$TMP/perf")
    fi
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    n=$(echo "$out" | awk '/requests in/ {print $1}')
    rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    [ -n "$n" ] && [ "$n" -gt 0 ] || { echo "no requests measured: $out" >&2; exit 1; }
    awk -v b="$3" -v f="$2" -v rps="$rps" -v t="$((t1 - t0))" -v tck="$TCK" -v n="$n" -v sm="$sm" \
        'BEGIN { printf "%s\t%s\t%.0f req/s\t%.2f cpu-us/req\t%s sendmsg/req\n", b, f, rps,
                 t * 1e6 / tck / n, sm == "-" ? "-" : sprintf("%.3f", sm / n) }'
}

for i in $(seq "$ROUNDS"); do
    for f in /small.html /f32k.bin; do
        run "$BASE" "$f" base
        run "$NEW" "$f" new
    done
done
