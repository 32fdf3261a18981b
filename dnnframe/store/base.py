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
The decisions (who wins a claim, what a finish, requeue or release writes, what each
refusal says) are one policy, :mod:`dnnframe.store.lifecycle`, that every backend applies.

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
own connection on first use. The in-memory backend (``memory://``) is the exception: safe
across threads (one lock), but its data lives in one process and no other can see it.

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
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from ..jsonsafe import dumps, json_safe
from ..metrics import DEFAULT_OBJECTIVE_METRIC, DEFAULT_OBJECTIVE_MODE, check_mode
from ..states import SCORED_STATE
from .base_trials import FinishItem, TrialMethods, now
from .checks import (
    StateFilter,
    check_experiment_args,
    check_experiment_id,
    check_experiment_ids,
    check_fields,
    check_ids,
    check_page,
    check_rung_args,
    check_trial_items,
    check_value_paths,
    check_worker,
    requeue_state_list,
    state_list,
)
from .export import write_csv, write_jsonl
from .leases import LeaseMethods, LeaseRecord
from .notes import NoteMethods
from .records import (
    BULKY_FIELDS,
    ExperimentRecord,
    TrialRecord,
    TrialState,
    TrialTally,
    WorkerRecord,
)
from .sorting import SORT_KEYS, check_since_order, resolve_sort_path

__all__ = ["BULKY_FIELDS", "SCHEMA_VERSION", "SORT_KEYS", "ExperimentRecord", "FinishItem",
           "LeaseRecord", "ResultStore", "TrialRecord", "TrialState", "WorkerRecord", "check_page", "dumps",
           "json_safe", "now", "resolve_sort_path"]

# Bumped whenever the on-disk layout changes; a store with a larger number refuses to open.
SCHEMA_VERSION = 1


class ResultStore(TrialMethods, LeaseMethods, NoteMethods):
    """Where every experiment, trial and per-epoch metric lives; open one with ``open_store``.

    The public methods check their arguments once, here and in :class:`TrialMethods` (the
    trial life cycle), then call the backend's ``_``-named abstract method; backends
    implement those (terse, no docs of their own), and the conveniences at the bottom are
    written once here on top of them. See the module docstring for the life cycle,
    ownership, batches, concurrency and error rules that every method follows.
    """

    url: str = ""

    # ---------------------------------------------------------------- experiments
    def create_experiment(self, experiment_id: str, name: str, spec: dict[str, Any],
                          n_trials: int) -> ExperimentRecord:
        """Record an experiment (idempotent: an existing one is returned unchanged).

        ``spec`` is the validated spec as JSON, ``n_trials`` how many trials it expands to.
        Returns the stored record (with ``counts``). Raises ValueError for an empty id or a
        negative ``n_trials``.
        """
        check_experiment_args(experiment_id, n_trials)
        return self._create_experiment(experiment_id, name, spec, n_trials)

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
        return self._create_trials(experiment_id, check_trial_items(trials))

    def cancel_experiment(self, experiment_id: str) -> int:
        """Request cancellation: set ``cancel_requested`` and turn its QUEUED trials CANCELLED.

        A QUEUED trial shared with another experiment that is not cancelled stays QUEUED.
        RUNNING trials are not touched here: ``cancel_requested`` tells their runner to stop
        at the next epoch, and the runner finishes them as CANCELLED.

        Returns how many QUEUED trials became CANCELLED. Raises NotFoundError if unknown.
        """
        return self._cancel_experiment(experiment_id)

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
        return self._requeue_trials(experiment_id, requeue_state_list(states))

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
        check_experiment_id(experiment_id)
        return self._delete_experiment(experiment_id)

    def get_experiment(self, experiment_id: str) -> ExperimentRecord:
        """The experiment with its trial ``counts`` and ``reruns``. Raises NotFoundError if
        unknown."""
        return self._get_experiment(experiment_id)

    def list_experiments(self, limit: int = 100, offset: int = 0) -> list[ExperimentRecord]:
        """Experiments, newest first, with their ``counts`` and ``reruns`` (all counted in one
        query)."""
        check_page(limit, offset)
        return self._list_experiments(limit, offset)

    # ---------------------------------------------------------------- queries
    def get_trial(self, trial_id: str) -> TrialRecord:
        """The trial with config, metrics and result. Raises NotFoundError if unknown."""
        return self._get_trial(trial_id)

    def get_trials(self, trial_ids: list[str],
                   fields: Iterable[str] | None = None) -> list[TrialRecord]:
        """Several trials in one read, in the order of ``trial_ids`` (a repeated id once).

        ``fields`` as for :meth:`list_trials`.

        Raises:
            NotFoundError: an unknown trial id (naming it).  ValueError: a malformed id list
            or ``fields``.
        """
        ids = check_ids(trial_ids)
        wanted = check_fields(fields)
        return self._get_trials(ids, wanted) if ids else []

    def list_trials(self, experiment_id: str | None = None,
                    state: StateFilter = None,
                    sort_by: str | None = None, descending: bool = False,
                    limit: int | None = None, offset: int = 0,
                    since: int | None = None,
                    fields: Iterable[str] | None = None) -> list[TrialRecord]:
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
            fields: which bulky fields to read (any of ``BULKY_FIELDS``: ``config``,
                ``result``, ``metrics``); None reads all. The others are not read from the
                store and keep their empty values (``{}``, None, ``[]``); every other field
                is always read. Filtering and sorting see the whole row either way.
        Raises:
            ValueError: bad ``sort_by``, ``state``, ``limit``, ``offset``, ``since`` or
            ``fields``, or ``since`` with an order other than ascending ``seq``.
        """
        check_page(limit, offset)
        check_since_order(since, sort_by, descending)
        wanted = check_fields(fields)
        if sort_by is not None:
            resolve_sort_path(sort_by)  # refused before any backend work
        return self._list_trials(experiment_id, state_list(state), sort_by, descending, limit, offset,
                                 since, wanted)

    def running_owners(self) -> list[TrialRecord]:
        """The RUNNING trials with who owns them and since when (``worker``,
        ``started_at``, ``heartbeat_at``), their bulky fields not read: what a reaper judges."""
        return self.list_trials(state=TrialState.RUNNING, fields=())

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
        check_rung_args(epoch, metric)
        return self._rung_values(experiment_id, epoch, metric)

    def trial_values(self, experiment_id: str, paths: Sequence[str]) -> list[dict[str, Any]]:
        """A few values of every trial of an experiment, without reading the rest of its row.

        One dict per trial linked to ``experiment_id``, in creation order: ``id``, ``state``
        (a :class:`TrialState`), ``error``, and each of ``paths`` (a dotted path into the
        trial's ``config`` or ``result``, e.g. ``config.model.width`` or
        ``result.metrics.test_accuracy``) mapped to its JSON value there, None where the
        trial has none. What a summary of thousands of trials needs: the backends read
        these values inside the store, never the learning curves they sit beside.

        Raises:
            ValueError: a path that is not ``config.`` or ``result.`` followed by plain
                names (letters, digits, _).
        """
        check_experiment_id(experiment_id)
        return self._trial_values(experiment_id, check_value_paths(paths))

    def _trial_values(self, experiment_id: str, paths: tuple[str, ...]) -> list[dict[str, Any]]:
        """:meth:`trial_values`, its arguments checked; this reads whole rows, and backends
        that can project inside the store override it."""
        out = []
        for t in self.iter_trials(experiment_id):
            row: dict[str, Any] = {"id": t.id, "state": t.state, "error": t.error}
            for path in paths:
                column, *keys = path.split(".")
                value: Any = t.config if column == "config" else t.result
                for key in keys:
                    value = value.get(key) if isinstance(value, dict) else None
                row[path] = value
            out.append(row)
        return out

    @abc.abstractmethod
    def latest_seq(self) -> int:
        """The cursor for ``since``: every change up to it is visible (0 for an empty store)."""

    @abc.abstractmethod
    def _count_states(self, experiment_id: str | None) -> dict[str, int]:
        """Trials by state (only states present), for one experiment or the whole store."""

    @abc.abstractmethod
    def _tally_many(self, experiment_ids: list[str]) -> dict[str, TrialTally]:
        """The trials of each experiment that has any, counted by state and re-runs, in one
        query (what its record's ``counts`` and ``reruns`` hold)."""

    # ---------------------------------------------------------------- workers

    def register_worker(self, name: str, host: str | None = None, pid: int | None = None,
                        current_trial: str | None = None, trials_done: int = 0,
                        info: dict[str, Any] | None = None) -> None:
        """Record what worker ``name`` is doing now (a full upsert; ``last_seen`` = now)."""
        check_worker(name, "worker name")
        self._register_worker(name, host, pid, current_trial, trials_done, info)

    @abc.abstractmethod
    def list_workers(self, seen_within_s: float | None = None) -> list[WorkerRecord]:
        """Workers by name; with ``seen_within_s``, only those seen that recently."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections; the store object must not be used afterwards."""

    # ---------------------------------------------------------------- what a backend implements
    @abc.abstractmethod
    def _create_experiment(self, experiment_id: str, name: str, spec: dict[str, Any],
                           n_trials: int) -> ExperimentRecord:
        """:meth:`create_experiment`, its arguments checked."""

    @abc.abstractmethod
    def _create_trials(self, experiment_id: str,
                       trials: list[tuple[str, dict[str, Any]]]) -> int:
        """:meth:`create_trials`, its arguments checked."""

    @abc.abstractmethod
    def _cancel_experiment(self, experiment_id: str) -> int:
        """:meth:`cancel_experiment`, its arguments checked."""

    @abc.abstractmethod
    def _requeue_trials(self, experiment_id: str, states: list[str]) -> list[str]:
        """:meth:`requeue_trials`, its arguments checked."""

    @abc.abstractmethod
    def _delete_experiment(self, experiment_id: str) -> int:
        """:meth:`delete_experiment`, its arguments checked."""

    @abc.abstractmethod
    def _get_experiment(self, experiment_id: str) -> ExperimentRecord:
        """:meth:`get_experiment`, its arguments checked."""

    @abc.abstractmethod
    def _list_experiments(self, limit: int | None, offset: int) -> list[ExperimentRecord]:
        """:meth:`list_experiments`, its arguments checked."""

    @abc.abstractmethod
    def _get_trials(self, trial_ids: list[str], fields: frozenset[str]) -> list[TrialRecord]:
        """:meth:`get_trials`, its arguments checked (distinct ids, at least one)."""

    @abc.abstractmethod
    def _get_trial(self, trial_id: str) -> TrialRecord:
        """:meth:`get_trial`, its arguments checked."""

    @abc.abstractmethod
    def _list_trials(self, experiment_id: str | None, states: list[str] | None,
                     sort_by: str | None, descending: bool, limit: int | None, offset: int,
                     since: int | None, fields: frozenset[str]) -> list[TrialRecord]:
        """:meth:`list_trials`, its arguments checked."""

    @abc.abstractmethod
    def _rung_values(self, experiment_id: str, epoch: int, metric: str) -> list[float]:
        """:meth:`rung_values`, its arguments checked."""

    @abc.abstractmethod
    def _register_worker(self, name: str, host: str | None, pid: int | None,
                         current_trial: str | None, trials_done: int,
                         info: dict[str, Any] | None) -> None:
        """:meth:`register_worker`, its arguments checked."""

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

    def counts_by_experiment(self, experiment_ids: list[str]) -> dict[str, dict[str, int]]:
        """:meth:`counts_by_state` of several experiments in one query: ``{experiment_id:
        counts}`` for each id given (an unknown one has all zeros). Raises ValueError for a
        malformed id list."""
        ids = check_experiment_ids(experiment_ids)
        found = self._tally_many(ids) if ids else {}
        return {eid: {**{s.value: 0 for s in TrialState}, **found.get(eid, TrialTally()).counts}
                for eid in ids}

    def best_trial(self, experiment_id: str | None = None,
                   metric: str = DEFAULT_OBJECTIVE_METRIC,
                   mode: str = DEFAULT_OBJECTIVE_MODE) -> TrialRecord | None:
        """The COMPLETE trial with the best ``metric`` (any ``sort_by`` key), or None; the
        first created wins a tie (the order :func:`dnnframe.metrics.best_first` ranks in).

        Raises:
            ValueError: ``mode`` not "max"/"min" or a bad metric key.
        """
        check_mode(mode)
        rows = self.list_trials(experiment_id=experiment_id, state=SCORED_STATE,
                                sort_by=metric, descending=(mode == "max"), limit=1)
        if not rows or rows[0].value(metric) is None:
            return None
        return rows[0]

    def iter_trials(self, experiment_id: str | None = None,
                    state: StateFilter = None,
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
                     state: StateFilter = None) -> int:
        """Write one JSON object per trial (``TrialRecord.to_dict()``, everything). Returns rows."""
        return write_jsonl(self.iter_trials(experiment_id, state), out)

    def export_csv(self, out: str | Path | TextIO, experiment_id: str | None = None,
                   state: StateFilter = None) -> int:
        """Write one flat row per trial (:func:`dnnframe.store.rows.export_row`: ids, state,
        ISO 8601 UTC times, ``config.*`` and ``result.*``). Returns the number of rows."""
        return write_csv(self.iter_trials(experiment_id, state), out)
