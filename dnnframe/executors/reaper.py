"""The reaper: put trials whose worker vanished back to work.

A RUNNING trial's worker refreshes its heartbeat; when a whole worker or machine dies the
heartbeat goes stale, and the broker's redelivery of its message is a no-op (the claim
refuses a RUNNING trial). So the reaper both requeues stale trials in the store
(``requeue_stale``, atomic: with several workers each trial is requeued by exactly one)
and publishes them again, as packs, to the queue their dead owner consumed. Duplicated
messages are harmless: the claim runs a trial once, and its ``attempts`` counter caps a
trial that keeps killing its workers.

It runs as a small spawned process beside every Celery worker (no extra service to keep
alive). Not a thread of the worker's main process: Celery forks pool processes from it at
any moment, and a fork taken while a thread holds SQLite connections hands the child
SQLite lock state nobody will release.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.process
import os
import signal
import socket
import time

from celery import Celery

from .. import settings
from ..store import default_store_url, open_store
from ..store.base import ResultStore, TrialState
from .celery import PACK_TASK, create_app
from .packing import make_packs

log = logging.getLogger(__name__)

_process: multiprocessing.process.BaseProcess | None = None  # this worker's reaper


def reap_once(store: ResultStore, celery_app: Celery, timeout_s: float,
              default_queue: str = "default") -> list[tuple[str, str]]:
    """Requeue RUNNING trials silent for ``timeout_s`` seconds and publish them again, as
    packs of trials that share a graph, to the queue their owner consumed.

    Returns ``(trial_id, queue)`` for each trial requeued and re-published; a trial whose
    owner's queue is unknown goes to ``default_queue``.
    """
    # Who owned each running trial (requeue_stale clears the owner), to route it back.
    owners = {t.id: t.worker for t in store.list_trials(state=TrialState.RUNNING)}
    requeued = store.requeue_stale(timeout_s)
    if not requeued:
        return []
    queues = {w.name: (w.info or {}).get("queue") for w in store.list_workers()}
    by_queue: dict[str, list[str]] = {}
    for trial_id in requeued:
        queue = queues.get(owners.get(trial_id) or "") or default_queue
        by_queue.setdefault(queue, []).append(trial_id)
        log.warning("reaper: trial %s had no heartbeat for %.0fs (worker %s vanished); "
                    "requeued to %r", trial_id, timeout_s, owners.get(trial_id), queue)
    current = settings.get()
    with celery_app.producer_or_acquire() as producer:
        for queue, ids in by_queue.items():
            configs = {tid: store.get_trial(tid).config for tid in ids}
            for pack in make_packs(ids, configs, current.pack_size, current.worker_count):
                celery_app.send_task(PACK_TASK, args=[pack], queue=queue,
                                     producer=producer, retry=True,
                                     retry_policy={"max_retries": None, "interval_start": 0.5,
                                                   "interval_step": 1, "interval_max": 10})
    return [(tid, queue) for queue, ids in by_queue.items() for tid in ids]


def _loop(celery_app: Celery, hostname: str, queues: list[str], parent_pid: int) -> None:
    timeout = settings.get().heartbeat_timeout
    interval = max(0.25, min(timeout / 4, 30.0))
    store = None
    while True:
        time.sleep(interval)
        if os.getppid() != parent_pid:
            break  # the worker is gone (even a SIGKILLed one): so is its reaper
        try:
            if store is None:
                store = open_store(default_store_url())
                store.register_worker(hostname, host=socket.gethostname(), pid=parent_pid,
                                      info={"role": "node", "queues": queues})
            reap_once(store, celery_app, timeout, default_queue=queues[0] if queues else "default")
        except Exception:  # keep reaping through store or broker hiccups
            log.warning("reaper: pass failed; retrying in %.1fs", interval, exc_info=True)
    if store is not None:
        store.close()


def _process_main(broker_url: str, hostname: str, queues: list[str], parent_pid: int) -> None:
    logging.basicConfig(level=logging.INFO,
                        format="[%(asctime)s: %(levelname)s/reaper] %(message)s")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the worker's to handle
    _loop(create_app(broker_url), hostname, queues, parent_pid)


def start_reaper(celery_app: Celery, hostname: str) -> None:
    """Start this worker's reaper process (idempotent); it ends when the worker does."""
    global _process
    if _process is not None and _process.is_alive():
        return
    queues: list[str] = []
    try:
        queues = sorted(celery_app.amqp.queues.consume_from or celery_app.amqp.queues)
    except Exception:  # no queue information: requeued trials go to "default"
        pass
    broker = celery_app.connection_for_write().as_uri(include_password=True)
    ctx = multiprocessing.get_context("spawn")
    _process = ctx.Process(target=_process_main, args=(broker, hostname, queues, os.getpid()),
                           name="dnnframe-reaper", daemon=True)
    _process.start()


def stop_reaper() -> None:
    """Stop this worker's reaper process (worker shutdown)."""
    global _process
    if _process is not None and _process.is_alive():
        _process.terminate()
        _process.join(timeout=5)
    _process = None
