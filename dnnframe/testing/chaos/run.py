"""One chaos run: deploy, start the workload and the seeded faults, watch the store's
progress, wait for the work to settle after the last fault, check every invariant and
report. :func:`chaos_run` returns the report (its ``violations`` empty when all held)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import requests

from ...spec.models import SearchConfig
from ...states import ACTIVE_STATES, TrialState
from ...store import open_store
from ...store.records import TrialRecord
from .checker import (
    Findings,
    api_violations,
    check_experiment,
    flower_disagrees,
    p99,
    recovery_times,
    workers_disagree,
)
from .deploy import SERVER_KINDS, Deployment, deployment
from .faults import FaultRunner
from .rungs import RungWatch, asha_violations
from .schedule import DEFAULT_KINDS, FAULT_SHARE, format_schedule, make_schedule, overlaps
from .workload import EPOCHS, Api, Workload


@dataclass
class Report:
    seed: int
    seconds: float
    netns: bool
    store: str = "postgresql"
    faults: Counter = field(default_factory=Counter)
    overlapping: int = 0
    states: Counter = field(default_factory=Counter)
    lost: int = 0
    duplicated: int = 0
    longest_recovery: float = 0.0
    api_calls: int = 0
    api_p99_during_faults: float = 0.0
    settled_after: float = 0.0
    asha: str = "not checked"
    at_rest: str = "not checked"
    violations: list[str] = field(default_factory=list)

    def text(self) -> str:
        lines = [
            f"chaos run: seed {self.seed}, {self.seconds:.0f} s, faults over its first "
            f"{FAULT_SHARE * self.seconds:.0f} s, {self.store} store"
            f"{', hosts are network namespaces' if self.netns else ', hosts are processes'}",
            f"faults by kind: {dict(sorted(self.faults.items()))} "
            f"({self.overlapping} overlapping an earlier one)",
            f"trials by state: {dict(sorted(self.states.items()))}",
            f"lost {self.lost}, duplicated {self.duplicated}",
            f"longest recovery (a fault undone -> the store changes again): "
            f"{self.longest_recovery:.1f} s",
            f"work settled {self.settled_after:.1f} s after the last fault was undone",
            f"ASHA decisions: {self.asha}",
            f"workers at rest: {self.at_rest}",
            f"API: {self.api_calls} requests, p99 latency during faults "
            f"{self.api_p99_during_faults * 1000:.0f} ms",
            f"violations: {len(self.violations)}",
            *(f"  - {v}" for v in self.violations[:50]),
        ]
        return "\n".join(lines)


class Progress:
    """Samples (time, active trials, change cursor) of the store every half second."""

    def __init__(self, store_url: str):
        self.store = open_store(store_url)
        self.samples: list[tuple[float, int, int]] = []
        self.cursor = 0
        self.stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="chaos-progress")

    def start(self) -> Progress:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self.stopped.wait(0.5):
            try:
                counts = self.store.counts_by_state()
                changed = self.store.list_trials(since=self.cursor, limit=500)
            except Exception:
                continue  # the store is down (a fault): no sample
            self.cursor = max([t.seq for t in changed], default=self.cursor)
            active = sum(counts[s.value] for s in ACTIVE_STATES)
            self.samples.append((time.monotonic(), active, self.cursor))

    def stop(self) -> None:
        self.stopped.set()
        self._thread.join(10)
        self.store.close()


def _settled(store_url: str, ids: dict[str, str], tpe_samples: int) -> bool:
    """No trial waits or runs, and the TPE experiment has asked all its trials."""
    try:
        store = open_store(store_url)
    except Exception:
        return False  # the store is down (a fault not yet recovered from)
    try:
        for role, eid in ids.items():
            counts = store.counts_by_state(eid)
            if any(counts[s.value] for s in ACTIVE_STATES):
                return False
            if role == "tpe" and sum(counts.values()) < tpe_samples:
                return False
        return True
    except Exception:
        return False
    finally:
        store.close()


def chaos_run(
    workdir: Path,
    seed: int,
    seconds: float,
    settings: dict[str, str],
    settle_s: float = 120.0,
    kinds: tuple[str, ...] = DEFAULT_KINDS,
    use_netns: bool = True,
    gap: float = 6.0,
    store: str = "postgresql",
) -> Report:
    """Run the workload under ``seconds`` of seeded faults; then wait ``settle_s`` at most
    for every trial to end; check and report. ``gap``: mean seconds between faults;
    ``store``: ``postgresql`` or ``sqlite`` (which has no server to stop: its
    :data:`~.deploy.SERVER_KINDS` are refused)."""
    if store == "sqlite" and set(kinds) & set(SERVER_KINDS):
        raise ValueError(
            f"a SQLite store has no server: leave out {sorted(set(kinds) & set(SERVER_KINDS))}"
        )
    with deployment(workdir, settings, use_netns, "disk_full" in kinds, store) as dep:
        if not dep.netns and "link_cut" in kinds:
            print("hosts are processes (no network namespaces): no link_cut faults", flush=True)
            kinds = tuple(k for k in kinds if k != "link_cut")
        faults = make_schedule(seed, seconds, kinds, hosts=len(dep.hosts), gap=gap)
        print(format_schedule(seed, faults), flush=True)
        report = Report(
            seed, seconds, dep.netns, store, Counter(f.kind for f in faults), overlaps(faults)
        )
        api = Api(dep.base_url)
        progress = Progress(dep.store_url).start()
        t0 = time.monotonic()
        workload = Workload(api, seed, seconds)
        rung_metrics = {
            role: SearchConfig.model_validate(spec["search"]).rung_metric
            for role, spec in workload.specs.items()
            if _prunes(spec)
        }
        watch = RungWatch(
            dep.store_url,
            lambda: {
                workload.ids[role]: metric
                for role, metric in rung_metrics.items()
                if role in workload.ids
            },
        ).start()
        workload.start(t0)
        runner = FaultRunner(dep, faults, t0).start()
        try:
            runner.join(seconds + 600)
            # the last submissions may come after the last fault (a schedule that ran out
            # early): the settling bound starts once both are over
            workload.join_steps(seconds + 600)
            tpe = int(workload.specs["tpe"]["search"]["num_samples"])
            deadline = time.monotonic() + settle_s
            while not _settled(dep.store_url, workload.ids, tpe) and time.monotonic() < deadline:
                time.sleep(0.5)
            report.settled_after = time.monotonic() - runner.last_end
            problems, report.at_rest = _workers_at_rest(
                dep, api, float(settings.get("DNNFRAME_HEARTBEAT_TIMEOUT", "30"))
            )
            report.violations += problems
        finally:
            workload.stop()
            runner.undo_all()
            progress.stop()
            watch.stop()
        # the engine trains a pack's members in lockstep; a train function set by
        # DNNFRAME_TRAIN_FN trains them one after another, each judged on its own
        _check(
            report,
            dep.store_url,
            workload,
            runner,
            api,
            progress,
            watch,
            lockstep="DNNFRAME_TRAIN_FN" not in settings,
        )
        _keep(workdir, api, runner)
    return report


def _processes(dep: Deployment) -> dict[str, set[int]]:
    """Each live worker node's name -> the pids of its processes (main and children)."""
    return {
        h.worker.nodename: {h.worker.proc.pid, *h.worker.children()}
        for h in dep.hosts
        if h.worker is not None and h.worker.alive()
    }


def _flower_status(dep: Deployment) -> dict[str, bool] | None:
    with contextlib.suppress(requests.RequestException, ValueError):
        r = requests.get(dep.flower_url + "/api/workers", params={"status": "1"}, timeout=10)
        if r.status_code == 200:
            return {str(k): bool(v) for k, v in r.json().items()}
    return None


def _workers_at_rest(dep: Deployment, api: Api, heartbeat_s: float) -> tuple[list[str], str]:
    """Once a killed node has been silent past its timeout, the API's workers must be the
    processes that exist, and Flower's live workers the nodes that exist; both asked until
    they agree or three timeouts (at least Flower's 4 s heartbeat expiry) have passed.
    Returns the violations and a line for the report."""
    deadline = time.monotonic() + 3 * min(max(heartbeat_s, 4.0), 30.0) + 5
    api_problem: str | None = "no answer from /api/v1/workers"
    flower_problem: str | None = "no answer from Flower's /api/workers"
    while True:
        processes = _processes(dep)
        if api_problem is not None:
            r = api.request("GET", "/api/v1/workers")
            if r is not None and r.status_code == 200:
                api_problem = workers_disagree(r.json()["workers"], processes)
        if flower_problem is not None:
            status = _flower_status(dep)
            if status is not None:
                flower_problem = flower_disagrees(status, set(processes))
        if (api_problem is None and flower_problem is None) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    problems = [f"at rest: {p}" for p in (api_problem, flower_problem) if p]
    line = (
        f"{len(processes)} nodes, {sum(map(len, processes.values()))} processes alive; "
        f"/api/v1/workers {'agrees' if api_problem is None else 'DISAGREES'}, "
        f"Flower {'agrees' if flower_problem is None else 'DISAGREES'}"
    )
    return problems, line


def _keep(workdir: Path, api: Api, runner: FaultRunner) -> None:
    """Every request and fault window, relative to the start, for a look after the run."""
    t0 = runner.t0
    with open(workdir / "api_calls.jsonl", "w") as fh:
        for c in api.calls:
            fh.write(json.dumps({**asdict(c), "t": round(c.t - t0, 3)}) + "\n")
    with open(workdir / "faults.jsonl", "w") as fh:
        for a in runner.applied:
            fh.write(
                json.dumps(
                    {
                        "fault": asdict(a.fault),
                        "began": round(a.began - t0, 3),
                        "ended": round(a.ended - t0, 3),
                        "error": a.error,
                    }
                )
                + "\n"
            )


def _prunes(spec: dict) -> bool:
    return SearchConfig.model_validate(spec["search"]).prunes


def _decisions(trials: list[TrialRecord], watch: RungWatch) -> str:
    """The report's line on ASHA: how many decisions were checked, on how many snapshots."""
    pruned = sum(t.state is TrialState.PRUNED for t in trials)
    went_on = sum(len(t.metrics) > 1 for t in trials)
    snaps = sum(map(len, watch.snapshots.values()))
    return (
        f"{len(watch.snapshots)} experiments, {went_on} trials went past a rung, "
        f"{pruned} were pruned; checked against {snaps} snapshots of their rungs"
    )


def _check(
    report: Report,
    store_url: str,
    workload: Workload,
    runner: FaultRunner,
    api: Api,
    progress: Progress,
    watch: RungWatch,
    lockstep: bool,
) -> None:
    found = Findings()
    pruning: list[TrialRecord] = []  # the trials of experiments that prune
    try:
        store = open_store(store_url)
    except Exception as exc:
        report.violations.append(f"the store is unreachable after the run: {exc}")
        return
    try:
        for role, spec in workload.specs.items():
            if role not in workload.ids:
                found.violations.append(f"{role}: the API never accepted the experiment")
                continue
            trials = store.list_trials(workload.ids[role])
            check_experiment(role, spec, trials, EPOCHS, role == "cancelled", found)
            if _prunes(spec):
                eid = workload.ids[role]
                pruning += trials
                found.violations += [
                    f"{role}: {v}"
                    for v in asha_violations(
                        eid, spec["search"], trials, watch.snapshots.get(eid, []), lockstep
                    )
                ]
    finally:
        store.close()
    report.asha = _decisions(pruning, watch)
    found.violations += [
        f"fault {a.fault.describe().strip()}: {a.error}" for a in runner.applied if a.error
    ]
    down = [(a.began, a.ended) for a in runner.applied if a.fault.kind == "dashboard_kill"]
    found.violations += api_violations(api.calls, down)
    during = [c.latency for c in api.calls if c.status is not None and runner.active_at(c.t)]
    recoveries = recovery_times([a.ended for a in runner.applied], progress.samples)
    report.states, report.lost, report.duplicated = found.states, found.lost, found.duplicated
    report.longest_recovery = max(recoveries, default=0.0)
    report.api_calls = len(api.calls)
    report.api_p99_during_faults = p99(during)
    report.violations += found.violations
