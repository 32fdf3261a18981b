"""Which parameters matter: Optuna's importance evaluators run on an experiment's stored trials.

The stored trials become Optuna ``FrozenTrial``s in an in-memory study: each parameter the
trials vary gets a distribution that spans the values they took (integers → ``IntDistribution``,
positive floats spanning more than a decade → a log ``FloatDistribution``, anything else
→ ``CategoricalDistribution``), and the chosen metric is the trial's value. Parameters with one
value carry no information and are left out; so are trials without a finite value.
"""

from __future__ import annotations

import math
import random
import threading
import warnings
from collections import OrderedDict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from dnnframe.states import SCORED_STATE, TrialState

from .params import trial_params, trial_values, value_direction

if TYPE_CHECKING:
    from .responses import Divergence, Importance, ImportanceResult

EVALUATORS = ("ped_anova", "fanova", "mean_decrease_impurity")
# PED-ANOVA answers in about a second for 10,000 trials; fANOVA's forest took minutes there
# (2 shared cores), so it is the choice, not the default, and sees a seeded sample at most
# this large (1,000 trials: seconds)
DEFAULT_EVALUATOR = "ped_anova"
FOREST_MAX_TRIALS = 1000
# a log axis once the values span more than this ratio (learning rates, L2)
LOG_RATIO = 10.0
# fewer complete trials than this per varied parameter: the answer says it is a rough guide
FEW_TRIALS_PER_PARAM = 5


def _evaluator(name: str) -> optuna.importance.BaseImportanceEvaluator:
    # fixed seeds: the same trials give the same answer on every request
    if name == "fanova":
        return optuna.importance.FanovaImportanceEvaluator(seed=0)
    if name == "ped_anova":
        return optuna.importance.PedAnovaImportanceEvaluator()
    return optuna.importance.MeanDecreaseImpurityImportanceEvaluator(seed=0)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def distribution(values: list[Any]) -> BaseDistribution:
    """The Optuna distribution spanning ``values`` (what one parameter took across trials)."""
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return IntDistribution(min(values), max(values))
    if all(_is_number(v) and math.isfinite(v) for v in values):
        low, high = float(min(values)), float(max(values))
        return FloatDistribution(low, high, log=low > 0 and high / low > LOG_RATIO)
    return CategoricalDistribution(sorted({_choice(v) for v in values}, key=str))


def _choice(value: Any) -> Any:
    # categorical choices must be None, bool, int, float or str; anything else by its text
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def _param_value(dist: BaseDistribution, value: Any) -> Any:
    return _choice(value) if isinstance(dist, CategoricalDistribution) else value


def divergence(trained: list[dict[str, Any]], diverged: list[dict[str, Any]]) -> Divergence:
    """What the ranking leaves out: ``n_diverged`` trials (they have no value to rank) and,
    when there are any, ``diverged_at``: each parameter → the values at which every trial
    diverged while some trial at another value trained, so a parameter that decides
    divergence is named even though the trials that trained do not vary it.

    >>> divergence([{"lr": 0.05, "depth": 1}, {"lr": 0.05, "depth": 2}],
    ...            [{"lr": 1000, "depth": 1}, {"lr": 1000, "depth": 2}])
    {'n_diverged': 2, 'diverged_at': {'lr': [1000]}}
    """
    if not diverged:
        return {"n_diverged": 0}
    at: dict[str, list[Any]] = {}
    for name in sorted({k for params in diverged for k in params}):
        seen_trained = {repr(p.get(name)) for p in trained}
        values = {repr(p.get(name)): p.get(name) for p in diverged}
        only = [v for r, v in values.items() if r not in seen_trained]
        if only and seen_trained:
            at[name] = sorted(only, key=lambda v: (str(type(v)), v if _is_number(v) else str(v)))
    return {"n_diverged": len(diverged), "diverged_at": at}


def importances(trials: Iterable[Any], metric: str, mode: str, evaluator: str
                ) -> ImportanceResult:
    """Each varied parameter → its importance for ``metric`` (normalised to sum to 1).

    ``trials`` are stored trial records; only COMPLETE ones with a finite ``metric`` count.
    The forest evaluators see a seeded sample of at most ``FOREST_MAX_TRIALS`` of them
    (``sampled`` in the answer says so).
    Returns ``{"importances": {...}, "ranking": [most important first], "n_trials": n,
    "params": [varied parameters], "few_trials": bool}``, with ``noise_floor`` (the seed's
    importance) and ``below_noise`` (parameters that matter no more than it) when the seed
    varies, ``n_diverged`` (and ``diverged_at``: see :func:`divergence`), a ``note`` on what
    to make of it, and, when there is nothing to rank yet, an empty ``importances`` with a
    ``note`` saying why.
    """
    rows: list[tuple[dict[str, Any], float]] = []
    diverged: list[dict[str, Any]] = []
    for trial in trials:
        state = getattr(trial.state, "value", trial.state)
        if state == TrialState.DIVERGED.value:
            diverged.append(trial_params(trial.config))
        if state != SCORED_STATE.value:
            continue
        value = trial_values(trial.result).get(metric)
        if value is not None:
            rows.append((trial_params(trial.config), float(value)))
    out: ImportanceResult = {"importances": {}, "ranking": [], "n_trials": len(rows),
                             "params": [], **divergence([p for p, _ in rows], diverged)}
    if len(rows) < 2:
        out["note"] = (f"needs at least 2 complete trials with a value of {metric}, has "
                       f"{len(rows)}{_diverged_note(out)}")
        return out
    names = sorted({k for params, _ in rows for k in params})
    varied = {}
    for name in names:
        taken = [params.get(name) for params, _ in rows]
        if len({repr(v) for v in taken}) > 1:
            varied[name] = distribution(taken)
    out["params"] = sorted(varied)
    if not varied:
        out["note"] = ("the complete trials all share the same parameters: nothing to rank"
                       + _diverged_note(out))
        return out
    if evaluator != "ped_anova" and len(rows) > FOREST_MAX_TRIALS:
        rows = random.Random(0).sample(rows, FOREST_MAX_TRIALS)
        out["sampled"] = FOREST_MAX_TRIALS
    if len({v for _, v in rows}) == 1:
        out["note"] = (f"every complete trial has the same {metric}: nothing to rank"
                       + _diverged_note(out))
        return out
    frozen = [
        optuna.trial.create_trial(
            params={n: _param_value(d, params.get(n)) for n, d in varied.items()},
            distributions=dict(varied),
            value=value,
        )
        for params, value in rows
    ]
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # as the search driver: no per-study line
    study = optuna.create_study(direction="maximize" if mode == "max" else "minimize")
    study.add_trials(frozen)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        ranked = optuna.importance.get_param_importances(study, evaluator=_evaluator(evaluator))
    out["importances"] = {k: float(v) for k, v in ranked.items()}
    notes = []
    # a handful of trials per parameter makes any split look decisive
    out["few_trials"] = len(rows) < FEW_TRIALS_PER_PARAM * len(varied)
    if out["few_trials"]:
        notes.append(f"rests on {len(rows)} trials for {len(varied)} parameters, fewer than "
                     f"{FEW_TRIALS_PER_PARAM} a parameter: a rough guide")
    if "seed" in ranked:
        # the seed changes nothing but the draw: what matters no more than it is noise
        out["noise_floor"] = float(ranked["seed"])
        out["below_noise"] = [p for p in ranked if p != "seed" and ranked[p] <= ranked["seed"]]
    if diverged:
        notes.append(_diverged_note(out).lstrip("; "))
    if notes:
        out["note"] = "; ".join(notes)
    out["ranking"] = list(ranked)  # JSON objects lose their order on the way out
    return out


def _diverged_note(out: Divergence) -> str:
    """"; N trials diverged …" naming what decided it, or "" when none diverged."""
    n = out["n_diverged"]
    if not n:
        return ""
    text = f"; {n} diverged trial{'s are' if n > 1 else ' is'} not ranked (no value)"
    at = out.get("diverged_at") or {}
    if at:
        text += ", and every trial diverged at " + "; ".join(
            f"{name} {', '.join(f'{v:g}' if isinstance(v, float) else str(v) for v in values)}"
            for name, values in at.items())
    return text


_lock = threading.Lock()
_cache: OrderedDict[tuple[Any, ...], ImportanceResult] = OrderedDict()
_CACHE_SIZE = 64


def cached_importances(
    store: Any, experiment_id: str, metric: str, mode: str, evaluator: str
) -> ImportanceResult:
    """:func:`importances` of an experiment's trials, computed once per change of them.

    The key holds the experiment's latest change number, so a live page asking again while
    nothing finished gets the stored answer instead of refitting a forest; one computation
    runs at a time, so many open pages cannot fill every core with forests.
    """
    latest = store.list_trials(experiment_id, sort_by="seq", descending=True, limit=1)
    key = (store.url, experiment_id, metric, mode, evaluator, latest[0].seq if latest else 0)
    with _lock:
        if key not in _cache:
            _cache[key] = importances(store.iter_trials(experiment_id), metric, mode, evaluator)
            while len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
        _cache.move_to_end(key)
        return _cache[key]


def experiment_importances(store: Any, exp: Any, metric: str | None, mode: str | None,
                           evaluator: str) -> Importance:
    """What ``GET …/importance`` answers for experiment ``exp``: ``metric`` defaults to the
    objective, ``mode`` to the objective's (else the metric's own direction)."""
    objective, objective_mode = exp.objective
    metric = metric or objective
    mode = mode or (objective_mode if metric == objective else value_direction(metric))
    body = cached_importances(store, exp.id, metric, mode, evaluator)
    return {"experiment_id": exp.id, "metric": metric, "mode": mode, "evaluator": evaluator,
            **body}
