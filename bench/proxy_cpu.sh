#!/bin/sh
# Proxied requests: the proxy worker's CPU per request, binaries
# alternating within each round (a change against its base). One proxy
# worker on CPU 0; a herd backend (reuseport, one worker) and wrk -t1 -c50
# on CPU 1, with Connection: close (TESTS=close) or keep-alive.
# Usage: BINS="OLD NEW" MODELS="uring reuseport coro" TESTS="close keepalive" \
#        sh bench/proxy_cpu.sh [ROUNDS] [DURATION]
set -eu
rounds=${1:-3}
dur=${2:-5s}
bins=${BINS:-build/herd}
models=${MODELS:-uring reuseport}
tests=${TESTS:-close}
backend_bin=${BACKEND_BIN:-build/herd}
bport=${BPORT:-18701}
port=${PORT:-18702}
root=$(mktemp -d)
head -c 64 /dev/zero | tr '\0' x > "$root/index.html"
tck=$(getconf CLK_TCK)

worker_of() {  # the herd-w0 child of master $1
    for p in $(cat /proc/"$1"/task/*/children); do
        [ "$(cat /proc/"$p"/comm)" = herd-w0 ] && echo "$p" && return
    done
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

taskset -c 1 "$backend_bin" serve "$root" --listen 127.0.0.1:$bport --workers 1 \
    --model reuseport 2>/dev/null &
backend=$!
trap 'kill -TERM $backend 2>/dev/null; wait $backend 2>/dev/null; rm -rf "$root"' EXIT
sleep 0.5
for r in $(seq "$rounds"); do
    for t in $tests; do
        hdr=""
        [ "$t" = close ] && hdr="Connection: close"
        for m in $models; do
            for b in $bins; do
                taskset -c 0 "$b" serve "$root" --listen 127.0.0.1:$port --workers 1 \
                    --model "$m" --upstream b=127.0.0.1:$bport --proxy /=b 2>/dev/null &
                master=$!
                sleep 0.5
                w=$(worker_of $master)
                t0=$(cpu_ticks "$w")
                out=$(taskset -c 1 wrk -t1 -c50 -d"$dur" ${hdr:+-H "$hdr"} "http://127.0.0.1:$port/")
                t1=$(cpu_ticks "$w")
                kill -TERM $master
                wait $master || true
                rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
                errs=$(echo "$out" | awk '/Non-2xx|Socket errors/ {print}' | tr '\n' ' ')
                n=$(echo "$rps * ${dur%s}" | bc -l)
                us=$(echo "($t1 - $t0) * 1000000 / $tck / $n" | bc -l | cut -c1-6)
                echo "$b $m $t req/s=$rps proxy_cpu_us_per_req=$us $errs"
            done
        done
    done
done
