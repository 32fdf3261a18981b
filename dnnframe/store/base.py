"""ResultStore: the interface every backend implements. The contract is documented here only.

Vocabulary
----------
* An **experiment** is one submitted spec (``experiment_id`` = hash of the validated spec).
* A **trial** is one configuration to train, keyed *globally* by its ``trial_id`` (a hash of
  everything that determines its result). Two experiments that expand to the same
  configuration share one trial row; the trial lists both in ``experiment_ids``.
* ``seq`` is a store-wide change counter. Every trial write that changes what a reader sees
  (creation, claim, metrics append, finish, requeue, cancel) gives the trial a ``seq`` larger
  than any before it, so ``list_trials(since=cursor)`` returns exactly what changed after
  ``cursor`` (``latest_seq()`` is the cursor to remember). Heartbeats do not bump ``seq``.
  A call that writes many rows at once (``create_trials``, ``cancel_experiment``,
  ``requeue_trials``, ``requeue_stale``) gives each row its *own* seq, never a shared one: a
  reader paging with ``since=max(seq of the last page), limit=N`` would otherwise skip the
  rest of a tie larger than ``N``.

Trial life cycle
----------------
``QUEUED → RUNNING → COMPLETE | FAILED | DIVERGED | PRUNED | CANCELLED`` and
``QUEUED → CANCELLED | FAILED`` (cancelled before start, delivery cap reached), plus
``RUNNING → QUEUED`` by :meth:`ResultStore.requeue_stale` (silent heartbeat) and
:meth:`ResultStore.release_trial` (the owner is known to be dead).

Ownership: a RUNNING trial belongs to the ``worker`` that claimed it. Only that worker may
heartbeat it, append its metrics (when ``worker`` is passed) and finish it; a write from any other worker (say, a worker whose trial was
requeued after a network partition and claimed by someone else) is refused. A finished trial
is read-only forever: late or duplicate writes are refused (``finish_trial`` returns False,
``append_metrics`` and ``heartbeat`` do nothing), never a second result.

Process and thread safety
-------------------------
Every method is safe to call from several threads and several processes (and, for MongoDB,
several machines) on the same store at once; each mutating call is one atomic transaction
(SQLite: ``BEGIN IMMEDIATE`` in WAL mode with a busy timeout and retries; MongoDB: single
document atomic updates / find-and-modify). A store object may be used across ``fork``: the
child opens its own connection on first use.

Errors
------
``NotFoundError`` for an unknown experiment or trial id, ``ValueError`` for a malformed
argument (the message names it), ``StoreError`` when the store cannot be reached, read or
written (the message names the URL or file), ``StoreCorruptError`` for a file that is not a
dnnframe store (it is never modified), ``SchemaVersionError`` for a store written by a newer
dnnframe.
"""

from __future__ import annotations

import abc
import csv
import enum
import io
import json
import math
import re
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

# Bumped whenever the on-disk layout changes; a store with a larger number refuses to open.
SCHEMA_VERSION = 1

# Columns ``list_trials(sort_by=...)`` accepts as they are. Anything else is a dotted path
# into the stored JSON (``result.metrics.test_accuracy``, ``config.model.hidden_layers``) or
# one of the short metric names below.
SORT_COLUMNS = ("created_at", "started_at", "finished_at", "heartbeat_at", "state", "attempts",
                "seq", "worker", "id")
SORT_ALIASES = {
    "train_seconds": "result.timings.train",
    "compile_seconds": "result.timings.compile",
    "data_seconds": "result.timings.data",
    "total_seconds": "result.timings.total",
    "n_params": "result.n_params",
    "epochs_run": "result.epochs_run",
}
_PATH_PART = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class TrialState(str, enum.Enum):
    """Where a trial is in its life cycle (see the module docstring)."""

    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"
    DIVERGED = "DIVERGED"
    PRUNED = "PRUNED"
    CANCELLED = "CANCELLED"

    @property
    def is_finished(self) -> bool:
        """True for every terminal state (the trial is read-only from then on)."""
        return self not in (TrialState.QUEUED, TrialState.RUNNING)


@dataclass
class ExperimentRecord:
    """One submitted experiment; ``counts`` (trials by state) is filled on every read."""

    id: str
    name: str
    spec: dict[str, Any]
    n_trials: int
    created_at: float
    cancel_requested: bool = False
    counts: dict[str, int] = field(default_factory=dict)  # trials by state (filled on read)

    @property
    def status(self) -> str:
        """Derived from trial states: QUEUED, RUNNING, COMPLETE, COMPLETE_WITH_FAILURES,
        FAILED or CANCELLED.

        RUNNING while any trial runs, or while some trials are finished and others still wait
        (work in progress); CANCELLED once cancel was requested and nothing runs any more;
        once every trial is finished: FAILED when all of them failed, COMPLETE_WITH_FAILURES
        when some did, COMPLETE otherwise; QUEUED before any trial started.
        """
        running = self.counts.get(TrialState.RUNNING.value, 0)
        queued = self.counts.get(TrialState.QUEUED.value, 0)
        total = sum(self.counts.values())
        if running:
            return "RUNNING"
        if self.cancel_requested:
            return "CANCELLED"
        if queued:
            return "RUNNING" if queued < total else "QUEUED"
        failed = self.counts.get(TrialState.FAILED.value, 0)
        if not total:
            return "QUEUED"
        if failed:
            return "FAILED" if failed == total else "COMPLETE_WITH_FAILURES"
        return "COMPLETE"


@dataclass
class TrialRecord:
    """One trial as stored; see the module docstring for states and ownership."""

    id: str
    experiment_ids: list[str]
    state: TrialState
    config: dict[str, Any]               # TrialConfig.model_dump(mode="json")
    result: dict[str, Any] | None = None  # TrialResult.to_dict() once finished
    metrics: list[dict[str, Any]] = field(default_factory=list)  # one dict per epoch
    error: str | None = None             # traceback / reason for FAILED, DIVERGED, CANCELLED
    worker: str | None = None
    attempts: int = 0                    # how many times it was claimed (delivery cap)
    created_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    heartbeat_at: float | None = None
    seq: int = 0                         # monotonically increasing change cursor

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (what ``export_jsonl`` writes and the REST API returns)."""
        d = asdict(self)
        d["state"] = self.state.value
        return d

    def value(self, path: str) -> Any:
        """The value at a ``sort_by`` path (``"test_accuracy"``, ``"config.model.width"``), or None."""
        path = resolve_sort_path(path)
        if "." not in path:
            v = getattr(self, path)
            return v.value if isinstance(v, TrialState) else v
        node: Any = self.to_dict()
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return node


@dataclass
class WorkerRecord:
    """What a worker last reported about itself (``register_worker``)."""

    name: str
    host: str | None = None
    pid: int | None = None
    current_trial: str | None = None
    trials_done: int = 0
    last_seen: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)


def resolve_sort_path(sort_by: str) -> str:
    """Validate a ``sort_by`` value and return a column name or a dotted JSON path.

    A column (``created_at``, ``state``, …) is returned as is; a short metric name
    (``test_accuracy``) means ``result.metrics.test_accuracy``; ``train_seconds`` and friends
    map into ``result.timings``; a dotted path must start with ``result.``, ``config.`` and
    consist of identifiers only (so it can never smuggle SQL or a Mongo operator).

    Raises:
        ValueError: naming the bad value and what is accepted.
    """
    if not isinstance(sort_by, str) or not sort_by:
        raise ValueError(f"sort_by must be a non-empty string, got {sort_by!r}")
    if sort_by in SORT_COLUMNS:
        return sort_by
    path = SORT_ALIASES.get(sort_by, sort_by)
    parts = path.split(".")
    if len(parts) == 1:
        parts = ["result", "metrics", parts[0]]
    if parts[0] not in ("result", "config") or len(parts) < 2 or not all(
            _PATH_PART.match(p) for p in parts):
        raise ValueError(
            f"sort_by={sort_by!r} is not sortable: use one of {', '.join(SORT_COLUMNS)}, a "
            "metric name such as 'test_accuracy' or 'train_seconds', or a dotted path of "
            "identifiers starting with 'result.' or 'config.' (e.g. 'config.model.hidden_layers')")
    return ".".join(parts)


def json_safe(value: Any) -> Any:
    """Copy ``value`` into plain JSON: numpy scalars/arrays unwrapped, NaN/±inf become None.

    Stored documents must be strict JSON (SQLite's JSON functions and the REST API reject
    NaN); a diverged loss is recorded as null, and the trial's state says why.
    """
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, enum.Enum):
        return json_safe(value.value)
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "tolist"):  # numpy scalar or array, without importing numpy
        return json_safe(value.tolist())
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot store a value of type {type(value).__name__} ({value!r:.80}) as JSON")


def dumps(value: Any) -> str:
    """Compact strict JSON of ``json_safe(value)``."""
    return json.dumps(json_safe(value), separators=(",", ":"), allow_nan=False)


def check_trial_items(trials: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """Validate ``create_trials`` input: (non-empty id, config dict) pairs, else ValueError."""
    items = []
    for i, item in enumerate(trials):
        try:
            tid, config = item
        except (TypeError, ValueError):
            raise ValueError(f"trials[{i}] must be a (trial_id, config_dict) pair, "
                             f"got {item!r:.100}") from None
        if not tid or not isinstance(tid, str):
            raise ValueError(f"trials[{i}]: trial id must be a non-empty string, got {tid!r}")
        if not isinstance(config, dict):
            raise ValueError(f"trials[{i}] ({tid}): config must be a dict, "
                             f"got {type(config).__name__}")
        items.append((tid, config))
    return items


def check_finish_state(state: TrialState | str) -> TrialState:
    """Coerce ``state`` to a terminal TrialState or raise ValueError naming it."""
    try:
        st = TrialState(state)
    except ValueError:
        raise ValueError(f"state={state!r} is not a trial state; use one of "
                         f"{', '.join(s.value for s in TrialState)}") from None
    if not st.is_finished:
        raise ValueError(f"finish_trial needs a finished state, got {st.value}")
    return st


REQUEUABLE_STATES = ("CANCELLED", "FAILED", "DIVERGED", "PRUNED")


def requeue_state_list(states: list[TrialState] | tuple[TrialState, ...] | TrialState | str
                       ) -> list[str]:
    """Validate the ``states`` of ``requeue_trials``: finished, and never COMPLETE."""
    names = state_list(states) or []
    bad = [s for s in names if s not in REQUEUABLE_STATES]
    if bad:
        raise ValueError(f"requeue_trials cannot requeue {', '.join(bad)} trials; allowed: "
                         f"{', '.join(REQUEUABLE_STATES)} (COMPLETE results are never discarded)")
    return names


def state_list(state: TrialState | str | list[TrialState] | list[str] | None) -> list[str] | None:
    """Normalise the ``state`` filter of ``list_trials`` to a list of state names (or None)."""
    if state is None:
        return None
    items = [state] if isinstance(state, (str, TrialState)) else list(state)
    out = []
    for s in items:
        try:
            out.append(TrialState(s).value)
        except ValueError:
            raise ValueError(f"state filter {s!r} is not a trial state; use one of "
                             f"{', '.join(t.value for t in TrialState)}") from None
    return out


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif isinstance(value, list):
        out[prefix] = json.dumps(value, separators=(",", ":"))
    else:
        out[prefix] = value


class ResultStore(abc.ABC):
    """Where every experiment, trial and per-epoch metric lives; open one with ``open_store``.

    Backends implement the abstract methods (terse, no docs of their own); the conveniences
    at the bottom are written once here on top of them. See the module docstring for the
    life cycle, ownership, concurrency and error rules that every method follows.
    """

    url: str = ""

    # ---------------------------------------------------------------- experiments
    @abc.abstractmethod
    def create_experiment(self, experiment_id: str, name: str, spec: dict[str, Any],
                          n_trials: int) -> ExperimentRecord:
        """Record an experiment (idempotent: an existing one is returned unchanged).

        Args:
            experiment_id: the spec's hash (``spec.experiment_id``).
            name: human name shown by the dashboard.
            spec: the validated spec as JSON (``spec.to_dict()``).
            n_trials: how many trials the spec expands to.
        Returns:
            The stored record (with ``counts``).
        Raises:
            ValueError: empty id or negative ``n_trials``.
        """

    @abc.abstractmethod
    def create_trials(self, experiment_id: str, trials: list[tuple[str, dict[str, Any]]]) -> int:
        """Create QUEUED trials and link them to the experiment, all in one transaction.

        Idempotent: a trial id that already exists (from this or another experiment) is not
        duplicated and keeps its state and results; it is only linked to ``experiment_id``.
        Finished trials are not re-queued by resubmitting.

        Args:
            experiment_id: an experiment created before.
            trials: ``(trial_id, config_dict)`` pairs, ``config_dict`` being
                ``TrialConfig.model_dump(mode="json")``.
        Returns:
            How many trial rows were new.
        Raises:
            NotFoundError: unknown experiment.  ValueError: an empty id or non-dict config.
        """

    @abc.abstractmethod
    def cancel_experiment(self, experiment_id: str) -> int:
        """Request cancellation: set ``cancel_requested`` and turn its QUEUED trials CANCELLED.

        A QUEUED trial shared with another experiment that is not cancelled stays QUEUED.
        RUNNING trials are not touched here: ``is_cancel_requested`` tells their runner to
        stop at the next epoch, and the runner finishes them as CANCELLED.

        Returns:
            How many QUEUED trials became CANCELLED.
        Raises:
            NotFoundError: unknown experiment.
        """

    @abc.abstractmethod
    def requeue_trials(self, experiment_id: str,
                       states: list[TrialState] | tuple[TrialState, ...] | TrialState
                       = (TrialState.CANCELLED,)) -> list[str]:
        """Resume an experiment: lift ``cancel_requested`` and put its trials in ``states`` back
        to QUEUED (the one sanctioned way out of a finished state).

        Meant for a deliberate resubmission (CANCELLED, and on request FAILED, DIVERGED or
        PRUNED trials). The trial's result, error, worker and times are cleared and
        ``attempts`` is reset so the delivery cap counts afresh. COMPLETE trials are never
        requeued: a stored result is never thrown away.

        Returns:
            The requeued trial ids.
        Raises:
            NotFoundError: unknown experiment.  ValueError: a state other than CANCELLED,
            FAILED, DIVERGED or PRUNED.
        """

    @abc.abstractmethod
    def get_experiment(self, experiment_id: str) -> ExperimentRecord:
        """The experiment with its trial ``counts``. Raises NotFoundError if unknown."""

    @abc.abstractmethod
    def list_experiments(self, limit: int = 100, offset: int = 0) -> list[ExperimentRecord]:
        """Experiments, newest first, with their ``counts``."""

    # ---------------------------------------------------------------- trial life cycle
    @abc.abstractmethod
    def claim_trial(self, trial_id: str, worker: str,
                    max_attempts: int | None = None) -> TrialRecord | None:
        """Atomically take a QUEUED trial for ``worker``: QUEUED → RUNNING.

        Sets ``worker``, ``started_at``, ``heartbeat_at``, increments ``attempts`` and clears
        metrics left by an earlier (requeued) attempt. Of two workers claiming at once, exactly
        one gets the record.

        Returns None (and claims nothing) when the trial is not QUEUED (already running or
        finished: a redelivered task is a no-op); when every experiment of the trial has been
        cancelled (the trial becomes CANCELLED); or when ``attempts`` already reached
        ``max_attempts`` (the trial becomes FAILED with error ``"delivery cap reached: ..."``).

        Raises:
            NotFoundError: unknown trial.  ValueError: empty worker or max_attempts < 1.
        """

    @abc.abstractmethod
    def heartbeat(self, trial_id: str, worker: str) -> bool:
        """Refresh ``heartbeat_at`` of a RUNNING trial owned by ``worker``.

        Returns False (and writes nothing) when the trial is not RUNNING or belongs to
        another worker: the caller has lost the trial and should stop.
        """

    @abc.abstractmethod
    def append_metrics(self, trial_id: str, metrics: dict[str, Any],
                       worker: str | None = None) -> bool:
        """Append one epoch's metrics to a RUNNING trial (also refreshes its heartbeat).

        Ignored when the trial is not RUNNING (a finished trial is read-only). With
        ``worker``, also ignored unless that worker owns the trial: a stale worker whose trial
        was requeued and claimed by another never writes into the new owner's learning curve.
        Non-finite floats are stored as null.

        Returns:
            True if the metrics were written; False if refused (the caller, if it passed
            ``worker``, has lost the trial and should stop).
        Raises:
            ValueError: ``metrics`` is not a dict.
        """

    @abc.abstractmethod
    def finish_trial(self, trial_id: str, state: TrialState, result: dict[str, Any] | None = None,
                     error: str | None = None, worker: str | None = None) -> bool:
        """Finish a trial: store ``result`` (``TrialResult.to_dict()``), ``error``, ``finished_at``.

        Allowed from RUNNING (when ``worker`` is given it must be the owner) to any finished
        state, and from QUEUED to CANCELLED. ``result`` and ``error`` replace nothing else.

        Returns:
            True if this call finished the trial; False if it was refused (already finished,
            QUEUED with a state other than CANCELLED, or owned by another worker).
        Raises:
            NotFoundError: unknown trial.  ValueError: ``state`` is not a finished state.
        """

    @abc.abstractmethod
    def requeue_stale(self, timeout_s: float) -> list[str]:
        """Put RUNNING trials whose heartbeat is older than ``timeout_s`` seconds back to QUEUED.

        Their worker is cleared (so a late write from the lost worker is refused); ``attempts``
        is kept, so a trial that keeps killing workers hits the delivery cap.

        Returns:
            The requeued trial ids (the caller resubmits them to its executor).
        """

    @abc.abstractmethod
    def release_trial(self, trial_id: str, worker: str) -> bool:
        """Atomically put a RUNNING trial owned by ``worker`` back to QUEUED: RUNNING → QUEUED.

        For a caller that knows the owner is dead (a Celery task redelivered after its pool
        process was killed finds the trial owned by a pid that no longer exists), so it need
        not wait for :meth:`requeue_stale`'s heartbeat timeout. ``worker`` and
        ``heartbeat_at`` are cleared (a late write from the old owner is refused) and ``seq``
        is bumped; ``attempts`` is kept, so the death counts toward the delivery cap of the
        next ``claim_trial``.

        Returns:
            True if this call released the trial; False (and writes nothing) when it is not
            RUNNING or is owned by another worker (say, the reaper requeued it and someone
            else claimed it meanwhile).
        Raises:
            NotFoundError: unknown trial.  ValueError: empty ``worker``.
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
            sort_by: a column, a metric name or a dotted path (see ``resolve_sort_path``);
                trials without a value sort last in both directions. Default: creation
                order, or ``seq`` order when ``since`` is given.
            descending: reverse the order (nulls still last).
            limit, offset: pagination.
            since: only trials whose ``seq`` is greater (live updates; see ``latest_seq``).
        Raises:
            ValueError: bad ``sort_by``, ``state``, ``limit`` or ``offset``.
        """

    @abc.abstractmethod
    def _count_states(self, experiment_id: str | None) -> dict[str, int]:
        """Trials by state (only states present), for one experiment or the whole store."""

    # ---------------------------------------------------------------- workers
    @abc.abstractmethod
    def register_worker(self, name: str, host: str | None = None, pid: int | None = None,
                        current_trial: str | None = None, trials_done: int = 0,
                        info: dict[str, Any] | None = None) -> None:
        """Record what worker ``name`` is doing now (a full upsert; ``last_seen`` = now).

        Called by a worker at start-up, when it claims and when it finishes a trial; the
        worker keeps its own ``trials_done`` count.
        """

    @abc.abstractmethod
    def list_workers(self, seen_within_s: float | None = None) -> list[WorkerRecord]:
        """Workers by name; with ``seen_within_s``, only those seen that recently."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections; the store object must not be used afterwards."""

    # ---------------------------------------------------------------- conveniences
    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def is_cancel_requested(self, trial_id: str) -> bool:
        """True when every experiment of the trial asked to cancel (runner: stop now).

        Also True if the trial itself is already CANCELLED. Raises NotFoundError if unknown.
        """
        trial = self.get_trial(trial_id)
        if trial.state is TrialState.CANCELLED:
            return True
        if not trial.experiment_ids:
            return False
        return all(self.get_experiment(e).cancel_requested for e in trial.experiment_ids)

    def counts_by_state(self, experiment_id: str | None = None) -> dict[str, int]:
        """Trials by state, every state present (zeros included), for one experiment or all."""
        counts = {s.value: 0 for s in TrialState}
        counts.update(self._count_states(experiment_id))
        return counts

    def best_trial(self, experiment_id: str | None = None, metric: str = "test_accuracy",
                   mode: str = "max") -> TrialRecord | None:
        """The COMPLETE trial with the best ``metric`` (any ``sort_by`` path), or None.

        Raises:
            ValueError: ``mode`` not "max"/"min" or a bad metric path.
        """
        if mode not in ("max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', got {mode!r}")
        rows = self.list_trials(experiment_id=experiment_id, state=TrialState.COMPLETE,
                                sort_by=metric, descending=(mode == "max"), limit=1)
        if not rows or rows[0].value(metric) is None:
            return None
        return rows[0]

    def latest_seq(self) -> int:
        """The largest ``seq`` so far (0 for an empty store): the cursor for ``since``."""
        rows = self.list_trials(sort_by="seq", descending=True, limit=1)
        return rows[0].seq if rows else 0

    def iter_trials(self, experiment_id: str | None = None,
                    state: TrialState | list[TrialState] | None = None,
                    page_size: int = 500) -> Iterator[TrialRecord]:
        """Every matching trial in creation order, fetched a page at a time."""
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
        with _open_out(out) as fh:
            n = 0
            for trial in self.iter_trials(experiment_id, state):
                fh.write(json.dumps(trial.to_dict(), separators=(",", ":")) + "\n")
                n += 1
        return n

    def export_csv(self, out: str | Path | TextIO, experiment_id: str | None = None,
                   state: TrialState | list[TrialState] | None = None) -> int:
        """Write one row per trial: ids, state, times, ``config.*`` and ``result.*`` flattened.

        The per-epoch history and environment stay in JSON lines (columns would explode);
        list values are written as JSON. Returns the number of rows.
        """
        rows = []
        for t in self.iter_trials(experiment_id, state):
            row: dict[str, Any] = {
                "id": t.id, "experiment_ids": " ".join(t.experiment_ids), "state": t.state.value,
                "attempts": t.attempts, "worker": t.worker, "created_at": t.created_at,
                "started_at": t.started_at, "finished_at": t.finished_at,
                "epochs_logged": len(t.metrics),
                "error": (t.error or "").strip().splitlines()[-1] if t.error else None,
            }
            _flatten("config", t.config, row)
            result = {k: v for k, v in (t.result or {}).items()
                      if k not in ("history", "environment")}
            _flatten("result", result, row)
            rows.append(row)
        columns: list[str] = []
        seen: set[str] = set()
        for row in rows:  # first-seen order keeps related columns together
            for k in row:
                if k not in seen:
                    seen.add(k)
                    columns.append(k)
        with _open_out(out) as fh:
            writer = csv.DictWriter(fh, fieldnames=columns or ["id"], lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        return len(rows)


class _open_out:
    """Context manager: a path is opened (and closed) for writing, a file object is borrowed."""

    def __init__(self, out: str | Path | TextIO):
        self.out = out
        self.fh: TextIO | None = None

    def __enter__(self) -> TextIO:
        if isinstance(self.out, (str, Path)):
            self.fh = open(self.out, "w", newline="", encoding="utf-8")
            return self.fh
        if not isinstance(self.out, io.IOBase) and not hasattr(self.out, "write"):
            raise ValueError(f"export target must be a path or a text file, got {self.out!r}")
        return self.out

    def __exit__(self, *exc: object) -> None:
        if self.fh is not None:
            self.fh.close()


def now() -> float:
    """Wall-clock seconds since the epoch (one place, so tests can reason about it)."""
    return time.time()
