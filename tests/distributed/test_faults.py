"""Faults under load, with real workers over a real broker: each chaos test has 20+ trials
queued when the fault hits, and checks that every trial completes exactly once and that an
interrupted trial runs again ahead of the queue (it starts before nearly all the trials
that were waiting when it was put back). The seconds from fault to re-run are printed.

Trials train with ``dnnframe.testing.hooks:sleepy_train`` (three 0.3 s epochs), so 24 trials
are cheap and a worker can be killed, stopped or starved of its store in the middle of one.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import kombu.utils.functional
import pytest

from dnnframe.executors import CeleryExecutor
from dnnframe.executors.dispatch import retry_queue
from dnnframe.store import TrialState
from dnnframe.submit import submit_experiment

from .conftest import REPO, SLEEPY, make_spec, queue_depth, wait_until, worker_env

pytestmark = pytest.mark.slow

N_TRIALS = 30
# The retry queue is not a strict priority: each time a process slot frees, RabbitMQ hands
# the worker the next message of either queue it consumes, so the put-back trial wins each
# such race about half the time. Without the retry queue it would wait behind all 20+
# trials; more than 8 lost races in a row would happen about once in 500 runs.
MAX_OVERTAKEN = 8


def _fault_snapshot(store, experiment_id: str) -> tuple[float, set[str]]:
    """When the fault hit (wall clock, as the store records) and which trials were waiting."""
    return time.time(), {t.id for t in store.list_trials(experiment_id, state=TrialState.QUEUED)}


def _put_back(store, experiment_id: str, tid: str) -> set[str]:
    """Wait until the interrupted trial is put back to work (QUEUED again, or already
    claimed a second time) and return the trials still waiting at that moment: those are
    the ones it must not be overtaken by. Trials that started while the fault was being
    detected (the heartbeat timeout) legitimately ran before it."""

    def put_back() -> bool:
        t = store.get_trial(tid)
        return t.state is TrialState.QUEUED or t.attempts >= 2

    wait_until(put_back, 60, f"trial {tid} to be put back to work", poll=0.05)
    return {t.id for t in store.list_trials(experiment_id, state=TrialState.QUEUED)} - {tid}


def _rerun(store, tid: str, fault_at: float, waiting: set[str]) -> tuple[float, int]:
    """Seconds from the fault to the re-run's start, and how many of the trials waiting when
    it was put back started first."""
    started = store.get_trial(tid).started_at
    overtaken = sum(1 for w in waiting if (store.get_trial(w).started_at or 0) < started)
    return started - fault_at, overtaken


def _assert_each_once(store, experiment_id: str, done_log: Path) -> None:
    trials = store.list_trials(experiment_id)
    assert [t.state for t in trials] == [TrialState.COMPLETE] * N_TRIALS
    assert all(len(t.metrics) == 3 for t in trials)
    seeds = Counter(json.loads(line)["seed"] for line in done_log.read_text().splitlines())
    assert sorted(seeds.values()) == [1] * N_TRIALS, seeds  # trained to completion once


def _running_on(store, experiment_id: str, node: str) -> list[str]:
    return [
        t.id
        for t in store.list_trials(experiment_id, state=TrialState.RUNNING)
        if t.worker.startswith(f"{node}:") and len(t.metrics) >= 1
    ]


def _sweep(name: str):
    return make_spec(name, N_TRIALS)


def _submit_and_catch_running(ex, store, name: str, node: str):
    """Submit a sweep and wait until ``node`` is an epoch into one of its trials; returns
    the spec and that trial's id."""
    spec = _sweep(name)
    submit_experiment(spec, store, ex, pack_size=1)
    wait_until(
        lambda: _running_on(store, spec.experiment_id, node),
        30,
        f"{node} to be an epoch into a trial",
    )
    (trial_id,) = _running_on(store, spec.experiment_id, node)
    return spec, trial_id


def _assert_ran_again_first(
    store,
    experiment_id: str,
    done_log: Path,
    trial_id: str,
    fault: str,
    fault_at: float,
    waiting_at_fault: set[str],
    waiting_at_put_back: set[str],
):
    """Every trial completed once, and the interrupted one ran a second time ahead of the
    queue that was waiting when it was put back (the order, not seconds, which a busy
    machine stretches); returns its record."""
    assert len(waiting_at_fault) >= 20
    _assert_each_once(store, experiment_id, done_log)
    seconds, overtaken = _rerun(store, trial_id, fault_at, waiting_at_put_back)
    print(
        f"{fault}: re-run {seconds:.1f}s after the fault, {len(waiting_at_fault)} waiting at "
        f"the fault, {len(waiting_at_put_back)} when put back, overtaken by {overtaken}"
    )
    assert overtaken <= MAX_OVERTAKEN
    redone = store.get_trial(trial_id)
    assert redone.attempts == 2
    return redone


def test_sigkill_worker_requeued_trial_runs_first(
    broker_url, store_url, queue_name, sleepy_workers, store, tmp_path: Path
):
    """SIGKILL a whole worker (main process, pool, reaper) mid-trial with 20+ trials queued:
    the survivor's reaper finds the silent trial after the heartbeat timeout and sends it
    to the retry queue, so it runs before the trials still waiting."""
    done_log = tmp_path / "completions.jsonl"
    victim, survivor = sleepy_workers(
        2, epochs=3, epoch_s=0.3, DNNFRAME_HOOK_LOG=str(done_log), DNNFRAME_HEARTBEAT_TIMEOUT="2"
    )
    with CeleryExecutor(broker_url, store_url, queue=queue_name) as ex:
        spec, killed = _submit_and_catch_running(ex, store, "chaos-sigkill", victim.nodename)
        victim.kill_group(signal.SIGKILL)
        fault_at, waiting = _fault_snapshot(store, spec.experiment_id)
        victim.proc.wait(timeout=10)
        put_back = _put_back(store, spec.experiment_id, killed)
        assert ex.wait(timeout=90), Counter(t.state.value for t in store.list_trials())
    _assert_ran_again_first(
        store, spec.experiment_id, done_log, killed, "sigkill worker", fault_at, waiting, put_back
    )
    assert f"reaper: trial {killed}" in survivor.log_text()
    assert retry_queue(queue_name) in survivor.log_text()


def test_sigkill_pool_process_redelivered_to_another_node(
    broker_url, store_url, queue_name, sleepy_workers, store, tmp_path: Path
):
    """SIGKILL the pool process training a trial on a node that no longer takes messages,
    so the broker redelivers it to the other node, whose claim refuses the RUNNING trial.
    With the default 300 s heartbeat timeout, the trial still runs again within seconds:
    the dead process's own node releases it (its reaper sees the pid is gone) and sends it
    to the retry queue."""
    done_log = tmp_path / "completions.jsonl"
    assert "DNNFRAME_HEARTBEAT_TIMEOUT" not in os.environ  # the default (300 s) applies
    owner_node, other = sleepy_workers(2, epochs=3, epoch_s=0.3, DNNFRAME_HOOK_LOG=str(done_log))
    spec = _sweep("chaos-pool-kill")
    with CeleryExecutor(broker_url, store_url, queue=queue_name) as ex:
        submit_experiment(spec, store, ex, pack_size=1)
        for queue in (queue_name, retry_queue(queue_name)):  # the owner's node takes no more
            ex.app.control.cancel_consumer(
                queue, destination=[owner_node.nodename], reply=True, timeout=5
            )

        def consumes_nothing() -> bool:
            # the reply above comes before the cancel is done (the worker defers it to its
            # event loop): until then the retry queue could still hand the owner the trial
            replies = ex.app.control.inspect([owner_node.nodename], timeout=2).active_queues()
            return bool(replies) and replies.get(owner_node.nodename) == []

        wait_until(consumes_nothing, 30, "the owner's node to consume from no queue")
        wait_until(
            lambda: _running_on(store, spec.experiment_id, owner_node.nodename),
            30,
            "the owner's node to be an epoch into a trial",
        )
        (killed,) = _running_on(store, spec.experiment_id, owner_node.nodename)
        owner = store.get_trial(killed).worker
        os.kill(int(owner.rpartition(":")[2]), signal.SIGKILL)
        fault_at, waiting = _fault_snapshot(store, spec.experiment_id)
        put_back = _put_back(store, spec.experiment_id, killed)
        assert ex.wait(timeout=90), Counter(t.state.value for t in store.list_trials())
    redone = _assert_ran_again_first(
        store,
        spec.experiment_id,
        done_log,
        killed,
        "sigkill pool process",
        fault_at,
        waiting,
        put_back,
    )
    assert redone.worker.startswith(f"{other.nodename}:")
    assert f"reaper: trial {killed} lost its pool process {owner}" in owner_node.log_text()
    assert owner_node.alive()


def test_sigstop_beyond_heartbeat_timeout(
    broker_url, store_url, queue_name, sleepy_workers, store, tmp_path: Path
):
    """SIGSTOP a worker longer than the heartbeat timeout: its trial is taken over and run
    first by the other worker; when the stopped worker continues, its writes are refused
    (the trial is no longer its own), its reaper does not judge anyone from its own pause,
    and the trial is recorded once."""
    done_log = tmp_path / "completions.jsonl"
    stopped, survivor = sleepy_workers(
        2, epochs=3, epoch_s=0.3, DNNFRAME_HOOK_LOG=str(done_log), DNNFRAME_HEARTBEAT_TIMEOUT="2"
    )
    with CeleryExecutor(broker_url, store_url, queue=queue_name) as ex:
        spec, paused = _submit_and_catch_running(ex, store, "chaos-sigstop", stopped.nodename)
        stopped.kill_group(signal.SIGSTOP)
        fault_at, waiting = _fault_snapshot(store, spec.experiment_id)
        try:
            put_back = _put_back(store, spec.experiment_id, paused)
            wait_until(
                lambda: (store.get_trial(paused).worker or "").startswith(f"{survivor.nodename}:"),
                30,
                "the survivor to take the stopped worker's trial over",
            )
        finally:
            stopped.kill_group(signal.SIGCONT)
        assert ex.wait(timeout=90), Counter(t.state.value for t in store.list_trials())
    _assert_ran_again_first(
        store, spec.experiment_id, done_log, paused, "sigstop", fault_at, waiting, put_back
    )
    # Only the stopped trial was taken over: nobody judged a live trial from a pause.
    assert sum(t.attempts for t in store.list_trials(spec.experiment_id)) == N_TRIALS + 1
    assert "reaper: trial" not in stopped.log_text()


def test_store_lock_beyond_heartbeat_timeout_requeues_nothing(
    broker_url, store_url, queue_name, sleepy_workers, store, tmp_path: Path
):
    """Hold the SQLite store's write lock until every running trial's heartbeat is older
    than twice the timeout: the workers and their reapers stall with it, and once the lock
    is released no reaper takes the stall for dead workers (no live trial is requeued)."""
    done_log = tmp_path / "completions.jsonl"
    workers = sleepy_workers(
        2, epochs=3, epoch_s=0.3, DNNFRAME_HOOK_LOG=str(done_log), DNNFRAME_HEARTBEAT_TIMEOUT="2"
    )
    spec = _sweep("chaos-store-lock")
    path = store_url[len("sqlite:///") :]
    with CeleryExecutor(broker_url, store_url, queue=queue_name) as ex:
        submit_experiment(spec, store, ex, pack_size=1)
        wait_until(
            lambda: (
                store.counts_by_state(spec.experiment_id).get("RUNNING", 0) == 2
                and store.counts_by_state(spec.experiment_id).get("COMPLETE", 0) >= 1
            ),
            30,
            "both workers to be training",
        )
        lock = sqlite3.connect(path, isolation_level=None, timeout=30)
        lock.execute("BEGIN EXCLUSIVE")
        try:

            def silent_beyond_timeout() -> bool:  # WAL: readers go on under the write lock
                beats = [
                    t.heartbeat_at
                    for t in store.list_trials(spec.experiment_id, state=TrialState.RUNNING)
                ]
                return bool(beats) and time.time() - max(beats) > 4.0

            wait_until(silent_beyond_timeout, 30, "every heartbeat to be older than 2 timeouts")
        finally:
            lock.execute("COMMIT")
            lock.close()
        assert ex.wait(timeout=90), Counter(t.state.value for t in store.list_trials())
    warnings = [line for w in workers for line in w.log_text().splitlines() if "WARNING" in line]
    assert [t.attempts for t in store.list_trials(spec.experiment_id)] == [1] * N_TRIALS, warnings
    _assert_each_once(store, spec.experiment_id, done_log)
    for w in workers:
        assert "reaper: trial" not in w.log_text()


def test_broker_down_at_submit(
    rabbitmq_node, store_url, store, start_worker, tmp_path: Path, monkeypatch
):
    """With the broker stopped, POST /api/v1/experiments answers 503 with a one-line reason
    in seconds and `dnnframe run` exits 1 with one line; their trials are stored QUEUED and
    held, and a worker's reaper sends them once the broker is back: all complete."""
    from dashboard import create_app

    rabbitmq_node.stop_app()
    app = create_app({"TESTING": True, "STORE_URL": store_url, "BROKER_URL": rabbitmq_node.url})
    try:
        body = {
            "name": "broker-down",
            "dataset": {"name": "iris"},
            "model": {"hidden_layers": 1, "width": 4},
            "training": {"max_epochs": 1},
            "search": {"seeds": 3},
        }
        # kombu's waits between connection attempts, recorded instead of slept: what the
        # request waits by design, whatever the machine's load
        waits: list[float] = []
        with monkeypatch.context() as patched:
            patched.setattr(kombu.utils.functional, "sleep", waits.append)
            response = app.test_client().post("/api/v1/experiments", json=body)
    finally:
        app.extensions["dnnframe"].shutdown()
    print(f"broker down: POST answered {response.status_code} after waits {waits}")
    assert response.status_code == 503, response.get_json()
    message = response.get_json()["message"]
    assert "\n" not in message and "broker" in message and "guest:guest" not in message
    assert sum(waits) < 5  # not the minute of retries a waiting client would give up on

    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(
        "name: broker-down-cli\ndataset: iris\nmodel: {width: 5}\n"
        "training: {max_epochs: 1}\nsearch: {seeds: 2}\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "dnnframe.cli", "run", str(spec_file), "--quiet"],
        cwd=REPO,
        env=worker_env(store_url, rabbitmq_node.url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1, run.stderr
    assert run.stderr.strip().count("\n") == 0 and run.stderr.startswith("error: the broker")
    queued = store.list_trials(state=TrialState.QUEUED)
    assert len(queued) == 5 and len(store.list_experiments()) == 2

    rabbitmq_node.start_app()
    start_worker(
        "default",
        DNNFRAME_BROKER_URL=rabbitmq_node.url,
        DNNFRAME_TRAIN_FN=SLEEPY,
        DNNFRAME_HOOK_EPOCHS="1",
        DNNFRAME_HOOK_EPOCH_SECONDS="0.05",
        DNNFRAME_HEARTBEAT_TIMEOUT="2",
    )
    wait_until(
        lambda: store.counts_by_state().get("COMPLETE", 0) == 5,
        60,
        "the held trials to be sent and trained",
    )
    assert store.take_dispatch() == []


def test_a_submit_after_a_broker_restart_publishes_each_pack_once(rabbitmq_node, store_url, store):
    """The executor keeps its broker connection between submits; after the broker restarts
    (a node of this test), the next submit reconnects and publishes each pack once: the
    queue holds exactly one message per pack sent (no worker consumes it)."""
    queue = "count-me"
    packs = [[f"trial-{i}", f"trial-{i}b"] for i in range(2)]
    ex = CeleryExecutor(rabbitmq_node.url, store_url, queue=queue)
    try:
        ex.submit(packs)
        assert queue_depth(rabbitmq_node.url, queue) == 2
        rabbitmq_node.stop_app()
        rabbitmq_node.start_app()
        assert queue_depth(rabbitmq_node.url, queue) == 2  # durable, persistent
        ex.submit(packs)
        assert queue_depth(rabbitmq_node.url, queue) == 4
        ex.submit(packs)
        assert queue_depth(rabbitmq_node.url, queue) == 6
    finally:
        ex.shutdown(wait=False)  # no worker: the trials are not in the store to wait for
