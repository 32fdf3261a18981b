"""ResultStore: the interface every backend implements (contract documented here only).

INTERFACE SKELETON — the store issue (#4) fills in the full contract docs, the
convenience methods and the backends. Signatures here are what the rest of the code uses.
"""

from __future__ import annotations

import abc
import enum
from dataclasses import dataclass, field
from typing import Any


class TrialState(str, enum.Enum):
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"
    DIVERGED = "DIVERGED"
    PRUNED = "PRUNED"
    CANCELLED = "CANCELLED"

    @property
    def is_finished(self) -> bool:
        return self not in (TrialState.QUEUED, TrialState.RUNNING)


@dataclass
class ExperimentRecord:
    id: str
    name: str
    spec: dict[str, Any]
    n_trials: int
    created_at: float
    cancel_requested: bool = False
    counts: dict[str, int] = field(default_factory=dict)  # trials by state (filled on read)

    @property
    def status(self) -> str:
        """Derived from trial states: QUEUED, RUNNING, COMPLETE (all finished), CANCELLED."""
        raise NotImplementedError


@dataclass
class TrialRecord:
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


class ResultStore(abc.ABC):
    @abc.abstractmethod
    def create_experiment(self, experiment_id: str, name: str, spec: dict[str, Any], n_trials: int) -> ExperimentRecord: ...

    @abc.abstractmethod
    def create_trials(self, experiment_id: str, trials: list[tuple[str, dict[str, Any]]]) -> int: ...

    @abc.abstractmethod
    def claim_trial(self, trial_id: str, worker: str, max_attempts: int | None = None) -> TrialRecord | None: ...

    @abc.abstractmethod
    def heartbeat(self, trial_id: str, worker: str) -> bool: ...

    @abc.abstractmethod
    def append_metrics(self, trial_id: str, metrics: dict[str, Any]) -> None: ...

    @abc.abstractmethod
    def finish_trial(self, trial_id: str, state: TrialState, result: dict[str, Any] | None = None,
                     error: str | None = None, worker: str | None = None) -> bool: ...

    @abc.abstractmethod
    def requeue_stale(self, timeout_s: float) -> list[str]: ...

    @abc.abstractmethod
    def cancel_experiment(self, experiment_id: str) -> int: ...

    @abc.abstractmethod
    def get_experiment(self, experiment_id: str) -> ExperimentRecord: ...

    @abc.abstractmethod
    def list_experiments(self, limit: int = 100, offset: int = 0) -> list[ExperimentRecord]: ...

    @abc.abstractmethod
    def get_trial(self, trial_id: str) -> TrialRecord: ...

    @abc.abstractmethod
    def list_trials(self, experiment_id: str | None = None, state: TrialState | list[TrialState] | None = None,
                    sort_by: str | None = None, descending: bool = False, limit: int | None = None,
                    offset: int = 0, since: int | None = None) -> list[TrialRecord]: ...

    @abc.abstractmethod
    def close(self) -> None: ...
