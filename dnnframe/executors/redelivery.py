"""What a pack message does with members that an earlier delivery left behind.

RabbitMQ redelivers a message when the consumer that held it lost its channel: its worker
process or its whole node died, or the broker restarted. The members of such a pack may
still be RUNNING under their first owner. :func:`take_back` finds out which of them can
run here, in this delivery (so Flower shows the re-run under the message's own task id,
``redelivered: True``):

- an owner on this node whose process is gone (or whose pid a later process reused) is
  released at once;
- an owner on another node is watched for a bounded while: when its node stops
  registering, a reaper releases the trials (:mod:`.liveness`) and they run here; when the
  node registers again it is alive (a broker restart) and the members are left to it;
- members put back to QUEUED after a crash run here as one pack after their first crash;
  after a later one only in pieces (:func:`.dispatch.split_after_crash`), published to
  the retry queue by whoever released them, so a poison trial ends FAILED alone; a message
  larger than such a piece (sent before the crash) leaves them to the pieces.
"""

from __future__ import annotations

import logging
import time

from celery import Celery

from .. import settings
from ..owners import split_owner
from ..store.base import ResultStore, TrialState
from ..store.records import TrialRecord
from . import liveness
from .dispatch import crash_piece_size, retry_queue, send_or_hold, split_after_crash

log = logging.getLogger(__name__)

# How often a redelivered pack looks at its members' owners while it waits.
_WATCH_POLL_S = 0.5


def _node_seen(store: ResultStore) -> dict[str, float]:
    return {
        name: node.last_seen
        for name, node in liveness.registered_nodes(store.list_workers()).items()
    }


def _release_gone_here(store: ResultStore, trials: list[TrialRecord], node: str) -> set[str]:
    released = set()
    for t in trials:
        if liveness.owner_gone_here(t, node) and t.worker and store.release_trial(t.id, t.worker):
            log.warning(
                "trial %s: its owner %s died (no such process on this node); released "
                "it to run again now (attempt %d so far)",
                t.id,
                t.worker,
                t.attempts,
            )
            released.add(t.id)
    return released


def _watch_other_nodes(store: ResultStore, trial_ids: list[str], node: str) -> None:
    """Wait while members are RUNNING under another registered node that has not been seen
    since the wait began: until they are released (the node is dead), the node registers
    again (alive), or the node timeout and two beats have passed."""
    deadline = time.monotonic() + liveness.node_timeout() + 2 * liveness.node_beat_interval()
    first_seen = _node_seen(store)
    while True:
        waiting = []
        seen = _node_seen(store)
        for t in store.get_trials(trial_ids, fields=()):
            owner_node, _ = split_owner(t.worker)
            if (
                t.state is TrialState.RUNNING
                and owner_node != node
                and owner_node in seen
                and seen[owner_node] <= first_seen.get(owner_node, 0.0)
            ):
                waiting.append(t)
        if not waiting:
            return
        if time.monotonic() >= deadline:
            log.info(
                "redelivered pack: %d member(s) left to their owners (%s)",
                len(waiting),
                ", ".join(sorted({t.worker or "" for t in waiting})),
            )
            return
        time.sleep(_WATCH_POLL_S)


def take_back(
    store: ResultStore,
    app: Celery,
    trial_ids: list[str],
    node: str,
    queue: str | None,
    redelivered: bool,
) -> list[str]:
    """The members of a pack message this delivery should claim and run (see the module
    docstring). Members whose owner on this node is gone are released first. Members that
    crashed before run here together only if :func:`.dispatch.crash_piece_size` allows
    that many; otherwise they are left to the pieces their releaser sent (this delivery
    sends them when it released them itself)."""
    ids = list(dict.fromkeys(trial_ids))
    first = store.get_trials(ids, fields=())
    released = _release_gone_here(store, first, node)
    if redelivered:
        _watch_other_nodes(store, ids, node)
    # read again only after this delivery changed or waited on them (a lean read of a
    # pack's rows is a few tens of milliseconds on SQLite, which walks each row to its end)
    current = store.get_trials(ids, fields=()) if released or redelivered else first
    crashed = [t for t in current if t.state is TrialState.QUEUED and t.attempts >= 1]
    if not crashed:
        return ids
    attempts = max(t.attempts for t in crashed)
    allowed = crash_piece_size(attempts, settings.get().max_attempts)
    if allowed is None or len(crashed) <= allowed:
        return ids
    mine = [t.id for t in crashed if t.id in released]
    if mine:
        target = retry_queue(queue or "default")
        pieces = split_after_crash(mine, attempts, settings.get().max_attempts)
        send_or_hold(store, app, {target: pieces})
        log.warning(
            "pack: %d member(s) crashed %d times; sent again to %r in %d pieces of up to %d",
            len(mine),
            attempts,
            target,
            len(pieces),
            max(map(len, pieces)),
        )
    skipped = {t.id for t in crashed}
    return [tid for tid in ids if tid not in skipped]
