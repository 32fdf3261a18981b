"""How far a starting experiment's graphs are built, for the experiment page's
"building graphs 1/3" notice (the CLI's progress line says the same).

Before its first epoch, a pack compiles its graph's C code: seconds when the compile cache
has it, minutes on a fresh host, and meanwhile nothing moves on the page. A graph is one
compile key (:func:`dnnframe.engine.compile_key`); it counts as built once a trial of it has
trained an epoch. The notice only matters until the first trial is over, so the store is
read only then: the experiment's compile keys once (cached by experiment and size), and its
RUNNING trials on each look.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from dnnframe.engine import compile_key
from dnnframe.states import TrialState

if TYPE_CHECKING:
    from .experiment_responses import GraphsProgress

# A few experiments' keys: the pages open at one time while their sweeps start.
_KEPT = 8
_keys: OrderedDict[tuple[str, int], dict[str, str]] = OrderedDict()
_lock = threading.Lock()


def _compile_keys(store: Any, exp: Any) -> dict[str, str]:
    """Trial id → compile key, for every trial of the experiment. An adaptive search adds
    trials as it goes, so its number of trials is part of the cache key."""
    key = (exp.id, exp.n_trials)
    with _lock:
        if key in _keys:
            _keys.move_to_end(key)
            return _keys[key]
    keys: dict[str, str] = {}
    for trial in store.list_trials(exp.id, fields=["config"]):
        try:
            keys[trial.id] = compile_key(trial.config)
        except ValueError:  # a config an older version stored: it builds no graph of ours
            continue
    with _lock:
        _keys[key] = keys
        while len(_keys) > _KEPT:
            _keys.popitem(last=False)
    return keys


def graphs_progress(exp: Any, counts: dict[str, int], store: Any) -> GraphsProgress | None:
    """``{"ready": r, "total": n}`` while trials run and none is over yet, else None."""
    if not counts.get(TrialState.RUNNING.value) or any(
        n for state, n in counts.items() if TrialState(state).is_finished
    ):
        return None
    keys = _compile_keys(store, exp)
    running = store.list_trials(exp.id, state=TrialState.RUNNING, fields=["metrics"])
    ready = {keys[t.id] for t in running if t.metrics and t.id in keys}
    return {"ready": len(ready), "total": len(set(keys.values()))}
