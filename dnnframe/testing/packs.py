"""Single-trial train functions for tests: :class:`one_by_one` makes a pack train function
(the only contract the runner and executors know) out of one, and :func:`run_one` runs one
trial as a pack of one with it.

Tests write stand-ins per trial because that is how they think about a trial's curve; the
adapter keeps the per-trial shape out of production code.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

from dnnframe.engine.result import TrialResult
from dnnframe.exceptions import TrialCancelled
from dnnframe.runner import PackEpochFn, run_pack
from dnnframe.spec import TrialConfig
from dnnframe.states import TrialState
from dnnframe.store.base import ResultStore

# ``train(config, on_epoch=...) -> TrialResult``; ``on_epoch(epoch, metrics)`` returns True
# to stop
TrialTrainFn = Callable[..., TrialResult]


class one_by_one:  # noqa: N801 - used as a decorator, like a function
    """Adapt a single-trial ``train(config, on_epoch=...)`` to the pack contract: members
    train one after another, each seeing only its own slot of the pack's epoch callback.

    An exception while training one member fails that member only (its result slot holds
    the exception); KeyboardInterrupt and cancellation still end the whole pack. A class
    rather than a closure so that the local pool can pickle it to its spawned workers.
    """

    def __init__(self, train: TrialTrainFn) -> None:
        self.train = train
        functools.update_wrapper(self, train)

    def __call__(self, configs: list[TrialConfig], on_epoch: PackEpochFn) -> list[TrialResult]:
        results: list[Any] = []
        for i, config in enumerate(configs):

            def member_epoch(epoch: int, metrics: dict[str, Any], i: int = i) -> bool:
                slots: list[dict[str, Any] | None] = [None] * len(configs)
                slots[i] = metrics
                return on_epoch(epoch, slots)[i]

            if len(configs) == 1:  # nothing to isolate: a pack of one fails as a pack
                return [self.train(config, on_epoch=member_epoch)]
            try:
                results.append(self.train(config, on_epoch=member_epoch))
            except (KeyboardInterrupt, TrialCancelled):
                raise
            except Exception as exc:  # recorded as this member's FAILED result
                results.append(exc)
        return results

    def __reduce__(self) -> str | tuple[Any, ...]:
        # a decorated module-level function is pickled by its name, as a plain function is;
        # one wrapped at a call site by the function it wraps
        module = sys.modules.get(getattr(self, "__module__", ""))
        name = getattr(self, "__qualname__", "")
        if module is not None and getattr(module, name, None) is self:
            return name
        return (one_by_one, (self.train,))


def run_one(
    trial_id: str,
    store: ResultStore,
    worker: str | None = None,
    max_attempts: int | None = None,
    train: TrialTrainFn | None = None,
) -> TrialState | None:
    """Claim and train one trial: :func:`run_pack` of one, with a single-trial ``train``
    (default: the packed engine). The trial's final state, or None when it was not
    claimable or was lost (see run_pack)."""
    return run_pack(
        [trial_id],
        store,
        worker=worker,
        max_attempts=max_attempts,
        train_fn=one_by_one(train) if train is not None else None,
    )[trial_id]
