"""The train function a pack runs with: ``train(configs, on_epoch) -> one result per config``,
the only training contract the runner and the executors know (a trial alone is a pack of
one)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..engine.result import EpochReport, TrialResult
from ..spec import TrialConfig

# ``on_epoch(epoch, one metrics dict or None per member) -> one stop flag per member``;
# the engine's pack hands over the epoch as an EpochReport (indexable so, built lazily)
PackEpochFn = Callable[[int, "EpochReport | Sequence[dict[str, Any] | None]"], list[bool]]
PackTrainFn = Callable[[list[TrialConfig], PackEpochFn], list[TrialResult]]
