"""The records a store hands out: experiments, trials, workers (trial states and what each
group of them means live in :mod:`dnnframe.states`; ``TrialState`` is exported here too)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..metrics import default_objective
from ..states import ACTIVE_STATES, ExperimentStatus, TrialState
from .sorting import resolve_sort_path

#: The trial fields that hold the bulk of a stored row (the config, the result with its
#: history, the learning curve so far). A read given ``fields=`` fills in only those named;
#: the others keep their empty values: ``config`` ``{}``, ``result`` None, ``metrics`` ``[]``.
BULKY_FIELDS = ("config", "result", "metrics")


def columns_reading(cols: str, fields: frozenset[str], null: str = "NULL") -> str:
    """An SQL backend's trial columns ``cols`` (each bulky one written ``t.<name>,``) with
    the bulky fields not in ``fields`` read as ``null`` instead, so every row decodes alike."""
    for name in BULKY_FIELDS:
        if name not in fields:
            cols = cols.replace(f"t.{name},", f"{null} AS {name},", 1)
    return cols


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
    # trials claimed more than once (attempts > 1): trained again after their worker was
    # lost (filled on read, with ``counts``)
    reruns: int = 0

    @property
    def status(self) -> str:
        """Derived from trial states: QUEUED, RUNNING, COMPLETE, COMPLETE_WITH_FAILURES,
        FAILED or CANCELLED.

        RUNNING while any trial runs, or while some trials are finished and others still wait
        (work in progress); CANCELLED once cancel was requested and nothing runs any more
        (unless every trial had finished without being cancelled);
        once every trial is finished: FAILED when all of them failed, COMPLETE_WITH_FAILURES
        when some did, COMPLETE otherwise; QUEUED before any trial started.
        """
        status = ExperimentStatus
        running = self.counts.get(TrialState.RUNNING.value, 0)
        queued = self.counts.get(TrialState.QUEUED.value, 0)
        total = sum(self.counts.values())
        if running:
            return status.RUNNING.value
        # a cancel that came after everything had finished cancelled nothing
        if self.cancel_requested and not (
            self.is_finished and not self.counts.get(TrialState.CANCELLED.value)
        ):
            return status.CANCELLED.value
        if queued:
            return (status.RUNNING if queued < total else status.QUEUED).value
        if not total:
            return status.QUEUED.value
        failed = self.counts.get(TrialState.FAILED.value, 0)
        if failed:
            return (status.FAILED if failed == total else status.COMPLETE_WITH_FAILURES).value
        return status.COMPLETE.value

    @property
    def is_finished(self) -> bool:
        """Every trial it expands to exists and is finished: nothing is left to cancel (an
        adaptive search that has not created all its trials yet is not finished)."""
        total = sum(self.counts.values())
        waiting = sum(self.counts.get(s.value, 0) for s in ACTIVE_STATES)
        return total >= self.n_trials and not waiting

    @property
    def objective(self) -> tuple[str, str]:
        """The spec's ``(metric, mode)``; :func:`dnnframe.metrics.default_objective` when it
        names none."""
        objective = (self.spec.get("search") or {}).get("objective") or {}
        metric, mode = default_objective()
        return objective.get("metric", metric), objective.get("mode", mode)


@dataclass
class TrialTally:
    """An experiment's trials as its record counts them: by state (only states present), and
    how many were claimed more than once (``reruns``)."""

    counts: dict[str, int] = field(default_factory=dict)
    reruns: int = 0


def tally_rows(rows: Iterable[tuple[str, str, Any, int]]) -> dict[str, TrialTally]:
    """Fold the rows of a store's grouping query, ``(experiment id, state, claimed more than
    once, how many)``, into each experiment's :class:`TrialTally`."""
    tallies: dict[str, TrialTally] = {}
    for experiment_id, state, rerun, n in rows:
        tally = tallies.setdefault(experiment_id, TrialTally())
        tally.counts[state] = tally.counts.get(state, 0) + n
        if rerun:
            tally.reruns += n
    return tallies


@dataclass
class TrialRecord:
    """One trial as stored; its states are described on :class:`dnnframe.states.TrialState`,
    its ownership on ``ResultStore``."""

    id: str
    experiment_ids: list[str]
    state: TrialState
    config: dict[str, Any]  # TrialConfig.model_dump(mode="json")
    result: dict[str, Any] | None = None  # TrialResult.to_dict() once finished
    metrics: list[dict[str, Any]] = field(default_factory=list)  # one dict per epoch
    error: str | None = None  # traceback / reason for FAILED, DIVERGED, CANCELLED
    worker: str | None = None
    attempts: int = 0  # how many times it was claimed (delivery cap)
    created_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    heartbeat_at: float | None = None
    seq: int = 0  # monotonically increasing change cursor

    def __post_init__(self) -> None:
        # A finished trial's learning curve is stored once, in ``metrics``; its result
        # carries a history of its own only when the curve could not be stored in full.
        # Read together, the result shows the curve as its history.
        if isinstance(self.result, dict) and "history" not in self.result and self.metrics:
            self.result["history"] = list(self.metrics)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (what ``export_jsonl`` writes and the REST API returns)."""
        d = asdict(self)
        d["state"] = self.state.value
        return d

    def value(self, path: str) -> Any:
        """The value at a ``sort_by`` path (``"val_loss"``, ``"config.model.width"``), or None."""
        path = resolve_sort_path(path)
        if "." not in path:
            v = getattr(self, path)
            return v.value if isinstance(v, TrialState) else v
        return value_at(self.to_dict(), path)


def value_at(doc: dict[str, Any], path: str) -> Any:
    """The value at a resolved dotted ``path`` of a trial's dict (``result.metrics.x``), or None."""
    node: Any = doc
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
