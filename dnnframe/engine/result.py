"""The result of one training run (no PyTensor import: the runner and store read it)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal

from ..jsonsafe import json_copy
from ..states import TrialState

# The states a training run ends in, as the engine writes them into a result.
COMPLETE, DIVERGED, CANCELLED = (TrialState.COMPLETE.value, TrialState.DIVERGED.value,
                                 TrialState.CANCELLED.value)
Status = Literal[(COMPLETE, DIVERGED, CANCELLED)]  # type: ignore[valid-type]


@dataclass
class TrialResult:
    """What :func:`dnnframe.engine.train` returns.

    ``status`` is COMPLETE, DIVERGED (loss became NaN/inf at ``diverged_epoch``) or
    CANCELLED (``on_epoch`` returned True). ``metrics`` holds the final train/val/test loss
    and accuracy (accuracy is None for regression, val_* None without a validation split);
    with early stopping they are those of the restored best epoch (``best_epoch``).
    ``timings`` are this trial's share of its pack's (they add up to the pack's over its
    members); ``pack`` is ``{"size", "index", "wall_seconds", "compile_seconds"}`` of the
    pack it trained in (a trial alone is a pack of one).
    """

    status: Status
    metrics: dict[str, float | None]
    history: list[dict[str, Any]]
    timings: dict[str, float]
    n_params: int
    environment: dict[str, Any]
    diverged_epoch: int | None = None
    stopped_early: bool = False
    epochs_run: int = 0
    best_epoch: int | None = None
    notes: list[str] = field(default_factory=list)
    pack: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (NaN/inf become None), sharing nothing with this result."""
        # no dataclasses.asdict: its deepcopy of every value cost a packed trial more than
        # its training
        return json_copy({f.name: getattr(self, f.name) for f in fields(self)})
