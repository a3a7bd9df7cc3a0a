#!/bin/sh
# The uring model against reuseport: one worker pinned to CPU 0, wrk on
# CPU 1 (-t1 -c50, keep-alive and Connection: close), server CPU per
# request from the worker's /proc/PID/stat utime+stime before and after,
# and the worker's context switches per request.
# Usage: bench/uring.sh [BIN] [ROUNDS] [DURATION]; prints one line a run.
# MODELS="uring reuseport" and TESTS="keepalive close" pick the runs; BINS
# (several binaries) alternates them within each round instead of BIN, to
# compare a change with its base in the same minutes.
set -eu
bin=${1:-build/herd}
bins=${BINS:-$bin}
models=${MODELS:-uring reuseport}
tests=${TESTS:-keepalive close}
rounds=${2:-3}
dur=${3:-5s}
port=${PORT:-18473}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
head -c 64 /dev/zero | tr '\0' x > "$root/index.html"
tck=$(getconf CLK_TCK)

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
ctx_switches() { awk '/^(non)?voluntary_ctxt_switches/ {n += $2} END {print n}' "/proc/$1/status"; }

worker_of() {  # the herd-w0 child of master $1
    for p in $(cat /proc/"$1"/task/*/children); do
        [ "$(cat /proc/"$p"/comm)" = herd-w0 ] && echo "$p" && return
    done
}

run() {  # model test bin
    taskset -c 0 "$3" serve "$root" --listen 127.0.0.1:$port --workers 1 \
        --model "$1" 2>/dev/null &
    master=$!
    sleep 0.5
    w=$(worker_of $master)
    hdr=""
    [ "$2" = close ] && hdr="Connection: close"
    t0=$(cpu_ticks "$w") c0=$(ctx_switches "$w")
    out=$(taskset -c 1 wrk -t1 -c50 -d"$dur" ${hdr:+-H "$hdr"} "http://127.0.0.1:$port/")
    t1=$(cpu_ticks "$w") c1=$(ctx_switches "$w")
    kill -TERM $master
    wait $master || true
    rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    errs=$(echo "$out" | awk '/Non-2xx|Socket errors/ {print}' | tr '\n' ' ')
    n=$(echo "$rps * ${dur%s}" | bc -l)
    echo "$3 $1 $2 req/s=$rps cpu_us_per_req=$(echo "($t1 - $t0) * 1000000 / $tck / $n" | bc -l | cut -c1-6) ctx_switches_per_req=$(echo "($c1 - $c0) / $n" | bc -l | cut -c1-5) $errs"
}

for r in $(seq "$rounds"); do
    for t in $tests; do
        for m in $models; do
            for b in $bins; do
                run $m $t $b
            done
        done
    done
done
