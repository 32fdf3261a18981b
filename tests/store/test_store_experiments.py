"""The experiments part of the ResultStore contract (experiments.py), run against every
backend (see conftest.py): creating, listing, cancelling, resuming and deleting experiments
with the trials they share; and a store reopened or opened without creating."""

from __future__ import annotations

import pytest
from store_support import CFG, cfg, make, run

from dnnframe.exceptions import ExperimentActiveError, NotFoundError
from dnnframe.store import TrialState


def test_create_experiment_is_idempotent(store):
    a = store.create_experiment("e", "first", {"x": 1}, 4)
    b = store.create_experiment("e", "second", {"x": 2}, 9)
    assert (b.name, b.spec, b.n_trials, b.created_at) == ("first", {"x": 1}, 4, a.created_at)
    assert [e.id for e in store.list_experiments()] == ["e"]
    assert store.get_experiment("e").status == "QUEUED"


def test_unknown_ids_raise_not_found(store):
    with pytest.raises(NotFoundError, match="nope"):
        store.get_experiment("nope")
    with pytest.raises(NotFoundError, match="nope"):
        store.get_trial("nope")
    with pytest.raises(NotFoundError, match="nope"):
        store.create_trials("nope", [("t", {})])
    with pytest.raises(NotFoundError, match="nope"):
        store.claim_trial("nope", "w")
    with pytest.raises(NotFoundError, match="nope"):
        store.cancel_experiment("nope")
    with pytest.raises(NotFoundError, match="nope"):
        store.finish_trial("nope", TrialState.COMPLETE)


def test_bad_arguments_are_named(store):
    store.create_experiment("e", "n", {}, 1)
    with pytest.raises(ValueError, match=r"trials\[0\].*config must be a dict"):
        store.create_trials("e", [("t", "not a dict")])
    with pytest.raises(ValueError, match="trial id"):
        store.create_trials("e", [("", {})])
    with pytest.raises(ValueError, match="n_trials"):
        store.create_experiment("e2", "n", {}, -1)
    store.create_trials("e", [("t", {})])
    with pytest.raises(ValueError, match="finished state"):
        store.finish_trial("t", TrialState.RUNNING)
    with pytest.raises(ValueError, match="'BOGUS' is not a trial state"):
        store.finish_trial("t", "BOGUS")
    with pytest.raises(ValueError, match="max_attempts"):
        store.claim_trial("t", "w", max_attempts=0)


def test_experiment_listing_newest_first_with_counts(store, clock):
    make(store, 2, "a")
    clock.advance(1)
    make(store, 3, "b")
    exps = store.list_experiments()
    assert [e.id for e in exps] == ["b", "a"]
    assert exps[0].counts == {"QUEUED": 3}
    assert [e.id for e in store.list_experiments(limit=1, offset=1)] == ["a"]


def test_status_follows_trial_states(store):
    ids = make(store, 2)
    assert store.get_experiment("exp1").status == "QUEUED"
    store.claim_trial(ids[0], "w")
    assert store.get_experiment("exp1").status == "RUNNING"
    store.finish_trial(ids[0], TrialState.COMPLETE, worker="w")
    assert store.get_experiment("exp1").status == "RUNNING"  # one done, one waiting
    run(store, ids[1], 0.5)
    exp = store.get_experiment("exp1")
    assert exp.status == "COMPLETE" and exp.counts == {"COMPLETE": 2}


def test_create_trials_is_idempotent_and_shares_rows(store):
    ids = make(store, 3, "a")
    assert store.create_trials("a", [(t, CFG) for t in ids]) == 0
    run(store, ids[0], 0.9)
    store.create_experiment("b", "b", {}, 2)
    assert store.create_trials("b", [(ids[0], CFG), ("new", CFG)]) == 1
    t0 = store.get_trial(ids[0])
    assert t0.experiment_ids == ["a", "b"]
    assert t0.state is TrialState.COMPLETE and t0.config == cfg(1)  # kept, not replaced
    assert len(store.list_trials()) == 4
    assert {t.id for t in store.list_trials(experiment_id="b")} == {ids[0], "new"}
    assert store.counts_by_state("b")["COMPLETE"] == 1
    assert store.counts_by_state()["QUEUED"] == 3


def test_cancel_experiment(store):
    a, b, c = make(store, 3)
    store.create_experiment("other", "o", {}, 1)
    store.create_trials("other", [(c, CFG)])  # c is shared with a live experiment
    store.claim_trial(a, "w")
    assert store.is_cancel_requested(a) is False
    assert store.cancel_experiment("exp1") == 1  # b only: a runs, c is still wanted by "other"
    assert store.get_trial(b).state is TrialState.CANCELLED
    assert store.get_trial(c).state is TrialState.QUEUED
    assert store.is_cancel_requested(a) is True and store.is_cancel_requested(c) is False
    assert store.get_experiment("exp1").status == "RUNNING"
    assert store.finish_trial(a, TrialState.CANCELLED, worker="w")
    store.cancel_experiment("other")
    assert store.get_trial(c).state is TrialState.CANCELLED
    exp = store.get_experiment("exp1")
    assert exp.cancel_requested and exp.status == "CANCELLED"


def test_delete_experiment_removes_only_what_no_other_experiment_shares(store):
    ids = make(store, 3, "gone")
    store.create_experiment("kept", "name-kept", {"spec": "kept"}, 1)
    store.create_trials("kept", [(ids[0], cfg(1))])  # the first trial is shared
    for tid in ids:
        run(store, tid, 0.5)
    store.hold_dispatch([(ids[1], "default")])
    seq_before = store.get_trial(ids[0]).seq
    assert store.delete_experiment("gone") == 2
    with pytest.raises(NotFoundError):
        store.get_experiment("gone")
    for tid in ids[1:]:
        with pytest.raises(NotFoundError):
            store.get_trial(tid)
    shared = store.get_trial(ids[0])
    assert shared.experiment_ids == ["kept"] and shared.result["metrics"]["test_accuracy"] == 0.5
    assert shared.seq > seq_before  # a cursor reader sees its links change
    assert [e.id for e in store.list_experiments()] == ["kept"]
    assert store.counts_by_state("kept")["COMPLETE"] == 1
    assert store.take_dispatch() == []
    # idempotent: deleting it again (a retry) removes nothing
    assert store.delete_experiment("gone") == 0
    with pytest.raises(ValueError, match="experiment_id"):
        store.delete_experiment("")


def test_delete_experiment_refuses_while_its_own_trials_wait_or_run(store):
    ids = make(store, 3, "busy")
    run(store, ids[0], 0.5)
    assert store.claim_trial(ids[1], "w") is not None
    with pytest.raises(ExperimentActiveError, match="busy.*2 trial.*queued or running"):
        store.delete_experiment("busy")
    assert len(store.list_trials("busy")) == 3  # nothing was removed
    store.cancel_experiment("busy")
    with pytest.raises(ExperimentActiveError, match="1 trial"):
        store.delete_experiment("busy")  # the running one has not stopped yet
    assert store.finish_trial(ids[1], TrialState.CANCELLED, worker="w")
    assert store.delete_experiment("busy") == 3
    # a trial shared with a live experiment may be queued: it stays with that experiment
    make(store, 1, "a")
    store.create_experiment("b", "name-b", {"spec": "b"}, 1)
    store.create_trials("b", [("a-t0", cfg(1))])
    assert store.delete_experiment("b") == 0
    assert store.get_trial("a-t0").experiment_ids == ["a"]


def test_claim_after_cancel_does_not_run(store):
    store.create_experiment("e", "e", {}, 1)
    store.cancel_experiment("e")
    store.create_trials("e", [("late", CFG)])  # created after the cancel
    assert store.claim_trial("late", "w") is None
    assert store.get_trial("late").state is TrialState.CANCELLED


def test_requeue_trials_resumes_a_cancelled_experiment(store):
    a, b, c = make(store, 3)
    run(store, a, 0.9)
    store.claim_trial(b, "w")
    store.finish_trial(b, TrialState.FAILED, error="Traceback: boom", worker="w")
    store.cancel_experiment("exp1")
    assert store.get_trial(c).state is TrialState.CANCELLED
    cursor = store.latest_seq()
    assert store.requeue_trials("exp1", [TrialState.CANCELLED]) == [c]
    exp = store.get_experiment("exp1")
    assert not exp.cancel_requested and exp.counts == {"COMPLETE": 1, "FAILED": 1, "QUEUED": 1}
    assert [t.id for t in store.list_trials(since=cursor)] == [c]
    assert store.requeue_trials("exp1", TrialState.FAILED) == [b]
    tb = store.get_trial(b)
    assert (tb.state, tb.error, tb.attempts, tb.finished_at) == (TrialState.QUEUED, None, 0, None)
    assert store.claim_trial(b, "w2", max_attempts=1) is not None  # cap counts afresh
    assert store.get_trial(a).result["metrics"]["test_accuracy"] == 0.9
    with pytest.raises(ValueError, match="cannot requeue COMPLETE"):
        store.requeue_trials("exp1", [TrialState.COMPLETE])
    with pytest.raises(NotFoundError, match="nope"):
        store.requeue_trials("nope", [TrialState.CANCELLED])


def test_reopen_keeps_everything(url):
    from dnnframe.store import open_store

    s = open_store(url)
    ids = make(s, 2)
    run(s, ids[0], 0.3)
    s.close()
    s2 = open_store(url)
    try:
        assert s2.get_trial(ids[0]).result["metrics"]["test_accuracy"] == 0.3
        assert s2.get_experiment("exp1").counts == {"COMPLETE": 1, "QUEUED": 1}
    finally:
        s2.close()


def test_open_without_create_refuses_a_missing_store(url, backend, tmp_path):
    from dnnframe.exceptions import StoreError
    from dnnframe.store import open_store

    with pytest.raises(StoreError, match=r"no store at .*nothing has been run with this store yet"):
        open_store(url, create=False)
    if backend == "sqlite":
        assert list(tmp_path.iterdir()) == [], "a read-only open must not create the file"
    s = open_store(url)  # creating is the default
    make(s, 1)
    s.close()
    s2 = open_store(url, create=False)
    try:
        assert [e.id for e in s2.list_experiments()] == ["exp1"]
    finally:
        s2.close()
