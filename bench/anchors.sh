#!/usr/bin/env bash
# bench/anchors.sh - run herd and the anchor servers through the shared
# harness (SHARED_BENCH/anchors.sh) into one OUTDIR, then print the summary.
#
# Usage (from anywhere; build herd first so that build/herd exists):
#   bash bench/anchors.sh
#   TESTS="keepalive pipeline" REPEATS=1 DURATION=5s bash bench/anchors.sh
#   ANCHORS="h2o nginx" OUTDIR=/tmp/cmp bash bench/anchors.sh
#   ANCHORS= bash bench/anchors.sh            # herd only
#   SKIP_HERD=1 bash bench/anchors.sh         # anchors only
#
# Order: herd first (LABEL=herd, SERVER=custom with
#   CUSTOM_CMD='<repo>/build/herd serve $DOCROOT --listen 127.0.0.1:$PORT'),
# then each anchor of ANCHORS. The shared anchors.sh pins every server,
# herd included, with `taskset -c $SERVER_CPU` and every load run with
# `taskset -c $CLIENT_CPU`, and only ever uses 127.0.0.1.
#
# Environment (defaults):
#   SHARED_BENCH=<repo>/../shared/bench   the shared harness directory
#   OUTDIR=<repo>/bench/out/<YYYYmmdd-HHMMSS>   results.tsv, raw/, summary.md
#   ANCHORS="h2o lighttpd nginx fasthttp"  any of nginx h2o lighttpd lwan ref fasthttp
#   HERD_BIN=<repo>/build/herd
#   HERD_ARGS                 extra options appended to `herd serve` (e.g.
#                             "--keepalive-requests 100000000"); set
#                             HERD_LABEL too when you change them
#   HERD_LABEL=herd           label of herd's rows in results.tsv
#   SKIP_HERD=0               1: run the anchors only
#   FASTHTTP_BIN=/tmp/herd-anchors/fasthttp-static   built with `go build`
#                             from SHARED_BENCH/fasthttp (copied to
#                             /tmp/herd-anchors/fasthttp-src) when missing and
#                             go is installed; fasthttp is skipped otherwise.
#                             It runs with RUNQ_GATE=0 (a Go server waits
#                             behind its own threads, which is not foreign work).
#   TESTS REPEATS DURATION    passed through to the harness (its defaults:
#                             "keepalive close large pipeline mem", 3, 10s)
#   Everything else the harness reads (PORT, WARMUP, SERVER_CPU, CLIENT_CPU,
#   DOCROOT, WORK, QUIET_*, ...) is inherited from the environment; see
#   `bash $SHARED_BENCH/anchors.sh --help`.
#
# Exit status: 0 when every run finished, 1 when one failed or was skipped
# (the others still run and the summary is still printed).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SHARED_BENCH=${SHARED_BENCH:-$REPO/../shared/bench}
[[ -f "$SHARED_BENCH/anchors.sh" ]] || { echo "anchors: no anchors.sh in SHARED_BENCH=$SHARED_BENCH" >&2; exit 2; }
SHARED_BENCH=$(cd "$SHARED_BENCH" && pwd)
HARNESS="$SHARED_BENCH/anchors.sh"

OUTDIR=${OUTDIR:-$REPO/bench/out/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
export OUTDIR

ANCHORS=${ANCHORS-"h2o lighttpd nginx fasthttp"}
HERD_BIN=${HERD_BIN:-$REPO/build/herd}
HERD_ARGS=${HERD_ARGS:-}
HERD_LABEL=${HERD_LABEL:-herd}
SKIP_HERD=${SKIP_HERD:-0}
FASTHTTP_BIN=${FASTHTTP_BIN:-/tmp/herd-anchors/fasthttp-static}
export FASTHTTP_BIN
# pass-through knobs (exported so the harness sees them even if only set here)
for v in TESTS REPEATS DURATION; do
    if [[ -n "${!v:-}" ]]; then export "$v"; fi
done

say() { printf '[anchors %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
FAILED=()

run_harness() { # label server [VAR=value ...]
    local label=$1 server=$2; shift 2
    say "== $label (SERVER=$server) -> $OUTDIR"
    local rc=0
    env "$@" LABEL="$label" bash "$HARNESS" "$server" || rc=$?
    if (( rc != 0 )); then
        say "!! $label failed (exit status $rc)"
        FAILED+=("$label")
    fi
}

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: $(uname -srm), $(nproc) CPUs"
    echo "herd: $("$HERD_BIN" --version 2>/dev/null || echo "not built ($HERD_BIN)")"
    if rev=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null); then
        git -C "$REPO" diff --quiet HEAD 2>/dev/null || rev="$rev (dirty)"
        echo "commit: $rev"
    else
        echo "commit: none"
    fi
    echo "tests: ${TESTS:-default} repeats: ${REPEATS:-3} duration: ${DURATION:-10s}"
    echo "anchors: $ANCHORS"
} >>"$OUTDIR/meta.txt"

# ------------------------------------------------------------------ herd
if [[ "$SKIP_HERD" != 1 ]]; then
    if [[ -x "$HERD_BIN" ]]; then
        # $DOCROOT and $PORT stay literal: the harness expands them
        # (it runs `bash -c "exec $CUSTOM_CMD"` under taskset).
        run_harness "$HERD_LABEL" custom \
            CUSTOM_CMD="$(printf '%q' "$HERD_BIN") serve \$DOCROOT --listen 127.0.0.1:\$PORT${HERD_ARGS:+ $HERD_ARGS}"
    else
        say "!! $HERD_BIN is missing or not executable (build herd first, e.g. make)"
        FAILED+=("$HERD_LABEL")
    fi
fi

# ------------------------------------------------------------------ anchors
ensure_fasthttp() {
    [[ -x "$FASTHTTP_BIN" ]] && return 0
    if ! command -v go >/dev/null; then
        say "fasthttp: $FASTHTTP_BIN missing and go not installed; skipping"
        return 1
    fi
    local src=/tmp/herd-anchors/fasthttp-src
    say "fasthttp: building $FASTHTTP_BIN from $SHARED_BENCH/fasthttp"
    mkdir -p "$(dirname "$FASTHTTP_BIN")"
    rm -rf "$src" && cp -r "$SHARED_BENCH/fasthttp" "$src" && chmod -R u+w "$src"
    (cd "$src" && go build -o "$FASTHTTP_BIN" .) || { say "fasthttp: go build failed; skipping"; return 1; }
}

for a in $ANCHORS; do
    case $a in
        fasthttp)
            if ensure_fasthttp; then
                run_harness fasthttp fasthttp RUNQ_GATE="${RUNQ_GATE:-0}"
            else
                FAILED+=(fasthttp)
            fi
            ;;
        nginx|h2o|lighttpd)
            bin_var="$(echo "$a" | tr a-z A-Z)_BIN"
            bin=${!bin_var:-$a}
            if command -v "$bin" >/dev/null; then
                run_harness "$a" "$a"
            else
                say "$a: $bin not installed (see $SHARED_BENCH/install-anchors.sh); skipping"
                FAILED+=("$a")
            fi
            ;;
        *)
            run_harness "$a" "$a"
            ;;
    esac
done

# ------------------------------------------------------------------ summary
if [[ -s "$OUTDIR/results.tsv" ]]; then
    python3 "$SHARED_BENCH/summarize.py" "$OUTDIR/results.tsv" | tee "$OUTDIR/summary.md"
    say "results: $OUTDIR/results.tsv  summary: $OUTDIR/summary.md"
else
    say "no results in $OUTDIR/results.tsv"
fi
if (( ${#FAILED[@]} )); then
    say "failed or skipped: ${FAILED[*]}"
    exit 1
fi
