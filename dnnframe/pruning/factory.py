"""The one place that chooses a pack's pruner, from its experiments' search settings."""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping

from ..exceptions import NotFoundError, StoreError
from ..spec.models import SearchConfig
from ..store.base import ResultStore
from .asha import AshaPruner, AshaRule
from .pruner import NoPruner, PackTrial, Pruner

log = logging.getLogger(__name__)


def pruner_for_pack(store: ResultStore, trials: Mapping[str, PackTrial]) -> Pruner:
    """The pruner of a pack whose members are ``trials`` (trial id -> what a pruner needs).

    A trial is pruned only when every experiment it belongs to prunes: a trial shared with
    a grid sweep must still train in full. An experiment whose settings cannot be read
    prunes nothing.
    """
    by_experiment: dict[str, SearchConfig | None] = {}
    rules: dict[str, list[AshaRule]] = {}
    for tid, trial in trials.items():
        for e in trial.experiment_ids:
            if e not in by_experiment:
                by_experiment[e] = _search_settings(store, e)
        pruning = [
            (e, s) for e in trial.experiment_ids if (s := by_experiment[e]) is not None and s.prunes
        ]
        if pruning and len(pruning) == len(trial.experiment_ids):
            rules[tid] = [AshaRule.of(e, s) for e, s in pruning]
    if not rules:
        return NoPruner()
    return AshaPruner(store, rules, {tid: t.max_epochs for tid, t in trials.items()})


# A submitted experiment's id is a hash of its spec, so its search settings never change:
# every pack of a sweep asked the store again (a read that also counts its trials by state).
# Kept per store object (a worker keeps one), forgotten with it.
_SETTINGS: weakref.WeakKeyDictionary[ResultStore, dict[str, SearchConfig]] = (
    weakref.WeakKeyDictionary()
)


def _search_settings(store: ResultStore, experiment_id: str) -> SearchConfig | None:
    known = _SETTINGS.setdefault(store, {})
    if experiment_id in known:
        return known[experiment_id]
    try:
        spec = store.get_experiment(experiment_id).spec
        search = SearchConfig.model_validate(spec.get("search", {}))
    except (NotFoundError, StoreError, ValueError):
        log.warning(
            "experiment %s: cannot read its search settings; its trials are not pruned",
            experiment_id,
            exc_info=True,
        )
        return None  # not remembered: the next pack asks again
    known[experiment_id] = search
    return search
