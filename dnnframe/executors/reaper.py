"""The reaper: put trials whose worker vanished back to work.

A RUNNING trial's worker refreshes its heartbeat, and each node registers itself every few
seconds (:mod:`.liveness`); when a whole worker or machine dies both go stale, and the
broker's redelivery of its message cannot run the trials (the claim refuses a RUNNING
trial). So the reaper releases the trials of nodes silent for the node timeout (30 s by
default) and requeues trials whose own heartbeat is older than the heartbeat timeout
(nodes that never registered), each atomically (with several workers each trial is put
back by exactly one), and publishes them again, the members of a lost pack together, to
the retry queue of the queue their dead owner consumed, so they run ahead of the trials
still waiting (see :mod:`.dispatch`). Duplicated messages are harmless: the claim runs a
trial once, and its ``attempts`` counter caps a trial that keeps killing its workers.

It also, every second, releases the trials of its own node's pool processes that died (a
pid is meaningful only on its own node), wherever the broker redelivers their message;
sends trials held in the store during a broker outage; and judges heartbeats only as of a
moment when the store had been taking its writes for a whole timeout (see
:class:`_StallGuard`), never from a stall of the store or of itself.

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
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from celery import Celery
from kombu.exceptions import ChannelError, OperationalError

from .. import settings
from ..store import default_store_url, open_store
from ..store.base import ResultStore, TrialState
from . import liveness
from .celery import QUEUES, create_app
from .dispatch import (
    RETRY_SUFFIX,
    lost_packs,
    repack,
    retry_queue,
    send_held,
    send_or_hold,
    with_retry_queues,
)

if TYPE_CHECKING:
    from celery.worker import WorkController

log = logging.getLogger(__name__)

_process: multiprocessing.process.BaseProcess | None = None  # this worker's reaper
# How often a reaper looks for trials of its own node's dead pool processes (a cheap read).
_OWN_NODE_CHECK_S = 1.0


class _StallGuard:
    """When this reaper may judge other workers' heartbeats, and as of what time.

    Heartbeats (of trials, and of nodes) are judged only as of a moment before which the
    store took this reaper's writes, with no gap longer than ``max_gap_s``, for a whole
    timeout: when the store stalls (a long lock) or this process does (SIGSTOP),
    heartbeats could not be written either, so every worker first gets a full timeout of
    working store to beat again. A stall shorter than ``max_gap_s`` may go unseen, so it
    must be well under each timeout minus the interval of the heartbeats it judges.
    """

    def __init__(self, max_gap_s: float) -> None:
        self.max_gap_s = max_gap_s
        self.last_write: float | None = None  # monotonic end of the last write that succeeded
        self.working_since = 0.0  # monotonic start of the current run of prompt writes

    def probe(self, write: Callable[[], object]) -> tuple[float, float]:
        """Run ``write`` (a store write; its errors propagate); return the wall-clock time
        to judge heartbeats as of, and for how many seconds before it the store had been
        working: judge a heartbeat timeout only when that is at least the timeout."""
        as_of, started = time.time(), time.monotonic()  # wall first: a stall between errs early
        write()
        ended = time.monotonic()
        gap = ended - (started if self.last_write is None else self.last_write)
        if gap > self.max_gap_s:
            log.warning(
                "reaper: no store write for %.1fs; not judging heartbeats until the "
                "store has worked for a timeout (they could not be written either)",
                gap,
            )
        if gap > self.max_gap_s or self.last_write is None:  # a first write starts the count
            self.working_since = ended
        self.last_write = ended
        return as_of, max(0.0, started - self.working_since)


def _send_back(
    store: ResultStore,
    celery_app: Celery,
    owners: Mapping[str, str | None],
    default_queue: str,
    why: Callable[[str], str],
) -> list[tuple[str, str]]:
    """Publish trials put back to QUEUED (``{trial_id: owner}``) to the retry queue of the
    queue their owner consumed (held in the store if the broker is down), the members of a
    lost pack together (:func:`.dispatch.lost_packs`), logging ``why(trial_id)`` for each;
    returns ``(trial_id, queue)``."""
    if not owners:
        return []
    queues = {w.name: (w.info or {}).get("queue") for w in store.list_workers()}
    by_queue: dict[str, dict[str, str | None]] = {}
    for trial_id, owner in owners.items():
        queue = retry_queue(queues.get(owner or "") or default_queue)
        by_queue.setdefault(queue, {})[trial_id] = owner
    send_or_hold(store, celery_app, {q: lost_packs(store, o) for q, o in by_queue.items()})
    sent = [(tid, queue) for queue, o in by_queue.items() for tid in o]
    for trial_id, queue in sent:
        log.warning("reaper: trial %s %s; sent to %r", trial_id, why(trial_id), queue)
    return sent


def reap_once(
    store: ResultStore,
    celery_app: Celery,
    timeout_s: float,
    default_queue: str = "default",
    as_of: float | None = None,
) -> list[tuple[str, str]]:
    """Requeue RUNNING trials silent for ``timeout_s`` seconds (as of ``as_of``, default
    now) and publish them again, each lost pack as a pack, to the retry queue of the queue
    their owner consumed.

    Returns ``(trial_id, queue)`` for each trial requeued; a trial whose owner's queue is
    unknown goes to ``default_queue``'s retry queue.
    """
    # Who owned each running trial (requeue_stale clears the owner), to route it back.
    owners = {t.id: t.worker for t in store.running_owners()}
    requeued = store.requeue_stale(timeout_s, as_of=as_of)
    return _send_back(
        store,
        celery_app,
        {tid: owners.get(tid) for tid in requeued},
        default_queue,
        lambda tid: (
            f"had no heartbeat for {timeout_s:.0f}s (worker "
            f"{owners.get(tid)} vanished) and was requeued"
        ),
    )


def reap_dead_nodes(
    store: ResultStore, celery_app: Celery, as_of: float, default_queue: str = "default"
) -> list[tuple[str, str]]:
    """Release the RUNNING trials of nodes that stopped registering (a lost host or
    container: :func:`.liveness.dead_node_trials`) and publish them again, each lost pack
    as a pack. Returns ``(trial_id, queue)`` for each trial released."""
    dead = liveness.dead_node_trials(store, as_of)
    released = {tid: owner for tid, owner in dead.items() if store.release_trial(tid, owner)}
    timeout = liveness.node_timeout()
    return _send_back(
        store,
        celery_app,
        released,
        default_queue,
        lambda tid: (
            f"lost its node (no sign of {released[tid]} for {timeout:.0f}s) and was released"
        ),
    )


def release_own_dead(
    store: ResultStore, celery_app: Celery, node: str, default_queue: str = "default"
) -> list[tuple[str, str]]:
    """Put back to work, at once, the RUNNING trials of this node's pool processes that
    died (SIGKILL, OOM; a pid reused by a later process is not the owner): the broker may
    redeliver their message to another node, whose claim refuses a RUNNING trial, and only
    this node can tell that the owner is gone. Returns ``(trial_id, queue)`` for each
    trial released and re-published."""
    owners = {t.id: t.worker for t in store.running_owners() if liveness.owner_gone_here(t, node)}
    released = {
        tid: owner for tid, owner in owners.items() if owner and store.release_trial(tid, owner)
    }
    for tid, owner in released.items():
        log.warning(
            "trial %s: its owner %s died (no such process on this node); released "
            "it to run again now",
            tid,
            owner,
        )
    return _send_back(
        store,
        celery_app,
        released,
        default_queue,
        lambda tid: f"lost its pool process {owners[tid]} and was released",
    )


class OrphanWatch:
    """Trials QUEUED with no message to run them (a message lost with a broker's data, a
    submitter that died between storing and publishing): sent again.

    A trial counts as orphaned when, at two passes in a row, it was QUEUED and unchanged
    and no queue that a live node consumes (nor ``default``/``gpu``, nor their retry
    queues) held a message ready: its message, if any, would have been taken by then. A
    message of a queue nobody consumes or watches is not seen, so its trials may be sent
    to this node's retry queue too; a duplicate is harmless (the claim runs a trial once).
    """

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}  # trial id -> seq, at the last pass with empty queues

    def check(self, store: ResultStore, celery_app: Celery, default_queue: str) -> list[str]:
        """One pass; returns the trial ids sent again."""
        names = set(QUEUES) | {default_queue}
        for node in liveness.live_nodes(store):
            names.update((node.info or {}).get("queues") or [])
        if any(_ready(celery_app, q) for q in with_retry_queues(sorted(names))):
            self.seen = {}
            return []
        queued = {t.id: t.seq for t in store.list_trials(state=TrialState.QUEUED, fields=())}
        orphans = [tid for tid, seq in queued.items() if self.seen.get(tid) == seq]
        self.seen = {tid: seq for tid, seq in queued.items() if tid not in orphans}
        if not orphans:
            return []
        target = retry_queue(default_queue)
        workers = liveness.worker_processes(store, default_queue, None)
        send_or_hold(store, celery_app, {target: repack(store, orphans, workers)})
        log.warning(
            "reaper: %d trial(s) QUEUED with no message on the broker (%s); sent again to %r",
            len(orphans),
            ", ".join(orphans[:5]) + (", ..." if len(orphans) > 5 else ""),
            target,
        )
        return orphans


def _ready(celery_app: Celery, queue: str) -> int:
    """Messages ready in ``queue`` (0 when it does not exist)."""
    with celery_app.connection_for_write() as conn:
        try:
            return conn.channel().queue_declare(queue, passive=True).message_count
        except ChannelError:
            return 0


def _loop(
    celery_app: Celery, hostname: str, queues: list[str], parent_pid: int, concurrency: int | None
) -> None:
    timeout = settings.get().heartbeat_timeout
    node_timeout = liveness.node_timeout()
    beat = liveness.node_beat_interval()
    interval = max(0.25, min(timeout / 4, 30.0))
    default_queue = queues[0] if queues else "default"
    tick = min(_OWN_NODE_CHECK_S, beat)
    # Writes (this node's registration) come every beat; a longer gap is taken for a stall.
    # Half the node timeout leaves nodes (beating every sixth of it) time to beat after a
    # stall it cannot see.
    guard = _StallGuard(max_gap_s=max(node_timeout / 2, beat + tick))
    store = None
    orphans = OrphanWatch()
    # a broker outage is expected (the worker itself logs it in one line), as is a lost
    # connection: so here too
    with celery_app.connection_for_write() as conn:
        broker_down = (OperationalError, *conn.connection_errors)
    next_beat = time.monotonic()  # register at once: submitters size packs from it
    next_judge = time.monotonic() + interval
    next_orphan_check = time.monotonic() + node_timeout
    while True:
        if os.getppid() != parent_pid:
            break  # the worker is gone (even a SIGKILLed one): so is its reaper
        try:
            if store is None:
                store = open_store(default_store_url())
            if time.monotonic() >= next_beat:
                next_beat = time.monotonic() + beat

                def probe(s: ResultStore = store) -> None:
                    # a write, so it waits behind whatever blocks the workers' heartbeats
                    liveness.register_node(s, hostname, parent_pid, queues, concurrency)

                as_of, working_s = guard.probe(probe)
                if working_s >= node_timeout:
                    reap_dead_nodes(store, celery_app, as_of, default_queue)
                if time.monotonic() >= next_judge:
                    next_judge = time.monotonic() + interval
                    if working_s >= timeout:
                        reap_once(store, celery_app, timeout, default_queue, as_of)
                    send_held(store, celery_app)  # while the broker is down, this raises
                if time.monotonic() >= next_orphan_check:
                    next_orphan_check = time.monotonic() + node_timeout
                    orphans.check(store, celery_app, default_queue)
            release_own_dead(store, celery_app, hostname, default_queue)
        except broker_down as exc:  # one line: no traceback tells more about a lost connection
            log.warning(
                "reaper: pass failed, a connection is down (%s: %s); retrying in %.1fs",
                type(exc).__name__,
                " ".join(str(exc).split()),
                tick,
            )
        except Exception:  # keep reaping through store hiccups
            log.warning("reaper: pass failed; retrying in %.1fs", tick, exc_info=True)
        time.sleep(tick)
    if store is not None:
        store.close()


def _process_main(
    broker_url: str, hostname: str, queues: list[str], parent_pid: int, concurrency: int | None
) -> None:
    logging.basicConfig(
        level=logging.INFO, format="[%(asctime)s: %(levelname)s/reaper] %(message)s"
    )
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the worker's to handle
    _loop(create_app(broker_url), hostname, queues, parent_pid, concurrency)


def consume_retry_queues(sender: object = None, *, instance: WorkController, **_: object) -> None:
    """``celeryd_after_setup`` handler: the worker consumes the retry queue of every queue
    it consumes, so trials put back to work reach it (see :mod:`.dispatch`)."""
    queues = instance.app.amqp.queues
    for name in with_retry_queues(queues.consume_from or queues):
        queues.select_add(name)


def start_reaper(celery_app: Celery, hostname: str, concurrency: int | None = None) -> None:
    """Start this worker's reaper process (idempotent); it ends when the worker does. It
    registers the node (``concurrency`` pool processes) so submitters size packs for it."""
    global _process
    if _process is not None and _process.is_alive():
        return
    queues: list[str] = []
    try:
        queues = sorted(
            q
            for q in (celery_app.amqp.queues.consume_from or celery_app.amqp.queues)
            if not q.endswith(RETRY_SUFFIX)
        )
    except Exception:  # no queue information: requeued trials go to "default"
        pass
    broker = celery_app.connection_for_write().as_uri(include_password=True)
    ctx = multiprocessing.get_context("spawn")
    _process = ctx.Process(
        target=_process_main,
        args=(broker, hostname, queues, os.getpid(), concurrency),
        name="dnnframe-reaper",
        daemon=True,
    )
    _process.start()


def stop_reaper() -> None:
    """Stop this worker's reaper process (worker shutdown)."""
    global _process
    if _process is not None and _process.is_alive():
        _process.terminate()
        _process.join(timeout=5)
    _process = None
