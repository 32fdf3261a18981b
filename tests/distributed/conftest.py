"""Harness for the distributed tests: the real RabbitMQ, real ``celery -A tasks worker``
processes, a real SQLite store file. Never eager mode.

Every test gets its own queue name (so tests and stray messages never meet) and its own
store file; every worker is started in its own session and its whole process group is
killed at teardown, pass or fail. Worker logs are kept in the test's tmp dir and printed
when a test fails.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dnnframe.testing.procs import WorkerProc, spawn_worker, wait_ready
from dnnframe.testing.rabbit import RabbitNode, rabbitmq_missing, start_rabbit_node

if TYPE_CHECKING:
    from dnnframe.store.base import ResultStore

REPO = Path(__file__).resolve().parents[2]
BROKER_URL = os.environ.get("DNNFRAME_TEST_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//")


def _broker_problem() -> str | None:
    from kombu import Connection

    try:
        with Connection(BROKER_URL, connect_timeout=3) as conn:
            conn.ensure_connection(max_retries=1)
    except Exception as exc:
        return (
            f"RabbitMQ is not reachable at {BROKER_URL} ({exc}); start it with "
            "`rabbitmq-server -detached` (.ci/run does this)"
        )
    return None


@pytest.fixture(scope="session")
def broker_url() -> str:
    """The real broker; a missing one skips the test, naming what to start (CI fails it)."""
    problem = _broker_problem()
    if problem:
        pytest.skip(problem)
    return BROKER_URL


@pytest.fixture
def rabbitmq_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RabbitNode]:
    """A dedicated RabbitMQ node on free ports, for tests that stop or restart a broker:
    the machine's shared broker is never touched. Stopped (and its data removed) after."""
    problem = rabbitmq_missing()
    if problem:
        pytest.skip(problem)
    try:
        node = start_rabbit_node(tmp_path_factory.mktemp("rabbitmq-node"))
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture
def queue_name(broker_url: str) -> Iterator[str]:
    """A queue of this test only; deleted afterwards."""
    name = f"dnnframe-test-{uuid.uuid4().hex[:10]}"
    yield name
    delete_queue(broker_url, name)


def delete_queue(broker_url: str, name: str) -> None:
    """Delete a queue and its retry queue (and their messages) if they exist."""
    from kombu import Connection

    from dnnframe.executors.dispatch import with_retry_queues

    try:
        with Connection(broker_url, connect_timeout=3) as conn:
            for queue in with_retry_queues([name]):
                conn.default_channel.queue_delete(queue)
    except Exception:
        pass


def queue_depth(broker_url: str, name: str) -> int:
    """Ready messages in ``name`` (0 if it does not exist)."""
    from kombu import Connection

    with Connection(broker_url, connect_timeout=3) as conn:
        try:
            return conn.default_channel.queue_declare(name, passive=True).message_count
        except Exception:
            return 0


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    """A fresh SQLite store file shared by the test and its workers."""
    return f"sqlite:///{tmp_path / 'store.db'}"


def worker_env(store_url: str, broker_url: str, **extra: str) -> dict[str, str]:
    """Environment of a test worker: repo on the path, the test's store and broker."""
    env = dict(os.environ)
    env.update(
        {
            "PYTHONPATH": f"{REPO}{os.pathsep}{env.get('PYTHONPATH', '')}",
            "DNNFRAME_STORE_URL": store_url,
            "DNNFRAME_BROKER_URL": broker_url,
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


@pytest.fixture
def start_worker(
    tmp_path: Path, store_url: str, broker_url: str, request: pytest.FixtureRequest
) -> Iterator[Callable[..., WorkerProc]]:
    """Factory: ``start_worker(queue, concurrency=1, cli=False, host=None, netns=None,
    **env)`` → a ready worker.

    ``cli=True`` starts it through ``dnnframe worker`` instead of ``celery -A tasks worker``.
    ``host="NAME"`` starts it in a UTS namespace of its own (``unshare -u``) whose hostname
    is NAME: its node name and its trials' owners name another host, as on another machine.
    ``netns="NAME"`` starts it in that network namespace (``ip netns exec``; see dnnframe/testing/netns.py).
    Every worker started here is killed (whole process group) at teardown.
    """
    started: list[WorkerProc] = []

    def start(
        queue: str,
        concurrency: int = 1,
        cli: bool = False,
        ready_timeout: float = 60,
        host: str | None = None,
        netns: str | None = None,
        **env: str,
    ) -> WorkerProc:
        name = f"w{len(started) + 1}-{uuid.uuid4().hex[:6]}"
        w = spawn_worker(
            name,
            queue,
            tmp_path / f"{name}.log",
            worker_env(store_url, broker_url, **env),
            concurrency=concurrency,
            cli=cli,
            host=host,
            netns=netns,
        )
        w.env = env
        started.append(w)
        problem = wait_ready(w, ready_timeout)
        if problem:
            pytest.fail(problem)
        return w

    yield start
    for w in started:
        w.stop()
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        for w in started:
            sys.stderr.write(f"\n===== log of worker {w.name} =====\n{w.log_text()[-6000:]}\n")


SLEEPY = "dnnframe.testing.hooks:sleepy_train"


@pytest.fixture
def sleepy_workers(
    start_worker: Callable[..., WorkerProc], queue_name: str
) -> Callable[..., list[WorkerProc]]:
    """Factory: ``sleepy_workers(n, epochs, epoch_s, cli=False, **env)`` → ``n`` ready
    workers on the test's queue that train with ``dnnframe.testing.hooks:sleepy_train`` (``epochs``
    epochs of ``epoch_s`` seconds); ``cli=True`` starts the second through ``dnnframe
    worker``."""

    def start(
        n: int = 1, epochs: int = 3, epoch_s: float = 0.5, cli: bool = False, **env: str
    ) -> list[WorkerProc]:
        env = {
            "DNNFRAME_TRAIN_FN": SLEEPY,
            "DNNFRAME_HOOK_EPOCHS": str(epochs),
            "DNNFRAME_HOOK_EPOCH_SECONDS": str(epoch_s),
            **env,
        }
        return [start_worker(queue_name, cli=cli and i == 1, **env) for i in range(n)]

    return start


@pytest.fixture
def store(store_url: str) -> Iterator[ResultStore]:
    """The test's store, opened here (the workers open their own)."""
    from dnnframe.store import open_store

    opened = open_store(store_url)
    yield opened
    opened.close()


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    # Make the call phase's outcome visible to fixtures (to print worker logs on failure).
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)


def make_spec(name: str, trials: int, **training: object):
    """A valid digits spec expanding to ``trials`` trials (one per seed)."""
    from dnnframe.spec import parse_spec

    return parse_spec(
        {
            "name": name,
            "dataset": {"name": "digits"},
            "model": {"hidden_layers": 1, "width": 16, "activation": "relu"},
            "training": {
                "optimizer": "adam",
                "learning_rate": 0.003,
                "batch_size": 64,
                "max_epochs": 3,
                **training,
            },
            "search": {"seeds": trials},
        }
    )


def wait_until(predicate: Callable[[], bool], timeout: float, what: str, poll: float = 0.2) -> None:
    """Poll ``predicate`` until true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(poll)
