"""The trial life cycle as one policy: who wins a claim, what a requeue resets, when a
write is refused, and what each refusal says.

Pure: no I/O. A backend reads what a rule needs (a trial's state, owner, attempts, whether
all its experiments asked to cancel), asks here, and writes the :class:`TrialUpdate` it is
given in its own terms (SQL assignments, a MongoDB ``$set``/``$inc``, a dict). Atomicity
stays the backend's job: it decides under the lock, or in a filter that re-checks the
state the decision was made on. The rules themselves are documented on ``ResultStore``.

>>> decide_claim("QUEUED", attempts=3, cancelled=False, max_attempts=3, worker="w", at=1.0)[0]
<ClaimOutcome.CAPPED: 'capped'>
>>> may_finish("QUEUED", None, "CANCELLED", worker="w")
True
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..states import ACTIVE_STATES, TrialState

QUEUED, RUNNING = TrialState.QUEUED.value, TrialState.RUNNING.value
ACTIVE = tuple(s.value for s in ACTIVE_STATES)  # as stored: a cancel or a delete waits for them
CANCELLED, FAILED = TrialState.CANCELLED.value, TrialState.FAILED.value

# The finished states ``requeue_trials`` may put back; COMPLETE results are never discarded.
REQUEUABLE_STATES = (CANCELLED, FAILED, TrialState.DIVERGED.value, TrialState.PRUNED.value)

CANCELLED_BEFORE_START = "experiment cancelled before the trial started"


def delivery_cap_error(attempts: int, max_attempts: int) -> str:
    """The error of a trial failed by the delivery cap instead of being claimed again."""
    return (
        f"delivery cap reached: claimed {attempts} times, max_attempts={max_attempts} "
        "(the trial keeps losing its worker)"
    )


@dataclass(frozen=True)
class TrialUpdate:
    """Field changes of one trial write: ``set`` assigns values, ``inc`` adds to numbers.

    A write's new ``seq`` is not part of it: each backend numbers its writes its own way.
    The mappings are read-only views: the module's constants cannot be changed by accident.
    """

    set: Mapping[str, Any]
    inc: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "set", MappingProxyType(dict(self.set)))
        object.__setattr__(self, "inc", MappingProxyType(dict(self.inc)))


# ---------------------------------------------------------------- claims
class ClaimOutcome(str, enum.Enum):
    """What a claim of one trial does."""

    NOT_QUEUED = "not_queued"  # running elsewhere or finished: a redelivery is a no-op
    CANCELLED = "cancelled"  # every experiment of it asked to cancel: it becomes CANCELLED
    CAPPED = "capped"  # claimed max_attempts times already: it becomes FAILED
    WON = "won"  # the caller runs it


def all_experiments_cancelled(experiment_ids: Iterable[str], live: Iterable[str]) -> bool:
    """A trial counts as cancelled when it has experiments and none of them is still live
    (``live``: the experiments that have not asked to cancel)."""
    ids = set(experiment_ids)
    return bool(ids) and not ids.intersection(live)


def decide_claim(
    state: str, attempts: int, cancelled: bool, max_attempts: int | None, worker: str, at: float
) -> tuple[ClaimOutcome, TrialUpdate | None]:
    """The outcome of ``worker`` claiming a trial at time ``at``, and the write it makes
    (None when it writes nothing). ``cancelled``: :func:`all_experiments_cancelled`."""
    if state != QUEUED:
        return ClaimOutcome.NOT_QUEUED, None
    if cancelled:
        return ClaimOutcome.CANCELLED, cancel_before_start(at)
    if max_attempts is not None and attempts >= max_attempts:
        return ClaimOutcome.CAPPED, TrialUpdate(
            {
                "state": FAILED,
                "finished_at": at,
                "error": delivery_cap_error(attempts, max_attempts),
            }
        )
    # metrics left by an earlier (requeued) attempt are cleared: the curve starts afresh
    return ClaimOutcome.WON, TrialUpdate(
        {"state": RUNNING, "worker": worker, "started_at": at, "heartbeat_at": at, "metrics": []},
        {"attempts": 1},
    )


def cancel_before_start(at: float) -> TrialUpdate:
    """A QUEUED trial all of whose experiments were cancelled: it never starts."""
    return TrialUpdate({"state": CANCELLED, "finished_at": at, "error": CANCELLED_BEFORE_START})


def stop_requested(state: str, cancelled: bool) -> bool:
    """Whether the runner of a trial should stop it now (``cancel_requested``)."""
    return state == CANCELLED or cancelled


# ---------------------------------------------------------------- writes by the owner
def owns(state: str, owner: str | None, worker: str | None) -> bool:
    """Whether a heartbeat or metrics write from ``worker`` may touch a trial: it runs,
    and (when a worker is named) under that worker."""
    return state == RUNNING and (worker is None or owner == worker)


def finishable_from(new_state: TrialState | str) -> tuple[str, ...]:
    """The states a trial may be finished from into ``new_state``: RUNNING always (the
    owner's, when a worker is named), QUEUED only into CANCELLED."""
    return (RUNNING, QUEUED) if TrialState(new_state) is TrialState.CANCELLED else (RUNNING,)


def may_finish(
    state: str, owner: str | None, new_state: TrialState | str, worker: str | None
) -> bool:
    """Whether ``finish_trials`` may move a trial from ``state`` to ``new_state``."""
    if state not in finishable_from(new_state):
        return False
    return state == QUEUED or worker is None or owner == worker


def finish_update(
    new_state: TrialState | str, result: dict[str, Any] | None, error: str | None, at: float
) -> TrialUpdate:
    """The write that finishes a trial (its worker and heartbeat stay, for the record)."""
    return TrialUpdate(
        {"state": TrialState(new_state).value, "result": result, "error": error, "finished_at": at}
    )


# ---------------------------------------------------------------- back to the queue
# requeue_trials: a fresh start, and the delivery cap counts afresh.
REQUEUE_RESET = TrialUpdate(
    {
        "state": QUEUED,
        "result": None,
        "error": None,
        "worker": None,
        "attempts": 0,
        "started_at": None,
        "finished_at": None,
        "heartbeat_at": None,
        "metrics": [],
    }
)
# requeue_stale: attempts kept, so a trial that keeps killing workers meets the cap; the
# worker is cleared, so a late write from the lost one is refused.
REQUEUE_STALE = TrialUpdate({"state": QUEUED, "worker": None})
# release_trial: as a stale requeue, for an owner known to be dead.
RELEASE = TrialUpdate({"state": QUEUED, "worker": None, "heartbeat_at": None})


def stale_cutoff(timeout_s: float, as_of: float | None, now: float) -> float:
    """Heartbeats older than this are stale: measured at ``as_of`` when given (the moment
    the caller last saw the store working), else at ``now``."""
    return (now if as_of is None else as_of) - timeout_s


def is_stale(state: str, heartbeat_at: float | None, cutoff: float) -> bool:
    """A RUNNING trial whose last heartbeat is older than ``cutoff``."""
    return state == RUNNING and heartbeat_at is not None and heartbeat_at < cutoff
