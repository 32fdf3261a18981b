"""The life-cycle policy alone (no store): the decisions every backend applies."""

from __future__ import annotations

import doctest

import pytest

from dnnframe.store import lifecycle
from dnnframe.store.lifecycle import ClaimOutcome, decide_claim, may_finish


@pytest.mark.parametrize(
    "state, attempts, cancelled, max_attempts, outcome",
    [
        ("RUNNING", 0, False, None, ClaimOutcome.NOT_QUEUED),
        ("COMPLETE", 0, True, 1, ClaimOutcome.NOT_QUEUED),
        ("QUEUED", 5, True, 1, ClaimOutcome.CANCELLED),  # cancelled wins over the cap
        ("QUEUED", 2, False, 2, ClaimOutcome.CAPPED),
        ("QUEUED", 1, False, 2, ClaimOutcome.WON),
        ("QUEUED", 9, False, None, ClaimOutcome.WON),
    ],
)
def test_claim_outcomes(state, attempts, cancelled, max_attempts, outcome):
    got, update = decide_claim(state, attempts, cancelled, max_attempts, "w", 7.0)
    assert got is outcome
    assert (update is None) == (outcome is ClaimOutcome.NOT_QUEUED)


def test_what_each_claim_writes():
    _, won = decide_claim("QUEUED", 1, False, 3, "w", 7.0)
    assert dict(won.set) == {
        "state": "RUNNING",
        "worker": "w",
        "started_at": 7.0,
        "heartbeat_at": 7.0,
        "metrics": [],
    }
    assert dict(won.inc) == {"attempts": 1}
    _, capped = decide_claim("QUEUED", 3, False, 3, "w", 7.0)
    assert dict(capped.set) == {
        "state": "FAILED",
        "finished_at": 7.0,
        "error": (
            "delivery cap reached: claimed 3 times, max_attempts=3 (the trial keeps losing its "
            "worker)"
        ),
    }
    _, cancelled = decide_claim("QUEUED", 0, True, None, "w", 7.0)
    assert dict(cancelled.set) == {
        "state": "CANCELLED",
        "finished_at": 7.0,
        "error": "experiment cancelled before the trial started",
    }


@pytest.mark.parametrize(
    "state, owner, new_state, worker, allowed",
    [
        ("RUNNING", "w", "COMPLETE", "w", True),
        ("RUNNING", "w", "COMPLETE", None, True),
        ("RUNNING", "w", "COMPLETE", "other", False),
        ("QUEUED", None, "CANCELLED", "w", True),
        ("QUEUED", None, "FAILED", None, False),
        ("COMPLETE", "w", "CANCELLED", "w", False),
    ],
)
def test_who_may_finish(state, owner, new_state, worker, allowed):
    assert may_finish(state, owner, new_state, worker) is allowed


def test_a_trial_with_no_experiment_is_never_cancelled_by_them():
    assert lifecycle.all_experiments_cancelled([], []) is False
    assert lifecycle.all_experiments_cancelled(["a", "b"], ["b"]) is False
    assert lifecycle.all_experiments_cancelled(["a", "b"], []) is True


def test_the_shared_updates_cannot_be_changed_by_a_backend():
    with pytest.raises(TypeError):
        lifecycle.REQUEUE_RESET.set["state"] = "RUNNING"  # type: ignore[index]


def test_lifecycle_examples_run():
    assert doctest.testmod(lifecycle).failed == 0
