"""Messages and the store they belong to: a worker on another store leaves a sweep's packs
on the queue (and says so), and trials left QUEUED with no message are sent again. Real
workers, the machine's RabbitMQ, real SQLite files."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from dnnframe.executors import CeleryExecutor
from dnnframe.store import TrialState
from dnnframe.submit import submit_experiment

from .conftest import SLEEPY, make_spec, wait_until

pytestmark = pytest.mark.slow


def test_a_worker_on_another_store_takes_no_pack(
    broker_url, store_url, queue_name, start_worker, store, tmp_path: Path
):
    """A worker whose DNNFRAME_STORE_URL names another store is alone on the queue when a
    16-trial sweep in 8 packs arrives: it leaves every pack on the queue, stops consuming
    it and says so in its log and in /api/v1/workers; a correct worker started later
    completes every trial."""
    from dashboard import create_app

    env = {
        "DNNFRAME_TRAIN_FN": SLEEPY,
        "DNNFRAME_HOOK_EPOCHS": "1",
        "DNNFRAME_HOOK_EPOCH_SECONDS": "0.05",
    }
    other = f"sqlite:///{tmp_path / 'other.db'}"
    wrong = start_worker(queue_name, DNNFRAME_STORE_URL=other, **env)
    spec = make_spec("wrong-store", 16)
    with CeleryExecutor(broker_url, store_url, queue=queue_name) as ex:
        result = submit_experiment(spec, store, ex, pack_size=2)
        assert len(result.packs) == 8
        wait_until(
            lambda: "is on the wrong store" in wrong.log_text(),
            30,
            "the worker on another store to notice",
        )
        assert store.counts_by_state(spec.experiment_id)["QUEUED"] == 16

        app = create_app(
            {
                "TESTING": True,
                "STORE_URL": store_url,
                "BROKER_URL": broker_url,
                "CELERY_INSPECT_TIMEOUT": 2,
            }
        )
        try:
            listed = app.test_client().get("/api/v1/workers").get_json()["wrong_store"]
        finally:
            app.extensions["dnnframe"].shutdown()
        (entry,) = [w for w in listed if w["node"] == wrong.nodename]
        assert "other.db" in entry["store"] and "DNNFRAME_STORE_URL" in entry["message"]

        right = start_worker(queue_name, **env)
        assert ex.wait(timeout=60), Counter(t.state.value for t in store.list_trials())
    trials = store.list_trials(spec.experiment_id)
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 16
    assert all(t.worker.startswith(f"{right.nodename}:") for t in trials)
    assert "not in this worker's store" not in wrong.log_text()  # nothing eaten


def test_queued_trials_with_no_message_are_sent_again(
    broker_url, store_url, queue_name, start_worker, store
):
    """Trials stored QUEUED whose messages never reached the broker (a submitter that died
    between storing and publishing) are noticed by a worker's reaper and sent again."""
    spec = make_spec("no-message", 3)
    submit_experiment(spec, store)  # stored only: no message is published
    w = start_worker(
        queue_name,
        DNNFRAME_TRAIN_FN=SLEEPY,
        DNNFRAME_HOOK_EPOCHS="1",
        DNNFRAME_HOOK_EPOCH_SECONDS="0.05",
        DNNFRAME_HEARTBEAT_TIMEOUT="2",
    )
    wait_until(
        lambda: store.counts_by_state(spec.experiment_id)["COMPLETE"] == 3,
        60,
        "the trials with no message to be sent again and trained",
    )
    assert "QUEUED with no message on the broker" in w.log_text()
