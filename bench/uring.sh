#!/bin/sh
# The uring model against reuseport: one worker pinned to CPU 0, wrk on
# CPU 1 (-t1 -c50, keep-alive and Connection: close), server CPU per
# request from the worker's /proc/PID/stat utime+stime before and after.
# Usage: bench/uring.sh [BIN] [ROUNDS] [DURATION]; prints one line a run.
set -eu
bin=${1:-build/herd}
rounds=${2:-3}
dur=${3:-5s}
port=${PORT:-18473}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
head -c 64 /dev/zero | tr '\0' x > "$root/index.html"
tck=$(getconf CLK_TCK)

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

worker_of() {  # the herd-w0 child of master $1
    for p in $(cat /proc/"$1"/task/*/children); do
        [ "$(cat /proc/"$p"/comm)" = herd-w0 ] && echo "$p" && return
    done
}

run() {  # model test
    taskset -c 0 "$bin" serve "$root" --listen 127.0.0.1:$port --workers 1 \
        --model "$1" 2>/dev/null &
    master=$!
    sleep 0.5
    w=$(worker_of $master)
    hdr=""
    [ "$2" = close ] && hdr="Connection: close"
    t0=$(cpu_ticks "$w")
    out=$(taskset -c 1 wrk -t1 -c50 -d"$dur" ${hdr:+-H "$hdr"} "http://127.0.0.1:$port/")
    t1=$(cpu_ticks "$w")
    kill -TERM $master
    wait $master || true
    rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    errs=$(echo "$out" | awk '/Non-2xx|Socket errors/ {print}' | tr '\n' ' ')
    echo "$1 $2 req/s=$rps cpu_us_per_req=$(echo "($t1 - $t0) * 1000000 / $tck / ($rps * ${dur%s})" | bc -l | cut -c1-6) $errs"
}

for r in $(seq "$rounds"); do
    for t in keepalive close; do
        for m in uring reuseport; do
            run $m $t
        done
    done
done
