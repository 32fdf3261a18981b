"""A trial's states and what each group of them means, defined once.

Every reader of trial states (the stores, the progress bar, the dashboard and its pages'
scripts, the search drivers, reports) asks this module which states are still active, which
are over, which count as work done and which a sampler learns from, so a new state or a
changed rule is one edit here. It imports nothing from dnnframe, so the lightest caller can
use it.

>>> TrialState("CANCELLED").is_finished, TrialState("CANCELLED").is_done
(True, False)
>>> count_done({"COMPLETE": 2, "FAILED": 1, "CANCELLED": 4, "QUEUED": 3})
3
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any


class TrialState(str, enum.Enum):
    """Where a trial is in its life cycle.

    QUEUED waits for a worker; RUNNING is owned by one worker; every other state is final
    (the trial is read-only): COMPLETE has a result, FAILED raised, DIVERGED blew up,
    PRUNED was stopped by the search as unpromising, CANCELLED was stopped by the user
    (``resume`` queues it again).
    """

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
        return self in FINISHED_STATES

    @property
    def is_done(self) -> bool:
        """True when the trial ran to an end (see :data:`DONE_STATES`)."""
        return self in DONE_STATES


#: States a trial is still waiting or working in (a cancel reaches them).
ACTIVE_STATES: tuple[TrialState, ...] = (TrialState.QUEUED, TrialState.RUNNING)
#: Terminal states: nothing will change the trial any more.
FINISHED_STATES: tuple[TrialState, ...] = tuple(s for s in TrialState if s not in ACTIVE_STATES)
#: Trials that ran to an end, which progress counts as done. CANCELLED is not among them:
#: ``resume`` runs a cancelled trial again, so an interrupted run shows how far it really got.
DONE_STATES: tuple[TrialState, ...] = (
    TrialState.COMPLETE,
    TrialState.FAILED,
    TrialState.DIVERGED,
    TrialState.PRUNED,
)
#: The states a model-based sampler is told about (the same trials progress counts as done):
#: a cancelled trial says nothing about its configuration.
TOLD_STATES: tuple[TrialState, ...] = DONE_STATES
#: The one state whose trials have a result that ran its course (the best trial, the best
#: configuration and reports rank these).
SCORED_STATE = TrialState.COMPLETE
#: The trials every analysis of a sweep counts (importance, the charts against parameters,
#: the distributions): a pruned trial with the value it was stopped at, and a diverged one as
#: the worst value of the metric (``dashboard.params.outcomes`` and the page's outcomes.js),
#: for the parameter values that make trials blow up are what a sweep most needs to show.
#: A failed or cancelled trial says nothing about its configuration.
ANALYSED_STATES: tuple[TrialState, ...] = (
    TrialState.COMPLETE,
    TrialState.PRUNED,
    TrialState.DIVERGED,
)
#: Finished states shown beside COMPLETE, in the order texts and bars name them.
OUTCOME_STATES: tuple[TrialState, ...] = (
    TrialState.FAILED,
    TrialState.DIVERGED,
    TrialState.PRUNED,
    TrialState.CANCELLED,
)
#: The segments of a progress bar, left to right (QUEUED is the empty rest).
BAR_STATES: tuple[TrialState, ...] = (
    TrialState.COMPLETE,
    TrialState.PRUNED,
    TrialState.DIVERGED,
    TrialState.FAILED,
    TrialState.CANCELLED,
    TrialState.RUNNING,
)


class ExperimentStatus(str, enum.Enum):
    """An experiment's status, derived from its trials' states
    (:attr:`dnnframe.store.records.ExperimentRecord.status`)."""

    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    COMPLETE = "COMPLETE"
    COMPLETE_WITH_FAILURES = "COMPLETE_WITH_FAILURES"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


EXPERIMENT_STATUSES: tuple[str, ...] = tuple(s.value for s in ExperimentStatus)
#: Statuses of an experiment that still has work waiting or running.
ACTIVE_STATUSES: tuple[ExperimentStatus, ...] = (ExperimentStatus.QUEUED, ExperimentStatus.RUNNING)


def _count(counts: Mapping[str, int], states: Iterable[TrialState]) -> int:
    names = {s.value for s in states}
    return sum(
        int(n) for state, n in counts.items() if str(getattr(state, "value", state)) in names
    )


def count_done(counts: Mapping[str, int]) -> int:
    """How many trials ran to an end, from counts by state (``{"COMPLETE": 3, ...}``)."""
    return _count(counts, DONE_STATES)


def count_active(counts: Mapping[str, int]) -> int:
    """How many trials still wait or run, from counts by state."""
    return _count(counts, ACTIVE_STATES)


def states_json() -> dict[str, Any]:
    """The state vocabulary for the dashboard's page scripts, so they hold no state lists."""
    return {
        "states": {s.name: s.value for s in TrialState},
        "active": [s.value for s in ACTIVE_STATES],
        "finished": [s.value for s in FINISHED_STATES],
        "done": [s.value for s in DONE_STATES],
        "scored": SCORED_STATE.value,
        "analysed": [s.value for s in ANALYSED_STATES],
        "bar": [s.value for s in BAR_STATES],
        "active_statuses": [s.value for s in ACTIVE_STATUSES],
    }
