"""ResultStore: the interface every backend implements. The contract is documented here only.

Vocabulary
----------
* An **experiment** is one submitted spec (``experiment_id`` = hash of the validated spec).
* A **trial** is one configuration to train, keyed *globally* by its ``trial_id`` (a hash of
  everything that determines its result). Two experiments that expand to the same
  configuration share one trial row; the trial lists both in ``experiment_ids``.
* ``seq`` is a store-wide change counter. Every trial write that changes what a reader sees
  (creation, claim, metrics append, finish, requeue, cancel) gives the trial a ``seq`` larger
  than any before it; heartbeats do not. A write of many rows gives each row its *own* seq,
  never a shared one (a reader paging with ``limit=N`` would skip the rest of a tie > N).
  ``list_trials(since=cursor)`` returns exactly what changed after ``cursor`` and never a row
  of ``seq`` n+1 while a write of ``seq`` n may still become visible, so a reader may always
  move its cursor to the largest ``seq`` it was given (``latest_seq()`` is the cursor to
  start from).

Trial life cycle
----------------
``QUEUED → RUNNING → COMPLETE | FAILED | DIVERGED | PRUNED | CANCELLED`` and
``QUEUED → CANCELLED | FAILED`` (cancelled before start, delivery cap reached), plus
``RUNNING → QUEUED`` by :meth:`ResultStore.requeue_stale` (silent heartbeat) and
:meth:`ResultStore.release_trial` (the owner is known to be dead).

Ownership: a RUNNING trial belongs to the ``worker`` that claimed it. Only that worker may
heartbeat it, append its metrics (when ``worker`` is passed) and finish it; a write from any
other worker (say, one whose trial was requeued after a network partition and claimed by
someone else) is refused. A finished trial is read-only forever: late or duplicate writes
are refused, never a second result.

Batches
-------
``claim_trials``, ``heartbeat_trials``, ``append_metrics_many``, ``finish_trials`` and
``cancel_requested`` do for many trials what the single-trial methods do for one, with the
same per-trial rules, in one round trip: one transaction on SQLite; on MongoDB one bulk
write of per-trial atomic updates (each trial all-or-nothing, the batch not). The
single-trial methods are batches of one.

Process and thread safety
-------------------------
Every method is safe to call from several threads and several processes (and, for MongoDB,
several machines) on the same store at once; each mutating call is atomic per trial
(SQLite: ``BEGIN IMMEDIATE`` in WAL mode with a busy timeout and retries; MongoDB: single
document atomic updates). A store object may be used across ``fork``: the child opens its
own connection on first use.

Retries
-------
Every write is safe to retry after a lost connection, even when the first attempt was
applied: a backend that retries by itself (MongoDB, on ``AutoReconnect``) answers as if the
first attempt had been the only one (a claim it won is returned, a finish it made is
reported), and a write its caller makes again changes nothing more (appended epochs are
placed by number, a finished trial stays as it is). ``take_dispatch`` is the exception: an
entry whose removal was applied but never answered reaches no taker (its trial stays
QUEUED until its experiment is submitted again).

Errors
------
``NotFoundError`` for an unknown experiment or trial id (a batch naming one changes
nothing), ``ValueError`` for a malformed argument (the message names it), ``StoreError``
when the store cannot be reached, read or written (the message names the URL or file),
``StoreCorruptError`` for a file that is not a dnnframe store (it is never modified),
``SchemaVersionError`` for a store written by a newer dnnframe.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from ..jsonsafe import dumps, json_safe
from .checks import MetricsBatch, check_page
from .export import write_csv, write_jsonl
from .records import ExperimentRecord, TrialRecord, TrialState, WorkerRecord
from .sorting import SORT_KEYS, resolve_sort_path

__all__ = ["SCHEMA_VERSION", "SORT_KEYS", "ExperimentRecord", "ResultStore", "TrialRecord",
           "TrialState", "WorkerRecord", "check_page", "dumps", "json_safe", "now",
           "resolve_sort_path"]

# Bumped whenever the on-disk layout changes; a store with a larger number refuses to open.
SCHEMA_VERSION = 1

FinishItem = tuple[str, TrialState | str, dict[str, Any] | None, str | None]


def now() -> float:
    """Wall-clock seconds since the epoch (one place, so tests can reason about it)."""
    return time.time()


class ResultStore(abc.ABC):
    """Where every experiment, trial and per-epoch metric lives; open one with ``open_store``.

    Backends implement the abstract methods (terse, no docs of their own); the conveniences
    at the bottom are written once here on top of them. See the module docstring for the
    life cycle, ownership, batches, concurrency and error rules that every method follows.
    """

    url: str = ""

    # ---------------------------------------------------------------- experiments
    @abc.abstractmethod
    def create_experiment(self, experiment_id: str, name: str, spec: dict[str, Any],
                          n_trials: int) -> ExperimentRecord:
        """Record an experiment (idempotent: an existing one is returned unchanged).

        ``spec`` is the validated spec as JSON, ``n_trials`` how many trials it expands to.
        Returns the stored record (with ``counts``). Raises ValueError for an empty id or a
        negative ``n_trials``.
        """

    @abc.abstractmethod
    def create_trials(self, experiment_id: str, trials: list[tuple[str, dict[str, Any]]]) -> int:
        """Create QUEUED trials and link them to the experiment, all in one transaction.

        Idempotent: a trial id that already exists (from this or another experiment) is not
        duplicated and keeps its state and results; it is only linked to ``experiment_id``.
        ``trials`` are ``(trial_id, TrialConfig.model_dump(mode="json"))`` pairs.

        Returns:
            How many trial rows were new.
        Raises:
            NotFoundError: unknown experiment.  ValueError: an empty id or non-dict config.
        """

    @abc.abstractmethod
    def cancel_experiment(self, experiment_id: str) -> int:
        """Request cancellation: set ``cancel_requested`` and turn its QUEUED trials CANCELLED.

        A QUEUED trial shared with another experiment that is not cancelled stays QUEUED.
        RUNNING trials are not touched here: ``cancel_requested`` tells their runner to stop
        at the next epoch, and the runner finishes them as CANCELLED.

        Returns how many QUEUED trials became CANCELLED. Raises NotFoundError if unknown.
        """

    @abc.abstractmethod
    def requeue_trials(self, experiment_id: str,
                       states: list[TrialState] | tuple[TrialState, ...] | TrialState
                       = (TrialState.CANCELLED,)) -> list[str]:
        """Resume an experiment: lift ``cancel_requested`` and put its trials in ``states`` back
        to QUEUED (the one sanctioned way out of a finished state).

        The trial's result, error, worker and times are cleared and ``attempts`` is reset so
        the delivery cap counts afresh. COMPLETE trials are never requeued.

        Returns:
            The requeued trial ids.
        Raises:
            NotFoundError: unknown experiment.  ValueError: a state other than CANCELLED,
            FAILED, DIVERGED or PRUNED.
        """

    @abc.abstractmethod
    def delete_experiment(self, experiment_id: str) -> int:
        """Remove an experiment that is over, with every trial that belongs to it alone.

        A trial it shares with another experiment stays, results and all, and only loses its
        link to this one (its ``seq`` moves, as its ``experiment_ids`` changed). Queued
        dispatches of the removed trials go too. Idempotent: an unknown (or already
        deleted) experiment removes nothing and returns 0, so a retry after a lost
        connection is safe.

        Returns:
            How many trials were removed.
        Raises:
            ExperimentActiveError: a trial that belongs to it alone is QUEUED or RUNNING
                (nothing is removed; cancel the experiment and let its trials stop first).
            ValueError: an empty experiment id.
        """

    @abc.abstractmethod
    def get_experiment(self, experiment_id: str) -> ExperimentRecord:
        """The experiment with its trial ``counts``. Raises NotFoundError if unknown."""

    @abc.abstractmethod
    def list_experiments(self, limit: int = 100, offset: int = 0) -> list[ExperimentRecord]:
        """Experiments, newest first, with their ``counts``."""

    # ---------------------------------------------------------------- trial life cycle
    @abc.abstractmethod
    def claim_trials(self, trial_ids: list[str], worker: str,
                     max_attempts: int | None = None) -> list[TrialRecord]:
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

    @abc.abstractmethod
    def heartbeat_trials(self, trial_ids: list[str], worker: str) -> set[str]:
        """Refresh ``heartbeat_at`` of each trial that is RUNNING and owned by ``worker``.

        Returns the ids still owned; a missing id tells the caller it lost that trial and
        should stop it. Writes nothing to the others.
        """

    @abc.abstractmethod
    def append_metrics_many(self, metrics_by_id: MetricsBatch,
                            worker: str | None = None) -> set[str]:
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

    @abc.abstractmethod
    def finish_trials(self, items: list[FinishItem], worker: str | None = None) -> set[str]:
        """Finish trials: ``items`` are ``(trial_id, state, result, error)`` tuples.

        Each trial gets its state, ``result`` (``TrialResult.to_dict()``), ``error`` and
        ``finished_at``. Allowed from RUNNING (when ``worker`` is given it must be the owner)
        to any finished state, and from QUEUED to CANCELLED.

        Returns:
            The ids this call finished; the others were refused (already finished, QUEUED
            with a state other than CANCELLED, or owned by another worker).
        Raises:
            NotFoundError: an unknown trial (nothing is finished).  ValueError: a state that
            is not a finished state, or a malformed item.
        """

    @abc.abstractmethod
    def cancel_requested(self, trial_ids: list[str]) -> set[str]:
        """The ids whose trial is CANCELLED or all of whose experiments asked to cancel
        (the runner stops those now). Raises NotFoundError for an unknown trial."""

    @abc.abstractmethod
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

    @abc.abstractmethod
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

    # ---------------------------------------------------------------- dispatch
    @abc.abstractmethod
    def hold_dispatch(self, items: list[tuple[str, str]]) -> None:
        """Remember QUEUED trials whose message could not be sent yet (the broker was
        down): ``(trial_id, queue)`` pairs. Idempotent: a trial held again keeps one entry,
        with the latest queue. Whoever reaches the broker later sends them (see
        :meth:`take_dispatch`). Raises ValueError for a malformed pair.
        """

    @abc.abstractmethod
    def take_dispatch(self, limit: int = 500) -> list[tuple[str, str]]:
        """Remove and return up to ``limit`` held ``(trial_id, queue)`` pairs, oldest first.

        Atomic per entry: with several callers at once each entry goes to exactly one. A
        caller that then fails to send them holds them again. Raises ValueError for a
        ``limit`` below 1.
        """

    # ---------------------------------------------------------------- queries
    @abc.abstractmethod
    def get_trial(self, trial_id: str) -> TrialRecord:
        """The trial with config, metrics and result. Raises NotFoundError if unknown."""

    @abc.abstractmethod
    def list_trials(self, experiment_id: str | None = None,
                    state: TrialState | list[TrialState] | None = None,
                    sort_by: str | None = None, descending: bool = False,
                    limit: int | None = None, offset: int = 0,
                    since: int | None = None) -> list[TrialRecord]:
        """Trials, filtered, sorted and paginated.

        Args:
            experiment_id: only trials linked to this experiment.
            state: one state or a list of states.
            sort_by: a key of ``SORT_KEYS`` or a dotted path (see ``resolve_sort_path``);
                trials without a value sort last in both directions. Default: creation
                order, or change (``seq``) order when ``since`` is given.
            descending: reverse the order (nulls still last).
            limit, offset: pagination.
            since: only trials whose ``seq`` is greater, in ascending change order (see the
                module docstring); any other order is refused, as it would lose rows.
        Raises:
            ValueError: bad ``sort_by``, ``state``, ``limit``, ``offset`` or ``since``, or
            ``since`` with an order other than ascending ``seq``.
        """

    @abc.abstractmethod
    def rung_values(self, experiment_id: str, epoch: int, metric: str) -> list[float]:
        """What the trials of an experiment reported for ``metric`` at ``epoch`` (ASHA's rungs).

        One value per trial of ``experiment_id`` (any state: running, finished, pruned)
        whose learning curve holds epoch ``epoch`` at position ``epoch - 1`` with a finite
        ``metric``; trials without one (and unknown experiments) give none. The caller's
        own epoch, written by :meth:`append_metrics_many` before it asks, is included.
        Order is unspecified.

        Raises:
            ValueError: ``epoch`` < 1 or ``metric`` not a plain name (letters, digits, _).
        """

    @abc.abstractmethod
    def latest_seq(self) -> int:
        """The cursor for ``since``: every change up to it is visible (0 for an empty store)."""

    @abc.abstractmethod
    def _count_states(self, experiment_id: str | None) -> dict[str, int]:
        """Trials by state (only states present), for one experiment or the whole store."""

    # ---------------------------------------------------------------- workers
    @abc.abstractmethod
    def register_worker(self, name: str, host: str | None = None, pid: int | None = None,
                        current_trial: str | None = None, trials_done: int = 0,
                        info: dict[str, Any] | None = None) -> None:
        """Record what worker ``name`` is doing now (a full upsert; ``last_seen`` = now)."""

    @abc.abstractmethod
    def list_workers(self, seen_within_s: float | None = None) -> list[WorkerRecord]:
        """Workers by name; with ``seen_within_s``, only those seen that recently."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections; the store object must not be used afterwards."""

    # ---------------------------------------------------------------- single trials
    def claim_trial(self, trial_id: str, worker: str,
                    max_attempts: int | None = None) -> TrialRecord | None:
        """:meth:`claim_trials` of one: the record, or None when not claimed."""
        won = self.claim_trials([trial_id], worker, max_attempts=max_attempts)
        return won[0] if won else None

    def heartbeat(self, trial_id: str, worker: str) -> bool:
        """:meth:`heartbeat_trials` of one: False when the caller lost the trial."""
        return trial_id in self.heartbeat_trials([trial_id], worker)

    def append_metrics(self, trial_id: str, metrics: dict[str, Any],
                       worker: str | None = None) -> bool:
        """:meth:`append_metrics_many` of one: True if written."""
        return trial_id in self.append_metrics_many({trial_id: metrics}, worker=worker)

    def finish_trial(self, trial_id: str, state: TrialState, result: dict[str, Any] | None = None,
                     error: str | None = None, worker: str | None = None) -> bool:
        """:meth:`finish_trials` of one: True if this call finished the trial."""
        return trial_id in self.finish_trials([(trial_id, state, result, error)], worker=worker)

    def is_cancel_requested(self, trial_id: str) -> bool:
        """:meth:`cancel_requested` of one. Raises NotFoundError if unknown."""
        return trial_id in self.cancel_requested([trial_id])

    # ---------------------------------------------------------------- conveniences
    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def counts_by_state(self, experiment_id: str | None = None) -> dict[str, int]:
        """Trials by state, every state present (zeros included), for one experiment or all."""
        counts = {s.value: 0 for s in TrialState}
        counts.update(self._count_states(experiment_id))
        return counts

    def best_trial(self, experiment_id: str | None = None, metric: str = "test_accuracy",
                   mode: str = "max") -> TrialRecord | None:
        """The COMPLETE trial with the best ``metric`` (any ``sort_by`` key), or None.

        Raises:
            ValueError: ``mode`` not "max"/"min" or a bad metric key.
        """
        if mode not in ("max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', got {mode!r}")
        rows = self.list_trials(experiment_id=experiment_id, state=TrialState.COMPLETE,
                                sort_by=metric, descending=(mode == "max"), limit=1)
        if not rows or rows[0].value(metric) is None:
            return None
        return rows[0]

    def iter_trials(self, experiment_id: str | None = None,
                    state: TrialState | list[TrialState] | None = None,
                    page_size: int = 500) -> Iterator[TrialRecord]:
        """Every matching trial in creation order, fetched a page at a time."""
        if not isinstance(page_size, int) or page_size < 1:
            raise ValueError(f"page_size must be an integer >= 1, got {page_size!r}")
        offset = 0
        while True:
            page = self.list_trials(experiment_id=experiment_id, state=state, limit=page_size,
                                    offset=offset)
            yield from page
            if len(page) < page_size:
                return
            offset += len(page)

    def export_jsonl(self, out: str | Path | TextIO, experiment_id: str | None = None,
                     state: TrialState | list[TrialState] | None = None) -> int:
        """Write one JSON object per trial (``TrialRecord.to_dict()``, everything). Returns rows."""
        return write_jsonl(self.iter_trials(experiment_id, state), out)

    def export_csv(self, out: str | Path | TextIO, experiment_id: str | None = None,
                   state: TrialState | list[TrialState] | None = None) -> int:
        """Write one flat row per trial (:func:`dnnframe.store.rows.export_row`: ids, state,
        ISO 8601 UTC times, ``config.*`` and ``result.*``). Returns the number of rows."""
        return write_csv(self.iter_trials(experiment_id, state), out)
