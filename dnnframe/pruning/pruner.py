"""What the runner knows of pruning: a :class:`Pruner` says, after each epoch, which trials
go on and which stop.

The runner trains a pack and asks the pack's pruner about each epoch's results; it never
knows the algorithm (ASHA, :mod:`.asha`, is the first one). Which pruner a pack gets is
decided from its experiments' search settings in one place,
:func:`dnnframe.pruning.factory.pruner_for_pack`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol


@dataclass(frozen=True)
class Decision:
    """A pruner's answer about one trial's result: go on, or stop.

    A stopped trial is recorded PRUNED with its curve so far, and ``reason`` (plain JSON:
    the epoch, the metric and what it was compared with) as its result's ``pruned``.
    """

    stop: bool
    reason: dict[str, Any] = field(default_factory=dict)


CONTINUE = Decision(stop=False)


class PackTrial(NamedTuple):
    """What a pruner is told about one member of a pack when it is made."""

    experiment_ids: Sequence[str]  # a trial may belong to several experiments
    max_epochs: int  # its ``training.max_epochs``


class Pruner(Protocol):
    """The pruning decisions of one pack, asked after every epoch."""

    @property
    def active(self) -> bool:
        """True when some member may be stopped. The runner then stores every epoch before
        asking (a pruner may judge by what the store holds), and asks at every epoch."""

    def on_results(
        self, epoch: int, results: Mapping[str, Mapping[str, Any]]
    ) -> dict[str, Decision]:
        """A decision for each trial of ``results`` (trial id -> its metrics of ``epoch``,
        already stored); the members of a pack that reach an epoch together are asked
        about in one call."""


class NoPruner:
    """Every trial goes on: the pruner of packs whose experiments do not prune."""

    active = False

    def on_results(
        self, epoch: int, results: Mapping[str, Mapping[str, Any]]
    ) -> dict[str, Decision]:
        return dict.fromkeys(results, CONTINUE)
