"""Whether a worker the store knows of is alive.

Workers record themselves (``register_worker``) when they start, take and end a pack, and
when they stop cleanly (``info["stopped"]``); a killed one just stops writing. So: a worker
that said it stopped is not alive; on this host (same host name, same pid namespace) its
process must exist; elsewhere it must have written within the heartbeat timeout, be one of
the processes its Celery node listed at a beat that fresh, or be running a trial whose
heartbeat is that fresh. An idle worker on another host that nothing vouches for that
long cannot be told from a dead one and counts as not alive.
"""

from __future__ import annotations

import socket
import time
from dataclasses import asdict
from typing import Any

from . import settings
from .exceptions import NotFoundError
from .owners import pid_is_dead
from .store.base import ResultStore, TrialState
from .store.records import WorkerRecord


def is_alive(store: ResultStore, worker: WorkerRecord, now: float | None = None,
             host: str | None = None) -> bool:
    """Whether ``worker`` is alive (see the module docstring); ``now`` in Unix seconds and
    ``host`` (this host's name) are parameters for tests."""
    if worker.info.get("stopped"):
        return False
    if worker.host == (host or socket.gethostname()) and worker.pid:
        return not pid_is_dead(worker.pid)
    now = time.time() if now is None else now
    fresh = now - settings.get().heartbeat_timeout
    if worker.last_seen >= fresh:
        return True
    from .executors.liveness import node_vouches_for  # the Celery side: only then

    if node_vouches_for(store, worker, now):
        return True
    if not worker.current_trial:
        return False
    try:
        trial = store.get_trial(worker.current_trial)
    except NotFoundError:
        return False
    return (trial.state is TrialState.RUNNING and trial.worker == worker.name
            and (trial.heartbeat_at or 0.0) >= fresh)


def workers_with_status(store: ResultStore) -> list[dict[str, Any]]:
    """Every worker the store knows of as a dict with ``alive``, the live ones first."""
    rows = [{**asdict(w), "alive": is_alive(store, w)} for w in store.list_workers()]
    return sorted(rows, key=lambda r: not r["alive"])
