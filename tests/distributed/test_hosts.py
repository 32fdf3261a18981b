"""Workers on two hosts: each worker runs in a UTS namespace of its own (``unshare -u``), so
its node name and its trials' owners name another machine and no pid of one is judged by
the other. Real workers, the machine's RabbitMQ, a real SQLite store, default settings
(the 300 s heartbeat timeout) unless a test says otherwise.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from dnnframe.executors import CeleryExecutor
from dnnframe.executors.liveness import live_nodes
from dnnframe.store import TrialState
from dnnframe.submit import submit_experiment

from .conftest import SLEEPY, make_spec, wait_until

pytestmark = pytest.mark.slow


def _two_hosts(start_worker, store, queue_name: str, **env: str):
    """A worker on host ``hosta`` and one on ``hostb`` (one process each), both registered
    in the store as nodes of ``queue_name``."""
    assert "DNNFRAME_HEARTBEAT_TIMEOUT" not in os.environ  # the default (300 s) applies
    workers = [
        start_worker(queue_name, host=host, DNNFRAME_TRAIN_FN=SLEEPY, **env)
        for host in ("hosta", "hostb")
    ]
    wait_until(
        lambda: {w.name for w in live_nodes(store, queue_name)} == {w.nodename for w in workers},
        30,
        "both nodes to register in the store",
    )
    return workers


def test_one_shape_sweep_is_shared_by_the_workers_consuming_the_queue(
    broker_url, store_url, queue_name, start_worker, store, monkeypatch
):
    """A 40-trial sweep of one shape submitted where DNNFRAME_WORKERS=1 (the dashboard's
    setting in compose: processes per container) is packed for the two worker processes
    that consume the queue, and both hosts train."""
    _two_hosts(
        start_worker,
        store,
        queue_name,
        DNNFRAME_HOOK_EPOCHS="1",
        DNNFRAME_HOOK_EPOCH_SECONDS="0.05",
    )
    monkeypatch.setenv("DNNFRAME_WORKERS", "1")
    spec = make_spec("shared-by-hosts", 40)
    with CeleryExecutor(broker_url, store_url, queue=queue_name) as ex:
        assert ex.parallelism == 2
        result = submit_experiment(spec, store, ex)
        assert len(result.packs) >= 2, [len(p) for p in result.packs]
        assert ex.wait(timeout=120)
    trials = store.list_trials(spec.experiment_id)
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 40
    hosts = Counter(t.worker.split(":")[0].split("@")[1] for t in trials)
    assert set(hosts) == {"hosta", "hostb"}, hosts


def test_killed_host_its_pack_runs_again_as_a_pack_within_a_minute(
    broker_url, store_url, queue_name, start_worker, store, tmp_path: Path
):
    """SIGKILL the whole process tree of one host's worker while it trains a pack, with
    default settings: the other host starts the lost members again within 60 s (not after
    the 300 s heartbeat timeout), together as one pack, and every trial completes once."""
    done_log = tmp_path / "completions.jsonl"
    workers = _two_hosts(
        start_worker,
        store,
        queue_name,
        DNNFRAME_HOOK_EPOCHS="4",
        DNNFRAME_HOOK_EPOCH_SECONDS="0.5",
        DNNFRAME_HOOK_LOG=str(done_log),
    )
    spec = make_spec("host-lost", 8)
    with CeleryExecutor(broker_url, store_url, queue=queue_name) as ex:
        result = submit_experiment(spec, store, ex, pack_size=4)
        assert len(result.packs) == 2

        def training_on(w) -> list:
            running = store.list_trials(spec.experiment_id, state=TrialState.RUNNING)
            mine = [t for t in running if t.worker.startswith(f"{w.nodename}:")]
            return mine if len(mine) == 4 and any(t.metrics for t in mine) else []

        wait_until(
            lambda: all(training_on(w) for w in workers),
            30,
            "each host to be an epoch into its pack",
        )
        victim, survivor = workers
        lost = sorted(t.id for t in training_on(victim))
        victim.kill_group(signal.SIGKILL)
        killed_at = time.time()
        victim.proc.wait(timeout=10)
        assert ex.wait(timeout=120), Counter(t.state.value for t in store.list_trials())
    trials = {t.id: t for t in store.list_trials(spec.experiment_id)}
    assert [t.state for t in trials.values()] == [TrialState.COMPLETE] * 8
    seeds = Counter(json.loads(line)["seed"] for line in done_log.read_text().splitlines())
    assert sorted(seeds.values()) == [1] * 8, seeds  # trained to completion once each
    rerun = [trials[tid] for tid in lost]
    started = min(t.started_at for t in rerun) - killed_at
    print(f"host lost: its pack started again {started:.1f}s after the SIGKILL")
    assert started < 60
    assert all(t.attempts == 2 and t.worker.startswith(f"{survivor.nodename}:") for t in rerun)
    packs = {(t.result["pack"]["id"], t.result["pack"]["size"]) for t in rerun}
    assert len(packs) == 1 and next(iter(packs))[1] == 4, packs  # one pack again
    # Flower's view: the dead host's message, redelivered, trained the pack itself.
    assert any(
        "'summary': 'pack of 4: trained 4 (COMPLETE 4)', 'redelivered': True" in line
        for line in survivor.log_text().splitlines()
    ), survivor.log_text()[-3000:]


def test_a_killed_hosts_worker_is_listed_not_alive_within_the_node_timeout(
    broker_url, store_url, queue_name, start_worker, store
):
    """SIGKILL the whole process tree of one host's worker while it trains: /api/v1/workers
    lists its node and its pool process not alive within the node timeout (the moment the
    reaper may release its trials), not after the 300 s heartbeat timeout, while the other
    host's stay alive."""
    from dashboard import create_app
    from dnnframe.executors.liveness import node_timeout

    workers = _two_hosts(
        start_worker,
        store,
        queue_name,
        DNNFRAME_HOOK_EPOCHS="100",
        DNNFRAME_HOOK_EPOCH_SECONDS="0.5",
    )
    victim, survivor = workers
    app = create_app({"TESTING": True, "STORE_URL": store_url, "EXECUTOR": None})
    client = app.test_client()

    def listed(w) -> dict[str, bool]:
        """``w``'s rows in the API's worker list (its node and its processes): alive?"""
        rows = client.get("/api/v1/workers").json["workers"]
        return {
            r["name"]: r["alive"]
            for r in rows
            if r["name"] == w.nodename or r["name"].startswith(f"{w.nodename}:")
        }

    spec = make_spec("host-killed-listed", 2)
    # not waited for: the trials outlast the test (the workers are killed at teardown)
    ex = CeleryExecutor(broker_url, store_url, queue=queue_name)
    try:
        submit_experiment(spec, store, ex, pack_size=1)
        # each host's node and the pool process training its trial are listed alive
        wait_until(
            lambda: all(
                len(listed(w)) == 2
                and all(listed(w).values())
                and any(
                    t.worker.startswith(f"{w.nodename}:") and t.metrics
                    for t in store.list_trials(spec.experiment_id, state=TrialState.RUNNING)
                )
                for w in workers
            ),
            60,
            "each host to train a trial",
        )
        victim.kill_group(signal.SIGKILL)
        victim.proc.wait(timeout=10)
        killed_at = time.monotonic()
        # the node's last beat came before the kill: it is silent for the node timeout by
        # killed_at + node_timeout() at the latest (a second more for the requests)
        wait_until(
            lambda: not any(listed(victim).values()),
            node_timeout() + 1,
            f"{victim.nodename}'s rows to be listed not alive",
        )
        print(
            f"host killed: its worker listed not alive "
            f"{time.monotonic() - killed_at:.1f}s after the SIGKILL"
        )
        assert len(listed(victim)) == 2
        assert all(listed(survivor).values()) and len(listed(survivor)) == 2
    finally:
        ex.shutdown(wait=False)
        app.extensions["dnnframe"].shutdown()
