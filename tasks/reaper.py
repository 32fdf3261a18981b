"""The reaper: put trials whose worker vanished back to work.

A trial is RUNNING in the store from its claim until its final write; its worker process
refreshes ``heartbeat_at`` every ``heartbeat_timeout / 5`` seconds. When a worker dies
(SIGKILL, OOM kill, lost machine), the trial's heartbeat goes stale. Its message is given
back by the broker (acks_late: the connection or the pool process died before the ack). When
only a pool process died and the message comes back to the same node, the task sees the
owner's pid is gone and releases and reruns the trial at once (``tasks.trial``); otherwise
(whole worker or machine lost) that redelivery finds the trial still RUNNING and is a no-op,
so the reaper must both
*requeue the trial in the store* (``requeue_stale``) and *publish its task again* — the
store requeue alone puts nothing on the queue. Duplicates (a redelivered message and a
re-published one) are harmless: the store claim lets exactly one of them run it, and the
``attempts`` counter of the claim caps a trial that keeps killing its workers.

Where it runs, and why: a small process beside every worker, started from the worker's
main process (``worker_ready`` signal) with the *spawn* method and ended with it. No extra
service to deploy or keep alive (Celery beat would be one more single point of failure);
there is a reaper whenever there is a worker to do the work; and ``requeue_stale`` is
atomic in the store, so with several workers each stale trial is requeued — and
re-published — by exactly one of them. Not a thread of the main process: Celery forks
pool processes from it at any moment, and a process that forks while it holds SQLite
connections hands its children SQLite's per-process lock state (SQLite's "do not carry an
open database across fork"); a pool process forked in the middle of a reaper pass then
waited on a lock nobody held. The main process touches no store at all. The requeued task goes back
to the queue its dead owner took it from (recorded in the store's worker state), so a
``gpu`` trial stays on the ``gpu`` queue.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
import threading
from typing import Any

from . import config

log = logging.getLogger(__name__)

_process: Any = None  # the reaper process of this worker (multiprocessing.Process)
_stop = threading.Event()  # set only to end _loop early when it runs in-process (tests)


def reap_once(store: Any, celery_app: Any, timeout_s: float,
              default_queue: str = "default") -> list[tuple[str, str]]:
    """Requeue RUNNING trials silent for ``timeout_s`` seconds and publish their tasks again.

    Args:
        store: an open ``ResultStore``.
        celery_app: the Celery app to publish with.
        timeout_s: heartbeat age after which a RUNNING trial counts as abandoned.
        default_queue: where a trial goes when its owner's queue is unknown.
    Returns:
        ``(trial_id, queue)`` for each trial requeued and re-published.
    """
    from dnnframe.store.base import TrialState

    # Who owned each running trial (requeue_stale clears the owner), to route it back.
    owners = {t.id: t.worker for t in store.list_trials(state=TrialState.RUNNING)}
    requeued = store.requeue_stale(timeout_s)
    if not requeued:
        return []
    queues = {w.name: (w.info or {}).get("queue") for w in store.list_workers()}
    out = []
    with celery_app.producer_or_acquire() as producer:
        for trial_id in requeued:
            queue = queues.get(owners.get(trial_id) or "") or default_queue
            celery_app.send_task(config.TRAIN_TASK, args=[trial_id], queue=queue,
                                 producer=producer, retry=True,
                                 retry_policy={"max_retries": None, "interval_start": 0.5,
                                               "interval_step": 1, "interval_max": 10})
            out.append((trial_id, queue))
            log.warning("reaper: trial %s had no heartbeat for %.0fs (worker %s vanished); "
                        "requeued to %r", trial_id, timeout_s, owners.get(trial_id), queue)
    return out


def _loop(celery_app: Any, hostname: str, queues: list[str], parent_pid: int) -> None:
    from dnnframe.store import open_store

    timeout = config.heartbeat_timeout()
    interval = max(0.25, min(timeout / 4, 30.0))
    store = None
    while not _stop.wait(interval):
        if os.getppid() != parent_pid:
            break  # the worker is gone (even a SIGKILLed one): so is its reaper
        try:
            if store is None:
                store = open_store(config.store_url())
                store.register_worker(hostname, host=socket.gethostname(), pid=parent_pid,
                                      info={"role": "node", "queues": queues})
            reap_once(store, celery_app, timeout, default_queue=queues[0] if queues else "default")
        except Exception:  # keep reaping through store or broker hiccups
            log.warning("reaper: pass failed; retrying in %.1fs", interval, exc_info=True)
    if store is not None:
        store.close()


def _process_main(broker_url: str, hostname: str, queues: list[str], parent_pid: int) -> None:
    from . import create_app

    logging.basicConfig(level=logging.INFO,
                        format="[%(asctime)s: %(levelname)s/reaper] %(message)s")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the worker's to handle
    _loop(create_app(broker_url), hostname, queues, parent_pid)


def start_reaper(celery_app: Any, hostname: str, consumer: Any = None) -> None:
    """Start this worker's reaper process (idempotent); see the module docstring."""
    global _process
    if _process is not None and _process.is_alive():
        return
    queues: list[str] = []
    try:
        queues = sorted(celery_app.amqp.queues.consume_from or celery_app.amqp.queues)
    except Exception:
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
