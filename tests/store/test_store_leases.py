"""Leases, on every backend: one owner at a time, taken over only once expired, renewed and
released only by their owner; of many acquirers racing (threads, processes) exactly one
wins. Time is the store's ``now``, replaced by a clock the test moves, never a sleep."""

from __future__ import annotations

import multiprocessing as mp
import threading

import pytest
from store_support import MONGODB_URL

from dnnframe.store import LeaseRecord, open_store
from dnnframe.store import leases as lease_module


@pytest.fixture
def clock(monkeypatch):
    """The leases' clock, at 1000.0 until a test moves it."""
    t = [1000.0]
    monkeypatch.setattr(lease_module, "now", lambda: t[0])
    return t


def test_a_lease_is_exclusive_until_released(store, clock):
    assert store.get_lease("driver:e") is None
    assert store.acquire_lease("driver:e", "a:1", 30)
    assert not store.acquire_lease("driver:e", "b:2", 30)
    assert store.get_lease("driver:e") == LeaseRecord("driver:e", "a:1", 1030.0)
    assert not store.release_lease("driver:e", "b:2")  # only the owner releases
    assert store.get_lease("driver:e").owner == "a:1"
    assert store.release_lease("driver:e", "a:1")
    assert not store.release_lease("driver:e", "a:1")  # again: nothing more to release
    assert store.get_lease("driver:e") is None
    assert store.acquire_lease("driver:e", "b:2", 30)
    assert store.get_lease("driver:e").owner == "b:2"


def test_renewal_moves_the_expiry_and_keeps_others_out(store, clock):
    assert store.acquire_lease("l", "a:1", 10)
    clock[0] = 1009.0
    assert store.acquire_lease("l", "a:1", 10)  # renewed before it expired
    assert store.get_lease("l").expires_at == 1019.0
    clock[0] = 1015.0  # past the first expiry, not the renewed one
    assert not store.acquire_lease("l", "b:2", 10)
    assert store.get_lease("l").owner == "a:1"


def test_an_expired_lease_is_taken_over_and_its_old_owner_cannot_release_it(store, clock):
    assert store.acquire_lease("l", "a:1", 10)
    clock[0] = 1010.0  # expired exactly now
    assert store.get_lease("l") is None
    assert store.acquire_lease("l", "b:2", 10)
    assert not store.acquire_lease("l", "a:1", 10)  # the old owner comes back too late
    assert not store.release_lease("l", "a:1")
    assert store.get_lease("l") == LeaseRecord("l", "b:2", 1020.0)


def test_leases_are_listed_by_prefix_and_only_while_live(store, clock):
    store.acquire_lease("driver:x", "a:1", 10)
    store.acquire_lease("driver:y", "b:2", 20)
    store.acquire_lease("other", "a:1", 20)
    assert [r.name for r in store.list_leases("driver:")] == ["driver:x", "driver:y"]
    clock[0] = 1015.0
    assert [(r.name, r.owner) for r in store.list_leases("driver:")] == [("driver:y", "b:2")]
    assert [r.name for r in store.list_leases()] == ["driver:y", "other"]


def test_bad_lease_arguments_are_named(store):
    with pytest.raises(ValueError, match="lease name"):
        store.acquire_lease("", "a:1", 10)
    with pytest.raises(ValueError, match="lease owner"):
        store.acquire_lease("l", "", 10)
    for ttl in (0, -1, float("nan"), True, "10"):
        with pytest.raises(ValueError, match="ttl_s must be"):
            store.acquire_lease("l", "a:1", ttl)
    with pytest.raises(ValueError, match="lease owner"):
        store.release_lease("l", None)


def test_of_threads_acquiring_at_once_exactly_one_wins(store, atomic_operations):
    n = 8
    barrier = threading.Barrier(n)
    won: list[str] = []

    def acquirer(k: int) -> None:
        barrier.wait()
        if store.acquire_lease("race", f"h:{k}", 60):
            won.append(f"h:{k}")

    threads = [threading.Thread(target=acquirer, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and store.get_lease("race").owner == won[0]


def _acquire_in_process(url: str, owner: str, barrier, out) -> None:  # noqa: ANN001
    with open_store(url) as s:
        barrier.wait()
        out.put((owner, s.acquire_lease("race", owner, 60)))


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"] + (["mongodb"] if MONGODB_URL else []))
def test_of_processes_acquiring_at_once_exactly_one_wins(url, backend):
    n = 4
    with open_store(url):
        pass  # create the store before the race, so the processes race only for the lease
    ctx = mp.get_context("spawn")  # fresh interpreters: nothing shared but the store
    out, barrier = ctx.Queue(), ctx.Barrier(n)
    procs = [
        ctx.Process(target=_acquire_in_process, args=(url, f"p:{k}", barrier, out))
        for k in range(n)
    ]
    for p in procs:
        p.start()
    results = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    winners = [owner for owner, won in results.items() if won]
    assert len(winners) == 1
    with open_store(url) as s:
        assert s.get_lease("race").owner == winners[0]
