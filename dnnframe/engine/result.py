"""The result of one training run (no PyTensor import: the runner and store read it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from ..jsonsafe import json_copy
from ..states import TrialState

# The states a training run ends in, as the engine writes them into a result.
COMPLETE, DIVERGED, CANCELLED = (
    TrialState.COMPLETE.value,
    TrialState.DIVERGED.value,
    TrialState.CANCELLED.value,
)
# (TrialState holds the names; mypy cannot read a Literal of variables: Any to it)
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

    def to_dict(self, history: bool = True) -> dict[str, Any]:
        """JSON-safe dict (NaN/inf become None), sharing nothing with this result; without
        its ``history`` when not ``history`` (a stored trial's curve holds it already)."""
        # no dataclasses.asdict: its deepcopy of every value cost a packed trial more than
        # its training; a history of plain finite entries (the engine's) is copied entry by
        # entry, five times quicker than a round trip through JSON
        out = json_copy(
            {f.name: getattr(self, f.name) for f in fields(self) if f.name != "history"}
        )
        if history:
            out["history"] = (
                [dict(entry) for entry in self.history]
                if _plain(self.history)
                else json_copy(self.history)
            )
        return out


def _plain(history: list[dict[str, Any]]) -> bool:
    """Entries that are dicts of string keys to None, str, int or finite floats."""
    for entry in history:
        if type(entry) is not dict:
            return False
        for key, value in entry.items():
            kind = type(value)
            if (
                type(key) is not str
                or (kind is float and value - value != 0.0)
                or (kind not in _PLAIN and value is not None)
            ):
                return False
    return True


_PLAIN = (float, int, str)


# What an epoch of a curve holds besides its number, in the order a stored entry has it.
EPOCH_COLUMNS = ("train_loss", "train_accuracy", "val_loss", "val_accuracy", "seconds")
_ENTRY_KEYS = ("epoch", *EPOCH_COLUMNS)


class EpochReport(Sequence):
    """One epoch of a pack, as arrays over its members: what ``on_epoch`` gets.

    ``columns`` holds each of :data:`EPOCH_COLUMNS` as a list over the members (None for a
    metric the pack does not have, e.g. accuracy in regression); ``reported`` says which
    members reported this epoch (the others no longer train, or just diverged). Indexing
    gives member k's metrics as the dict a curve stores (``epoch``, then the columns), or
    None: a consumer that needs every member's dicts builds them once,
    when it needs them, instead of the engine building dicts nobody reads.
    """

    def __init__(
        self, epoch: int, columns: dict[str, list[float | None] | None], reported: list[bool]
    ) -> None:
        self.epoch = epoch
        self.columns = columns
        self.reported = reported
        self._entries: list[list[dict[str, Any]]] = []  # built once, shared by reporting()

    @classmethod
    def of_dicts(cls, epoch: int, metrics: Sequence[dict[str, Any] | None]) -> EpochReport:
        """A report from one metrics dict (or None) per member, as a single-trial train
        function reports them."""
        columns: dict[str, list[float | None] | None] = {
            name: [None if m is None else m.get(name) for m in metrics] for name in EPOCH_COLUMNS
        }
        return cls(epoch, columns, [m is not None for m in metrics])

    def __len__(self) -> int:
        return len(self.reported)

    # (a member's entry: indexed by member only, never sliced as Sequence allows)
    def __getitem__(self, k: int) -> dict[str, Any] | None:  # type: ignore[override]
        return self.entry(k) if self.reported[k] else None

    def entry(self, k: int) -> dict[str, Any]:
        """Member k's metrics of this epoch, as a curve stores them (whether it reported
        or not: the caller knows); a dict of the caller's own."""
        return dict(self.entries()[k])

    def entries(self) -> list[dict[str, Any]]:
        """Every member's :meth:`entry`, built together once (a pack writes each epoch to
        the store and into the results' histories: one dict serves both). Shared: callers
        must not change them."""
        if not self._entries:
            nones = [None] * len(self.reported)
            columns = [self.columns[name] or nones for name in EPOCH_COLUMNS]
            epoch = self.epoch
            self._entries.append([dict(zip(_ENTRY_KEYS, (epoch, *row))) for row in zip(*columns)])
        return self._entries[0]

    def reporting(self, reported: list[bool]) -> EpochReport:
        """This epoch with other members reporting: the same columns and entries."""
        other = EpochReport(self.epoch, self.columns, reported)
        other._entries = self._entries
        return other

    def indices(self) -> list[int]:
        """The members that reported this epoch."""
        return [k for k, r in enumerate(self.reported) if r]
