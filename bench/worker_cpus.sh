#!/bin/bash
# --worker-cpus auto against unpinned workers: 2 reuseport workers, wrk
# with 2 threads on both CPUs (-t2 -c50), keep-alive off and on, the two
# servers alternated. With it, each worker runs on its own CPU and takes
# the connections whose SYN that CPU handled (SO_INCOMING_CPU): over
# loopback, the connections of the wrk thread that runs there.
#
#   bash bench/worker_cpus.sh     # ROUNDS=3 DURATION=8s MODEL=reuseport
#
# Prints one TSV line per run: setting, test, req/s, server CPU µs per
# request (the whole tree: utime + stime from /proc), wrk CPU µs per
# request, and the share of connections the busier worker accepted.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-8s}
MODEL=${MODEL:-reuseport}
HERD=${HERD:-build/herd}
command -v wrk >/dev/null || { echo "wrk not installed (apt-get install wrk)" >&2; exit 1; }
[ "$(nproc)" -ge 2 ] || { echo "needs 2 CPUs" >&2; exit 1; }
TMP=$(mktemp -d /tmp/herd-worker-cpus.XXXXXX)
. "$(dirname "$0")/lib.sh" # free_port, tree_ticks, PIDS killed at exit
mkdir -p "$TMP/www"
printf '%064d' 0 > "$TMP/www/index.html"

start() { # label args...
    local port
    port=$(free_port)
    "$HERD" serve "$TMP/www" --listen "127.0.0.1:$port" --model "$MODEL" --workers 2 \
        --keepalive-requests 100000000 --status-path /herd-status "${@:2}" 2>"$TMP/$1.log" &
    PIDS+=("$!")
    eval "PORT_$1=$port PID_$1=$!"
    for _ in $(seq 100); do
        curl -sf -o /dev/null "http://127.0.0.1:$port/index.html" && return 0
        sleep 0.05
    done
    echo "herd ($1) does not answer" >&2
    exit 1
}
start plain
start pinned --worker-cpus auto

HZ=$(getconf CLK_TCK)
run() { # label test
    local port pid hdr=()
    eval "port=\$PORT_$1 pid=\$PID_$1"
    [ "$2" = close ] && hdr=(-H 'Connection: close')
    wrk -t2 -c50 -d2s "${hdr[@]}" "http://127.0.0.1:$port/index.html" >/dev/null
    local s0 s1 a0 a1 out
    a0=$(curl -s "http://127.0.0.1:$port/herd-status")
    s0=$(tree_ticks "$pid")
    local TIMEFORMAT='WRKCPU %U %S' # bash's time: wrk's user and system seconds
    out=$( { time wrk -t2 -c50 -d"$DURATION" "${hdr[@]}" \
             "http://127.0.0.1:$port/index.html"; } 2>&1)
    s1=$(tree_ticks "$pid")
    a1=$(curl -s "http://127.0.0.1:$port/herd-status")
    if echo "$out" | grep -q "Non-2xx\|Socket errors"; then
        echo "$1 $2: errors during the run:" >&2
        echo "$out" >&2
        exit 1
    fi
    python3 - "$1" "$2" "$DURATION" "$((s1 - s0))" "$HZ" "$out" "$a0" "$a1" <<'PY'
import json, sys
label, test, dur, st, hz, out, a0, a1 = sys.argv[1:]
reqs = int(next(l.split()[0] for l in out.splitlines() if "requests in" in l))
u, s = next(l.split()[1:] for l in out.splitlines() if l.startswith("WRKCPU"))
acc = lambda a: {x["pid"]: x["accepted"] for x in json.loads(a)["slots"]}
b, e = acc(a0), acc(a1)
got = [e[p] - b.get(p, 0) for p in e]
share = max(got) / max(1, sum(got))
print(f"{label}\t{test}\t{reqs / float(dur.rstrip('s')):.0f}\t{int(st) / int(hz) * 1e6 / reqs:.2f}"
      f"\t{(float(u) + float(s)) * 1e6 / reqs:.2f}\t{share:.2f}")
PY
}

printf "setting\ttest\treq/s\tserver_cpu_us_per_req\twrk_cpu_us_per_req\tbusier_worker_share\n"
for _ in $(seq "$ROUNDS"); do
    for t in close keepalive; do
        run plain "$t"
        run pinned "$t"
    done
done
