"""Whether a worker the store knows of is alive.

Workers record themselves (``register_worker``) when they start, take and end a pack, and
when they stop cleanly (``info["stopped"]``); a killed one just stops writing. So: a worker
that said it stopped is not alive; on this host (same host name, same pid namespace) its
process must exist. Elsewhere, a Celery node and its processes are judged by the node's
beat, by the rule and the timeout by which the reaper releases a dead node's trials
(:func:`dnnframe.executors.liveness.node_says_alive`): a node silent past the node timeout (30 s by
default) is dead, and so is every process of it, whatever they wrote last. A worker whose
node never registered (``dnnframe run`` elsewhere, a worker of an earlier release) must
have written within the heartbeat timeout or be running a trial whose heartbeat is that
fresh; an idle one that nothing vouches for that long cannot be told from a dead one and
counts as not alive.
"""

from __future__ import annotations

import socket
import time
from dataclasses import asdict
from typing import Any

from dnnframe import settings
from dnnframe.exceptions import NotFoundError
from dnnframe.executors import liveness
from dnnframe.owners import pid_is_dead
from dnnframe.store.base import ResultStore, TrialState
from dnnframe.store.records import WorkerRecord


def is_alive(
    store: ResultStore,
    worker: WorkerRecord,
    now: float | None = None,
    host: str | None = None,
    nodes: dict[str, WorkerRecord] | None = None,
) -> bool:
    """Whether ``worker`` is alive (see the module docstring); ``now`` in Unix seconds and
    ``host`` (this host's name) are parameters for tests; ``nodes``
    (:func:`dnnframe.executors.liveness.registered_nodes` of the store's worker list) saves a
    read when many workers are judged."""
    if worker.info.get("stopped"):
        return False
    if worker.host == (host or socket.gethostname()) and worker.pid:
        return not pid_is_dead(worker.pid)
    now = time.time() if now is None else now
    if nodes is None:
        nodes = liveness.registered_nodes(store.list_workers())
    node = liveness.node_of(worker, nodes)
    if node is not None:
        return liveness.node_says_alive(node, worker, now)
    fresh = now - settings.get().heartbeat_timeout
    if worker.last_seen >= fresh:
        return True
    if not worker.current_trial:
        return False
    try:
        trial = store.get_trial(worker.current_trial)
    except NotFoundError:
        return False
    return (
        trial.state is TrialState.RUNNING
        and trial.worker == worker.name
        and (trial.heartbeat_at or 0.0) >= fresh
    )


def workers_with_status(store: ResultStore) -> list[dict[str, Any]]:
    """Every worker the store knows of as a dict with ``alive``, the live ones first."""
    workers = store.list_workers()
    nodes = liveness.registered_nodes(workers)
    rows = [{**asdict(w), "alive": is_alive(store, w, nodes=nodes)} for w in workers]
    return sorted(rows, key=lambda r: not r["alive"])
