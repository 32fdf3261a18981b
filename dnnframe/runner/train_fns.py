"""The train functions a pack runs with, and :func:`one_by_one`, which makes a pack's train
function out of a single-trial one (a trial alone is a pack of one)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..engine.result import EpochReport, TrialResult
from ..exceptions import TrialCancelled
from ..spec import TrialConfig

TrainFn = Callable[..., TrialResult]
# ``on_epoch(epoch, one metrics dict or None per member) -> one stop flag per member``;
# the engine's pack hands over the epoch as an EpochReport (indexable so, built lazily)
PackEpochFn = Callable[[int, "EpochReport | Sequence[dict[str, Any] | None]"], list[bool]]
PackTrainFn = Callable[[list[TrialConfig], PackEpochFn], list[TrialResult]]


def one_by_one(train: TrainFn) -> PackTrainFn:
    """Adapt a single-trial ``train(config, on_epoch=...)`` to the pack contract: members
    train one after another, each seeing only its own slot of the pack's epoch callback.

    An exception while training one member fails that member only (its result slot holds
    the exception); KeyboardInterrupt and cancellation still end the whole pack.
    """

    def train_each(configs: list[TrialConfig], on_epoch: PackEpochFn) -> list[TrialResult]:
        results: list[Any] = []
        for i, config in enumerate(configs):
            def member_epoch(epoch: int, metrics: dict[str, Any], i: int = i) -> bool:
                slots: list[dict[str, Any] | None] = [None] * len(configs)
                slots[i] = metrics
                return on_epoch(epoch, slots)[i]

            if len(configs) == 1:  # nothing to isolate: a pack of one fails as a pack
                return [train(config, on_epoch=member_epoch)]
            try:
                results.append(train(config, on_epoch=member_epoch))
            except (KeyboardInterrupt, TrialCancelled):
                raise
            except Exception as exc:  # recorded as this member's FAILED result
                results.append(exc)
        return results

    return train_each
