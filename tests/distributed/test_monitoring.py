"""What monitors see of a pack task: real RabbitMQ, real ``celery -A tasks worker``
processes, the Celery events they send (read with Celery's own event receiver, as Flower
does) and Flower itself.

The tasks' result names every member (trial id, final state, objective, what this
delivery did); a pack with a FAILED member is a task failure in one line; a duplicate or
redelivered message is told apart from the delivery that trained; progress arrives as
``task-progress`` events.
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from celery.events.receiver import EventReceiver
from kombu import Connection

from dnnframe.executors import CeleryExecutor
from dnnframe.executors.celery import create_app
from dnnframe.executors.celery_monitoring import PackFailed, PackReport, error_line
from dnnframe.runner import run_pack
from dnnframe.store import TrialState
from dnnframe.submit import submit_experiment
from dnnframe.testing.rabbit import free_ports

from .conftest import REPO, make_spec, wait_until, worker_env


class EventLog:
    """Every Celery event on the broker while the test runs, captured in a thread."""

    def __init__(self, broker_url: str) -> None:
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._conn = Connection(broker_url)
        log = self

        class Receiver(EventReceiver):
            def on_consume_ready(self, *args: Any, **kwargs: Any) -> None:
                super().on_consume_ready(*args, **kwargs)
                log._ready.set()

        self._receiver = Receiver(
            self._conn, handlers={"*": self._on_event}, app=create_app(broker_url)
        )
        self._thread = threading.Thread(
            target=self._receiver.capture, kwargs={"wakeup": False}, daemon=True
        )
        self._thread.start()
        if not self._ready.wait(30):
            pytest.fail("the event receiver did not start consuming within 30 s")

    def _on_event(self, event: dict[str, Any]) -> None:
        with self._lock:
            self.events.append(event)

    def of(self, hostname: str, type_: str | None = None) -> list[dict[str, Any]]:
        """Task events sent by the worker node ``hostname`` (other engineers' workers on the
        shared broker send theirs too), optionally of one type."""
        with self._lock:
            return [
                e
                for e in self.events
                if e.get("hostname") == hostname
                and e["type"].startswith("task-")
                and type_ in (None, e["type"])
            ]

    def wait_for(
        self, hostname: str, type_: str, n: int = 1, timeout: float = 60
    ) -> list[dict[str, Any]]:
        wait_until(
            lambda: len(self.of(hostname, type_)) >= n,
            timeout,
            f"{n} {type_} event(s) from {hostname}",
        )
        return self.of(hostname, type_)

    def close(self) -> None:
        self._receiver.should_stop = True
        self._thread.join(timeout=10)
        self._conn.release()


@pytest.fixture
def events(broker_url: str) -> Iterator[EventLog]:
    log = EventLog(broker_url)
    yield log
    log.close()


def _result(event: dict[str, Any]) -> dict[str, Any]:
    """A task-succeeded event's result: the ``repr`` of what the task returned."""
    return ast.literal_eval(event["result"])


@pytest.mark.slow
def test_result_names_trials_states_objective_and_a_duplicate_is_a_no_op(
    broker_url, store_url, queue_name, sleepy_workers, store, events
):
    """A pack of 2 that trains: task-received/started/succeeded events without -E, progress
    events while it trains, a result naming each trial COMPLETE with its objective; the same
    pack sent again succeeds as a no-op that says so."""
    (w,) = sleepy_workers(1, epochs=2, epoch_s=0.6)
    spec = make_spec("monitored", 2, max_epochs=2)  # as many as the hook trains
    with CeleryExecutor(broker_url, store_url, queue=queue_name) as ex:
        sub = submit_experiment(spec, store, ex, pack_size=2)
        assert sub.packs == [sub.trial_ids]
        (done,) = events.wait_for(w.nodename, "task-succeeded")
        trained = _result(done)
        ex.submit(sub.packs)  # a duplicate message: the store claim makes it a no-op
        noop = _result(events.wait_for(w.nodename, "task-succeeded", n=2)[1])
    first, second = sub.trial_ids
    by = store.get_trial(first).worker  # the pool process that trained the pack
    assert by.startswith(f"{w.nodename}:") and store.get_trial(second).worker == by
    assert trained == {
        "summary": "pack of 2: trained 2 (COMPLETE 2)",
        "redelivered": False,
        "trials": {
            tid: {
                "state": "COMPLETE",
                "delivery": "trained",
                "attempt": 1,
                "metric": "test_accuracy",
                "objective": 0.75,
            }
            for tid in (first, second)
        },
    }
    assert noop == {
        "summary": f"pack of 2: no-op 2 (COMPLETE 2; by {by})",
        "redelivered": False,
        "trials": {
            tid: {
                "state": "COMPLETE",
                "delivery": "no-op",
                "reason": "already COMPLETE",
                "by": by,
                "metric": "test_accuracy",
                "objective": 0.75,
            }
            for tid in (first, second)
        },
    }
    task_id = done["uuid"]
    assert {e["type"] for e in events.of(w.nodename) if e["uuid"] == task_id} >= {
        "task-received",
        "task-started",
        "task-progress",
        "task-succeeded",
    }
    progress = [
        e["progress"] for e in events.of(w.nodename, "task-progress") if e["uuid"] == task_id
    ]
    # members train one after the other (the hook trains one by one); at most one report
    # a second: the first epoch of the first member is reported at once
    assert progress[0] == {"progress": "epoch 1 of 2", "trials": {first: "1/2"}}
    assert all(p["progress"] in ("epoch 1 of 2", "epoch 2 of 2") for p in progress)
    assert len(progress) <= 3, progress  # 4 epochs of 0.6 s: never one per epoch


@pytest.mark.slow
def test_a_failed_member_fails_the_task_in_one_line(
    broker_url, store_url, queue_name, sleepy_workers, store, events
):
    """A pack whose second member has a config that no longer validates: the good member
    COMPLETEs, the bad one is FAILED with its traceback in the store, and the task is a
    failure whose exception is one line naming the trial; the worker logs no traceback."""
    (w,) = sleepy_workers(1, epochs=1, epoch_s=0.1)
    spec = make_spec("poisoned", 1)
    sub = submit_experiment(spec, store, None)  # stored, not sent
    (good,) = sub.trial_ids
    bad = f"poison-{uuid.uuid4().hex[:8]}"
    store.create_trials(
        spec.experiment_id, [(bad, {"dataset": {"name": "digits"}, "model": {"width": -3}})]
    )
    with CeleryExecutor(broker_url, store_url, queue=queue_name) as ex:
        ex.submit([[good, bad]])
        (failed,) = events.wait_for(w.nodename, "task-failed")
    assert not events.of(w.nodename, "task-succeeded")
    assert failed["exception"] == (
        f"PackFailed('1 of 2 trials FAILED ({bad}: pydantic_core._pydantic_core.ValidationError: "
        "2 validation errors for TrialConfig) [pack of 2: trained 2 (COMPLETE 1, FAILED 1)]')"
    )
    assert store.get_trial(good).state is TrialState.COMPLETE
    stored = store.get_trial(bad)
    assert stored.state is TrialState.FAILED and "Traceback" in stored.error
    wait_until(
        lambda: "raised expected: PackFailed(" in w.log_text(),
        10,
        "the worker's one-line log of the failure",
    )
    assert "Traceback" not in w.log_text()


@pytest.mark.slow
def test_a_killed_delivery_shows_in_its_redelivery(
    broker_url, store_url, queue_name, sleepy_workers, store, events
):
    """SIGKILL the pool process training a trial: the broker redelivers the message under
    the same task id, and the redelivery's result says so (redelivered, attempt 2). The
    node's reaper may also have released the trial to the retry queue (a second task):
    then exactly one of the two trains it and the other reports a no-op."""
    (w,) = sleepy_workers(1, epochs=4, epoch_s=0.5)
    spec = make_spec("killed", 1)
    with CeleryExecutor(broker_url, store_url, queue=queue_name) as ex:
        sub = submit_experiment(spec, store, ex)
        (tid,) = sub.trial_ids
        wait_until(lambda: len(store.get_trial(tid).metrics) >= 1, 30, "the first epoch")
        os.kill(int(store.get_trial(tid).worker.rpartition(":")[2]), signal.SIGKILL)
        (killed,) = {e["uuid"] for e in events.of(w.nodename, "task-received")}

        def settled() -> bool:  # every message the node took has its final event
            taken = {e["uuid"] for e in events.of(w.nodename, "task-received")}
            ended = {e["uuid"] for e in events.of(w.nodename, "task-succeeded")}
            return store.get_trial(tid).state is TrialState.COMPLETE and taken <= ended

        wait_until(settled, 60, "the trial to complete and every delivery to report")
    received = [e for e in events.of(w.nodename, "task-received") if e["uuid"] == killed]
    assert len(received) == 2  # the killed delivery and its redelivery: one task id
    results = {e["uuid"]: _result(e) for e in events.of(w.nodename, "task-succeeded")}
    assert results[killed]["redelivered"] is True
    entries = [r["trials"][tid] for r in results.values()]
    trained = [t for t in entries if t["delivery"] == "trained"]
    assert trained == [
        {
            "state": "COMPLETE",
            "delivery": "trained",
            "attempt": 2,
            "metric": "test_accuracy",
            "objective": 0.875,
        }
    ]
    # a no-op names the process that trained the trial (the same task id's result in Flower)
    owner = store.get_trial(tid).worker
    assert all(t["delivery"] == "no-op" and t["by"] == owner for t in entries if t not in trained)


def _flower(
    broker_url: str, store_url: str, tmp_path: Path, **env: str
) -> tuple[subprocess.Popen, int, Path]:
    (port,) = free_ports(1)
    log = tmp_path / "flower.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "tasks",
                "flower",
                f"--port={port}",
                "--address=127.0.0.1",
            ],
            cwd=REPO,
            env=worker_env(store_url, broker_url, **env),
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return proc, port, log


@pytest.mark.slow
def test_flower_shows_progress_and_the_result(
    broker_url, store_url, queue_name, sleepy_workers, store, tmp_path: Path
):
    """Flower on 127.0.0.1 with a login (FLOWER_BASIC_AUTH): its API answers 401 without
    it; with it, the running task is PROGRESS with the epoch reached, then SUCCESS with the
    trial's state and objective."""
    requests = pytest.importorskip("requests")
    flower, port, log = _flower(broker_url, store_url, tmp_path, FLOWER_BASIC_AUTH="admin:s3cret")
    base, auth = f"http://127.0.0.1:{port}", ("admin", "s3cret")
    try:

        def up() -> bool:
            if flower.poll() is not None:
                pytest.skip(f"Flower exited at start:\n{log.read_text(errors='replace')[-2000:]}")
            try:
                return requests.get(f"{base}/healthcheck", timeout=5).status_code == 200
            except requests.ConnectionError:
                return False

        wait_until(up, 60, "Flower to answer /healthcheck", poll=0.5)
        assert requests.get(f"{base}/api/tasks", timeout=10).status_code == 401
        (w,) = sleepy_workers(1, epochs=6, epoch_s=0.5)
        spec = make_spec("flower", 1, max_epochs=6)
        seen: list[dict[str, Any]] = []

        def ours(state: str) -> Callable[[], bool]:
            def check() -> bool:
                r = requests.get(
                    f"{base}/api/tasks", params={"worker": w.nodename}, auth=auth, timeout=10
                )
                assert r.status_code == 200, r.text
                # Flower's worker filter keeps tasks no worker took yet (sent by other
                # tests on the shared broker): keep ours only
                seen[:] = [t for t in r.json().values() if t.get("worker") == w.nodename]
                return any(t["state"] == state for t in seen)

            return check

        with CeleryExecutor(broker_url, store_url, queue=queue_name) as ex:
            (tid,) = submit_experiment(spec, store, ex).trial_ids
            wait_until(ours("PROGRESS"), 60, "Flower to show the task in PROGRESS", poll=0.3)
            assert len(seen) == 1, seen
            (running,) = seen
            assert running["name"] == "tasks.train_pack"
            progress = ast.literal_eval(running["result"])
            assert progress["progress"].endswith(" of 6") and tid in progress["trials"]
            wait_until(ours("SUCCESS"), 60, "Flower to show the task succeeded", poll=0.5)
        assert len(seen) == 1, seen
        (finished,) = seen
        assert ast.literal_eval(finished["result"])["trials"] == {
            tid: {
                "state": "COMPLETE",
                "delivery": "trained",
                "attempt": 1,
                "metric": "test_accuracy",
                "objective": 1 - 1 / 12,
            }
        }
    finally:
        os.killpg(flower.pid, signal.SIGKILL)
        flower.wait(timeout=10)


# ---------------------------------------------------------------- the report, without a broker
def _result_of(status: str, **metrics: float | None):
    from dnnframe.engine.result import TrialResult

    return TrialResult(
        status=status,
        metrics=metrics,
        history=[],
        timings={},
        n_params=0,
        environment={},
        diverged_epoch=1 if status == "DIVERGED" else None,
        epochs_run=1,
    )


def test_report_of_a_pack_with_diverged_failed_lost_and_finished_members(store):
    """The task's report straight from run_pack on a real SQLite store: DIVERGED is a result
    (named, with its reason), FAILED makes the task fail in one line, a member another
    worker took over is ``dropped``, and a trial finished before is a ``no-op``."""
    spec = make_spec("report", 4, max_epochs=5)
    ids = submit_experiment(spec, store, None).trial_ids
    run_pack(
        ids[3:],
        store,
        worker="elsewhere:1",
        train_fn=lambda configs, on_epoch: [_result_of("COMPLETE", test_accuracy=0.5)],
    )

    def train(configs, on_epoch):  # noqa: ANN001, ANN202
        on_epoch(1, [{"epoch": 1, "val_loss": 1.0}] * 3)
        assert store.release_trial(ids[2], "node:1")  # the reaper gave it to another worker
        assert store.claim_trials([ids[2]], "thief:2")
        on_epoch(2, [{"epoch": 2, "val_loss": 1.0}] * 3)
        return [
            _result_of("DIVERGED", test_accuracy=None),
            ValueError("poison\nsecond line"),
            _result_of("COMPLETE", test_accuracy=0.9),
        ]

    report = PackReport(store, None, "node", None)
    run_pack(ids, store, worker="node:1", train_fn=train, observer=report)
    result = report.result(ids, redelivered=False)
    assert result == {
        "summary": "pack of 4: trained 2 (DIVERGED 1, FAILED 1), dropped 1 (RUNNING 1), "
        "no-op 1 (COMPLETE 1; by elsewhere:1)",
        "redelivered": False,
        "trials": {
            ids[0]: {
                "state": "DIVERGED",
                "delivery": "trained",
                "attempt": 1,
                "metric": "test_accuracy",
                "objective": None,
                "error": "diverged at epoch 1 (loss became non-finite)",
            },
            ids[1]: {
                "state": "FAILED",
                "delivery": "trained",
                "attempt": 1,
                "error": "ValueError: poison",
            },
            ids[2]: {
                "state": "RUNNING",
                "delivery": "dropped",
                "attempt": 1,
                "reason": "trained, but thief:2 owns it now: this delivery's result was "
                "not recorded",
            },
            ids[3]: {
                "state": "COMPLETE",
                "delivery": "no-op",
                "reason": "already COMPLETE",
                "by": "elsewhere:1",
                "metric": "test_accuracy",
                "objective": 0.5,
            },
        },
    }
    assert report.epochs == {ids[0]: 2, ids[1]: 2, ids[2]: 1}
    with pytest.raises(
        PackFailed,
        match=rf"^1 of 4 trials FAILED \({ids[1]}: ValueError: "
        r"poison\) \[pack of 4: ",
    ):
        report.raise_if_failed(result)
    assert (
        error_line("delivery cap reached: claimed 2 times\nmore")
        == "delivery cap reached: claimed 2 times"
    )
    assert error_line(None) is None
