"""The dispatch outbox of the ResultStore contract (outbox.py), run against every backend
(see conftest.py): held entries are taken oldest first, each by exactly one taker."""

from __future__ import annotations

import threading

import pytest


def test_held_dispatch_is_taken_once_oldest_first(store):
    store.hold_dispatch([("t1", "default"), ("t2", "gpu")])
    store.hold_dispatch([("t3", "default"), ("t1", "default")])  # held again: one entry
    assert sorted(store.take_dispatch(limit=2) + store.take_dispatch()) == [
        ("t1", "default"),
        ("t2", "gpu"),
        ("t3", "default"),
    ]
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
