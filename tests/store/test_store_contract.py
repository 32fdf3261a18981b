"""The ResultStore contract, run against every backend (see conftest.py)."""

from __future__ import annotations

import csv
import datetime
import io
import json
import threading

import pytest

from dnnframe.exceptions import ExperimentActiveError, NotFoundError
from dnnframe.store import ResultStore, TrialRecord, TrialState

CFG = {"model": {"hidden_layers": 2, "width": 8}, "seed": 0}


def cfg(layers: int, seed: int = 0) -> dict:
    return {"model": {"hidden_layers": layers, "width": 8}, "seed": seed}


def make(store: ResultStore, n: int = 3, eid: str = "exp1") -> list[str]:
    store.create_experiment(eid, f"name-{eid}", {"spec": eid}, n)
    ids = [f"{eid}-t{i}" for i in range(n)]
    store.create_trials(eid, [(t, cfg(i + 1)) for i, t in enumerate(ids)])
    return ids


def run(store: ResultStore, tid: str, acc: float | None, state=TrialState.COMPLETE,
        epochs: int = 2, worker: str = "w") -> None:
    assert store.claim_trial(tid, worker) is not None
    for e in range(epochs):
        store.append_metrics(tid, {"epoch": e, "val_loss": 1.0 / (e + 1)})
    result = {"status": state.value, "metrics": {"test_accuracy": acc},
              "timings": {"train": 10 - (acc or 0)}, "history": [{"epoch": 0}]}
    assert store.finish_trial(tid, state, result=result, worker=worker)


# ---------------------------------------------------------------- experiments
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


# ---------------------------------------------------------------- trials
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


def test_rung_values_read_one_epoch_of_the_experiments_curves(store):
    a, b, c, d = make(store, 4)
    (other,) = make(store, 1, eid="exp2")
    curves = {a: [0.5, 0.7, 0.9], b: [0.4, float("nan")], c: [0.6], other: [0.99, 0.99]}
    for tid, values in curves.items():
        store.claim_trial(tid, "w")
        for e, v in enumerate(values, 1):
            store.append_metrics(tid, {"epoch": e, "val_accuracy": v})
    store.finish_trial(a, TrialState.COMPLETE, worker="w")
    store.finish_trial(c, TrialState.PRUNED, worker="w")
    assert sorted(store.rung_values("exp1", 1, "val_accuracy")) == [0.4, 0.5, 0.6]
    assert store.rung_values("exp1", 2, "val_accuracy") == [0.7]  # b's NaN is no value
    assert store.rung_values("exp1", 3, "val_accuracy") == [0.9]
    assert store.rung_values("exp1", 4, "val_accuracy") == []
    assert store.rung_values("exp1", 1, "val_loss") == []
    assert store.rung_values("exp2", 2, "val_accuracy") == [0.99]
    assert store.rung_values("nope", 1, "val_accuracy") == []
    assert d not in curves
    for epoch, metric in [(0, "val_loss"), (1, "val_loss') OR 1=1 --"), (1, "")]:
        with pytest.raises(ValueError, match="epoch|metric"):
            store.rung_values("exp1", epoch, metric)


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


# ---------------------------------------------------------------- queries
@pytest.fixture
def filled(store):
    ids = make(store, 6)
    accs = [0.5, 0.9, None, 0.7]
    for tid, acc in zip(ids, accs):
        run(store, tid, acc)
    store.claim_trial(ids[4], "w")
    return store, ids


def test_filter_by_state(filled):
    store, ids = filled
    assert {t.id for t in store.list_trials(state=TrialState.RUNNING)} == {ids[4]}
    assert {t.id for t in store.list_trials(state=["QUEUED", TrialState.RUNNING])} == {ids[4], ids[5]}
    with pytest.raises(ValueError, match="'DONE' is not a trial state"):
        store.list_trials(state="DONE")


def test_sort_by_metric_nulls_last_both_ways(filled):
    store, ids = filled
    asc = [t.id for t in store.list_trials(sort_by="test_accuracy")]
    assert asc[:3] == [ids[0], ids[3], ids[1]]
    desc = [t.id for t in store.list_trials(sort_by="result.metrics.test_accuracy", descending=True)]
    assert desc[:3] == [ids[1], ids[3], ids[0]]
    assert set(asc[3:]) == set(desc[3:]) == {ids[2], ids[4], ids[5]}
    secs = [t.id for t in store.list_trials(sort_by="train_seconds", limit=2)]
    assert secs == [ids[1], ids[3]]


def test_sort_by_config_path_and_columns(filled):
    store, ids = filled
    by_layers = [t.id for t in store.list_trials(sort_by="config.model.hidden_layers", descending=True)]
    assert by_layers == list(reversed(ids))
    by_state = [t.state.value for t in store.list_trials(sort_by="state")]
    assert by_state == sorted(by_state)
    assert [t.id for t in store.list_trials()] == ids  # default: creation order


@pytest.mark.parametrize("bad", ["result; DROP TABLE trials", "config.a-b", "$where", "spec.x",
                                 "result.metrics.'x'", ""])
def test_sort_by_is_validated(store, bad):
    with pytest.raises(ValueError, match="sort_by"):
        store.list_trials(sort_by=bad)


def test_pagination(filled):
    store, ids = filled
    pages = [store.list_trials(limit=4, offset=0), store.list_trials(limit=4, offset=4)]
    assert [t.id for p in pages for t in p] == ids
    assert store.list_trials(limit=0) == []
    with pytest.raises(ValueError, match="offset"):
        store.list_trials(offset=-1)


def test_since_cursor_returns_changes_only(store):
    assert store.latest_seq() == 0
    a, b, c = make(store, 3)
    cursor = store.latest_seq()
    assert cursor > 0 and store.list_trials(since=cursor) == []
    store.claim_trial(b, "w")
    changed = store.list_trials(since=cursor)
    assert [t.id for t in changed] == [b]
    cursor2 = store.latest_seq()
    store.append_metrics(b, {"epoch": 0})
    store.claim_trial(a, "w")
    assert [t.id for t in store.list_trials(since=cursor2)] == [b, a]  # in change order
    assert store.latest_seq() > cursor2
    assert [t.id for t in store.list_trials(since=cursor, experiment_id="exp1",
                                            state=TrialState.RUNNING)] == [b, a]


def test_best_trial(filled):
    store, ids = filled
    assert store.best_trial("exp1").id == ids[1]
    assert store.best_trial("exp1", metric="test_accuracy", mode="min").id == ids[0]
    assert store.best_trial("exp1", metric="val_loss") is None  # nobody has it
    with pytest.raises(ValueError, match="mode"):
        store.best_trial("exp1", mode="top")


def test_export_jsonl_and_csv(filled, tmp_path):
    store, ids = filled
    path = tmp_path / "out.jsonl"
    assert store.export_jsonl(path, experiment_id="exp1") == 6
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["id"] for r in rows] == ids
    assert rows[1]["result"]["metrics"]["test_accuracy"] == 0.9
    assert rows[1]["metrics"][1] == {"epoch": 1, "val_loss": 0.5}
    assert rows[4]["state"] == "RUNNING"
    buf = io.StringIO()
    assert store.export_csv(buf, state=TrialState.COMPLETE) == 4
    table = list(csv.DictReader(io.StringIO(buf.getvalue())))
    assert [r["id"] for r in table] == ids[:4]
    assert table[1]["result.metrics.test_accuracy"] == "0.9"
    assert table[1]["config.model.hidden_layers"] == "2"
    assert table[2]["result.metrics.test_accuracy"] == ""
    assert "result.history" not in table[0]


def test_workers(store, clock):
    store.register_worker("w1", host="h", pid=12, current_trial="t", trials_done=3,
                          info={"queue": "default"})
    store.register_worker("w2", host="h", pid=13)
    store.register_worker("w1", host="h", pid=12, current_trial=None, trials_done=4)
    ws = store.list_workers()
    assert [w.name for w in ws] == ["w1", "w2"]
    assert (ws[0].current_trial, ws[0].trials_done, ws[0].pid) == (None, 4, 12)
    assert ws[0].last_seen == clock()
    clock.advance(60)
    assert len(store.list_workers(seen_within_s=60)) == 2
    assert store.list_workers(seen_within_s=-10) == []


def test_held_dispatch_is_taken_once_oldest_first(store):
    store.hold_dispatch([("t1", "default"), ("t2", "gpu")])
    store.hold_dispatch([("t3", "default"), ("t1", "default")])  # held again: one entry
    assert sorted(store.take_dispatch(limit=2) + store.take_dispatch()) == [
        ("t1", "default"), ("t2", "gpu"), ("t3", "default")]
    assert store.take_dispatch() == []
    store.hold_dispatch([])
    with pytest.raises(ValueError, match="trial_id, queue"):
        store.hold_dispatch([("t4", "")])
    with pytest.raises(ValueError, match="limit"):
        store.take_dispatch(limit=0)


def test_held_dispatch_goes_to_one_taker(store, atomic_operations):
    store.hold_dispatch([(f"t{i}", "default") for i in range(60)])
    taken: list[tuple[str, str]] = []

    def taker() -> None:
        while batch := store.take_dispatch(limit=7):
            taken.extend(batch)

    threads = [threading.Thread(target=taker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # a taker that lost every entry it saw to the others may stop early: drain the rest
    taken.extend(store.take_dispatch(limit=100))
    assert sorted(tid for tid, _ in taken) == sorted(f"t{i}" for i in range(60))  # once each


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


# ---------------------------------------------------------------- cursor paging of big batches
def follow(store: ResultStore, cursor: int, limit: int) -> tuple[int, dict[str, TrialRecord]]:
    """What a live page does: ask ``since=cursor`` a page at a time, advance to max(seq)."""
    seen: dict[str, TrialRecord] = {}
    while True:
        page = store.list_trials(since=cursor, limit=limit)
        for t in page:
            seen[t.id] = t
        if len(page) < limit:
            return max([cursor, *(t.seq for t in page)]), seen
        cursor = max(t.seq for t in page)


def test_cursor_pages_see_every_row_of_a_batch_larger_than_a_page(store):
    ids = make(store, 1500)
    assert len({t.seq for t in store.list_trials()}) == 1500  # one seq per row, no ties
    cursor, seen = follow(store, 0, 1000)
    assert sorted(seen) == sorted(ids)
    assert store.cancel_experiment("exp1") == 1500
    cursor, seen = follow(store, cursor, 1000)
    assert sorted(seen) == sorted(ids)
    assert {t.state for t in seen.values()} == {TrialState.CANCELLED}
    assert len(store.requeue_trials("exp1")) == 1500
    cursor, seen = follow(store, cursor, 1000)
    assert sorted(seen) == sorted(ids)
    assert {t.state for t in seen.values()} == {TrialState.QUEUED}
    # requeue_stale writes many rows at once too
    for tid in ids[:3]:
        store.claim_trial(tid, "w")
    cursor = store.latest_seq()
    assert store.requeue_stale(0) == sorted(ids[:3])
    cursor, seen = follow(store, cursor, 2)
    assert sorted(seen) == sorted(ids[:3])


# ---------------------------------------------------------------- metrics ownership
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


# ---------------------------------------------------------------- opening without creating
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


# ---------------------------------------------------------------- batches
def test_claim_trials_wins_what_it_can_and_applies_the_cap_per_trial(store):
    ids = make(store, 5)
    assert store.claim_trial(ids[2], "dead") is not None      # one delivery already spent
    assert store.requeue_stale(0) == [ids[2]]
    assert store.claim_trial(ids[0], "other") is not None  # running elsewhere
    run(store, ids[1], 0.5)                                   # finished
    cursor = store.latest_seq()
    won = store.claim_trials([*ids, ids[3]], "w", max_attempts=1)
    assert [r.id for r in won] == [ids[3], ids[4]]
    assert all((r.state, r.worker, r.attempts, r.metrics) == (TrialState.RUNNING, "w", 1, [])
               for r in won)
    capped = store.get_trial(ids[2])
    assert capped.state is TrialState.FAILED and capped.error.startswith("delivery cap reached")
    assert store.get_trial(ids[0]).worker == "other"
    changed = store.list_trials(since=cursor)
    assert sorted(t.id for t in changed) == sorted(ids[2:])
    assert len({t.seq for t in changed}) == 3  # one seq per row
    assert store.claim_trials(ids, "w2") == []  # a redelivered pack is a no-op


def test_claim_trials_of_a_cancelled_experiment_cancels_them(store):
    ids = make(store, 2)
    store.create_experiment("live", "live", {}, 1)
    store.create_trials("live", [(ids[1], CFG)])  # shared with an experiment still wanted
    store.cancel_experiment("exp1")
    store.finish_trial(ids[1], TrialState.CANCELLED)  # ... but cancelled by hand meanwhile
    store.create_trials("exp1", [("late", CFG)])  # created after the cancel: still QUEUED
    assert store.claim_trials(["late", ids[0]], "w") == []
    assert store.get_trial("late").state is TrialState.CANCELLED


def test_batches_naming_an_unknown_trial_change_nothing(store):
    ids = make(store, 2)
    with pytest.raises(NotFoundError, match="nope"):
        store.claim_trials([ids[0], "nope"], "w")
    assert store.get_trial(ids[0]).state is TrialState.QUEUED
    store.claim_trial(ids[0], "w")
    with pytest.raises(NotFoundError, match="nope"):
        store.finish_trials([(ids[0], TrialState.COMPLETE, None, None),
                             ("nope", TrialState.COMPLETE, None, None)], worker="w")
    assert store.get_trial(ids[0]).state is TrialState.RUNNING
    with pytest.raises(NotFoundError, match="nope"):
        store.cancel_requested([ids[0], "nope"])


def test_batch_arguments_are_named(store):
    ids = make(store, 1)
    with pytest.raises(ValueError, match="worker"):
        store.claim_trials(ids, "")
    with pytest.raises(ValueError, match="max_attempts"):
        store.claim_trials(ids, "w", max_attempts=0)
    with pytest.raises(ValueError, match="trial_ids"):
        store.claim_trials(ids[0], "w")  # a bare string is not a list of ids
    with pytest.raises(ValueError, match="metrics must be a dict"):
        store.append_metrics_many({ids[0]: [1, 2]}, worker="w")
    with pytest.raises(ValueError, match="metrics must be a dict"):
        store.append_metrics_many({ids[0]: "epoch 1"}, worker="w")
    with pytest.raises(ValueError, match="finished state"):
        store.finish_trials([(ids[0], TrialState.RUNNING, None, None)], worker="w")
    with pytest.raises(ValueError, match=r"items\[0\]"):
        store.finish_trials([(ids[0], TrialState.COMPLETE)], worker="w")


def test_heartbeat_trials_reports_what_is_still_owned(store, clock):
    a, b, c, d = make(store, 4)
    store.claim_trials([a, b, c], "w")
    store.claim_trial(d, "other")
    store.finish_trial(c, TrialState.COMPLETE, worker="w")
    before = {t.id: t.heartbeat_at for t in store.list_trials()}
    cursor = store.latest_seq()
    clock.advance(1)
    assert store.heartbeat_trials([a, b, c, d], "w") == {a, b}
    after = {t.id: t.heartbeat_at for t in store.list_trials()}
    assert after[a] > before[a] and after[b] > before[b]
    assert (after[c], after[d]) == (before[c], before[d])
    assert store.list_trials(since=cursor) == []  # heartbeats are not changes


def test_append_metrics_many_writes_owned_running_trials_only(store):
    a, b, c, d = make(store, 4)
    store.claim_trials([a, b], "w")
    store.claim_trial(c, "other")
    cursor = store.latest_seq()
    for epoch in (1, 2):
        written = store.append_metrics_many(
            {a: {"epoch": epoch, "val_loss": float("nan")}, b: {"epoch": epoch},
             c: {"epoch": epoch}, d: {"epoch": epoch}}, worker="w")
        assert written == {a, b}
    assert store.get_trial(a).metrics == [{"epoch": 1, "val_loss": None},
                                          {"epoch": 2, "val_loss": None}]
    assert [m["epoch"] for m in store.get_trial(b).metrics] == [1, 2]
    assert store.get_trial(c).metrics == [] and store.get_trial(d).metrics == []
    changed = store.list_trials(since=cursor)
    assert [t.id for t in changed] == [a, b] and changed[0].seq != changed[1].seq
    assert store.append_metrics_many({}, worker="w") == set()


def test_append_metrics_many_appends_several_epochs_in_order(store):
    a, b, c = make(store, 3)
    store.claim_trials([a, b], "w")
    store.claim_trial(c, "other")
    store.append_metrics_many({a: {"epoch": 1}}, worker="w")
    cursor = store.latest_seq()
    written = store.append_metrics_many(
        {a: [{"epoch": 2}, {"epoch": 3, "val_loss": float("inf")}],
         b: [{"epoch": 1}, {"epoch": 2}, {"epoch": 3}, {"epoch": 4}],
         c: [{"epoch": 1}, {"epoch": 2}]}, worker="w")
    assert written == {a, b}
    assert store.get_trial(a).metrics == [{"epoch": 1}, {"epoch": 2},
                                          {"epoch": 3, "val_loss": None}]
    assert [m["epoch"] for m in store.get_trial(b).metrics] == [1, 2, 3, 4]
    assert store.get_trial(c).metrics == []
    assert sorted(t.id for t in store.list_trials(since=cursor)) == sorted([a, b])
    assert store.append_metrics_many({a: []}, worker="w") == set()  # nothing to append


def test_finish_trials_applies_each_trials_rules(store):
    a, b, c, d, e = make(store, 5)
    store.claim_trials([a, b], "w")
    store.claim_trial(c, "other")
    result = {"status": "COMPLETE", "metrics": {"test_accuracy": 0.75}}
    done = store.finish_trials([
        (a, TrialState.COMPLETE, result, None),
        (b, "DIVERGED", None, "diverged at epoch 3"),
        (c, TrialState.COMPLETE, result, None),          # another worker's: refused
        (d, TrialState.CANCELLED, None, "user"),         # QUEUED may be cancelled
        (e, TrialState.COMPLETE, result, None),          # QUEUED may not complete
    ], worker="w")
    assert done == {a, b, d}
    ta, tb = store.get_trial(a), store.get_trial(b)
    assert ta.state is TrialState.COMPLETE and ta.result["metrics"]["test_accuracy"] == 0.75
    assert (tb.state, tb.error) == (TrialState.DIVERGED, "diverged at epoch 3")
    assert store.get_trial(c).state is TrialState.RUNNING
    assert store.get_trial(e).state is TrialState.QUEUED
    again = store.finish_trials([(a, TrialState.FAILED, None, "late")], worker="w")
    assert again == set() and store.get_trial(a) == ta  # finished rows are read-only


def test_cancel_requested_in_one_call(store):
    a, b = make(store, 2)
    store.create_experiment("other", "o", {}, 1)
    store.create_trials("other", [("x", CFG), (b, CFG)])
    store.claim_trials([a, b, "x"], "w")
    assert store.cancel_requested([a, b, "x"]) == set()
    store.cancel_experiment("exp1")
    assert store.cancel_requested([a, b, "x"]) == {a}  # b is still wanted by "other"
    store.cancel_experiment("other")
    assert store.cancel_requested([a, b, "x"]) == {a, b, "x"}


# ---------------------------------------------------------------- paging that cannot lose rows
@pytest.mark.parametrize("sort_by, descending", [("test_accuracy", False), ("created_at", True),
                                                 ("seq", True), ("state", False)])
def test_since_is_refused_in_any_order_but_change_order(store, sort_by, descending):
    with pytest.raises(ValueError, match="since= pages in ascending change order only"):
        store.list_trials(since=0, sort_by=sort_by, descending=descending)
    assert store.list_trials(since=0, sort_by="seq") == []


def test_unknown_sort_key_names_the_allowed_keys(store):
    with pytest.raises(ValueError, match=r"'bogus' is not a sort key: use one of .*test_accuracy"):
        store.list_trials(sort_by="bogus")


def test_csv_times_are_iso_8601_utc(store):
    (tid,) = make(store, 1)
    run(store, tid, 0.5)
    t = store.get_trial(tid)
    buf = io.StringIO()
    store.export_csv(buf)
    (row,) = csv.DictReader(io.StringIO(buf.getvalue()))
    for column, value in (("created_at", t.created_at), ("started_at", t.started_at),
                          ("finished_at", t.finished_at)):
        assert row[column].endswith("Z") and "T" in row[column]
        parsed = datetime.datetime.fromisoformat(row[column].replace("Z", "+00:00"))
        assert parsed.tzinfo is not None
        assert abs(parsed.timestamp() - value) < 1e-3


def test_interleaved_writers_never_hide_a_finished_trial_from_a_cursor_reader(
        store, atomic_operations):
    ids = make(store, 120)
    stop = threading.Event()
    seen: dict[str, TrialRecord] = {}
    errors: list[BaseException] = []

    def reader():
        cursor = 0
        try:
            while True:
                done = stop.is_set()  # read before the last sweep, so it sees the final writes
                cursor, page = follow(store, cursor, 7)
                seen.update(page)
                if done:
                    return
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    def writer(k: int):
        try:
            mine = ids[k::4]
            for start in range(0, len(mine), 5):
                pack = [r.id for r in store.claim_trials(mine[start:start + 5], f"w{k}")]
                store.append_metrics_many({t: {"epoch": 1} for t in pack}, worker=f"w{k}")
                store.finish_trials([(t, TrialState.COMPLETE, {"k": k}, None) for t in pack],
                                    worker=f"w{k}")
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    watcher = threading.Thread(target=reader)
    watcher.start()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    stop.set()
    watcher.join()
    assert errors == []
    assert sorted(seen) == sorted(ids)
    assert {t.state for t in seen.values()} == {TrialState.COMPLETE}


def test_row_examples_run():
    import doctest

    from dnnframe.store import rows

    assert doctest.testmod(rows).failed == 0


def test_trial_values_read_config_and_result_paths_of_each_trial(store):
    a, b, c = make(store, 3)
    (other,) = make(store, 1, eid="exp2")
    run(store, a, 0.8, epochs=2)
    store.claim_trial(b, "w")
    store.finish_trial(b, TrialState.FAILED, error="boom", worker="w")
    store.claim_trial(c, "w")
    store.finish_trial(c, TrialState.COMPLETE, worker="w", result={
        "metrics": {"test_accuracy": None, "flag": True, "curve": [1, 2]},
        "deep": {"list": {"x": False}}})
    paths = ["config.model.hidden_layers", "config.missing.key", "result.metrics.test_accuracy",
             "result.metrics.flag", "result.metrics.curve", "result.deep.list", "config.model"]
    rows = store.trial_values("exp1", paths)
    assert [r["id"] for r in rows] == [a, b, c]  # creation order, only this experiment's
    assert [r["state"] for r in rows] == [TrialState.COMPLETE, TrialState.FAILED,
                                          TrialState.COMPLETE]
    assert rows[1]["error"] == "boom" and rows[0]["error"] is None
    assert [r["config.model.hidden_layers"] for r in rows] == [1, 2, 3]
    assert all(r["config.missing.key"] is None for r in rows)
    assert rows[0]["result.metrics.test_accuracy"] == 0.8
    assert rows[1]["result.metrics.test_accuracy"] is None  # no result at all
    assert rows[2]["result.metrics.flag"] is True  # a JSON true stays a bool
    assert rows[2]["result.metrics.curve"] == [1, 2]
    assert rows[2]["result.deep.list"] == {"x": False}
    assert rows[0]["config.model"] == {"hidden_layers": 1, "width": 8}  # and a path inside it
    # the same values as the whole rows hold
    whole = {t.id: t for t in store.list_trials("exp1")}
    assert all(r["config.model.hidden_layers"] == whole[r["id"]].config["model"]["hidden_layers"]
               for r in rows)
    # one path of a column, and a path given twice, read the same
    single = store.trial_values("exp1", ["result.deep.list", "config.model.hidden_layers",
                                         "config.model.hidden_layers"])
    assert [(r["result.deep.list"], r["config.model.hidden_layers"]) for r in single] == [
        (None, 1), (None, 2), ({"x": False}, 3)]
    assert store.trial_values("nope", paths) == []
    for bad in (["metrics.x"], ["config"], ["config.a b"], ["result.x') OR 1=1 --"], "config.model"):
        with pytest.raises(ValueError, match="path"):
            store.trial_values("exp1", bad)
