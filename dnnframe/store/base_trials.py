"""The trial life-cycle part of the ResultStore contract: claims, heartbeats, metrics,
finishing and requeues (``ResultStore`` inherits it; the rules are in base.py's module
docstring). It is also the home of the stores' clock, :func:`now`.

Each public method checks its arguments once, here, then calls the backend's ``_``-named
method with them normalised; what a claim, finish or requeue decides and writes comes from
:mod:`dnnframe.store.lifecycle`.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable
from typing import Any

from .checks import (
    CheckedFinish,
    Epochs,
    MetricsBatch,
    check_finish_items,
    check_ids,
    check_max_attempts,
    check_metrics_many,
    check_timeout,
    check_worker,
)
from .lifecycle import stale_cutoff
from .records import TrialRecord, TrialState

__all__ = ["FinishItem", "TrialMethods", "now"]

FinishItem = tuple[str, TrialState | str, dict[str, Any] | None, str | None]


# The clock every backend's timestamps and staleness judgements read: tests put one they
# drive in its place, so an age is set exactly instead of slept for.
clock: Callable[[], float] = time.time


def now() -> float:
    """Seconds since the epoch by :data:`clock` (the one place stores read the time)."""
    return clock()


class TrialMethods(abc.ABC):
    """The trial life cycle of :class:`~dnnframe.store.base.ResultStore` (see there)."""

    # ---------------------------------------------------------------- trial life cycle
    def claim_trials(
        self, trial_ids: list[str], worker: str, max_attempts: int | None = None
    ) -> list[TrialRecord]:
        """Atomically take each QUEUED trial of ``trial_ids`` for ``worker``: QUEUED → RUNNING.

        Each claim sets ``worker``, ``started_at``, ``heartbeat_at``, increments ``attempts``
        and clears metrics left by an earlier (requeued) attempt. Of two workers claiming a
        trial at once, exactly one gets it. A trial is not claimed (and not returned) when it
        is not QUEUED (running elsewhere or finished: a redelivery is a no-op); when every
        experiment of it has been cancelled (it becomes CANCELLED); or when ``attempts``
        already reached ``max_attempts`` (it becomes FAILED with error
        ``"delivery cap reached: ..."``).

        Returns:
            The records won, in the order of ``trial_ids``.
        Raises:
            NotFoundError: an unknown trial (nothing is claimed).  ValueError: empty worker,
            max_attempts < 1, or a malformed id list.
        """
        ids = check_ids(trial_ids)
        check_worker(worker)
        check_max_attempts(max_attempts)
        return self._claim_trials(ids, worker, max_attempts)

    def heartbeat_trials(self, trial_ids: list[str], worker: str) -> set[str]:
        """Refresh ``heartbeat_at`` of each trial that is RUNNING and owned by ``worker``.

        Returns the ids still owned; a missing id tells the caller it lost that trial and
        should stop it. Writes nothing to the others.
        """
        return self._heartbeat_trials(check_ids(trial_ids), worker)

    def append_metrics_many(
        self, metrics_by_id: MetricsBatch[Epochs], worker: str | None = None
    ) -> set[str]:
        """Append one epoch's metrics (a dict), or several epochs' in order (a list of
        dicts), to each RUNNING trial, also refreshing its heartbeat.

        A trial that is not RUNNING is left alone (a finished trial is read-only); with
        ``worker``, so is one that worker does not own: a stale worker whose trial was
        requeued and claimed by another never writes into the new owner's learning curve.
        Non-finite floats are stored as null. Any number of epochs may come in one call.

        Safe to retry: when a batch's epochs and the curve's last entry carry integer
        ``epoch`` numbers, epochs numbered no later than that entry are stored already and
        are skipped (the trial still counts as written), so a call repeated after its first
        attempt was applied, or resent together with the next epochs, stores each once.

        Returns:
            The ids written (a missing one, when ``worker`` was given, was lost).
        Raises:
            ValueError: not a dict of trial id -> metrics dict or list of them.
        """
        checked = check_metrics_many(metrics_by_id)
        return self._append_metrics_many(checked, worker) if checked else set()

    def finish_trials(
        self,
        items: list[FinishItem],
        worker: str | None = None,
        epochs: MetricsBatch[Epochs] | None = None,
    ) -> set[str]:
        """Finish trials: ``items`` are ``(trial_id, state, result, error)`` tuples.

        Each trial gets its state, ``result`` (``TrialResult.to_dict()``), ``error`` and
        ``finished_at``. Allowed from RUNNING (when ``worker`` is given it must be the owner)
        to any finished state, and from QUEUED to CANCELLED.

        ``epochs`` (trial id -> the last epochs of its curve, as ``append_metrics_many``
        takes them) are appended to the curve of each trial this call finishes, in the same
        write: a reader never sees the end without them, and a trial this call refuses
        keeps its curve as it was. As with ``append_metrics_many``, epochs a curve holds
        already are skipped, so a retried call stores each once. A pack's runner sends the
        epochs it has not written yet this way: its curves and ends cost one write a trial.

        Returns:
            The ids this call finished; the others were refused (already finished, QUEUED
            with a state other than CANCELLED, or owned by another worker).
        Raises:
            NotFoundError: an unknown trial (nothing is finished).  ValueError: a state that
            is not a finished state, a malformed item, or epochs for a trial not among
            ``items`` (nothing is written).
        """
        checked = check_finish_items(items)
        tails = check_metrics_many(epochs) if epochs else {}
        strays = set(tails).difference(tid for tid, *_ in checked)
        if strays:
            raise ValueError(
                f"epochs for trial {sorted(strays)[0]!r}, which is not among the trials to finish"
            )
        return self._finish_trials(checked, worker, tails) if checked else set()

    def cancel_requested(self, trial_ids: list[str]) -> set[str]:
        """The ids whose trial is CANCELLED or all of whose experiments asked to cancel
        (the runner stops those now). Raises NotFoundError for an unknown trial."""
        return self._cancel_requested(check_ids(trial_ids))

    def requeue_stale(self, timeout_s: float, as_of: float | None = None) -> list[str]:
        """Put RUNNING trials whose heartbeat is older than ``timeout_s`` seconds back to QUEUED.

        Age is measured at ``as_of`` (a ``time.time()`` value; default: when the call is
        made, before any wait for a lock), never at the moment the write finally runs: a
        caller that last saw the store working at ``as_of`` does not judge heartbeats that
        a stall since then kept from being written.

        Their worker is cleared (so a late write from the lost worker is refused); ``attempts``
        is kept, so a trial that keeps killing workers hits the delivery cap. Returns the
        requeued ids (the caller resubmits them to its executor).
        """
        check_timeout(timeout_s)
        # taken now, before any wait for a lock or a retry: a stall must not age the heartbeats
        return self._requeue_stale(stale_cutoff(timeout_s, as_of, now()))

    def release_trial(self, trial_id: str, worker: str) -> bool:
        """Atomically put a RUNNING trial owned by ``worker`` back to QUEUED: RUNNING → QUEUED.

        For a caller that knows the owner is dead (a redelivered task finds the trial owned
        by a pid that no longer exists), so it need not wait for :meth:`requeue_stale`.
        ``worker`` and ``heartbeat_at`` are cleared and ``seq`` is bumped; ``attempts`` is
        kept, so the death counts toward the delivery cap of the next claim.

        Returns:
            True if this call released the trial; False (and writes nothing) when it is not
            RUNNING or is owned by another worker.
        Raises:
            NotFoundError: unknown trial.  ValueError: empty ``worker``.
        """
        check_worker(worker)
        return self._release_trial(trial_id, worker)

    # ---------------------------------------------------------------- single trials
    def claim_trial(
        self, trial_id: str, worker: str, max_attempts: int | None = None
    ) -> TrialRecord | None:
        """:meth:`claim_trials` of one: the record, or None when not claimed."""
        won = self.claim_trials([trial_id], worker, max_attempts=max_attempts)
        return won[0] if won else None

    def heartbeat(self, trial_id: str, worker: str) -> bool:
        """:meth:`heartbeat_trials` of one: False when the caller lost the trial."""
        return trial_id in self.heartbeat_trials([trial_id], worker)

    def append_metrics(
        self, trial_id: str, metrics: dict[str, Any], worker: str | None = None
    ) -> bool:
        """:meth:`append_metrics_many` of one: True if written."""
        return trial_id in self.append_metrics_many({trial_id: metrics}, worker=worker)

    def finish_trial(
        self,
        trial_id: str,
        state: TrialState,
        result: dict[str, Any] | None = None,
        error: str | None = None,
        worker: str | None = None,
    ) -> bool:
        """:meth:`finish_trials` of one: True if this call finished the trial."""
        return trial_id in self.finish_trials([(trial_id, state, result, error)], worker=worker)

    def is_cancel_requested(self, trial_id: str) -> bool:
        """:meth:`cancel_requested` of one. Raises NotFoundError if unknown."""
        return trial_id in self.cancel_requested([trial_id])

    # ---------------------------------------------------------------- what a backend implements
    @abc.abstractmethod
    def _claim_trials(
        self, trial_ids: list[str], worker: str, max_attempts: int | None
    ) -> list[TrialRecord]:
        """:meth:`claim_trials`, its arguments checked."""

    @abc.abstractmethod
    def _heartbeat_trials(self, trial_ids: list[str], worker: str) -> set[str]:
        """:meth:`heartbeat_trials`, its arguments checked."""

    @abc.abstractmethod
    def _append_metrics_many(
        self, epochs_by_id: dict[str, list[dict[str, Any]]], worker: str | None
    ) -> set[str]:
        """:meth:`append_metrics_many`, its arguments checked."""

    @abc.abstractmethod
    def _finish_trials(
        self,
        items: list[CheckedFinish],
        worker: str | None,
        epochs: dict[str, list[dict[str, Any]]],
    ) -> set[str]:
        """:meth:`finish_trials`, its arguments checked (``epochs`` holds only trials of
        ``items``, none with an empty list)."""

    @abc.abstractmethod
    def _cancel_requested(self, trial_ids: list[str]) -> set[str]:
        """:meth:`cancel_requested`, its arguments checked."""

    @abc.abstractmethod
    def _requeue_stale(self, cutoff: float) -> list[str]:
        """:meth:`requeue_stale`, its arguments checked."""

    @abc.abstractmethod
    def _release_trial(self, trial_id: str, worker: str) -> bool:
        """:meth:`release_trial`, its arguments checked."""
