"""A running pack's per-epoch bookkeeping: throttled curve writes, heartbeats, cancel and
pruning checks, and what a caller may watch (:class:`PackObserver`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..engine.result import EpochReport
from ..exceptions import StoreError
from ..pruning.factory import pruner_for_pack
from ..pruning.pruner import PackTrial
from ..states import TrialState
from ..store.base import ResultStore, TrialRecord
from .heartbeat import Heartbeat

log = logging.getLogger(__name__)

# Heartbeat and cancellation checks from epochs at most this often: tiny trials run many
# epochs a second, and each check is a store round trip. The heartbeat thread covers long
# epochs and compiles.
CHECK_INTERVAL_S = 1.0
# A pack's learning curves are written at most this often (every epoch once an epoch takes
# longer): rewriting each member's curve every epoch cost tiny trials more than training.
METRICS_INTERVAL_S = 1.0


class PackObserver:
    """What a caller of :func:`run_pack` may watch while a pack runs (a Celery task shows it
    in Flower). Called in the training thread, so each method must be quick and must not
    raise; the defaults do nothing."""

    def claimed(self, records: list[TrialRecord]) -> None:
        """The members this call won, as the claim returned them (config, attempts)."""

    def epoch(self, epoch: int, metrics: dict[str, dict[str, Any]]) -> None:
        """Epoch ``epoch`` was recorded for these members (trial id -> that epoch's metrics).
        Epochs are written at most every :data:`METRICS_INTERVAL_S`, so several calls may
        come at once."""

    def finished(
        self, trial_id: str, state: TrialState, result: dict[str, Any] | None, error: str | None
    ) -> None:
        """The store accepted this member's final state (nothing is called for a member
        lost to another worker)."""


@dataclass
class PackMember:
    """One claimed trial of a pack."""

    trial_id: str
    config: dict[str, Any]
    index: int = -1  # position in the trained pack (-1: not trained)
    stopped: bool = False  # asked to stop (cancelled) or frozen by the engine
    lost: bool = False  # another worker owns it now: nothing more is written
    experiment_ids: tuple[str, ...] = ()
    pruned: dict[str, Any] | None = None  # why the pruner stopped it
    outcome: tuple[TrialState, dict[str, Any] | None, str | None] | None = None
    trained: Any = None  # what the engine returned for it (its whole history, if needed)


class PackEpochs:
    """The per-epoch bookkeeping of one pack: throttled metrics writes and checks."""

    def __init__(
        self,
        store: ResultStore,
        worker: str,
        members: list[PackMember],
        heartbeat: Heartbeat,
        observer: PackObserver,
    ):
        self.store, self.worker, self.members, self.heartbeat = store, worker, members, heartbeat
        self.observer = observer
        # The claim just beat and checked for cancellation: the first check is due an
        # interval after the pack started. The first epoch is written at once (a running
        # trial shows its curve from then on), the next at most every interval.
        self.last_check = time.monotonic()
        self.last_write = -float("inf")
        self.pending: list[EpochReport] = []  # epochs not written
        self.stored: dict[str, int] = {}  # epochs of each member's curve the store confirmed
        self.pruner = pruner_for_pack(
            store,
            {
                m.trial_id: PackTrial(
                    m.experiment_ids, int(m.config.get("training", {}).get("max_epochs", 0))
                )
                for m in members
            },
        )

    def live(self) -> list[PackMember]:
        return [m for m in self.members if not m.lost]

    def lose(self, ids: set[str]) -> None:
        if not ids:  # the common case, asked every epoch: no walk over the pack
            return
        for m in self.members:
            if m.trial_id in ids and not m.lost:
                m.lost = True
                log.warning(
                    "trial %s: another worker owns it now; it is dropped from this pack", m.trial_id
                )
        self.heartbeat.untrack(ids)

    def on_epoch(
        self, epoch: int, metrics: EpochReport | Sequence[dict[str, Any] | None]
    ) -> list[bool]:
        """Take the epoch's report (or one metrics dict or None per member); write what is
        due, ask the pruner, beat and check for cancellation when due. Returns one stop
        flag per member."""
        if len(metrics) != len(self.members):
            raise ValueError(
                f"on_epoch got {len(metrics)} metrics for a pack of {len(self.members)}"
            )
        report = (
            metrics if isinstance(metrics, EpochReport) else EpochReport.of_dicts(epoch, metrics)
        )
        self.lose(self.heartbeat.lost)
        self.pending.append(report)
        try:
            # A pack that may be pruned writes every epoch: the pruner may read what was written.
            if self.pruner.active or time.monotonic() - self.last_write >= METRICS_INTERVAL_S:
                self.write()
            if self.pruner.active:
                written = {
                    m.trial_id: report.entry(k)
                    for k, m in enumerate(self.members)
                    if report.reported[k] and not m.lost and not m.stopped
                }
                for tid, decision in self.pruner.on_results(epoch, written).items():
                    if decision.stop:
                        member = self._member(tid)
                        member.pruned, member.stopped = dict(decision.reason), True
            if time.monotonic() - self.last_check >= CHECK_INTERVAL_S:
                self.last_check = time.monotonic()
                live = [m.trial_id for m in self.live() if not m.stopped]
                if live:
                    self.lose(self.heartbeat.beat())
                    for tid in self.store.cancel_requested(live):
                        self._member(tid).stopped = True
        except StoreError:
            log.warning(
                "pack of %d: could not record epoch %s; training goes on",
                len(self.members),
                epoch,
                exc_info=True,
            )
        # None is a member with nothing this epoch (frozen by the engine, or not yet trained
        # by a one-by-one train function): it is neither stopped nor lost by that
        return [m.lost or m.stopped for m in self.members]

    def write(self) -> None:
        """Write the epochs not written yet in one store call, then tell the observer what
        was recorded. Owner-checked: a worker whose trial was requeued and claimed by
        another never writes into its curve, and drops the trial. A failed write (StoreError)
        keeps its epochs for the next write: the store skips epochs a curve already holds,
        so sending them again stores each once."""
        self.last_write = time.monotonic()
        by_trial = self.unwritten()
        if not by_trial:
            self.pending = []
            return
        written = self.store.append_metrics_many(by_trial, self.worker)
        self.recorded(written, by_trial)
        self.lose(set(by_trial) - written)

    def unwritten(self) -> dict[str, list[dict[str, Any]]]:
        """Each live member's epochs not written yet, in order (the engine's entries, built
        once from the reports' arrays). At the end of training they go to the store with
        the members' ends (``finish_trials(..., epochs=)``): one write a trial, not two."""
        live = [k for k, m in enumerate(self.members) if not m.lost]
        by_trial: dict[str, list[dict[str, Any]]] = {}
        for report in self.pending:
            shared, reported = report.entries(), report.reported
            for k in live:
                if reported[k]:
                    by_trial.setdefault(self.members[k].trial_id, []).append(shared[k])
        return by_trial

    def recorded(self, written: set[str], by_trial: dict[str, list[dict[str, Any]]]) -> None:
        """The store took ``by_trial``'s epochs of the ``written`` members: count them, tell
        the observer epoch by epoch, and forget every pending epoch."""
        for tid in written:
            self.stored[tid] = self.stored.get(tid, 0) + len(by_trial.get(tid, ()))
        ids = [m.trial_id for m in self.members]
        for report in self.pending:
            entries = report.entries()
            recorded = {
                ids[k]: entries[k]
                for k in report.indices()
                if ids[k] in written and ids[k] in by_trial
            }
            if recorded:
                self.observer.epoch(report.epoch, recorded)
        self.pending = []

    def _member(self, trial_id: str) -> PackMember:
        return next(m for m in self.members if m.trial_id == trial_id)
