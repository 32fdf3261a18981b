"""Sending packs to Celery queues: the retry queues that put recovered trials ahead of the queue, and
trials held in the store while the broker is down.

A trial put back to work (its worker died) goes to its queue's retry queue,
``<queue>.retry``, which every worker consumes beside ``<queue>``: a plain queue of its own,
so the queue that deployments already have is left as declared. Not a strict priority:
a freed worker process takes the next message of either queue. (RabbitMQ refuses to
redeclare an existing queue with new arguments such as ``x-max-priority``, so a priority
queue would have needed new queue names on every broker.) Workers of earlier releases do
not consume retry queues: upgrade every worker of a queue together.

A submit that cannot reach the broker holds its trials in the store
(:meth:`ResultStore.hold_dispatch`); :func:`send_held` sends them once a broker answers. A
worker's reaper calls it on every pass and so does each submit, so nothing stays QUEUED
without a message. A trial sent twice is harmless: the store's claim runs it once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from celery import Celery

from .. import settings
from ..store.base import ResultStore, TrialState
from .packing import make_packs

log = logging.getLogger(__name__)

#: The task that trains a pack (its one argument: a list of trial ids).
PACK_TASK = "tasks.train_pack"
RETRY_SUFFIX = ".retry"
# Publishing to a down broker fails after this many tries (about a second and a half).
_SEND_POLICY = {"max_retries": 2, "interval_start": 0.2, "interval_step": 0.5,
                "interval_max": 1.0}


def retry_queue(queue: str) -> str:
    """The queue that trials of ``queue`` put back to work are sent to."""
    return queue if queue.endswith(RETRY_SUFFIX) else queue + RETRY_SUFFIX


def with_retry_queues(queues: Iterable[str]) -> list[str]:
    """``queues`` and the retry queue of each (what a worker consumes)."""
    names = list(dict.fromkeys(queues))
    return names + [q for q in dict.fromkeys(map(retry_queue, names)) if q not in names]


def repack(store: ResultStore, trial_ids: list[str]) -> list[list[str]]:
    """The trials of ``trial_ids`` still QUEUED, in packs of trials that share a graph."""
    trials = [store.get_trial(tid) for tid in dict.fromkeys(trial_ids)]
    queued = {t.id: t.config for t in trials if t.state is TrialState.QUEUED}
    if not queued:
        return []
    current = settings.get()
    return make_packs(list(queued), queued, current.pack_size, current.worker_count)


def send(celery_app: Celery, by_queue: dict[str, list[list[str]]]) -> None:
    """Publish each queue's packs; raises the broker's error after a short retry."""
    with celery_app.producer_or_acquire() as producer:
        for queue, packs in by_queue.items():
            for pack in packs:
                celery_app.send_task(PACK_TASK, args=[pack], queue=queue, producer=producer,
                                     retry=True, retry_policy=_SEND_POLICY)


def send_or_hold(store: ResultStore, celery_app: Celery,
                 by_queue: dict[str, list[list[str]]]) -> bool:
    """Publish the packs; if the broker cannot take them, hold their trials in the store
    (sent later by :func:`send_held`). Returns True if they were published."""
    try:
        send(celery_app, by_queue)
        return True
    except Exception as exc:  # noqa: BLE001 - any broker failure: keep the trials, send later
        held = [(tid, queue) for queue, packs in by_queue.items() for p in packs for tid in p]
        store.hold_dispatch(held)
        log.warning("broker unavailable (%s); %d trial(s) held in the store until it is back",
                    exc, len(held))
        return False


def send_held(store: ResultStore, celery_app: Celery, limit: int = 500) -> int:
    """Send the trials held during a broker outage (those still QUEUED) to their queues.

    Returns how many trials were sent; 0 when none were held or the broker is still down
    (they are held again then).
    """
    sent = 0
    while items := store.take_dispatch(limit=limit):
        by_queue: dict[str, list[str]] = {}
        for tid, queue in items:
            by_queue.setdefault(queue, []).append(tid)
        try:
            packs = {queue: repack(store, ids) for queue, ids in by_queue.items()}
            send(celery_app, packs)
        except Exception:
            store.hold_dispatch(items)
            raise
        sent += sum(len(p) for packs_ in packs.values() for p in packs_)
        if len(items) < limit:
            break
    if sent:
        log.warning("sent %d trial(s) held while the broker was unavailable", sent)
    return sent
