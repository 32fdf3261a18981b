"""ASHA's decisions checked against the rungs the store held when each was made.

ASHA (:mod:`dnnframe.pruning.asha`) judges a trial when it reaches a rung epoch: it writes
that epoch, reads every value the experiment's trials hold at the rung (its own included)
and keeps the trial only if fewer than ``n // eta`` of those ``n`` values are better, or
``n < eta``. A PRUNED trial keeps the reason (the rung, its value, ``n``); a promotion
leaves no record but the trial's next epoch. Which values a decision saw depends on when
it read, so the check watches the experiment's trials during the run (:class:`RungWatch`,
consistent snapshots a quarter second apart) and bounds, for every decision, the values
its read must have seen (held before the trial wrote its rung, and still held when its
next step showed) and those it may have seen (held at some point in between). A decision
is a violation only when *no* set of values within those bounds gives it: legal
asynchronous outcomes (an early trial promoted with fewer than ``eta`` values, a trial
judged while another's value was on its way) never fail it.

Where a pack's members train in lockstep (the engine's ``train_pack``), the members that
reach a rung in one epoch are judged in one call, on one read: a pack's trials (the same
``result.pack.id``) pruned and kept at a rung must then agree with each other exactly (every
one kept better than every one pruned, all pruned as one of the same ``n``, fewer than
``n // eta`` of the pack better than any one kept). A train function that trains members
one after another judges each on its own read, so this part is asked for, not assumed.

A claim clears a requeued trial's curve, so a rung value can vanish and come back with
another value (training is not always bit-for-bit repeatable). Snapshots tell a trial's
runs apart by ``(attempts, started_at)``, which every claim changes; a trial whose run
changed within a decision's window may have held any value then (a wildcard, counted
whichever way favours the decision).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...metrics import is_number
from ...pruning.asha import rungs
from ...spec.models import SearchConfig
from ...states import FINISHED_STATES, TrialState
from ...store import open_store
from ...store.records import TrialRecord

#: How often the watcher reads the ASHA experiment's trials.
WATCH_INTERVAL_S = 0.25


@dataclass(frozen=True)
class Seen:
    """One trial in one snapshot: its run (a claim starts a new one and clears the curve),
    its state, and the rung metric of each epoch its curve held (None: not a number)."""

    run: tuple[int, float | None]  # (attempts, started_at)
    state: TrialState
    values: Mapping[int, float | None]


Snapshot = dict[str, Seen]


def seen(trial: TrialRecord, metric: str) -> Seen:
    values: dict[int, float | None] = {}
    for m in trial.metrics:
        v = m.get(metric)
        values[int(m["epoch"])] = float(v) if is_number(v) else None
    return Seen((trial.attempts, trial.started_at), trial.state, values)


@dataclass
class _Window:
    """What one decision's read held at the rung, besides the trial's own value: values it
    must have held, values it may have held, and how many trials may have held anything."""

    certain: list[float] = field(default_factory=list)
    maybe: list[float] = field(default_factory=list)
    wildcards: int = 0


def _window(snaps: Sequence[Snapshot], trial: str, rung: int, b: int, g: int) -> _Window:
    """The values at ``rung`` that a read made after snapshot ``b`` (-1: before any) and
    before snapshot ``g`` could have seen, from every trial but ``trial``."""
    w = _Window()
    others = {tid for s in snaps[max(b, 0) : g + 1] for tid in s} - {trial}
    for tid in sorted(others):
        obs = [s.get(tid) for s in snaps[max(b, 0) : g + 1]]
        present = [o for o in obs if o is not None]
        runs = list(dict.fromkeys(o.run for o in present))
        first_known = b >= 0 and obs[0] is not None
        # an unwatched run (cleared before a snapshot showed it) may have held any value
        if len(runs) > 1 or (not first_known and runs and runs[0][0] > 1):
            w.wildcards += 1
            continue
        at_b = obs[0] if first_known else None
        if at_b is not None and is_number(at_b.values.get(rung)) and len(present) == len(obs):
            w.certain.append(at_b.values[rung])  # type: ignore[arg-type]
            continue
        later = {o.values[rung] for o in present if is_number(o.values.get(rung))}
        w.maybe += sorted(later)  # type: ignore[arg-type]
    return w


def _better(v: float, x: float, mode: str) -> bool:
    return v > x if mode == "max" else v < x


def may_promote(x: float, w: _Window, eta: int, mode: str) -> bool:
    """Whether some read within ``w`` keeps a trial of value ``x``: ``n`` values (its own
    among them) of which fewer than ``n // eta`` are better, or ``n < eta``. The rule is
    written out here, not imported, so the checker does not share a bug with the pruner."""
    base = 1 + len(w.certain)
    better = sum(_better(v, x, mode) for v in w.certain)
    b_maybe = sum(_better(v, x, mode) for v in w.maybe)
    free = len(w.maybe) - b_maybe + w.wildcards  # values that may count as not better
    return any(
        base + i + j < eta or better + i < (base + i + j) // eta
        for i in range(b_maybe + 1)
        for j in range(free + 1)
    )


def may_prune(x: float, n: int, w: _Window, eta: int, mode: str) -> bool:
    """Whether some read of exactly ``n`` values within ``w`` (its own among them) prunes
    a trial of value ``x``: at least ``eta`` values, ``n // eta`` or more of them better."""
    base = 1 + len(w.certain)
    extra = n - base
    if n < eta or extra < 0 or extra > len(w.maybe) + w.wildcards:
        return False
    better = sum(_better(v, x, mode) for v in w.certain)
    better += min(extra, sum(_better(v, x, mode) for v in w.maybe) + w.wildcards)
    return better >= n // eta


def _first(
    snaps: Sequence[Snapshot],
    tid: str,
    test: Callable[[Seen], bool],
    run: tuple[int, float | None] | None = None,
) -> int | None:
    """The first snapshot where ``tid`` (in ``run``, if given) passes ``test``."""
    return next(
        (
            i
            for i, s in enumerate(snaps)
            if tid in s and (run is None or s[tid].run == run) and test(s[tid])
        ),
        None,
    )


def asha_violations(
    experiment_id: str,
    search: dict[str, Any],
    trials: list[TrialRecord],
    snapshots: Sequence[Snapshot],
    lockstep: bool = False,
) -> list[str]:
    """What is wrong with the ASHA decisions of one experiment: ``trials`` as stored at the
    end (every field), ``snapshots`` of them taken while it ran, oldest first (the final
    state is added as the last); ``lockstep``: a pack's members were judged together at
    each epoch. Trials shared with another experiment are left out (they are pruned only if
    every experiment prunes)."""
    rule = SearchConfig.model_validate(search)
    metric, mode, eta = rule.rung_metric, rule.objective.mode, rule.eta
    own = [t for t in trials if list(t.experiment_ids) == [experiment_id]]
    snaps = [*snapshots, {t.id: seen(t, metric) for t in own}]
    out: list[str] = []
    for t in own:
        at = rungs(rule.min_epochs, int(t.config["training"]["max_epochs"]), eta)
        if t.state is TrialState.PRUNED:
            problem = _pruned(t, at, metric, eta, mode, experiment_id, snaps)
            if problem:
                out.append(f"trial {t.id}: {problem}")
        for r in at:
            out += [f"trial {t.id}: {p}" for p in _promotions(t.id, r, eta, mode, snaps)]
    if lockstep:
        out += _packs(own, rule.min_epochs, eta, mode, metric)
    return out


def _packs(own: list[TrialRecord], min_epochs: int, eta: int, mode: str, metric: str) -> list[str]:
    """The decisions of one call (a pack in lockstep, one rung) against each other."""
    groups: dict[tuple[str, int], list[tuple[TrialRecord, float]]] = {}
    for t in own:
        pack = ((t.result or {}).get("pack") or {}).get("id")
        values = seen(t, metric).values
        for r in rungs(min_epochs, int(t.config["training"]["max_epochs"]), eta):
            x = values.get(r)
            if pack is not None and x is not None:
                groups.setdefault((str(pack), r), []).append((t, x))
    out = []
    for (pack, r), members in sorted(groups.items()):
        pruned = [
            (t, x)
            for t, x in members
            if t.state is TrialState.PRUNED
            and ((t.result or {}).get("pruned") or {}).get("epoch") == r
        ]
        kept = [(t, x) for t, x in members if any(m["epoch"] > r for m in t.metrics)]
        ns = {(t.result or {})["pruned"].get("trials_at_rung") for t, _ in pruned}
        where = f"pack {pack} at rung {r}"
        if len(ns) > 1:
            out.append(
                f"{where}: pruned in one call as one of different counts {sorted(ns, key=str)}"
            )
        for k, x in kept:
            for p, y in pruned:
                if not _better(x, y, mode):
                    out.append(
                        f"{where}: trial {k.id} kept with {x}, trial {p.id} pruned "
                        f"with {y} in the same call"
                    )
        if len(ns) == 1:
            (n,) = ns
            if len(members) > n:
                out.append(
                    f"{where}: {len(members)} members at the rung, but pruned as one of {n} values"
                )
            for k, x in kept:
                ahead = sum(_better(y, x, mode) for _, y in members)
                if n >= eta and ahead >= n // eta:
                    out.append(
                        f"{where}: trial {k.id} kept with {x}, though {ahead} of the "
                        f"pack were better of {n} values"
                    )
    return out


def _pruned(
    t: TrialRecord,
    at: list[int],
    metric: str,
    eta: int,
    mode: str,
    experiment_id: str,
    snaps: Sequence[Snapshot],
) -> str | None:
    reason = (t.result or {}).get("pruned")
    if not isinstance(reason, dict):
        return "PRUNED without the pruner's reason"
    r, n, x = reason.get("epoch"), reason.get("trials_at_rung"), reason.get("value")
    if (
        r not in at
        or reason.get("metric") != metric
        or reason.get("eta") != eta
        or reason.get("experiment_id") != experiment_id
        or not isinstance(n, int)
        or not is_number(x)
    ):
        return f"pruned for a reason that is not this experiment's rung rule: {reason}"
    epochs = [int(m["epoch"]) for m in t.metrics]
    if epochs != list(range(1, r + 1)):
        return f"pruned at rung {r}, but its curve holds epochs {epochs}"
    stored = snaps[-1][t.id].values.get(r)
    if stored is None or not math.isclose(stored, x, rel_tol=1e-9, abs_tol=0.0):
        return f"pruned at rung {r} for {metric} {x}, but its curve holds {stored} there"
    run = snaps[-1][t.id].run
    f = _first(snaps, t.id, lambda s: r in s.values, run)
    g = _first(snaps, t.id, lambda s: s.state is TrialState.PRUNED)
    assert f is not None and g is not None  # the final snapshot holds both
    w = _window(snaps, t.id, r, f - 1, g)
    if not may_prune(x, n, w, eta, mode):
        return (
            f"pruned at rung {r} ({metric} {x}) as one of {n} values, but the rung held "
            f"{sorted(w.certain)} for certain and maybe {sorted(w.maybe)} "
            f"(+{w.wildcards} unknown) then: no such read prunes it"
        )
    return None


def _promotions(tid: str, r: int, eta: int, mode: str, snaps: Sequence[Snapshot]) -> list[str]:
    """Each run of ``tid`` that went past rung ``r`` must have held a value there, and some
    read between its rung and its next epoch must keep it."""
    out = []
    runs = dict.fromkeys(s[tid].run for s in snaps if tid in s)
    for run in runs:
        g = _first(snaps, tid, lambda s: any(e > r for e in s.values), run)
        if g is None:
            continue  # this run never showed an epoch past the rung
        if r not in snaps[g][tid].values:
            out.append(
                f"went past rung {r} without a value stored there (epochs "
                f"{sorted(snaps[g][tid].values)})"
            )
            continue
        x = snaps[g][tid].values[r]
        if x is None:
            continue  # nothing to compare: ASHA lets it go on
        f = _first(snaps, tid, lambda s: r in s.values, run)
        assert f is not None  # snapshot g holds it
        w = _window(snaps, tid, r, f - 1, g)
        if not may_promote(x, w, eta, mode):
            out.append(
                f"promoted past rung {r} with {x}, but the rung held "
                f"{sorted(w.certain)} for certain and maybe {sorted(w.maybe)} "
                f"(+{w.wildcards} unknown) then: no such read keeps it"
            )
    return out


class RungWatch:
    """Snapshots of each ASHA experiment's trials every :data:`WATCH_INTERVAL_S`, once
    ``experiments()`` names it (experiment id -> its rung metric; the workload learns ids
    when the API accepts them), until a snapshot shows every trial of it finished (nothing
    changes after that). Each snapshot is one read of the store, so it is consistent."""

    def __init__(self, store_url: str, experiments: Callable[[], dict[str, str]]):
        self.store = open_store(store_url)
        self.experiments = experiments
        self.snapshots: dict[str, list[Snapshot]] = {}
        self._done: set[str] = set()
        self.stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="chaos-rungs")

    def start(self) -> RungWatch:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self.stopped.wait(WATCH_INTERVAL_S):
            for eid, metric in self.experiments().items():
                if eid not in self._done:
                    self._snap(eid, metric)

    def _snap(self, eid: str, metric: str) -> None:
        try:
            trials = self.store.list_trials(eid, fields=("metrics",))
            # an adaptive search may not have made all its trials yet
            made = self.store.get_experiment(eid).n_trials
        except Exception:
            return  # the store is down (a fault): no snapshot
        self.snapshots.setdefault(eid, []).append({t.id: seen(t, metric) for t in trials})
        if len(trials) >= made and all(t.state in FINISHED_STATES for t in trials):
            self._done.add(eid)

    def stop(self) -> None:
        self.stopped.set()
        self._thread.join(10)
        self.store.close()
