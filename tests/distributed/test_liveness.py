"""Who is alive (no broker needed): worker processes counted for pack sizing, a trial's
owner judged by its pid and start time, a node judged by its registration."""

from __future__ import annotations

import subprocess
import sys
import time

from dnnframe.executors import liveness
from dnnframe.store import TrialState
from dnnframe.submit import submit_experiment

from .conftest import make_spec


def _node(store, name: str, queues: list[str], concurrency: int | None) -> None:
    liveness.register_node(store, name, 1, queues, concurrency)


def test_processes_are_the_consuming_nodes_pool_sizes(store):
    _node(store, "a@h1", ["q"], 3)
    _node(store, "b@h2", ["q", "gpu"], 2)
    _node(store, "c@h3", ["gpu"], 8)  # another queue's
    store.register_worker("a@h1:77", info={"role": "process", "queue": "q"})  # not a node
    assert liveness.worker_processes(store, "q", None) == 5
    assert liveness.worker_processes(store, "q", 2) == 5
    assert liveness.worker_processes(store, "q", 3) == 6  # a consumer that never registered
    assert liveness.worker_processes(store, "q", 1) in (2, 3)  # one node stopped consuming
    assert liveness.worker_processes(store, "nobody", 0) is None
    assert liveness.worker_processes(store, "nobody", 2) == 2


def test_a_node_that_stopped_registering_is_not_counted(store, monkeypatch):
    from dnnframe.store import base_trials

    _node(store, "a@h1", ["q"], 4)
    assert liveness.worker_processes(store, "q", None) == 4
    registered = time.time()
    monkeypatch.setattr(base_trials, "clock", lambda: registered + 31)  # 31 s of silence
    assert liveness.worker_processes(store, "q", None) is None


def test_owner_is_gone_when_its_pid_is_dead_or_reused():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        before_it_started = time.time() - 30  # a claim 30 s before this process existed
        assert liveness.owner_process_gone(proc.pid, before_it_started)  # pid reused
        assert not liveness.owner_process_gone(proc.pid, time.time())  # it may be the claimer
        assert not liveness.owner_process_gone(proc.pid, None)
    finally:
        proc.kill()
        proc.wait()
    assert liveness.owner_process_gone(proc.pid, time.time())  # no such process


def test_dead_node_trials_need_a_silent_node_and_a_silent_trial(store, monkeypatch):
    monkeypatch.setenv("DNNFRAME_HEARTBEAT_TIMEOUT", "300")  # node timeout 30 s
    spec = make_spec("liveness", 3)
    submit_experiment(spec, store)
    a, b, c = (t.id for t in store.list_trials(spec.experiment_id))
    _node(store, "dead@h1", ["q"], 1)
    _node(store, "live@h2", ["q"], 1)
    store.claim_trial(a, "dead@h1:10")
    store.claim_trial(b, "live@h2:11")
    store.claim_trial(c, "unregistered@h3:12")
    later = time.time() + 31  # judged 31 s from now: every row is older than 30 s then
    assert liveness.dead_node_trials(store, later) == {a: "dead@h1:10", b: "live@h2:11"}
    _node(store, "live@h2", ["q"], 1)
    store.heartbeat(a, "dead@h1:10")
    assert liveness.dead_node_trials(store, time.time() + 5) == {}
    assert store.get_trial(c).state is TrialState.RUNNING  # left to the heartbeat timeout
