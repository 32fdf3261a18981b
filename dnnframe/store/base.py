"""ResultStore: the interface every backend implements. The rules every part follows are
documented here only.

Parts
-----
``ResultStore`` is composed of one small abstract class per concern, each in its own
module with its public methods (argument checks) and the ``_``-named abstract methods a
backend implements:

* :mod:`~dnnframe.store.experiments`: experiments, their trials created and counted;
* :mod:`~dnnframe.store.queries`: trial reads, the change cursor, rung values, exports;
* :mod:`~dnnframe.store.base_trials`: the trial life cycle (claims to finishes);
* :mod:`~dnnframe.store.outbox`: the dispatch outbox (``hold_dispatch``/``take_dispatch``);
* :mod:`~dnnframe.store.workers`: the worker registry;
* :mod:`~dnnframe.store.leases`: leases;
* :mod:`~dnnframe.store.notes`: notes on experiments and trials.

Each backend follows the same split: experiments and queries in its main module, the
other parts in mixins beside it (``sqlite_trials.py``, ``lease_backends.py``,
``outbox_backends.py``, ``worker_backends.py``, ``note_backends.py``; MongoDB's in
``mongo_*.py``).

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

from ..jsonsafe import dumps, json_safe
from .base_trials import FinishItem, TrialMethods, now
from .checks import check_page
from .experiments import ExperimentMethods
from .leases import LeaseMethods, LeaseRecord
from .notes import NoteMethods
from .outbox import OutboxMethods
from .queries import TrialQueries
from .records import (
    BULKY_FIELDS,
    ExperimentRecord,
    TrialRecord,
    TrialState,
    WorkerRecord,
)
from .sorting import SORT_KEYS, resolve_sort_path
from .workers import WorkerMethods

__all__ = [
    "BULKY_FIELDS",
    "SCHEMA_VERSION",
    "SORT_KEYS",
    "ExperimentRecord",
    "FinishItem",
    "LeaseRecord",
    "ResultStore",
    "TrialRecord",
    "TrialState",
    "WorkerRecord",
    "check_page",
    "dumps",
    "json_safe",
    "now",
    "resolve_sort_path",
]

# Bumped whenever the on-disk layout changes; a store with a larger number refuses to open.
SCHEMA_VERSION = 1


class ResultStore(
    ExperimentMethods,
    TrialQueries,
    TrialMethods,
    OutboxMethods,
    WorkerMethods,
    LeaseMethods,
    NoteMethods,
):
    """Where every experiment, trial and per-epoch metric lives; open one with ``open_store``.

    The composition of the contract's parts (see "Parts" in the module docstring): each
    public method checks its arguments once, in its part, then calls the backend's
    ``_``-named abstract method; backends implement those (terse, no docs of their own).
    See the module docstring for the life cycle, ownership, batches, concurrency and error
    rules that every method follows.
    """

    url: str = ""

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections; the store object must not be used afterwards."""

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
