"""Which configuration is best: trials that differ only in their seed are one configuration,
ranked by its mean over its seeds, shown with their spread and count. Seeds count as every
analysis counts trials (:func:`dashboard.params.outcomes`): a complete or pruned seed with
its value, a diverged one as the metric's worst value, and how many diverged or were pruned
is told beside the mean.

A single trial's value is one draw of the seed's noise, so five trials tying at 0.9721 say
little; a configuration that scored 0.9721 on both its seeds says more. The order is total
and depends on nothing but the values, so the live page, a reloaded page and "sweep again"
name the same configuration: a better mean first, then more seeds, then a smaller spread,
then the smallest trial id. plotting.js ranks the same way (sums taken over the values in
ascending order, so both give the same floating-point mean).

>>> from types import SimpleNamespace as T
>>> from dnnframe.states import SCORED_STATE
>>> def trial(tid, lr, seed, acc):
...     return T(id=tid, state=SCORED_STATE, result={"metrics": {"test_accuracy": acc}},
...              config={"model": {}, "training": {"learning_rate": lr}, "seed": seed})
>>> trials = [trial("a", 0.1, 0, 0.9721), trial("b", 0.01, 0, 0.98), trial("c", 0.01, 1, 0.95),
...           trial("d", 0.1, 1, 0.9721), trial("e", 0.3, 0, 0.9721)]
>>> best, *rest = rank_configurations(trials, "test_accuracy", "max")
>>> best.params["learning_rate"], best.mean, best.sd, best.n, best.trial_ids, best.best_trial_id
(0.1, 0.9721, 0.0, 2, ('a', 'd'), 'a')
>>> [(r.params["learning_rate"], r.n) for r in rest]
[(0.3, 1), (0.01, 2)]

Equal means are ties, and are reported as such: the order among them (more seeds, a smaller
spread, the smallest trial id) is only a rule that makes the choice repeatable.

>>> [c.params["learning_rate"] for c in tied_with_best([best, *rest])]
[0.3]

A seed that diverged counts as the worst value (an accuracy's 0), so the configuration that
kept one good seed no longer holds the lead with it:

>>> lost = T(id="f", state="DIVERGED", result={"metrics": {}},
...          config={"model": {}, "training": {"learning_rate": 0.3}, "seed": 1})
>>> [(c.params["learning_rate"], c.n, c.n_diverged) for c in
...  rank_configurations([*trials, lost], "test_accuracy", "max")]
[(0.1, 2, 0), (0.01, 2, 0), (0.3, 2, 1)]
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dnnframe.metrics import configuration_order
from dnnframe.states import TrialState

from .params import Outcome, outcomes

_DIVERGED = TrialState.DIVERGED.value
_PRUNED = TrialState.PRUNED.value

if TYPE_CHECKING:
    from .experiment_responses import BestConfiguration, TiedConfiguration


@dataclass(frozen=True)
class RankedConfiguration:
    """One configuration (every parameter but the seed) and its scores over seeds."""

    params: dict[str, Any]
    mean: float
    sd: float  # sample standard deviation over seeds; 0 for one seed
    n: int  # seeds counted: complete or pruned with a value, or diverged
    trial_ids: tuple[str, ...]  # sorted
    # its trial with the best value (a trained one, the smallest id among equals)
    best_trial_id: str
    n_diverged: int = 0  # of its n seeds, those that diverged (counted as the worst value)
    n_pruned: int = 0  # of its n seeds, those pruned (counted with the value they stopped at)

    def tie_json(self) -> TiedConfiguration:
        """The configuration as the API shows one tied with the best."""
        return {
            "params": self.params,
            "n": self.n,
            "n_diverged": self.n_diverged,
            "n_pruned": self.n_pruned,
            "sd": self.sd,
            "trial_ids": list(self.trial_ids),
        }


def mean_sd(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation, summed in ascending order (as the page sums)."""
    ordered = sorted(values)
    total = 0.0
    for v in ordered:
        total += v
    mean = total / len(ordered)
    if len(ordered) < 2:
        return mean, 0.0
    squares = 0.0
    for v in ordered:
        squares += (v - mean) * (v - mean)
    return mean, math.sqrt(squares / (len(ordered) - 1))


def rank_configurations(trials: Iterable[Any], metric: str, mode: str) -> list[RankedConfiguration]:
    """The configurations of ``trials`` best first, each seed counted by :func:`outcomes`'
    rule: a complete or pruned seed with its value, a diverged one as the worst value, so a
    configuration whose other seed blew up cannot keep the mean of its good one."""
    groups: dict[str, list[Outcome]] = {}
    for outcome in outcomes(trials, metric, mode):
        params = dict(outcome.params)
        params.pop("seed", None)
        groups.setdefault(json.dumps(params, sort_keys=True, default=str), []).append(outcome)
    sign = -1.0 if mode == "max" else 1.0
    ranked = []
    for members in groups.values():
        mean, sd = mean_sd([m.value for m in members])
        # a trained seed is the one to show (and sweep around) before a diverged equal
        best = min(members, key=lambda m: (sign * m.value, m.state == _DIVERGED, str(m.trial_id)))
        params = dict(members[0].params)
        params.pop("seed", None)
        ranked.append(
            RankedConfiguration(
                params,
                mean,
                sd,
                len(members),
                tuple(sorted(str(m.trial_id) for m in members)),
                str(best.trial_id),
                sum(m.state == _DIVERGED for m in members),
                sum(m.state == _PRUNED for m in members),
            )
        )
    ranked.sort(key=lambda c: (*configuration_order(c.mean, c.n, c.sd, mode), c.trial_ids[0]))
    return ranked


# means equal but for the last bits of their sums are equal
_TIE_TOLERANCE = 1e-12


def tied_with_best(ranked: list[RankedConfiguration]) -> list[RankedConfiguration]:
    """The configurations after the first whose mean equals the first's (a tie broken only
    by the ranking's rule), in rank order."""
    if not ranked:
        return []
    best = ranked[0].mean
    return [
        c
        for c in ranked[1:]
        if math.isclose(c.mean, best, rel_tol=_TIE_TOLERANCE, abs_tol=_TIE_TOLERANCE)
    ]


def best_configuration_json(ranked: list[RankedConfiguration]) -> BestConfiguration | None:
    """The best configuration as the API gives it: its params, mean, spread and count, and
    the configurations tied with it on the mean (``ties``, each with its params, count and
    trials), or None while nothing completed."""
    if not ranked:
        return None
    best = ranked[0]
    return {
        "params": best.params,
        "mean": best.mean,
        "sd": best.sd,
        "n": best.n,
        "n_diverged": best.n_diverged,
        "n_pruned": best.n_pruned,
        "trial_ids": list(best.trial_ids),
        "best_trial_id": best.best_trial_id,
        "n_configurations": len(ranked),
        "ties": [c.tie_json() for c in tied_with_best(ranked)],
    }
