"""Every write is safe to retry after it was applied and its answer was lost.

Two ways a write is retried, both checked for every write operation of the contract:

* the store retries it itself (MongoDB, after ``AutoReconnect``): the n-th driver write of
  the call is applied and then the connection is reported lost, for every n, and the call
  must answer and leave the store exactly as a call that met no fault;
* the caller retries it (any backend): the same call made twice leaves the store as one
  call does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import mongomock
import pytest
from pymongo.errors import AutoReconnect
from store_support import store_url

from dnnframe.store import (
    ExperimentRecord,
    NoteRecord,
    ResultStore,
    TrialRecord,
    TrialState,
    open_store,
)

IDS = ["t0", "t1", "t2"]


def _base(s: ResultStore) -> None:
    s.create_experiment("e", "e", {}, len(IDS))
    s.create_trials("e", [(tid, {"seed": i}) for i, tid in enumerate(IDS)])


def _claimed(s: ResultStore) -> None:
    _base(s)
    s.claim_trials(IDS, "w")


def _cancelled(s: ResultStore) -> None:
    _base(s)
    s.cancel_experiment("e")


# name -> (set-up, the write)
WRITES: dict[str, tuple[Callable[[ResultStore], Any], Callable[[ResultStore], Any]]] = {
    "create_experiment": (lambda s: None, lambda s: s.create_experiment("e", "e", {"a": 1}, 3)),
    "create_trials": (
        lambda s: s.create_experiment("e", "e", {}, 3),
        lambda s: s.create_trials("e", [(t, {"seed": 1}) for t in IDS]),
    ),
    "cancel_experiment": (_base, lambda s: s.cancel_experiment("e")),
    "requeue_trials": (_cancelled, lambda s: s.requeue_trials("e")),
    "claim_trials": (_base, lambda s: s.claim_trials(IDS, "w", max_attempts=3)),
    "heartbeat_trials": (_claimed, lambda s: s.heartbeat_trials(IDS, "w")),
    "append_metrics_many": (
        _claimed,
        lambda s: s.append_metrics_many(
            {t: [{"epoch": e, "loss": 1.0 / e} for e in (1, 2, 3)] for t in IDS}, worker="w"
        ),
    ),
    "finish_trials": (
        _claimed,
        lambda s: s.finish_trials(
            [
                ("t0", TrialState.COMPLETE, {"metrics": {"test_accuracy": 0.5}}, None),
                ("t1", TrialState.FAILED, None, "Traceback: boom"),
                ("t2", TrialState.CANCELLED, None, "stopped"),
            ],
            worker="w",
        ),
    ),
    "finish_trials with the last epochs": (
        _claimed,
        lambda s: s.finish_trials(
            [
                ("t0", TrialState.COMPLETE, {"metrics": {"test_accuracy": 0.5}}, None),
                ("t1", TrialState.FAILED, None, "Traceback: boom"),
            ],
            worker="w",
            epochs={t: [{"epoch": e, "loss": 1.0 / e} for e in (1, 2, 3)] for t in ("t0", "t1")},
        ),
    ),
    "requeue_stale": (_claimed, lambda s: s.requeue_stale(0, as_of=time.time() + 60)),
    "release_trial": (_claimed, lambda s: s.release_trial("t1", "w")),
    "hold_dispatch": (_base, lambda s: s.hold_dispatch([("t0", "q"), ("t1", "gpu")])),
    "register_worker": (
        lambda s: None,
        lambda s: s.register_worker(
            "w", host="h", pid=7, current_trial="t0", trials_done=2, info={"queue": "q"}
        ),
    ),
    "set_experiment_note": (
        _base,
        lambda s: s.set_experiment_note("e", "a finding", expected_version=0),
    ),
    "set_trial_note": (_base, lambda s: s.set_trial_note("t1", "an odd curve", 0)),
}


def _answer(value: Any) -> Any:
    """What a call answered, without the times that differ from run to run."""
    if isinstance(value, list) and value and isinstance(value[0], TrialRecord):
        return [(t.id, t.state, t.worker, t.attempts, t.metrics) for t in value]
    if isinstance(value, set):
        return sorted(value)
    if isinstance(value, ExperimentRecord):
        return value.id, value.name, value.spec, value.n_trials, value.counts
    if isinstance(value, NoteRecord):
        return value.text, value.version
    return value


def _contents(s: ResultStore) -> Any:
    """Everything a reader can see, without times."""
    trials = [
        (t.id, t.state, t.worker, t.attempts, t.metrics, t.result, t.error, t.experiment_ids)
        for t in s.list_trials()
    ]
    experiments = [
        (e.id, e.name, e.spec, e.n_trials, e.cancel_requested, e.counts)
        for e in s.list_experiments()
    ]
    workers = [
        (w.name, w.host, w.pid, w.current_trial, w.trials_done, w.info) for w in s.list_workers()
    ]
    notes = [
        (n.text, n.version)
        for n in [
            *(s.experiment_note(e.id) for e in s.list_experiments()),
            *(s.trial_note(t.id) for t in s.list_trials()),
        ]
    ]
    return trials, experiments, workers, sorted(s.take_dispatch()), notes


class LostAnswers:
    """Applies the ``fail_at``-th mongomock write of a call, then raises AutoReconnect as a
    dropped connection would (once); with ``fail_at=None`` only counts the writes."""

    METHODS = (
        "update_one",
        "update_many",
        "insert_one",
        "insert_many",
        "replace_one",
        "find_one_and_update",
        "find_one_and_delete",
        "delete_one",
        "delete_many",
    )

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.count, self.fail_at, self.armed = 0, None, False
        monkeypatch.setattr("dnnframe.retrying.pause", lambda s: None)
        for name in self.METHODS:
            real = getattr(mongomock.collection.Collection, name)
            monkeypatch.setattr(mongomock.collection.Collection, name, self._wrap(real))

    def _wrap(self, real: Callable) -> Callable:
        def write(collection: Any, *args: Any, **kwargs: Any) -> Any:
            result = real(collection, *args, **kwargs)
            if self.armed:
                self.count += 1
                if self.count == self.fail_at:
                    raise AutoReconnect("connection closed after the write was applied")
            return result

        return write

    def run(self, action: Callable[[], Any], fail_at: int | None) -> Any:
        self.count, self.fail_at, self.armed = 0, fail_at, True
        try:
            return action()
        finally:
            self.armed = False


def _fresh(backend: str, tmp_path, n: int) -> ResultStore:
    return open_store(store_url(backend, tmp_path / str(n)))


@pytest.mark.parametrize("write", list(WRITES))
def test_a_write_applied_before_the_connection_dropped_is_not_applied_twice(
    write, tmp_path, monkeypatch
):
    setup, action = WRITES[write]
    lost = LostAnswers(monkeypatch)
    clean = _fresh("mongomock", tmp_path, 0)
    setup(clean)
    expected_answer = _answer(lost.run(lambda: action(clean), fail_at=None))
    expected = _contents(clean)
    writes = lost.count
    assert writes >= 1
    for n in range(1, writes + 1):
        s = _fresh("mongomock", tmp_path, n)
        setup(s)
        answer = _answer(lost.run(lambda s=s: action(s), fail_at=n))
        assert answer == expected_answer, f"answer after losing driver write {n}"
        assert _contents(s) == expected, f"store after losing driver write {n}"
        # a seq reservation whose answer was lost holds no reader back
        assert (s._db.counters.find_one({"_id": "seq"}) or {}).get("inflight", []) == []


@pytest.mark.parametrize("write", list(WRITES))
def test_a_write_made_again_by_its_caller_changes_nothing_more(write, store):
    setup, action = WRITES[write]
    setup(store)
    action(store)
    once = _contents(store)
    for tid, queue in once[3]:  # _contents took them: hold them again as they were
        store.hold_dispatch([(tid, queue)])
    action(store)
    assert _contents(store) == once
