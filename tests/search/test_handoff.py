"""Handing trials to a server's one local pool through the store: what the web tier leaves
(:class:`HandoffExecutor`) and what the driver service takes (:func:`take_handed`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from dnnframe.executors.base import Executor
from dnnframe.executors.dispatch import send_held
from dnnframe.executors.handoff import (
    LOCAL_POOL_QUEUE,
    HandoffExecutor,
    hand_all_queued,
    is_pool_queue,
    take_handed,
)
from dnnframe.executors.packing import compile_key
from dnnframe.spec import parse_spec
from dnnframe.states import TrialState
from dnnframe.store import open_store
from dnnframe.submit import submit_experiment


class Pool(Executor):
    """Records what it is given, as a local pool would receive it."""

    def __init__(self, workers: int = 2):
        self.workers, self.packs, self.keys = workers, [], []

    @property
    def parallelism(self) -> int:
        return self.workers

    def submit(self, packs: Sequence[list[str]], compile_keys: Sequence[str] | None = None) -> None:
        self.packs += [list(p) for p in packs]
        self.keys += list(compile_keys or [])

    def cancel(self, experiment_id: str) -> int:
        return 0

    def wait(self, timeout: float | None = None) -> bool:
        return True

    def shutdown(self, wait: bool = True) -> None:
        pass


def _spec(name: str, pack_size: int | None = None, seeds: int = 6, width: int = 4):
    search = {"seeds": list(range(seeds))}
    if pack_size is not None:
        search["pack_size"] = pack_size
    return parse_spec(
        {
            "name": name,
            "dataset": {"name": "iris"},
            "model": {"hidden_layers": 1, "width": width},
            "training": {"max_epochs": 1},
            "search": search,
        }
    )


def test_the_web_tier_only_leaves_trials_in_the_store_and_the_service_packs_them():
    store = open_store(f"memory://{uuid.uuid4().hex}")
    handoff = HandoffExecutor(store, workers=2)
    a = submit_experiment(_spec("a", pack_size=2), store, handoff)
    b = submit_experiment(_spec("b", seeds=3, width=8), store, handoff)
    # nothing ran and nothing was sent: the trials wait in the store for the pool
    assert store.counts_by_state()["QUEUED"] == 9
    assert not handoff.wait(timeout=0)

    pool = Pool()
    assert take_handed(store, pool) == 9
    assert sorted(t for p in pool.packs for t in p) == sorted(a.trial_ids + b.trial_ids)
    packs_a = [p for p in pool.packs if set(p) <= set(a.trial_ids)]
    assert [len(p) for p in packs_a] == [2, 2, 2]  # the spec's search.pack_size
    assert len(pool.keys) == len(pool.packs)
    assert take_handed(store, pool) == 0  # taken once


def test_taking_skips_cancelled_trials_and_leaves_a_brokers_entries():
    store = open_store(f"memory://{uuid.uuid4().hex}")
    handoff = HandoffExecutor(store, workers=2)
    a = submit_experiment(_spec("a"), store, handoff)
    handoff.cancel(a.experiment.id)
    assert store.counts_by_state(a.experiment.id)["CANCELLED"] == 6
    store.hold_dispatch([("t-elsewhere", "gpu")])
    pool = Pool()
    assert take_handed(store, pool) == 0 and pool.packs == []
    assert store.take_dispatch() == [("t-elsewhere", "gpu")]


def test_a_brokers_sender_leaves_trials_handed_to_a_local_pool():
    store = open_store(f"memory://{uuid.uuid4().hex}")
    submit_experiment(_spec("a", seeds=2), store, HandoffExecutor(store, workers=1))
    assert send_held(store, celery_app=None) == 0  # type: ignore[arg-type]
    taken = store.take_dispatch()
    assert len(taken) == 2 and all(is_pool_queue(q) for _, q in taken)


def test_waiting_ends_when_the_handed_trials_finish():
    store = open_store(f"memory://{uuid.uuid4().hex}")
    handoff = HandoffExecutor(store, workers=1)
    result = submit_experiment(_spec("a", seeds=1), store, handoff)
    (tid,) = result.trial_ids
    assert not handoff.wait(timeout=0)
    store.cancel_experiment(result.experiment.id)
    assert store.get_trial(tid).state is TrialState.CANCELLED
    assert handoff.wait(timeout=0)


def test_a_starting_service_hands_every_queued_trial_again():
    """Trials a dead service took from the list but never trained are QUEUED with no entry:
    the next service hands them again (and nothing else)."""
    store = open_store(f"memory://{uuid.uuid4().hex}")
    result = submit_experiment(_spec("a", seeds=4), store, HandoffExecutor(store, workers=1))
    store.take_dispatch()  # taken by a service that then died
    done = result.trial_ids[0]
    assert store.claim_trials([done], "host:1")
    store.finish_trials([(done, TrialState.COMPLETE, None, None)], worker="host:1")
    assert hand_all_queued(store, page=2) == 3
    pool = Pool()
    assert take_handed(store, pool) == 3
    assert sorted(t for p in pool.packs for t in p) == sorted(result.trial_ids[1:])


class Handing(HandoffExecutor):
    """The web tier's executor, remembering the packs and keys it handed."""

    def submit(self, packs, compile_keys=None):  # noqa: ANN001 - the Executor signature
        self.handed = [list(p) for p in packs]
        self.handed_keys = list(compile_keys or [])
        super().submit(packs, compile_keys)


def _reads(store, monkeypatch) -> list:  # noqa: ANN001
    """Every ``get_trials`` call's fields, and a failure for any spec read."""
    reads: list = []
    get_trials = store.get_trials

    def counted(ids, *args, **kwargs):  # noqa: ANN001, ANN202
        reads.append(kwargs.get("fields", args[0] if args else None))
        return get_trials(ids, *args, **kwargs)

    def no_spec(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("a handed pack was regrouped from its experiment's spec")

    monkeypatch.setattr(store, "get_trials", counted)
    monkeypatch.setattr(store, "get_experiment", no_spec)
    return reads


def test_handed_packs_arrive_as_packed_without_reading_a_configuration(monkeypatch):
    """The service regroups a submission's packs from the dispatch entries alone: the same
    packs, the same compile keys, and no configuration or spec read on the way (only the
    trials' states, to leave out cancelled ones)."""
    store = open_store(f"memory://{uuid.uuid4().hex}")
    handoff = Handing(store, workers=2)
    submit_experiment(_spec("a", pack_size=3, seeds=7), store, handoff)
    assert len(handoff.handed) == 3
    reads = _reads(store, monkeypatch)
    pool = Pool()
    assert take_handed(store, pool) == 7
    assert pool.packs == handoff.handed and pool.keys == handoff.handed_keys
    assert reads == [()]  # one read of states, none of configurations
    config = store.get_trial(pool.packs[0][0]).config
    assert pool.keys[0] == compile_key(config, len(pool.packs[0]))


def test_a_pack_cut_by_a_takes_limit_is_joined_again(monkeypatch):
    store = open_store(f"memory://{uuid.uuid4().hex}")
    handoff = Handing(store, workers=2)
    submit_experiment(_spec("a", pack_size=3, seeds=9), store, handoff)
    pool = Pool()
    assert take_handed(store, pool, limit=4) == 9  # takes of 4 cut the second pack
    assert sorted(map(sorted, pool.packs)) == sorted(map(sorted, handoff.handed))
    assert store.take_dispatch() == []


def test_a_pack_larger_than_a_take_is_trained_in_parts():
    store = open_store(f"memory://{uuid.uuid4().hex}")
    handoff = Handing(store, workers=1)
    result = submit_experiment(_spec("a", pack_size=5, seeds=5), store, handoff)
    pool = Pool()
    assert take_handed(store, pool, limit=2) == 5
    assert sorted(t for p in pool.packs for t in p) == sorted(result.trial_ids)
    assert all(len(p) <= 2 for p in pool.packs)
    assert store.take_dispatch() == []


def test_packed_and_unpacked_entries_and_a_brokers_mix():
    """A starting service's unpacked entries are packed from their configurations; a
    handed pack keeps its shape; a broker's entry is put back."""
    store = open_store(f"memory://{uuid.uuid4().hex}")
    handoff = Handing(store, workers=2)
    b = submit_experiment(_spec("b", seeds=3, width=8), store, HandoffExecutor(store, 2))
    store.take_dispatch()  # b's entries were taken by a service that died
    a = submit_experiment(_spec("a", pack_size=2, seeds=4), store, handoff)
    store.hold_dispatch([(tid, LOCAL_POOL_QUEUE) for tid in b.trial_ids])
    store.hold_dispatch([("t-elsewhere", "gpu")])
    pool = Pool()
    assert take_handed(store, pool) == 7
    assert [p for p in pool.packs if set(p) <= set(a.trial_ids)] == handoff.handed
    assert sorted(t for p in pool.packs for t in p if t in b.trial_ids) == sorted(b.trial_ids)
    assert len(pool.keys) == len(pool.packs) and all(pool.keys)
    assert store.take_dispatch() == [("t-elsewhere", "gpu")]
