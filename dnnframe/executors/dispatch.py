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
import math
from collections.abc import Iterable

from celery import Celery

from .. import settings
from ..store.base import ResultStore, TrialState
from . import liveness
from .handoff import is_pool_queue
from .packing import make_packs

log = logging.getLogger(__name__)

#: The task that trains a pack (its one argument: a list of trial ids).
PACK_TASK = "tasks.train_pack"
#: The message header naming the store a pack's trials are in (:func:`.liveness.store_label`): a
#: worker on another store leaves the message on the queue instead of consuming it.
STORE_HEADER = "dnnframe_store"
RETRY_SUFFIX = ".retry"
# Publishing to a down broker fails after this many tries (about a second and a half).
_SEND_POLICY = {"max_retries": 2, "interval_start": 0.2, "interval_step": 0.5, "interval_max": 1.0}


def retry_queue(queue: str) -> str:
    """The queue that trials of ``queue`` put back to work are sent to."""
    return queue if queue.endswith(RETRY_SUFFIX) else queue + RETRY_SUFFIX


def with_retry_queues(queues: Iterable[str]) -> list[str]:
    """``queues`` and the retry queue of each (what a worker consumes)."""
    names = list(dict.fromkeys(queues))
    return names + [q for q in dict.fromkeys(map(retry_queue, names)) if q not in names]


def repack(store: ResultStore, trial_ids: list[str], workers: int | None = None) -> list[list[str]]:
    """The trials of ``trial_ids`` still QUEUED, in packs of trials that share a graph, sized
    for ``workers`` worker processes (default ``$DNNFRAME_WORKERS``, else the cores here);
    a pack with members that crashed before is split as :func:`split_after_crash` says."""
    trials = {
        t.id: t
        for t in store.get_trials(list(trial_ids), fields=["config"])
        if t.state is TrialState.QUEUED
    }
    if not trials:
        return []
    current = settings.get()
    packs = make_packs(
        list(trials),
        {t.id: t.config for t in trials.values()},
        current.pack_size,
        workers or current.worker_count,
    )
    return [
        piece
        for pack in packs
        for piece in split_after_crash(
            pack, max(trials[t].attempts for t in pack), current.max_attempts
        )
    ]


def crash_piece_size(attempts: int, max_attempts: int) -> int | None:
    """The most members that crashed before (``attempts`` claims at most) one message may
    run together: any number after one crash (None), then pieces small enough to reach
    single trials with the claims left (a single trial when one claim is left)."""
    left = max_attempts - attempts
    if left <= 1:
        return 1
    return None if attempts <= 1 else 2 ** (left - 1)


def split_after_crash(trial_ids: list[str], attempts: int, max_attempts: int) -> list[list[str]]:
    """How a pack whose worker process died is sent again: whole after its first crash (a
    lost host, most likely), in halves or smaller pieces after a later one
    (:func:`crash_piece_size`), so that a trial that kills every process it runs in ends
    FAILED alone at the delivery cap while its companions complete. ``attempts`` is the
    most claims any member has had; each crash costs every member one."""
    ids = list(trial_ids)
    if not ids:
        return []
    size = crash_piece_size(attempts, max_attempts) or len(ids)
    if attempts >= 2:
        size = min(size, math.ceil(len(ids) / 2))
    return [ids[i : i + size] for i in range(0, len(ids), size)]


def lost_packs(store: ResultStore, owners: dict[str, str | None]) -> list[list[str]]:
    """Packs for trials put back to work after their worker died (``{trial_id: owner}``):
    the members a process trained together go out together (:func:`split_after_crash`);
    those no longer QUEUED are left out."""
    by_owner: dict[str, list[str]] = {}
    for tid, owner in owners.items():
        by_owner.setdefault(owner or "", []).append(tid)
    cap = settings.get().max_attempts
    packs: list[list[str]] = []
    for ids in by_owner.values():
        queued = [t for t in store.get_trials(ids, fields=()) if t.state is TrialState.QUEUED]
        if queued:
            packs += split_after_crash([t.id for t in queued], max(t.attempts for t in queued), cap)
    return packs


def send(celery_app: Celery, by_queue: dict[str, list[list[str]]]) -> None:
    """Publish each queue's packs, naming this process's store; raises the broker's error
    after a short retry."""
    headers = {STORE_HEADER: liveness.store_label()}
    with celery_app.producer_or_acquire() as producer:
        for queue, packs in by_queue.items():
            for pack in packs:
                celery_app.send_task(
                    PACK_TASK,
                    args=[pack],
                    queue=queue,
                    producer=producer,
                    headers=headers,
                    retry=True,
                    retry_policy=_SEND_POLICY,
                )


def send_or_hold(
    store: ResultStore, celery_app: Celery, by_queue: dict[str, list[list[str]]]
) -> bool:
    """Publish the packs; if the broker cannot take them, hold their trials in the store
    (sent later by :func:`send_held`). Returns True if they were published."""
    try:
        send(celery_app, by_queue)
        return True
    except Exception as exc:  # noqa: BLE001 - any broker failure: keep the trials, send later
        held = [(tid, queue) for queue, packs in by_queue.items() for p in packs for tid in p]
        store.hold_dispatch(held)
        log.warning(
            "broker unavailable (%s); %d trial(s) held in the store until it is back",
            exc,
            len(held),
        )
        return False


def send_held(store: ResultStore, celery_app: Celery, limit: int = 500) -> int:
    """Send the trials held during a broker outage (those still QUEUED) to their queues.

    Returns how many trials were sent; 0 when none were held or the broker is still down
    (they are held again then).
    """
    sent = 0
    while items := store.take_dispatch(limit=limit):
        # trials handed to a server's local pool are its driver service's, not a queue's
        pool = [item for item in items if is_pool_queue(item[1])]
        if pool:
            store.hold_dispatch(pool)
        by_queue: dict[str, list[str]] = {}
        for tid, queue in items:
            if not is_pool_queue(queue):
                by_queue.setdefault(queue, []).append(tid)
        if not by_queue:
            break
        try:
            # sized for the processes consuming the queue now, as a submit's are
            packs = {
                queue: repack(
                    store,
                    ids,
                    liveness.worker_processes(store, queue.removesuffix(RETRY_SUFFIX), None),
                )
                for queue, ids in by_queue.items()
            }
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
