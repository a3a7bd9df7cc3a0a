"""The models layer has no circle of calls (issue 12): from the object
files' symbol tables (nm), which file's functions each file calls; the graph
must be acyclic, and the request step, plan writer and sizing call no other
models file. Needs `make build` (build/obj)."""

import glob
import os
import subprocess

import pytest

from conftest import REPO_ROOT

OBJ = REPO_ROOT / "build" / "obj" / "models"
# models/*.o that exist for a source file still present (no stale objects)
SOURCES = {p.stem for p in (REPO_ROOT / "src" / "models").glob("*.c")}


def call_graph():
    defs, uses = {}, {}
    for o in glob.glob(str(OBJ / "*.o")):
        name = os.path.basename(o)[:-2]
        if name not in SOURCES:
            continue
        out = subprocess.run(["nm", o], capture_output=True, text=True, timeout=30,
                             check=True).stdout.splitlines()
        uses[name] = {l.split()[-1] for l in out if l.strip().startswith("U ")}
        for l in out:
            parts = l.split()
            if len(parts) == 3 and parts[1] in "TDBR":
                defs[parts[2]] = name
    return {n: {defs[s] for s in u if s in defs and defs[s] != n} for n, u in uses.items()}


def find_cycle(edges):
    state = {}

    def visit(u, path):
        state[u] = 1
        path.append(u)
        for v in sorted(edges[u]):
            if state.get(v) == 1:
                return path[path.index(v):] + [v]
            if not state.get(v):
                c = visit(v, path)
                if c:
                    return c
        path.pop()
        state[u] = 2
        return None

    for n in sorted(edges):
        if not state.get(n):
            c = visit(n, [])
            if c:
                return c
    return None


def test_models_call_graph_is_acyclic():
    if not OBJ.is_dir():
        pytest.fail("build/obj/models missing: run `make build`", pytrace=False)
    edges = call_graph()
    assert {"step", "conn", "evloop", "coro", "iterative"} <= set(edges), sorted(edges)
    cycle = find_cycle(edges)
    assert cycle is None, "a circle of calls among src/models files: " + " -> ".join(cycle)
    for leaf in ("step", "plan_write", "sizing"):
        assert not edges[leaf], f"{leaf}.c calls other models files: {sorted(edges[leaf])}"
