"""The lean reads of the ResultStore contract, run against every backend (see conftest.py):
``fields=`` (records without their bulky fields), ``get_trials`` (several ids in one read),
``counts_by_experiment`` (grouped counts) and ``running_owners``."""

from __future__ import annotations

import pytest

from dnnframe.exceptions import NotFoundError
from dnnframe.store import ResultStore, TrialState


def make(store: ResultStore, n: int, eid: str) -> list[str]:
    store.create_experiment(eid, f"name-{eid}", {"spec": eid}, n)
    ids = [f"{eid}-t{i}" for i in range(n)]
    store.create_trials(
        eid, [(t, {"model": {"hidden_layers": i + 1}, "seed": i}) for i, t in enumerate(ids)]
    )
    return ids


def finish(store: ResultStore, tid: str, acc: float, worker: str = "w") -> None:
    assert store.claim_trial(tid, worker) is not None
    store.append_metrics_many(
        {tid: [{"epoch": 1, "val_loss": 0.5}, {"epoch": 2, "val_loss": 0.25}]}
    )
    assert store.finish_trial(
        tid,
        TrialState.COMPLETE,
        worker=worker,
        result={"metrics": {"test_accuracy": acc}, "history": [{"epoch": 1}]},
    )


@pytest.fixture
def three(store):
    """Three trials: one COMPLETE (curve, result), one RUNNING (curve so far), one QUEUED."""
    ids = make(store, 3, "e")
    finish(store, ids[0], 0.75)
    assert store.claim_trial(ids[1], "node:7") is not None
    store.append_metrics(ids[1], {"epoch": 1, "val_loss": 0.9}, worker="node:7")
    return ids


def light(record) -> dict:
    """Everything of a record but its bulky fields."""
    return {k: v for k, v in record.to_dict().items() if k not in ("config", "result", "metrics")}


@pytest.mark.parametrize("fields", [(), ["metrics"], ("config", "result"), {"config"}])
def test_list_trials_reads_only_the_fields_asked_for(three, store, fields):
    full = store.list_trials()
    lean = store.list_trials(fields=fields)
    assert [t.id for t in lean] == three
    for whole, part in zip(full, lean):
        assert light(part) == light(whole)  # ids, state, owner, times, seq: always read
        assert part.config == (whole.config if "config" in fields else {})
        assert part.result == (whole.result if "result" in fields else None)
        assert part.metrics == (whole.metrics if "metrics" in fields else [])
    assert store.list_trials(fields=None) == full


def test_lean_list_trials_still_filters_sorts_and_pages_on_the_whole_row(three, store):
    finish(store, three[2], 0.5)
    best = store.list_trials(state="COMPLETE", sort_by="test_accuracy", descending=True, fields=())
    assert [(t.id, t.result) for t in best] == [(three[0], None), (three[2], None)]
    by_config = store.list_trials(
        sort_by="config.model.hidden_layers", descending=True, limit=2, fields=["metrics"]
    )
    assert [t.id for t in by_config] == [three[2], three[1]]
    assert by_config[1].metrics == [{"epoch": 1, "val_loss": 0.9}]
    assert store.list_trials("e", state=TrialState.RUNNING, fields=()) == [
        t for t in store.list_trials(fields=()) if t.state is TrialState.RUNNING
    ]


def test_lean_change_cursor_sees_every_change(three, store):
    cursor = store.latest_seq()
    store.append_metrics(three[1], {"epoch": 2, "val_loss": 0.8}, worker="node:7")
    store.finish_trial(three[1], TrialState.PRUNED, worker="node:7")
    changed = store.list_trials(since=cursor, fields=())
    assert [(t.id, t.state, t.metrics) for t in changed] == [(three[1], TrialState.PRUNED, [])]
    assert changed[0].seq == store.latest_seq()


def test_changed_states_are_the_change_cursors_ids_states_and_seqs(three, store):
    """What a follower counting ended trials reads: the rows ``since=`` returns, as
    ``(id, state, seq)``, from any cursor; nothing after the newest change."""
    start = store.latest_seq()
    assert store.changed_states(start) == []
    store.append_metrics(three[1], {"epoch": 2, "val_loss": 0.8}, worker="node:7")
    store.finish_trial(three[1], TrialState.PRUNED, worker="node:7")
    assert store.claim_trial(three[2], "node:8") is not None
    for since in range(store.latest_seq() + 1):
        assert store.changed_states(since) == [
            (t.id, t.state, t.seq) for t in store.list_trials(since=since, fields=())
        ]
    assert [(tid, state) for tid, state, _ in store.changed_states(start)] == [
        (three[1], TrialState.PRUNED),
        (three[2], TrialState.RUNNING),
    ]
    for bad in (-1, "3", True, 1.5):
        with pytest.raises(ValueError, match="since must be a non-negative integer"):
            store.changed_states(bad)


def test_get_trials_reads_several_in_the_order_asked(three, store):
    asked = [three[2], three[0], three[2], three[1]]
    got = store.get_trials(asked)
    assert got == [store.get_trial(tid) for tid in (three[2], three[0], three[1])]
    lean = store.get_trials(asked, fields=["result"])
    assert [t.id for t in lean] == [three[2], three[0], three[1]]
    assert [(t.config, t.metrics) for t in lean] == [({}, [])] * 3
    assert lean[1].result == {"metrics": {"test_accuracy": 0.75}, "history": [{"epoch": 1}]}
    assert [light(t) for t in lean] == [light(t) for t in got]
    assert store.get_trials([]) == []


def test_get_trials_many_ids(store):
    ids = make(store, 1200, "big")  # more than one SQL chunk of ids
    got = store.get_trials(list(reversed(ids)), fields=())
    assert [t.id for t in got] == list(reversed(ids))


def test_get_trials_names_an_unknown_id_and_refuses_bad_arguments(three, store):
    with pytest.raises(NotFoundError, match="'nope'"):
        store.get_trials([three[0], "nope"])
    with pytest.raises(ValueError, match="trial_ids"):
        store.get_trials(three[0])
    with pytest.raises(ValueError, match="'curve' is not a field"):
        store.get_trials(three, fields=["curve"])
    with pytest.raises(ValueError, match="fields must be a list"):
        store.list_trials(fields="metrics")


def test_counts_by_experiment_in_one_read(three, store):
    shared = make(store, 2, "f")
    store.create_trials("f", [(three[0], {"model": {"hidden_layers": 1}, "seed": 0})])
    counts = store.counts_by_experiment(["f", "e", "unknown", "e"])
    assert list(counts) == ["f", "e", "unknown"]
    zeros = {s.value: 0 for s in TrialState}
    assert counts["e"] == {**zeros, "COMPLETE": 1, "RUNNING": 1, "QUEUED": 1}
    assert counts["f"] == {**zeros, "COMPLETE": 1, "QUEUED": 2}
    assert counts["unknown"] == zeros
    assert counts["e"] == store.counts_by_state("e")
    assert store.counts_by_experiment([]) == {}
    with pytest.raises(ValueError, match="experiment_ids"):
        store.counts_by_experiment("e")
    assert len(shared) == 2


def test_list_experiments_counts_each_experiment(three, store):
    make(store, 2, "f")
    exps = {e.id: e for e in store.list_experiments()}
    assert exps["e"].counts == {"COMPLETE": 1, "RUNNING": 1, "QUEUED": 1}
    assert exps["f"].counts == {"QUEUED": 2}
    assert exps["e"].counts == store.get_experiment("e").counts


def test_experiments_count_the_trials_claimed_more_than_once(three, store):
    # A trial whose worker died is released and claimed again (attempts 2): a re-run. The
    # one read of an experiment and the page of them say how many of its trials ran again.
    assert store.get_experiment("e").reruns == 0
    assert store.release_trial(three[1], "node:7")
    assert store.claim_trial(three[1], "node:8") is not None
    assert store.finish_trial(three[1], TrialState.COMPLETE, worker="node:8", result={})
    make(store, 1, "f")
    store.create_trials("f", [(three[1], {"model": {"hidden_layers": 2}, "seed": 1})])
    exps = {e.id: e for e in store.list_experiments()}
    assert (exps["e"].reruns, exps["f"].reruns) == (1, 1)
    assert exps["e"].counts == {"COMPLETE": 2, "QUEUED": 1}
    assert store.get_experiment("e").reruns == 1
    assert store.get_experiment("f").counts == {"COMPLETE": 1, "QUEUED": 1}


def test_running_owners_names_owner_and_heartbeat_without_curves(three, store):
    owners = store.running_owners()
    assert [(t.id, t.worker, t.state) for t in owners] == [(three[1], "node:7", TrialState.RUNNING)]
    whole = store.get_trial(three[1])
    assert (owners[0].heartbeat_at, owners[0].started_at) == (whole.heartbeat_at, whole.started_at)
    assert (owners[0].config, owners[0].metrics, owners[0].result) == ({}, [], None)
    store.finish_trial(three[1], TrialState.COMPLETE, worker="node:7")
    assert store.running_owners() == []
