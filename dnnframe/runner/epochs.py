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
from ..retrying import FINAL_WRITE
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
        so sending them again stores each once. Each member's entries are made here, once,
        from the reports' arrays."""
        self.last_write = time.monotonic()
        live = [k for k, m in enumerate(self.members) if not m.lost]
        by_trial: dict[str, list[dict[str, Any]]] = {}
        entries: list[tuple[int, dict[str, dict[str, Any]]]] = []
        for report in self.pending:
            batch = {}
            shared, reported = report.entries(), report.reported
            for k in live:
                if reported[k]:
                    tid = self.members[k].trial_id
                    batch[tid] = shared[k]
                    by_trial.setdefault(tid, []).append(shared[k])
            entries.append((report.epoch, batch))
        if not by_trial:
            self.pending = []
            return
        written = self.store.append_metrics_many(by_trial, self.worker)
        self.pending = []
        for tid in written:
            self.stored[tid] = self.stored.get(tid, 0) + len(by_trial[tid])
        self.lose(set(by_trial) - written)
        for epoch, batch in entries:
            recorded = {tid: x for tid, x in batch.items() if tid in written}
            if recorded:
                self.observer.epoch(epoch, recorded)

    def write_rest(self) -> None:
        """:meth:`write` at the end of training, before any member's end is recorded; no
        later write would carry these epochs, so it is retried like the final states. Epochs
        still unstored after that are named in an error (each result keeps its whole
        history)."""
        try:
            FINAL_WRITE.call(
                self.write, what=f"pack of {len(self.members)}: recording its last epochs"
            )
            return
        except StoreError as exc:
            failure = " ".join(str(exc).split())
        counts: dict[str, int] = {}
        for report in self.pending:
            for k in report.indices():
                if not self.members[k].lost:
                    tid = self.members[k].trial_id
                    counts[tid] = counts.get(tid, 0) + 1
        log.error(
            "pack of %d: %s could not be stored in the trials' curves after %d tries "
            "(%s; their results keep the whole history)",
            len(self.members),
            ", ".join(f"{n} epochs of {tid}" for tid, n in counts.items()),
            FINAL_WRITE.attempts,
            failure,
        )

    def _member(self, trial_id: str) -> PackMember:
        return next(m for m in self.members if m.trial_id == trial_id)
