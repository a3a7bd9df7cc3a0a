#!/bin/sh
# Errors a non-retrying client (wrk) sees across reloads (issue 13): for
# each model and concurrency, herd serve --workers 2 on CPU 0, wrk -t1 on
# CPU 1 for DURATION seconds, SIGNAL (HUP, or USR2 for a binary upgrade) to
# the master the pid file names every INTERVAL seconds (HUPS of them).
# Prints one line per run: binary model connections requests errors.
#   bench/hitless.sh BIN [MODELS] [CONNS]
# env: DURATION (20), HUPS (5), INTERVAL (3), SIGNAL (HUP), PORT (18731),
# DOCROOT (www)
set -eu
BIN=$1
MODELS=${2:-"reuseport prefork dispatch threads coro"}
CONNS=${3:-"20 200"}
DURATION=${DURATION:-20}
HUPS=${HUPS:-5}
INTERVAL=${INTERVAL:-3}
PORT=${PORT:-18731}
SIGNAL=${SIGNAL:-HUP}
DOCROOT=${DOCROOT:-www}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for model in $MODELS; do
    for c in $CONNS; do
        taskset -c 0 "$BIN" serve "$DOCROOT" --listen 127.0.0.1:$PORT --model "$model" \
            --workers 2 --keepalive-timeout 60s --pid-file "$out/pid" 2>"$out/err" &
        pid=$!
        i=0
        until grep -q "listening on" "$out/err" 2>/dev/null; do
            i=$((i + 1)); [ $i -lt 100 ] || { echo "no start: $(cat "$out/err")"; exit 1; }
            sleep 0.1
        done
        taskset -c 1 wrk -t1 -c"$c" -d"${DURATION}s" "http://127.0.0.1:$PORT/index.html" \
            >"$out/wrk" 2>&1 &
        wpid=$!
        sleep 2
        h=0
        while [ $h -lt "$HUPS" ]; do
            kill -"$SIGNAL" "$(cat "$out/pid")"
            h=$((h + 1))
            sleep "$INTERVAL"
        done
        wait $wpid
        last=$(cat "$out/pid")
        kill -TERM "$last"
        wait $pid || true
        while kill -0 "$last" 2>/dev/null; do sleep 0.1; done
        reqs=$(awk '/requests in/ {print $1}' "$out/wrk")
        errs=$(awk '/Socket errors/ {print}' "$out/wrk")
        non2xx=$(awk '/Non-2xx/ {print $NF}' "$out/wrk")
        echo "$BIN $model c$c requests=$reqs" \
             "non2xx=${non2xx:-0} ${errs:-Socket errors: none}"
    done
done
