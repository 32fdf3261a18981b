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
    take_handed,
)
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
    return parse_spec({"name": name, "dataset": {"name": "iris"},
                       "model": {"hidden_layers": 1, "width": width},
                       "training": {"max_epochs": 1}, "search": search})


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
    assert len(taken) == 2 and {q for _, q in taken} == {LOCAL_POOL_QUEUE}


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
