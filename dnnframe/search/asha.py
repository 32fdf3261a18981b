"""Asynchronous successive halving (ASHA; Li et al., MLSys 2020), decided by store queries.

Rungs sit at ``min_epochs * eta**k`` epochs, below ``max_epochs`` (each trial's
``training.max_epochs``). When a trial reaches a rung, the runner asks the store for the
values every trial of the experiment reported at that epoch (its own included) and keeps
the trial only if it is in the top ``1/eta`` of them. Promotion never waits for a rung to
fill: with fewer than ``eta`` values at a rung the trial goes on, as in the paper's
asynchronous rule, so the first trials always continue. This is the stopping form of ASHA
(as in Ray Tune and Optuna's SuccessiveHalvingPruner): a trial is judged once per rung, when
it gets there, and a pruned trial is never resumed. There is no coordinator, so the rule is
the same in a local process pool, on Celery workers and inside a pack (where members that
reach a rung in the same epoch are judged against each other at once).
"""

from __future__ import annotations

import logging
import math
import weakref
from dataclasses import dataclass
from typing import Any

from ..exceptions import NotFoundError, StoreError
from ..spec.models import SearchConfig
from ..store.base import ResultStore

log = logging.getLogger(__name__)


def rungs(min_epochs: int, max_epochs: int, eta: int) -> list[int]:
    """The rung epochs ``min_epochs * eta**k`` that lie below ``max_epochs``."""
    out, epoch = [], min_epochs
    while epoch < max_epochs:
        out.append(epoch)
        epoch *= eta
    return out


def promoted(value: float, values: list[float], eta: int, mode: str) -> bool:
    """True if ``value`` is in the top ``len(values) // eta`` of ``values`` (better first),
    or ``values`` has fewer than ``eta`` entries. Ties count for the trial."""
    if len(values) < eta:
        return True
    better = sum(1 for v in values if (v > value if mode == "max" else v < value))
    return better < len(values) // eta


@dataclass(frozen=True)
class AshaRule:
    """ASHA's settings of one experiment."""

    experiment_id: str
    metric: str
    mode: str
    min_epochs: int
    eta: int

    @classmethod
    def of(cls, experiment_id: str, search: SearchConfig) -> AshaRule | None:
        """The rule of an experiment's search settings, or None when it does not prune."""
        if not search.prunes:
            return None
        return cls(experiment_id, search.rung_metric, search.objective.mode, search.min_epochs,
                   search.eta)


class Pruner:
    """The ASHA decisions of one pack: which members to stop at a rung epoch."""

    def __init__(self, store: ResultStore, rules: dict[str, list[AshaRule]],
                 max_epochs: dict[str, int]):
        self.store, self.rules, self.max_epochs = store, rules, max_epochs

    @classmethod
    def for_trials(cls, store: ResultStore, trials: dict[str, tuple[list[str], int]]) -> Pruner:
        """A pruner for ``trials`` (id -> (experiment ids, training.max_epochs)).

        A trial is pruned only when every experiment it belongs to prunes: a trial shared
        with a grid sweep must still train in full. Unreadable experiments mean no pruning.
        """
        by_experiment: dict[str, AshaRule | None] = {}
        rules: dict[str, list[AshaRule]] = {}
        for tid, (experiment_ids, _) in trials.items():
            for e in experiment_ids:
                if e not in by_experiment:
                    by_experiment[e] = _rule(store, e)
            found = [by_experiment[e] for e in experiment_ids]
            if found and all(r is not None for r in found):
                rules[tid] = [r for r in found if r is not None]
        return cls(store, rules, {tid: r for tid, (_, r) in trials.items()})

    @property
    def active(self) -> bool:
        """True when some member may be pruned."""
        return bool(self.rules)

    def check(self, epoch: int, metrics: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Members of ``metrics`` (id -> this epoch's metrics, already stored) to prune now,
        each with a note of the decision (epoch, metric, value, rank, values at the rung)."""
        pruned: dict[str, dict[str, Any]] = {}
        cache: dict[tuple[str, str], list[float]] = {}
        for tid, m in metrics.items():
            notes = []
            for rule in self.rules.get(tid, []):
                if epoch not in rungs(rule.min_epochs, self.max_epochs[tid], rule.eta):
                    break
                value = m.get(rule.metric)
                if not isinstance(value, (int, float)) or not math.isfinite(value):
                    break  # nothing to compare: the trial goes on
                key = (rule.experiment_id, rule.metric)
                if key not in cache:
                    cache[key] = self.store.rung_values(rule.experiment_id, epoch, rule.metric)
                values = cache[key]
                if promoted(float(value), values, rule.eta, rule.mode):
                    break
                notes.append({"experiment_id": rule.experiment_id, "epoch": epoch,
                              "metric": rule.metric, "value": float(value),
                              "trials_at_rung": len(values), "eta": rule.eta})
            else:
                if notes:
                    pruned[tid] = notes[0]
        return pruned


# A submitted experiment's id is a hash of its spec, so its rule never changes: every pack
# of a sweep asked the store again (a read that also counts its trials by state). Kept per
# store object (a worker keeps one), forgotten with it.
_RULES: weakref.WeakKeyDictionary[ResultStore, dict[str, AshaRule | None]] = \
    weakref.WeakKeyDictionary()


def _rule(store: ResultStore, experiment_id: str) -> AshaRule | None:
    known = _RULES.setdefault(store, {})
    if experiment_id in known:
        return known[experiment_id]
    try:
        spec = store.get_experiment(experiment_id).spec
        rule = AshaRule.of(experiment_id, SearchConfig.model_validate(spec.get("search", {})))
    except (NotFoundError, StoreError, ValueError):
        log.warning("experiment %s: cannot read its search settings; its trials are not "
                    "pruned", experiment_id, exc_info=True)
        return None  # not remembered: the next pack asks again
    known[experiment_id] = rule
    return rule
