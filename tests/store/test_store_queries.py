"""The trial reads of the ResultStore contract (queries.py), run against every backend (see
conftest.py): filters, sorting, paging, the best trial, exports, rung and path values, and
the change cursor (``since=``) that must never lose a row."""

from __future__ import annotations

import csv
import datetime
import io
import json
import threading

import pytest
from store_support import make, run

from dnnframe.store import ResultStore, TrialRecord, TrialState


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
    assert {t.id for t in store.list_trials(state=["QUEUED", TrialState.RUNNING])} == {
        ids[4],
        ids[5],
    }
    with pytest.raises(ValueError, match="'DONE' is not a trial state"):
        store.list_trials(state="DONE")


def test_sort_by_metric_nulls_last_both_ways(filled):
    store, ids = filled
    asc = [t.id for t in store.list_trials(sort_by="test_accuracy")]
    assert asc[:3] == [ids[0], ids[3], ids[1]]
    desc = [
        t.id for t in store.list_trials(sort_by="result.metrics.test_accuracy", descending=True)
    ]
    assert desc[:3] == [ids[1], ids[3], ids[0]]
    assert set(asc[3:]) == set(desc[3:]) == {ids[2], ids[4], ids[5]}
    secs = [t.id for t in store.list_trials(sort_by="train_seconds", limit=2)]
    assert secs == [ids[1], ids[3]]


def test_sort_by_config_path_and_columns(filled):
    store, ids = filled
    by_layers = [
        t.id for t in store.list_trials(sort_by="config.model.hidden_layers", descending=True)
    ]
    assert by_layers == list(reversed(ids))
    by_state = [t.state.value for t in store.list_trials(sort_by="state")]
    assert by_state == sorted(by_state)
    assert [t.id for t in store.list_trials()] == ids  # default: creation order


@pytest.mark.parametrize(
    "bad", ["result; DROP TABLE trials", "config.a-b", "$where", "spec.x", "result.metrics.'x'", ""]
)
def test_sort_by_is_validated(store, bad):
    with pytest.raises(ValueError, match="sort_by"):
        store.list_trials(sort_by=bad)


def test_unknown_sort_key_names_the_allowed_keys(store):
    with pytest.raises(ValueError, match=r"'bogus' is not a sort key: use one of .*test_accuracy"):
        store.list_trials(sort_by="bogus")


def test_pagination(filled):
    store, ids = filled
    pages = [store.list_trials(limit=4, offset=0), store.list_trials(limit=4, offset=4)]
    assert [t.id for p in pages for t in p] == ids
    assert store.list_trials(limit=0) == []
    with pytest.raises(ValueError, match="offset"):
        store.list_trials(offset=-1)


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


def test_csv_times_are_iso_8601_utc(store):
    (tid,) = make(store, 1)
    run(store, tid, 0.5)
    t = store.get_trial(tid)
    buf = io.StringIO()
    store.export_csv(buf)
    (row,) = csv.DictReader(io.StringIO(buf.getvalue()))
    for column, value in (
        ("created_at", t.created_at),
        ("started_at", t.started_at),
        ("finished_at", t.finished_at),
    ):
        assert row[column].endswith("Z") and "T" in row[column]
        parsed = datetime.datetime.fromisoformat(row[column].replace("Z", "+00:00"))
        assert parsed.tzinfo is not None
        assert abs(parsed.timestamp() - value) < 1e-3


def test_row_examples_run():
    import doctest

    from dnnframe.store import rows

    assert doctest.testmod(rows).failed == 0


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


def test_trial_values_read_config_and_result_paths_of_each_trial(store):
    a, b, c = make(store, 3)
    (other,) = make(store, 1, eid="exp2")
    run(store, a, 0.8, epochs=2)
    store.claim_trial(b, "w")
    store.finish_trial(b, TrialState.FAILED, error="boom", worker="w")
    store.claim_trial(c, "w")
    store.finish_trial(
        c,
        TrialState.COMPLETE,
        worker="w",
        result={
            "metrics": {"test_accuracy": None, "flag": True, "curve": [1, 2]},
            "deep": {"list": {"x": False}},
        },
    )
    paths = [
        "config.model.hidden_layers",
        "config.missing.key",
        "result.metrics.test_accuracy",
        "result.metrics.flag",
        "result.metrics.curve",
        "result.deep.list",
        "config.model",
    ]
    rows = store.trial_values("exp1", paths)
    assert [r["id"] for r in rows] == [a, b, c]  # creation order, only this experiment's
    assert [r["state"] for r in rows] == [
        TrialState.COMPLETE,
        TrialState.FAILED,
        TrialState.COMPLETE,
    ]
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
    assert all(
        r["config.model.hidden_layers"] == whole[r["id"]].config["model"]["hidden_layers"]
        for r in rows
    )
    # one path of a column, and a path given twice, read the same
    single = store.trial_values(
        "exp1", ["result.deep.list", "config.model.hidden_layers", "config.model.hidden_layers"]
    )
    assert [(r["result.deep.list"], r["config.model.hidden_layers"]) for r in single] == [
        (None, 1),
        (None, 2),
        ({"x": False}, 3),
    ]
    assert store.trial_values("nope", paths) == []
    for bad in (
        ["metrics.x"],
        ["config"],
        ["config.a b"],
        ["result.x') OR 1=1 --"],
        "config.model",
    ):
        with pytest.raises(ValueError, match="path"):
            store.trial_values("exp1", bad)


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
    assert [
        t.id
        for t in store.list_trials(since=cursor, experiment_id="exp1", state=TrialState.RUNNING)
    ] == [b, a]


@pytest.mark.parametrize(
    "sort_by, descending",
    [("test_accuracy", False), ("created_at", True), ("seq", True), ("state", False)],
)
def test_since_is_refused_in_any_order_but_change_order(store, sort_by, descending):
    with pytest.raises(ValueError, match="since= pages in ascending change order only"):
        store.list_trials(since=0, sort_by=sort_by, descending=descending)
    assert store.list_trials(since=0, sort_by="seq") == []


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


def test_interleaved_writers_never_hide_a_finished_trial_from_a_cursor_reader(
    store, atomic_operations
):
    ids = make(store, 120)
    stop = threading.Event()
    seen: dict[str, TrialRecord] = {}
    states: dict[str, TrialState] = {}  # what a reader of changed_states saw last
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

    def state_reader():
        cursor = 0
        try:
            while True:
                done = stop.is_set()
                for tid, state, seq in store.changed_states(cursor):
                    states[tid], cursor = state, max(cursor, seq)
                if done:
                    return
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    def writer(k: int):
        try:
            mine = ids[k::4]
            for start in range(0, len(mine), 5):
                pack = [r.id for r in store.claim_trials(mine[start : start + 5], f"w{k}")]
                store.append_metrics_many({t: {"epoch": 1} for t in pack}, worker=f"w{k}")
                store.finish_trials(
                    [(t, TrialState.COMPLETE, {"k": k}, None) for t in pack], worker=f"w{k}"
                )
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    watchers = [threading.Thread(target=reader), threading.Thread(target=state_reader)]
    for th in watchers:
        th.start()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    stop.set()
    for th in watchers:
        th.join()
    assert errors == []
    assert sorted(seen) == sorted(ids)
    assert {t.state for t in seen.values()} == {TrialState.COMPLETE}
    assert states == dict.fromkeys(ids, TrialState.COMPLETE)
