"""--worker-cpus auto (nginx's worker_cpu_affinity auto): each worker on
its own CPU, and on reuseport and uring a new connection steered to the
worker on the CPU that took its SYN (SO_INCOMING_CPU on each worker's
socket). Over loopback the SYN is taken on the connecting thread's CPU, so
a client thread pinned to one CPU reaches only that CPU's worker; without
the steering the reuseport hash spreads it over both."""

import json
import os
import signal
import urllib.request

import pytest

from conftest import HERD_ARGS, run_herd
from herdtest import wait_for

CPUS = sorted(os.sched_getaffinity(0))
STATUS = "/herd-status"

pytestmark = [
    pytest.mark.skipif("--model" in HERD_ARGS, reason="sets --model itself"),
    pytest.mark.skipif(len(CPUS) < 2, reason="needs 2 CPUs"),
]


def status(srv):
    with urllib.request.urlopen(f"http://127.0.0.1:{srv.port}{STATUS}", timeout=10) as r:
        return json.loads(r.read())


def cpus_of(pid):
    """The CPUs pid may run on (Cpus_allowed_list of /proc/PID/status)."""
    with open(f"/proc/{pid}/status") as f:
        line = next(l for l in f if l.startswith("Cpus_allowed_list:"))
    cpus = set()
    for part in line.split(":", 1)[1].strip().split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def workers(srv, n):
    """{pid: slot} of the n running workers, once all show on the status page."""
    got = {}

    def ready():
        got.clear()
        got.update({s["pid"]: s for s in status(srv)["slots"] if s["state"] != "stopping"})
        return len(got) == n
    wait_for(ready, timeout=5, what=f"{n} workers on the status page")
    return dict(got)


@pytest.mark.parametrize("model", ["reuseport", "prefork", "dispatch", "uring"])
def test_each_worker_runs_on_its_own_cpu(server, model):
    srv = server("--model", model, "--workers", "2", "--worker-cpus", "auto",
                 "--status-path", STATUS)
    pids = workers(srv, 2)
    # The master lists a worker from its fork on; the worker pins itself
    # first thing, which a loaded machine may not have run yet.
    wait_for(lambda: sorted(frozenset(cpus_of(p)) for p in pids) == [{CPUS[0]}, {CPUS[1]}],
             timeout=5, what="each worker pinned to its own CPU")
    assert cpus_of(srv.pid) == set(CPUS)   # the master is not pinned
    assert srv.get("/").status == 200


def test_without_it_workers_may_run_anywhere(server):
    srv = server("--model", "reuseport", "--workers", "2", "--status-path", STATUS)
    for pid in workers(srv, 2):
        assert cpus_of(pid) == set(CPUS)


def test_workers_of_several_threads_are_not_pinned(server):
    srv = server("--model", "threads", "--threads", "2", "--worker-cpus", "auto",
                 "--status-path", STATUS)
    wait_for(lambda: "workers of 2 threads are not pinned" in srv.stderr_text(),
             timeout=5, what="the notice")
    for pid in workers(srv, 1):
        assert cpus_of(pid) == set(CPUS)


def accepted_by_worker(srv, cpu, n):
    """Opens n connections (a GET each) from this thread pinned to cpu:
    {worker pid: connections it accepted meanwhile}."""
    pids = workers(srv, 2)
    before = {s["pid"]: s["accepted"] for s in status(srv)["slots"]}
    os.sched_setaffinity(0, {cpu})   # this thread only
    try:
        for _ in range(n):
            assert srv.get("/").status == 200
    finally:
        os.sched_setaffinity(0, set(CPUS))
    after = {s["pid"]: s["accepted"] for s in status(srv)["slots"]}
    # the status reads run unpinned: each may land on either worker
    return {p: after[p] - before[p] for p in pids}


def accepted_from(srv, cpu, n):
    """accepted_by_worker keyed by the CPU each (pinned) worker runs on."""
    return {min(cpus_of(p)): k for p, k in accepted_by_worker(srv, cpu, n).items()}


@pytest.mark.parametrize("model", ["reuseport", "uring"])
def test_connections_go_to_the_worker_on_the_cpu_that_took_the_syn(server, model):
    srv = server("--model", model, "--workers", "2", "--worker-cpus", "auto",
                 "--status-path", STATUS)
    for cpu, other in ((CPUS[0], CPUS[1]), (CPUS[1], CPUS[0])):
        got = accepted_from(srv, cpu, 40)
        assert got[cpu] >= 40 and got[other] <= 1, got


def test_without_steering_the_hash_spreads_them(server):
    """The control: the same client without --worker-cpus reaches both."""
    srv = server("--model", "reuseport", "--workers", "2", "--status-path", STATUS)
    got = accepted_by_worker(srv, CPUS[0], 40)
    assert all(k >= 3 for k in got.values()), got


@pytest.mark.parametrize("value", ["", "3", "Auto", "auto,0", "none x"])
def test_a_bad_value_is_refused(value):
    r = run_herd(["serve", ".", "--listen", "127.0.0.1:0", "--worker-cpus", value],
                 extra=False)
    assert r.returncode != 0
    assert "worker-cpus" in r.stderr, r.stderr


@pytest.mark.parametrize("value", ["auto", "none"])
def test_config_file_line(tmp_path, site, value):
    cfg = tmp_path / "herd.conf"
    cfg.write_text(f"listen = 127.0.0.1:0\ndocroot = {site.root}\nworker-cpus = {value}\n")
    r = run_herd(["serve", "--check-config", str(cfg)], extra=False)
    assert r.returncode == 0, r.stderr
    cfg.write_text(f"listen = 127.0.0.1:0\ndocroot = {site.root}\nworker-cpus = some\n")
    r = run_herd(["serve", "--check-config", str(cfg)], extra=False)
    assert r.returncode != 0 and "worker-cpus" in r.stderr, r.stderr


def test_a_reload_that_turns_it_off_leaves_no_steering(server, site, tmp_path):
    """worker i keeps socket i across a reload: the new generation must
    clear what the old one set, or connections would stay steered to
    workers that no longer run on those CPUs."""
    cfg = tmp_path / "herd.conf"
    base = f"docroot = {site.root}\nmodel = reuseport\nworkers = 2\nstatus-path = {STATUS}\n"
    cfg.write_text(base + "worker-cpus = auto\n")
    srv = server("--config", cfg, docroot=None)
    got = accepted_from(srv, CPUS[0], 40)
    assert got[CPUS[0]] >= 40 and got[CPUS[1]] <= 1, got
    old = set(workers(srv, 2))
    cfg.write_text(base + "worker-cpus = none\n")
    srv.send_signal(signal.SIGHUP)
    wait_for(lambda: not old & {s["pid"] for s in status(srv)["slots"]},
             timeout=10, what="the old generation to go")
    assert all(cpus_of(p) == set(CPUS) for p in workers(srv, 2))
    got = accepted_by_worker(srv, CPUS[0], 40)
    assert all(k >= 3 for k in got.values()), got
