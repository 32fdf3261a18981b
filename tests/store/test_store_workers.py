"""The worker registry of the ResultStore contract (workers.py), run against every backend
(see conftest.py)."""

from __future__ import annotations


def test_workers(store, clock):
    store.register_worker(
        "w1", host="h", pid=12, current_trial="t", trials_done=3, info={"queue": "default"}
    )
    store.register_worker("w2", host="h", pid=13)
    store.register_worker("w1", host="h", pid=12, current_trial=None, trials_done=4)
    ws = store.list_workers()
    assert [w.name for w in ws] == ["w1", "w2"]
    assert (ws[0].current_trial, ws[0].trials_done, ws[0].pid) == (None, 4, 12)
    assert ws[0].last_seen == clock()
    clock.advance(60)
    assert len(store.list_workers(seen_within_s=60)) == 2
    assert store.list_workers(seen_within_s=-10) == []
