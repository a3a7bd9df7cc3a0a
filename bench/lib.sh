# Shell helpers the benchmark scripts share (sourced, not run):
#   . "$(dirname "$0")/lib.sh"

# A free loopback TCP port (the kernel's pick).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# CPU ticks (utime + stime) of a process and its descendants.
tree_ticks() {
    python3 - "$1" <<'EOF'
import os, sys
root = int(sys.argv[1]); par = {}; ticks = {}
for d in os.listdir("/proc"):
    if not d.isdigit(): continue
    try: st = open(f"/proc/{d}/stat").read()
    except OSError: continue
    f = st[st.rfind(")") + 2:].split()
    par[int(d)] = int(f[1]); ticks[int(d)] = int(f[11]) + int(f[12])
todo, tot = [root], 0
while todo:
    p = todo.pop(); tot += ticks.get(p, 0)
    todo += [c for c, pp in par.items() if pp == p]
print(tot)
EOF
}

# PIDS: what a script started. Sourcing this traps EXIT to kill them and
# remove $TMP (set TMP before sourcing).
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT
