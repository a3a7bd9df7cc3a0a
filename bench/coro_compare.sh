#!/bin/sh
# coro vs threads vs reuseport, one kernel thread / worker each. The three
# servers run at once on CPU 0 (an idle one costs nothing) and `herd load`
# on CPU 1; for each of keep-alive / a connection per request x 1, 50, 500
# connections the models take turns, ROUNDS times, DUR each (the machine
# is shared: turns spread the noise over every model alike).
#   sh bench/coro_compare.sh [DUR] [ROUNDS]
set -eu
DUR=${1:-2s}
ROUNDS=${2:-2}
HERD=${HERD_BIN:-build/herd}
pids=""
port_of() { case $1 in coro) echo 18790;; threads) echo 18791;; reuseport) echo 18792;; esac; }
for model in coro threads reuseport; do
  case $model in
    coro) args="--model coro --threads 1";;
    *) args="--model $model --workers 1";;
  esac
  taskset -c 0 $HERD serve www --listen 127.0.0.1:$(port_of $model) $args 2>/dev/null &
  pids="$pids $!"
done
trap 'kill $pids 2>/dev/null || true' EXIT
sleep 1
for ka in keepalive close; do
  for c in 1 50 500; do
    r=0
    while [ $r -lt $ROUNDS ]; do
      r=$((r + 1))
      for model in coro threads reuseport; do
        extra=""
        [ $ka = close ] && extra="--no-keepalive"
        out=$($HERD load http://127.0.0.1:$(port_of $model)/index.html -c $c -t 1 -d $DUR \
              --cpus 1 $extra --latency 2>&1 || true)
        rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
        p99=$(echo "$out" | awk '$1 == "99%" {print $2}' | head -1)
        errs=$(echo "$out" | grep -iE "error|timeout" | head -1)
        echo "$ka c$c round$r $model req/s=${rps:-FAIL} p99=${p99:--} ${errs}"
      done
    done
  done
done
