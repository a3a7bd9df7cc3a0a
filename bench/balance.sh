#!/usr/bin/env bash
# bench/balance.sh - how evenly each model spreads connections over its
# workers: herd serve with N workers (or threads) under wrk, keep-alive and
# Connection: close, then each worker's accepted connections and requests
# and the accept wakeups that found nothing, from the scoreboard (status
# page). A balance figure, not a speed one: on a machine with fewer cores
# than workers + wrk, the CPU figures are shared and not reported.
#
#   bash bench/balance.sh                    # every model, 2 workers
#   WORKERS=4 MODELS="reuseport prefork" DURATION=5s bash bench/balance.sh
#
# Prints one line per model and test: max/mean of the workers' requests and
# accepted counts (1.00 = perfectly even), and the empty wakeups per
# accepted connection. Needs build/herd and wrk; 127.0.0.1 only.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HERD_BIN=${HERD_BIN:-$REPO/build/herd}
WORKERS=${WORKERS:-2} DURATION=${DURATION:-5s} PORT=${PORT:-18680}
MODELS=${MODELS:-"reuseport prefork dispatch threads coro"}
CONNS=${CONNS:-50}
command -v wrk >/dev/null || { echo "balance: wrk is not installed" >&2; exit 2; }
[[ -x $HERD_BIN ]] || { echo "balance: $HERD_BIN is missing: make build" >&2; exit 2; }
[[ $DURATION =~ ^[0-9]+s$ ]] || { echo "balance: DURATION is whole seconds (5s)" >&2; exit 2; }

WORK=$(mktemp -d)
SERVER=
cleanup() { [[ -n $SERVER ]] && kill "$SERVER" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
head -c 64 /dev/zero | tr '\0' h > "$WORK/index.html"

# max/mean of a JSON list of per-worker counters
spread() { python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
ws = [w for w in d["slots"] if w["state"] == "running"] or d["slots"]
for key in ("requests", "accepted"):
    v = [w[key] for w in ws]
    m = sum(v) / len(v) if v else 0
    print("%s max/mean %.2f (%s)" % (key, max(v) / m if m else 0, "/".join(map(str, v))), end="  ")
acc = sum(w["accepted"] for w in ws)
print("empty wakeups/accept %.3f" % (sum(w["empty_accept_wakeups"] for w in ws) / acc if acc else 0))
' "$1"; }

for model in $MODELS; do
    case $model in
    threads|coro) size="--threads $WORKERS" ;;
    *) size="--workers $WORKERS" ;;
    esac
    for test in keepalive close; do
        PORT=$((PORT + 1))
        "$HERD_BIN" serve "$WORK" --listen 127.0.0.1:$PORT --model "$model" $size \
            --status-path /herd-status --keepalive-requests 100000000 > "$WORK/server.log" 2>&1 &
        SERVER=$!
        for _ in $(seq 50); do
            curl -s -o /dev/null "http://127.0.0.1:$PORT/index.html" && break
            sleep 0.1
        done
        hdr=(); [[ $test == close ]] && hdr=(-H "Connection: close")
        timeout 60 wrk -t1 -c"$CONNS" -d"$DURATION" "${hdr[@]}" "http://127.0.0.1:$PORT/index.html" \
            > "$WORK/wrk.txt" 2>&1 || { echo "balance: wrk failed on $model" >&2; cat "$WORK/wrk.txt" >&2; exit 1; }
        curl -s --max-time 5 "http://127.0.0.1:$PORT/herd-status" > "$WORK/status.json"
        kill "$SERVER"; wait "$SERVER" 2>/dev/null || true; SERVER=
        printf '%-10s %-9s %s  ' "$model" "$test" "$(awk '/Requests\/sec/ {print $2 " req/s"}' "$WORK/wrk.txt")"
        spread "$WORK/status.json"
    done
done
