"""Which parameters matter: Optuna's importance evaluators run on an experiment's stored trials.

The stored trials become Optuna ``FrozenTrial``s in an in-memory study: each parameter the
trials vary gets a distribution that spans the values they took (integers → ``IntDistribution``,
positive floats spanning more than a decade → a log ``FloatDistribution``, anything else
→ ``CategoricalDistribution``), and the chosen metric is the trial's value, as every analysis
counts it (:func:`.params.outcomes`: a diverged trial is the worst value). Parameters with one
value carry no information and are left out; the seed is fitted as the noise floor.
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

from dnnframe.states import TrialState

from .params import outcomes, value_direction

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
# fewer trials than this per varied parameter: the answer says it is a rough guide
FEW_TRIALS_PER_PARAM = 5
# the seed is fitted as the noise floor, never ranked as a parameter
SEED = "seed"
_DIVERGED, _PRUNED = TrialState.DIVERGED.value, TrialState.PRUNED.value


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
    """How many trials diverged (``n_diverged``) and, when any did, ``diverged_at``: each
    parameter → the values at which every trial diverged while some trial at another value
    trained, what the ranking then finds decisive.

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


def importances(trials: Iterable[Any], metric: str, mode: str, evaluator: str) -> ImportanceResult:
    """Each varied parameter → its importance for ``metric``.

    ``trials`` are stored trial records, counted as every analysis counts them
    (:func:`.params.outcomes`): complete and pruned trials with their value, diverged ones
    as the worst value (``worst``), so a parameter that decides divergence ranks first.
    The seed is no parameter: it is fitted with them, and its share is reported as
    ``noise_floor`` (what the draw alone explains; ``importances`` and it sum to 1), with
    ``below_noise`` (parameters that matter no more than it); it is never in ``ranking``.
    The forest evaluators see a seeded sample of at most ``FOREST_MAX_TRIALS`` trials
    (``sampled`` says so).
    Returns ``{"importances": {...}, "ranking": [most important first], "n_trials": n,
    "params": [varied parameters], "few_trials": bool}`` with ``n_diverged`` and
    ``n_pruned`` (and ``diverged_at``: see :func:`divergence`), a ``note`` on what to make
    of it, and, when there is nothing to rank yet, an empty ``importances`` with a ``note``
    saying why.
    """
    counted = outcomes(trials, metric, mode)
    rows = [(o.params, o.value) for o in counted]
    diverged = [o for o in counted if o.state == _DIVERGED]
    out: ImportanceResult = {
        "importances": {},
        "ranking": [],
        "n_trials": len(rows),
        "params": [],
        "n_pruned": sum(o.state == _PRUNED for o in counted),
        **divergence(
            [o.params for o in counted if o.state != _DIVERGED], [o.params for o in diverged]
        ),
    }
    if diverged:
        out["worst"] = diverged[0].value
    if len(rows) < 2:
        out["note"] = f"needs at least 2 finished trials with a value of {metric}, has {len(rows)}"
        return out
    names = sorted({k for params, _ in rows for k in params})
    varied = {}
    for name in names:
        taken = [params.get(name) for params, _ in rows]
        if len({repr(v) for v in taken}) > 1:
            varied[name] = distribution(taken)
    out["params"] = sorted(n for n in varied if n != SEED)
    if not out["params"]:
        out["note"] = "the trials differ in no parameter but the seed: nothing to rank"
        return out
    if evaluator != "ped_anova" and len(rows) > FOREST_MAX_TRIALS:
        rows = random.Random(0).sample(rows, FOREST_MAX_TRIALS)
        out["sampled"] = FOREST_MAX_TRIALS
    if len({v for _, v in rows}) == 1:
        out["note"] = f"every trial has the same {metric}: nothing to rank"
        return out
    ranked = _fit(rows, varied, mode, evaluator)
    floor = ranked.pop(SEED, None)
    out["importances"] = ranked
    out["ranking"] = list(ranked)  # JSON objects lose their order on the way out
    notes = []
    # a handful of trials per parameter makes any split look decisive
    out["few_trials"] = len(rows) < FEW_TRIALS_PER_PARAM * len(out["params"])
    if out["few_trials"]:
        n = len(out["params"])
        notes.append(
            f"rests on {len(rows)} trials for {n} parameter{'s' if n > 1 else ''}, "
            f"fewer than {FEW_TRIALS_PER_PARAM} a parameter: a rough guide"
        )
    if floor is not None:
        # the seed changes nothing but the draw: what matters no more than it is noise
        out["noise_floor"] = floor
        out["below_noise"] = [p for p in ranked if ranked[p] <= floor]
    notes += _counted_notes(out, metric)
    if notes:
        out["note"] = "; ".join(notes)
    return out


def _fit(
    rows: list[tuple[dict[str, Any], float]],
    varied: dict[str, BaseDistribution],
    mode: str,
    evaluator: str,
) -> dict[str, float]:
    """The evaluator's importances (they sum to 1) over the ``varied`` parameters, most
    important first."""
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
    return {k: float(v) for k, v in ranked.items()}


def _counted_notes(out: ImportanceResult, metric: str) -> list[str]:
    """What the ranking counts besides complete trials: the diverged ones as the worst
    value (and where every trial diverged), the pruned ones at the value they stopped at."""
    notes = []
    n = out["n_diverged"]
    if n and "worst" in out:
        text = (
            f"{n} diverged trial{'s count' if n > 1 else ' counts'} as the worst "
            f"{metric} ({out['worst']:g})"
        )
        at = out.get("diverged_at") or {}
        if at:
            text += ", and every trial diverged at " + "; ".join(
                f"{name} {', '.join(f'{v:g}' if isinstance(v, float) else str(v) for v in vs)}"
                for name, vs in at.items()
            )
        notes.append(text)
    if out.get("n_pruned"):
        p = out["n_pruned"]
        notes.append(
            f"{p} pruned trial{'s count' if p > 1 else ' counts'} with the "
            f"value{'s they were' if p > 1 else ' it was'} stopped at"
        )
    return notes


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


def experiment_importances(
    store: Any, exp: Any, metric: str | None, mode: str | None, evaluator: str
) -> Importance:
    """What ``GET …/importance`` answers for experiment ``exp``: ``metric`` defaults to the
    objective, ``mode`` to the objective's (else the metric's own direction)."""
    objective, objective_mode = exp.objective
    metric = metric or objective
    mode = mode or (objective_mode if metric == objective else value_direction(metric))
    body = cached_importances(store, exp.id, metric, mode, evaluator)
    return {"experiment_id": exp.id, "metric": metric, "mode": mode, "evaluator": evaluator, **body}
