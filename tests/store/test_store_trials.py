"""The trial life cycle of the ResultStore contract (base_trials.py), one trial at a time,
run against every backend (see conftest.py): claims, heartbeats, metrics, finishing,
requeues and releases, and who may make each."""

from __future__ import annotations

import pytest
from store_support import make, run

from dnnframe.exceptions import NotFoundError
from dnnframe.store import TrialState


def test_claim_is_exclusive_and_counts_attempts(store):
    (tid,) = make(store, 1)
    rec = store.claim_trial(tid, "w1")
    assert rec is not None and rec.state is TrialState.RUNNING
    assert (rec.worker, rec.attempts) == ("w1", 1)
    assert rec.started_at is not None and rec.heartbeat_at is not None
    assert store.claim_trial(tid, "w2") is None
    assert store.get_trial(tid).worker == "w1"


def test_heartbeat_only_by_owner_while_running(store, clock):
    (tid,) = make(store, 1)
    assert store.heartbeat(tid, "w1") is False  # not running yet
    store.claim_trial(tid, "w1")
    before = store.get_trial(tid).heartbeat_at
    clock.advance(1)
    assert store.heartbeat(tid, "w1") is True
    assert store.get_trial(tid).heartbeat_at == before + 1
    assert store.heartbeat(tid, "intruder") is False
    store.finish_trial(tid, TrialState.COMPLETE, worker="w1")
    assert store.heartbeat(tid, "w1") is False


def test_metrics_append_in_order_and_nan_becomes_null(store):
    (tid,) = make(store, 1)
    store.append_metrics(tid, {"epoch": 0})  # not running: ignored
    store.claim_trial(tid, "w")
    for e in range(5):
        store.append_metrics(tid, {"epoch": e, "val_loss": float("nan") if e == 4 else e / 10})
    m = store.get_trial(tid).metrics
    assert [x["epoch"] for x in m] == [0, 1, 2, 3, 4]
    assert m[4]["val_loss"] is None and m[1]["val_loss"] == 0.1


def test_finished_trial_is_read_only(store):
    (tid,) = make(store, 1)
    run(store, tid, 0.8, epochs=3)
    done = store.get_trial(tid)
    assert done.result["metrics"]["test_accuracy"] == 0.8 and done.finished_at is not None
    # duplicate/late writes: refused, nothing changes
    assert store.finish_trial(tid, TrialState.FAILED, error="late", worker="w") is False
    assert store.finish_trial(tid, TrialState.COMPLETE, result={"metrics": {}}) is False
    store.append_metrics(tid, {"epoch": 99})
    assert store.claim_trial(tid, "w2") is None
    assert store.get_trial(tid) == done


def test_finish_by_other_worker_refused(store):
    (tid,) = make(store, 1)
    store.claim_trial(tid, "owner")
    assert store.finish_trial(tid, TrialState.COMPLETE, worker="stranger") is False
    assert store.get_trial(tid).state is TrialState.RUNNING
    assert store.finish_trial(tid, TrialState.FAILED, error="Traceback: boom", worker="owner")
    t = store.get_trial(tid)
    assert t.state is TrialState.FAILED and t.error == "Traceback: boom"


def test_queued_can_only_be_cancelled(store):
    a, b = make(store, 2)
    assert store.finish_trial(a, TrialState.COMPLETE) is False
    assert store.finish_trial(a, TrialState.CANCELLED, error="user") is True
    assert store.get_trial(a).state is TrialState.CANCELLED
    assert store.claim_trial(a, "w") is None


def test_delivery_cap_marks_failed(store, clock):
    (tid,) = make(store, 1)
    for i in range(2):
        assert store.claim_trial(tid, f"w{i}", max_attempts=2) is not None
        clock.advance(2)
        assert store.requeue_stale(1) == [tid]
    assert store.claim_trial(tid, "w3", max_attempts=2) is None
    t = store.get_trial(tid)
    assert t.state is TrialState.FAILED and t.attempts == 2
    assert t.error.startswith("delivery cap reached")


def test_requeue_stale_judges_age_as_of_the_given_time(store, clock):
    (tid,) = make(store, 1)
    store.claim_trial(tid, "w")
    # seen a minute ago the heartbeat was not written yet: nothing is old as of then
    assert store.requeue_stale(0, as_of=clock() - 60) == []
    assert store.requeue_stale(30, as_of=clock() + 60) == [tid]
    assert store.get_trial(tid).state is TrialState.QUEUED


def test_requeue_stale_only_old_heartbeats(store, clock):
    a, b = make(store, 2)
    store.claim_trial(a, "lost")
    clock.advance(30)
    store.claim_trial(b, "alive")
    clock.advance(10)
    assert store.requeue_stale(40) == []  # a is exactly 40 s old: not older than 40 s
    assert store.requeue_stale(20) == [a]  # b is 10 s old
    ta = store.get_trial(a)
    assert ta.state is TrialState.QUEUED and ta.worker is None and ta.attempts == 1
    assert store.get_trial(b).state is TrialState.RUNNING
    # the lost worker comes back late: its writes are refused
    assert store.heartbeat(a, "lost") is False
    assert store.finish_trial(a, TrialState.COMPLETE, worker="lost") is False
    again = store.claim_trial(a, "new")
    assert again.attempts == 2 and again.metrics == []
    assert store.finish_trial(a, TrialState.COMPLETE, worker="lost") is False


def test_release_trial_only_by_owner_while_running_keeps_attempts(store):
    a, b = make(store, 2)
    store.claim_trial(a, "dead")
    store.append_metrics(a, {"epoch": 1})
    cursor = store.latest_seq()
    assert store.release_trial(a, "other") is False  # not the owner
    assert store.get_trial(a).state is TrialState.RUNNING
    assert store.release_trial(b, "dead") is False  # QUEUED, not RUNNING
    assert store.release_trial(a, "dead") is True
    t = store.get_trial(a)
    assert (t.state, t.worker, t.heartbeat_at, t.attempts) == (TrialState.QUEUED, None, None, 1)
    assert [x.id for x in store.list_trials(since=cursor)] == [a]  # seq bumped
    assert store.release_trial(a, "dead") is False  # already released
    # the dead owner's late writes are refused; the next claim counts the death
    assert store.heartbeat(a, "dead") is False
    assert store.finish_trial(a, TrialState.COMPLETE, worker="dead") is False
    again = store.claim_trial(a, "new", max_attempts=2)
    assert again.attempts == 2 and again.metrics == []
    assert store.release_trial(a, "new") is True
    assert store.claim_trial(a, "newer", max_attempts=2) is None  # the cap still holds
    assert store.get_trial(a).state is TrialState.FAILED
    assert store.release_trial(a, "newer") is False  # finished trials stay finished
    with pytest.raises(NotFoundError, match="nope"):
        store.release_trial("nope", "w")
    with pytest.raises(ValueError, match="worker"):
        store.release_trial(a, "")


def test_append_metrics_by_a_stale_worker_is_refused(store):
    (tid,) = make(store, 1)
    store.claim_trial(tid, "w1")
    assert store.append_metrics(tid, {"epoch": 1, "who": "w1"}, worker="w1") is True
    assert store.requeue_stale(0) == [tid]
    assert store.claim_trial(tid, "w2") is not None
    assert store.append_metrics(tid, {"epoch": 1, "who": "w2"}, worker="w2") is True
    cursor = store.latest_seq()
    assert store.append_metrics(tid, {"epoch": 2, "who": "w1"}, worker="w1") is False
    t = store.get_trial(tid)
    assert t.metrics == [{"epoch": 1, "who": "w2"}] and t.worker == "w2"
    assert store.list_trials(since=cursor) == []  # a refused write changes nothing visible
    store.finish_trial(tid, TrialState.COMPLETE, worker="w2")
    assert store.append_metrics(tid, {"epoch": 3}, worker="w2") is False  # finished: read-only
    assert store.append_metrics(tid, {"epoch": 3}) is False
