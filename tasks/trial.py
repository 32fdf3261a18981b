"""The one task (``tasks.train_trial``), per-process worker state, heartbeats, worker signals.

The task is thin: it takes a trial id, and :func:`dnnframe.runner.run_trial` does the rest
(claim in the store, train, record). What this module adds is what only a Celery worker
needs:

* a heartbeat thread per worker process that refreshes the running trial every
  ``heartbeat_timeout / 5`` seconds, independent of how long an epoch takes, so only a
  trial whose process really vanished goes stale;
* worker state in the store (``register_worker``): host, pid, current trial, trials done,
  and the queue the trial came from (the reaper sends a requeued trial back to it);
* the reaper process beside each worker's main process (:mod:`tasks.reaper`);
* ``$DNNFRAME_TRAIN_FN``, a testing/benchmark hook naming a ``module:function`` to call
  instead of the engine's ``train`` (fault injection, no-op trials for dispatch benchmarks).
"""

from __future__ import annotations

import importlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from celery import signals
from celery.exceptions import SoftTimeLimitExceeded  # noqa: F401  (documented: becomes FAILED)

from dnnframe.exceptions import DnnframeError, NotFoundError, StoreError

from . import app, config

log = logging.getLogger(__name__)

# Store outages while claiming: retry with backoff (capped at a minute) for about 15 minutes
# rather than acknowledging the message and leaving the trial QUEUED with nothing to run it.
STORE_RETRIES = 20
# Worker state (current trial, trials done) reaches the store at most this often.
STATE_WRITE_S = 0.1

# Each worker process trains one trial at a time on one core: pin math libraries to one
# thread (set before any library loads in the pool processes).
_THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
}


def resolve_train_fn() -> Callable[..., Any] | None:
    """The function named by ``$DNNFRAME_TRAIN_FN`` (``module:function``), or None.

    A testing/benchmark hook: the worker trains with it instead of the engine.

    Raises:
        config.ConfigError: the value is malformed or cannot be imported.
    """
    spec = os.environ.get("DNNFRAME_TRAIN_FN", "").strip()
    if not spec:
        return None
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise config.ConfigError(
            f"DNNFRAME_TRAIN_FN must look like 'package.module:function', but got {spec!r}")
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise config.ConfigError(f"DNNFRAME_TRAIN_FN={spec!r} cannot be imported: {exc}") from exc
    if not callable(fn):
        raise config.ConfigError(f"DNNFRAME_TRAIN_FN={spec!r} is not callable")
    return fn


class _ProcessState:
    """What one worker process knows: its store, its trial, its heartbeat thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.store: Any = None
        self.trials_done = 0
        self.current: tuple[str, str] | None = None  # (trial_id, worker name)
        self.state: dict[str, Any] = {}  # register_worker kwargs still to write
        self.dirty = False
        self.wake = threading.Event()
        self.thread: threading.Thread | None = None
        self.train_fn: Callable[..., Any] | None = None
        self.train_fn_loaded = False

    def open_store(self) -> Any:
        if self.store is None:
            from dnnframe.store import open_store

            self.store = open_store(config.store_url())
        return self.store

    def get_train_fn(self) -> Callable[..., Any] | None:
        if not self.train_fn_loaded:
            self.train_fn = resolve_train_fn()
            self.train_fn_loaded = True
        return self.train_fn

    def start_heartbeats(self) -> None:
        if self.thread is None or not self.thread.is_alive():
            self.thread = threading.Thread(target=self._beat, name="dnnframe-heartbeat",
                                           daemon=True)
            self.thread.start()

    def _beat(self) -> None:
        # One thread per process does every background write: the trial's heartbeat every
        # interval, and worker state when it changed — at most every STATE_WRITE_S, so a
        # burst of short trials costs a few writes a second, not two per trial.
        interval = max(0.2, config.heartbeat_timeout() / 5)
        next_beat = time.monotonic() + interval
        last_state = 0.0
        while True:
            now = time.monotonic()
            timeout = next_beat - now
            if self.dirty:
                timeout = min(timeout, last_state + STATE_WRITE_S - now)
            self.wake.wait(max(0.0, timeout))
            self.wake.clear()
            now = time.monotonic()
            with self.lock:
                current = self.current
                state = self.state if self.dirty and now >= last_state + STATE_WRITE_S else None
                if state is not None:
                    self.dirty = False
            try:
                if state is not None:
                    last_state = now
                    self.open_store().register_worker(**state)
                if now >= next_beat:
                    next_beat = now + interval
                    if current is not None:
                        self.open_store().heartbeat(*current)
            except Exception:  # a store hiccup must not kill the thread; the next pass retries
                log.warning("heartbeat / worker state write failed", exc_info=True)

    def set_state(self, node: str, queue: str | None, current: tuple[str, str] | None) -> None:
        """Record the running trial (for heartbeats) and queue a worker-state write."""
        with self.lock:
            self.current = current
            self.state = {
                "name": f"{node}:{os.getpid()}", "host": socket.gethostname(),
                "pid": os.getpid(), "current_trial": current[0] if current else None,
                "trials_done": self.trials_done,
                "info": {"node": node, "queue": queue, "role": "process"}}
            self.dirty = True
        self.wake.set()


_proc = _ProcessState()


@signals.worker_process_init.connect
def _reset_process_state(**_: Any) -> None:
    # A fresh pool process must not reuse the parent's store connection or threads.
    global _proc
    _proc = _ProcessState()


@app.task(name=config.TRAIN_TASK, bind=True, acks_late=True, reject_on_worker_lost=True,
          ignore_result=True)
def train_trial(self: Any, trial_id: str) -> str | None:
    """Run one stored trial by id (claim → train → record); returns its final state or None.

    None means the store refused the claim: the trial is running elsewhere, finished
    (a redelivered message), cancelled, or over its delivery cap (then it is FAILED).
    A trial left RUNNING by a dead pool process of this same node is released and run
    again at once (see :func:`release_if_owner_died`).
    """
    from dnnframe.runner import release_if_owner_died, run_trial

    if not isinstance(trial_id, str) or not trial_id:
        raise DnnframeError(f"tasks.train_trial needs a trial id string, but got {trial_id!r}")
    node = self.request.hostname or f"celery@{socket.gethostname()}"
    worker = f"{node}:{os.getpid()}"
    queue = (self.request.delivery_info or {}).get("routing_key")
    proc = _proc
    try:
        store = proc.open_store()
    except StoreError as exc:
        raise self.retry(exc=exc, countdown=min(60, 2 ** self.request.retries),
                         max_retries=STORE_RETRIES) from exc
    train_fn = proc.get_train_fn()
    proc.start_heartbeats()
    proc.set_state(node, queue, (trial_id, worker))
    state = None
    try:
        state = run_trial(trial_id, store, worker=worker, max_attempts=config.max_attempts(),
                          train_fn=train_fn)
        if state is None and release_if_owner_died(store, trial_id, node):
            # Once: a normal capped claim, so a trial that keeps killing its process still
            # ends FAILED at DNNFRAME_MAX_ATTEMPTS.
            state = run_trial(trial_id, store, worker=worker,
                              max_attempts=config.max_attempts(), train_fn=train_fn)
    except NotFoundError as exc:
        raise DnnframeError(
            f"trial {trial_id} is not in this worker's store {config.store_url()!r}: the "
            "submitter and the workers must use the same DNNFRAME_STORE_URL") from exc
    except StoreError as exc:
        # Claim or final write failed: try again later. A trial that did get claimed stays
        # RUNNING without heartbeats and is requeued by the reaper, so nothing is lost.
        log.warning("trial %s: store unavailable (%s); retrying", trial_id, exc)
        raise self.retry(exc=exc, countdown=min(60, 2 ** self.request.retries),
                         max_retries=STORE_RETRIES) from exc
    finally:
        if state is not None:
            proc.trials_done += 1
        proc.set_state(node, queue, None)
    return state.value if state is not None else None


@signals.worker_init.connect
def _on_worker_init(**_: Any) -> None:
    for key, value in _THREAD_ENV.items():
        os.environ.setdefault(key, value)
    # Fail at start-up, not on the first trial, when the configuration is unusable.
    config.task_time_limits()
    config.heartbeat_timeout()
    config.max_attempts()
    resolve_train_fn()


@signals.worker_ready.connect
def _on_worker_ready(sender: Any = None, **_: Any) -> None:
    from . import reaper

    hostname = getattr(sender, "hostname", None) or f"celery@{socket.gethostname()}"
    reaper.start_reaper(app, hostname, consumer=sender)


@signals.worker_shutdown.connect
def _on_worker_shutdown(**_: Any) -> None:
    from . import reaper

    reaper.stop_reaper()
