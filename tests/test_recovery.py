"""Recovery of trials whose worker stopped: one function (dnnframe/recovery.py), owned by the
driver service of a server without a broker (under a store lease) and called by `dnnframe
run` before it submits; never by a submission."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from types import SimpleNamespace

import pytest

from dnnframe import recovery
from dnnframe.executors.base import Executor
from dnnframe.executors.handoff import HandoffExecutor
from dnnframe.executors.pool_service import LocalPoolService
from dnnframe.recovery import (
    RECOVERY_LEASE,
    StoreRecovery,
    recover_abandoned_trials,
    recover_for_run,
)
from dnnframe.search.service import DriverService
from dnnframe.spec import expand_documents, parse_spec
from dnnframe.states import TrialState
from dnnframe.store import open_store
from dnnframe.submit import submit_experiment
from dnnframe.testing.counting import CountingStore

HERE = socket.gethostname()
# what a store does for recovery: none of it belongs in a submission
RECOVERY_CALLS = {"running_owners", "requeue_stale", "release_trial", "acquire_lease"}


class Pool(Executor):
    """Records the trials it is given, as a local pool would receive them."""

    def __init__(self) -> None:
        self.trials: list[str] = []

    @property
    def parallelism(self) -> int:
        return 2

    def submit(self, packs: Sequence[list[str]], compile_keys: Sequence[str] | None = None) -> None:
        self.trials += [t for p in packs for t in p]

    def cancel(self, experiment_id: str) -> int:
        return 0

    def wait(self, timeout: float | None = None) -> bool:
        return True

    def shutdown(self, wait: bool = True) -> None:
        pass


def _spec(name: str, seeds: int, width: int = 8):
    return parse_spec(
        {
            "name": name,
            "dataset": {"name": "iris"},
            "model": {"hidden_layers": 1, "width": width},
            "training": {"max_epochs": 1},
            "search": {"seeds": seeds},
        }
    )


def _dead_owner() -> str:
    """``host:pid`` of a process of this host that has exited."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # its pid now names no process
    return f"{HERE}:{gone.pid}"


@pytest.fixture
def store():
    s = open_store(f"memory://{uuid.uuid4().hex}")
    yield s
    s.close()


def test_abandoned_trials_are_put_back_with_their_attempts(store, monkeypatch):
    """A trial whose owner process of this host is gone is put back at once; one whose
    heartbeat is older than the timeout (any host) when heartbeats are judged; one that beat
    since, never. Each keeps its attempts, so the delivery cap holds."""
    ids = submit_experiment(_spec("recover", 4), store).trial_ids
    orphan, stale, alive, mine = ids
    assert store.claim_trial(orphan, _dead_owner())
    assert store.claim_trial(stale, "another-host:1")
    assert store.claim_trial(alive, "another-host:2")
    assert store.claim_trial(mine, f"{HERE}:{os.getpid()}")  # a live process of this host
    monkeypatch.setenv("DNNFRAME_HEARTBEAT_TIMEOUT", "3600")
    assert recover_abandoned_trials(store) == [orphan]  # the others wait for the timeout
    assert store.get_trial(orphan).state is TrialState.QUEUED
    time.sleep(0.01)  # so that its beat is later than the others' claims
    assert store.heartbeat(alive, "another-host:2")
    # recovery's clock pinned so the timeout falls between the claims and that beat,
    # however long this machine then takes to get to the calls below
    beats = {t.id: t.heartbeat_at for t in store.get_trials(ids, fields=())}
    assert max(beats[stale], beats[mine]) < beats[alive]
    cutoff = (max(beats[stale], beats[mine]) + beats[alive]) / 2
    monkeypatch.setenv("DNNFRAME_HEARTBEAT_TIMEOUT", "60")
    monkeypatch.setattr(recovery, "time", SimpleNamespace(time=lambda: cutoff + 60))
    assert recover_abandoned_trials(store, heartbeats=False) == []  # pids only
    assert sorted(recover_abandoned_trials(store)) == sorted([stale, mine])
    assert store.get_trial(alive).state is TrialState.RUNNING
    assert {store.get_trial(t).attempts for t in ids} == {1}


def test_a_submission_recovers_nothing(store):
    """submit_experiment (what the API and the pages call) stores and hands on: it reads no
    RUNNING trials and puts none back."""
    first = submit_experiment(_spec("submit", 3), store)
    orphan = first.trial_ids[0]
    assert store.claim_trial(orphan, _dead_owner())
    counting = CountingStore(store)
    again = submit_experiment(_spec("submit", 3), counting, Pool())  # type: ignore[arg-type]
    assert not RECOVERY_CALLS & set(counting.calls), counting.calls
    assert store.get_trial(orphan).state is TrialState.RUNNING
    assert orphan not in again.submitted_trial_ids and not again.created


def test_a_run_recovers_its_own_spec_and_leaves_other_experiments_alone(store):
    """`dnnframe run` recovers the trials of its spec only: also one stored by another
    experiment and not yet linked to this one; another experiment's are its owner's."""
    ours = _spec("ours", 3)
    other = submit_experiment(_spec("other", 4, width=16), store).trial_ids[0]
    shared = submit_experiment(_spec("shares-a-trial", 1), store).trial_ids[0]
    assert shared in {tid for tid, _ in expand_documents(ours)}
    for tid in (other, shared):
        assert store.claim_trial(tid, _dead_owner())
    assert recover_for_run(store, ours) == [shared]
    assert store.get_trial(other).state is TrialState.RUNNING
    result = submit_experiment(ours, store, Pool())
    assert shared in result.submitted_trial_ids


def test_one_service_judges_heartbeats_under_the_lease(store, monkeypatch):
    """Two services on one store: the lease holder judges every trial's heartbeat, the other
    only its own host's pids; once the holder lets go, the other takes over."""
    monkeypatch.setenv("DNNFRAME_HEARTBEAT_TIMEOUT", "0.001")
    ids = submit_experiment(_spec("lease", 4), store).trial_ids
    first, second = StoreRecovery(store, "host-a:1"), StoreRecovery(store, "host-b:2")
    assert first.poll() == [] and first.holds_lease
    assert store.claim_trial(ids[0], "far-away:1")
    assert store.claim_trial(ids[1], _dead_owner())
    time.sleep(0.01)
    assert second.poll() == [ids[1]] and not second.holds_lease  # its host's pid only
    assert store.get_trial(ids[0]).state is TrialState.RUNNING
    assert first.poll() == [ids[0]]
    first.release()
    assert store.get_lease(RECOVERY_LEASE) is None
    assert store.claim_trial(ids[2], "far-away:3")
    time.sleep(0.01)
    assert second.poll() == [ids[2]] and second.holds_lease


def test_the_local_pool_service_hands_the_trials_it_recovers_to_its_pool(store):
    """Without a broker the local pool's service owns recovery: a trial whose pool process died
    is put back and trained by its pool, with no submission to trigger it."""
    handoff = HandoffExecutor(store, workers=2)
    ids = submit_experiment(_spec("service", 3), store, handoff).trial_ids
    pool = Pool()
    service = LocalPoolService(store, lambda: pool, owner=f"{HERE}:1")
    try:
        service.poll()
        assert sorted(pool.trials) == sorted(ids)  # handed once
        assert store.claim_trial(ids[0], _dead_owner())  # its pool process then died
        service.poll()
        assert pool.trials[3:] == [ids[0]]
        assert store.get_trial(ids[0]).state is TrialState.QUEUED
        assert store.get_lease(RECOVERY_LEASE).owner == f"{HERE}:1"
        service.poll()
        assert len(pool.trials) == 4  # nothing more to recover
    finally:
        service.shutdown()
    assert store.get_lease(RECOVERY_LEASE) is None


def test_the_search_drivers_service_leaves_recovery_to_others(store):
    """With a broker `dnnframe drive` runs the drivers' service alone: the reapers recover."""
    service = DriverService(store, Pool)
    ids = submit_experiment(_spec("broker", 1), store).trial_ids
    assert store.claim_trial(ids[0], _dead_owner())
    service.poll()
    service.shutdown()
    assert store.get_trial(ids[0]).state is TrialState.RUNNING
    assert store.get_lease(RECOVERY_LEASE) is None
