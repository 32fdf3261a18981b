"""Asynchronous successive halving (ASHA; Li et al., MLSys 2020), decided by store queries.

Rungs sit at ``min_epochs * eta**k`` epochs, below ``max_epochs`` (each trial's
``training.max_epochs``). When a trial reaches a rung, :class:`AshaPruner` asks the store for the
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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..metrics import is_number
from ..spec.models import SearchConfig
from ..store.base import ResultStore
from .pruner import CONTINUE, Decision


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
    def of(cls, experiment_id: str, search: SearchConfig) -> AshaRule:
        """The rule of an experiment's search settings (which ask for ASHA)."""
        return cls(
            experiment_id, search.rung_metric, search.objective.mode, search.min_epochs, search.eta
        )


class AshaPruner:
    """ASHA's decisions for one pack (a :class:`~.pruner.Pruner`): which members to stop at
    a rung epoch.

    Args:
        store: where the values at each rung are read.
        rules: each member that may be pruned -> the rule of every experiment it belongs to
            (a member is stopped only when all of them would stop it).
        max_epochs: each member's ``training.max_epochs`` (no rung at or above it).
    """

    def __init__(
        self, store: ResultStore, rules: dict[str, list[AshaRule]], max_epochs: dict[str, int]
    ):
        self.store, self.rules, self.max_epochs = store, rules, max_epochs

    @property
    def active(self) -> bool:
        """True when some member may be pruned."""
        return bool(self.rules)

    def on_results(
        self, epoch: int, results: Mapping[str, Mapping[str, Any]]
    ) -> dict[str, Decision]:
        """Stop the members of ``results`` that reached a rung at ``epoch`` outside the top
        ``1/eta`` there; the reason names the epoch, metric, value and how many values the
        rung held. Members judged in one call see the same values at a rung."""
        decisions: dict[str, Decision] = {}
        cache: dict[tuple[str, str], list[float]] = {}
        for tid, m in results.items():
            decisions[tid] = CONTINUE
            notes = []
            for rule in self.rules.get(tid, []):
                if epoch not in rungs(rule.min_epochs, self.max_epochs[tid], rule.eta):
                    break
                value = m.get(rule.metric)
                if not is_number(value):
                    break  # nothing to compare: the trial goes on
                key = (rule.experiment_id, rule.metric)
                if key not in cache:
                    cache[key] = self.store.rung_values(rule.experiment_id, epoch, rule.metric)
                values = cache[key]
                if promoted(float(value), values, rule.eta, rule.mode):
                    break
                notes.append(
                    {
                        "experiment_id": rule.experiment_id,
                        "epoch": epoch,
                        "metric": rule.metric,
                        "value": float(value),
                        "trials_at_rung": len(values),
                        "eta": rule.eta,
                    }
                )
            else:
                if notes:
                    decisions[tid] = Decision(stop=True, reason=notes[0])
        return decisions
