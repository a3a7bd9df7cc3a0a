#!/bin/bash
# A cold file against the other clients of its worker: one worker pinned to
# CPU 0; a 1 GiB file is dropped from the page cache (posix_fadvise
# DONTNEED), then curl downloads it while `wrk -t1 -c10 --latency` asks for
# a 6-byte file, both on CPU 1. A sendfile of pages that are not cached
# waits for the disk inside the call, and the small files wait with it;
# read in off the loop (models/file_window.h), they do not.
# CACHED=1 leaves the file in the page cache: then what the small files
# wait for is a client that reads as fast as the loop sends (turns).
# ALONE=1: no wrk, the cached file downloaded 3 times by itself; prints the
# download times and the worker's CPU ticks (what turns cost a lone client).
# WRK_NICE=-15 runs wrk niced, so curl on the same CPU cannot starve it.
# SERVE_ARGS adds flags to herd serve (coro: SERVE_ARGS="--threads 1").
# Usage: BINS="BEFORE AFTER" MODELS="reuseport uring" bench/cold_file.sh
#        [ROUNDS] [DURATION]; prints one line a run, binaries alternating
#        within each round. Every run is bounded by wrk's duration and a
#        curl --max-time.
set -eu
TMP=$(mktemp -d)
. "$(dirname "$0")/lib.sh"  # PIDS, free_port; the EXIT trap removes $TMP
rounds=${1:-3}
dur=${2:-2s}
bins=${BINS:-build/herd}
models=${MODELS:-reuseport}
mkdir "$TMP/www"
printf 'small\n' > "$TMP/www/small.txt"
head -c 1G /dev/zero > "$TMP/www/cold.bin"  # real blocks, not a sparse file
sync

evict() {
    python3 -c "import os,sys; fd=os.open(sys.argv[1],os.O_RDONLY); os.fsync(fd);
os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)" "$TMP/www/cold.bin"
}

worker_of() {  # the herd-w0 child of master $1
    for p in $(cat /proc/"$1"/task/*/children); do
        [ "$(cat /proc/"$p"/comm)" = herd-w0 ] && echo "$p" && return
    done
}

alone() {  # bin model port master
    local w t0 t1 times=""
    w=$(worker_of "$4")
    curl -s -o /dev/null --max-time 60 "http://127.0.0.1:$3/cold.bin"  # cached now
    t0=$(awk '{print $14 + $15}' "/proc/$w/stat")
    for _ in 1 2 3; do
        times="$times $(taskset -c 1 curl -s -o /dev/null --max-time 60 -w '%{time_total}' \
            "http://127.0.0.1:$3/cold.bin")"
    done
    t1=$(awk '{print $14 + $15}' "/proc/$w/stat")
    echo "$1 $2 alone: downloads${times} s, worker CPU ticks $((t1 - t0))"
}

run() {  # bin model
    port=$(free_port)
    taskset -c 0 "$1" serve "$TMP/www" --model "$2" --workers 1 \
        --listen 127.0.0.1:$port ${SERVE_ARGS:-} 2>/dev/null &
    local master=$!
    PIDS+=("$master")
    for _ in $(seq 50); do
        curl -s -o /dev/null "http://127.0.0.1:$port/small.txt" && break
        sleep 0.1
    done
    if [ -n "${ALONE:-}" ]; then
        alone "$1" "$2" "$port" "$master"
        kill "$master"
        wait "$master" 2>/dev/null || true
        return
    fi
    [ -n "${CACHED:-}" ] || evict
    taskset -c 1 curl -s -o /dev/null --max-time 60 -w '%{time_total}' \
        "http://127.0.0.1:$port/cold.bin" > "$TMP/dl" &
    local c=$!
    sleep 0.1
    taskset -c 1 nice -n "${WRK_NICE:-0}" wrk -t1 -c10 -d"$dur" --latency "http://127.0.0.1:$port/small.txt" > "$TMP/wrk"
    wait $c || true
    kill "$master"
    wait "$master" 2>/dev/null || true
    awk -v bin="$1" -v model="$2" -v dl="$(cat "$TMP/dl")" '
        /^ +Latency +[0-9]/ {max = $4}
        /^ +99%/ {p99 = $2}
        /^Requests\/sec/ {rps = $2}
        END {printf "%s %s download %ss small-file p99 %s max %s req/s %s\n",
             bin, model, dl, p99, max, rps}' "$TMP/wrk"
}

for r in $(seq "$rounds"); do
    for m in $models; do
        for b in $bins; do
            run "$b" "$m"
        done
    done
done
