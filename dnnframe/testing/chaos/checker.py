"""The invariants a chaos run must keep whatever its faults were, as pure functions of what
the run recorded (trials read from the store, API calls, fault windows, progress samples),
so each can be tested on hand-made records.

- every submitted trial is in exactly one final state, none lost, none made twice;
- every COMPLETE trial has every epoch of its curve, each once (one owner wrote it);
- no trial is still QUEUED or RUNNING a bound after the last fault was undone;
- no TPE configuration was asked twice;
- the API answered every request with 2xx, 4xx or a 503 with a reason, within a bound
  (no answer at all only while the dashboard itself was down);
- ASHA's decisions agree with the rungs the store held (:mod:`.rungs`);
- at rest, ``/api/v1/workers`` calls alive exactly the worker nodes and processes that
  exist, and Flower exactly the nodes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ...executors.liveness import NODE_ROLE
from ...owners import split_owner
from ...states import FINISHED_STATES, TrialState
from ...store.records import TrialRecord
from .workload import Call

#: After the dashboard is back, this long is still allowed for a request already refused.
DOWN_GRACE_S = 1.0


@dataclass
class Findings:
    violations: list[str] = field(default_factory=list)
    states: Counter = field(default_factory=Counter)
    lost: int = 0
    duplicated: int = 0


def expected_trials(spec: dict[str, Any]) -> int:
    """How many trials a spec of the workload makes (grid product x seeds, or samples)."""
    search = spec["search"]
    if search.get("method") in ("tpe", "asha"):
        return int(search["num_samples"])
    n = int(search.get("seeds", 1))
    for section in ("model", "training"):
        for value in spec[section].values():
            if isinstance(value, dict) and "grid" in value:
                n *= len(value["grid"])
    return n


def _epochs(trial: TrialRecord) -> list[int]:
    return [int(m["epoch"]) for m in trial.metrics]


def check_curve(trial: TrialRecord, epochs: int) -> tuple[str | None, bool]:
    """(what is wrong with the trial's curve or None, whether an epoch was written twice)."""
    seen = _epochs(trial)
    doubled = len(seen) != len(set(seen))
    if trial.state is TrialState.COMPLETE and sorted(set(seen)) != list(range(1, epochs + 1)):
        return f"trial {trial.id} is COMPLETE with epochs {seen}, not 1..{epochs}", doubled
    if doubled:
        return f"trial {trial.id} ({trial.state.value}) has epochs written twice: {seen}", True
    return None, False


def check_experiment(
    role: str,
    spec: dict[str, Any],
    trials: list[TrialRecord],
    epochs: int,
    cancelled_for_good: bool,
    found: Findings,
) -> None:
    """Add what is wrong with one experiment's trials to ``found``."""
    want = expected_trials(spec)
    ids = Counter(t.id for t in trials)
    found.duplicated += sum(n - 1 for n in ids.values())
    if len(ids) < want:
        found.lost += want - len(ids)
        found.violations.append(f"{role}: {len(ids)} trials stored, {want} submitted")
    elif len(ids) > want:
        found.duplicated += len(ids) - want
        found.violations.append(f"{role}: {len(ids)} trials stored, only {want} submitted")
    for t in trials:
        found.states[t.state.value] += 1
        if t.state not in FINISHED_STATES:
            found.violations.append(f"{role}: trial {t.id} still {t.state.value}")
        elif t.state is TrialState.CANCELLED and not cancelled_for_good:
            found.violations.append(
                f"{role}: trial {t.id} CANCELLED though its experiment "
                "was resubmitted or never cancelled"
            )
        problem, doubled = check_curve(t, epochs)
        found.duplicated += doubled
        if problem:
            found.violations.append(f"{role}: {problem}")
    if spec["search"].get("method") == "tpe":
        asked = Counter(repr(sorted(t.config["training"].items())) for t in trials)
        twice = [c for c, n in asked.items() if n > 1]
        if twice:
            found.duplicated += len(twice)
            found.violations.append(f"{role}: TPE asked {len(twice)} configurations twice")


def api_violations(calls: Iterable[Call], down: list[tuple[float, float]]) -> list[str]:
    """Requests answered wrongly: a 5xx other than a reasoned 503, a hang, or no answer
    while the dashboard was up (``down``: its (killed, answering again) windows)."""
    bad = []
    for c in calls:
        if c.status is not None and (c.error or (c.status >= 500 and c.status != 503)):
            bad.append(f"{c.method} {c.path}: {c.status} {c.error or ''}".strip())
        elif c.status is None and "Timeout" in (c.error or ""):
            bad.append(f"{c.method} {c.path}: no answer within the bound ({c.error})")
        elif c.status is None and not any(
            a <= c.t + c.latency and c.t <= b + DOWN_GRACE_S for a, b in down
        ):
            bad.append(f"{c.method} {c.path}: no answer while the dashboard ran ({c.error})")
    return bad


def p99(values: list[float]) -> float:
    """The 99th percentile (nearest rank); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, -(-99 * len(ordered) // 100) - 1))]


def recovery_times(ends: list[float], samples: list[tuple[float, int, int]]) -> list[float]:
    """For each fault's undo time, the seconds until the store next showed a trial change
    (``samples``: (time, trials active, change cursor)); 0 when nothing was left to do."""
    out = []
    for end in ends:
        before = [s for s in samples if s[0] <= end]
        if not before or before[-1][1] == 0:
            out.append(0.0)
            continue
        cursor = before[-1][2]
        later = [s[0] for s in samples if s[0] > end and s[2] > cursor]
        out.append(later[0] - end if later else float("inf"))
    return out


def workers_disagree(rows: list[dict[str, Any]], processes: dict[str, set[int]]) -> str | None:
    """How ``/api/v1/workers``'s rows disagree with the worker nodes that exist
    (``processes``: each node's name -> the pids of its processes) (None when they agree):
    every existing node alive, no other node alive, and no process alive that is not one of
    those pids."""
    nodes = set(processes)
    alive = [r for r in rows if r.get("alive")]
    alive_nodes = {r["name"] for r in alive if (r.get("info") or {}).get("role") == NODE_ROLE}
    strays, ghosts = [], []
    for r in alive:
        node, pid = split_owner(r["name"])
        if node not in nodes:
            strays.append(r["name"])
        elif pid is not None and pid not in processes[node]:
            ghosts.append(r["name"])
    if alive_nodes == nodes and not strays and not ghosts:
        return None
    return (
        f"/api/v1/workers calls alive nodes {sorted(alive_nodes)}, processes of gone "
        f"nodes {sorted(strays)} and processes that do not exist {sorted(ghosts)}; the "
        f"nodes that exist are {sorted(nodes)} with processes "
        f"{ {n: sorted(p) for n, p in sorted(processes.items())} }"
    )


def flower_disagrees(status: dict[str, bool], nodes: set[str]) -> str | None:
    """How Flower's ``/api/workers?status=1`` (node -> alive) disagrees with the worker
    nodes that exist (None when it agrees): those alive, every other one it knows not."""
    alive = {name for name, up in status.items() if up}
    if alive == nodes:
        return None
    return (
        f"Flower calls alive {sorted(alive)} (of {sorted(status)}); the nodes that "
        f"exist are {sorted(nodes)}"
    )
