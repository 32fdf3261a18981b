"""Which Celery workers are alive, how many worker processes consume a queue, and which
store a worker serves.

Every worker node (``celery -A tasks worker``) has a reaper process that registers the node
in the store every :func:`node_beat_interval` seconds: its queues and its concurrency. That
row is the node's heartbeat. It is written by a process of its own, so a pool process that
holds the GIL in a long C call never makes its node look dead, and it stops within a second
of the node's death (the reaper leaves when its parent does). A RUNNING trial is judged
abandoned across hosts when both its own heartbeat and its node's are older than
:func:`node_timeout` (30 s by default): a dead host's trials run again within a minute,
without waiting for the 300 s trial heartbeat timeout that protects trials of nodes that
never registered (workers of earlier releases, ``dnnframe run``).

On its own node a trial's owner ``"<node>:<pid>"`` is judged by its pid: gone, a zombie,
or a process that started after the trial was claimed (a pid reused after a container
restart is not the owner).

A node silent past the node timeout is dead (:func:`node_is_silent`): the reaper releases
its trials by that rule, and the worker list (:mod:`dashboard.worker_status`) shows the node
and its processes not alive by the same rule (:func:`node_says_alive`), at the same moment.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable

from .. import settings
from ..owners import split_owner
from ..store import default_store_url
from ..store.base import ResultStore, TrialState
from ..store.records import TrialRecord, WorkerRecord
from ..urls import redact

#: How often a node's reaper registers the node (its heartbeat), at most.
NODE_BEAT_S = 5.0
#: A node silent this long (at most; less when the heartbeat timeout is shorter) is dead.
NODE_TIMEOUT_S = 30.0
#: The role of a node's row in the store's worker list (its pool processes are "process").
NODE_ROLE = "node"
# A process that started this long after the claim cannot be the claimer (the claim time
# and the start time come from different clocks of this host: the store's and /proc's).
_START_SLACK_S = 1.0


def store_label(url: str | None = None) -> str:
    """How messages name a store: its URL (default: this process's store), password
    masked, a SQLite file by its absolute path."""
    url = url or default_store_url()
    if url.startswith("sqlite:///"):
        url = "sqlite:///" + os.path.abspath(url[len("sqlite:///") :])
    return redact(url, mask="**")  # as Celery masks the broker URL in its own logs


def node_timeout() -> float:
    """Seconds of silence after which a registered node counts as dead."""
    return min(settings.get().heartbeat_timeout, NODE_TIMEOUT_S)


def node_beat_interval() -> float:
    """How often a node registers itself: a sixth of :func:`node_timeout`, at most 5 s."""
    return max(0.1, min(NODE_BEAT_S, node_timeout() / 6))


def trial_beat_interval() -> float:
    """How often a Celery worker beats for its running trials: a third of
    :func:`node_timeout` (10 s by default), so a live trial is never older than it."""
    return max(0.1, min(settings.get().heartbeat_timeout / 5, node_timeout() / 3))


def register_node(
    store: ResultStore, node: str, pid: int, queues: list[str], concurrency: int | None
) -> None:
    """Write node ``node``'s heartbeat row: host, main pid, queues, pool size and the pids
    of its processes (so an idle pool process on another host can be told alive)."""
    store.register_worker(
        node,
        host=socket.gethostname(),
        pid=pid,
        info={
            "role": NODE_ROLE,
            "queues": queues,
            "concurrency": concurrency,
            "pids": _child_pids(pid),
        },
    )


def _child_pids(pid: int) -> list[int]:
    """This host's processes whose parent is ``pid`` (a node's pool processes); empty where
    there is no /proc."""
    children = []
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return []
    for name in entries:
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as fh:
                if int(fh.read().rpartition(")")[2].split()[1]) == pid:
                    children.append(int(name))
        except (OSError, IndexError, ValueError):
            continue  # it ended meanwhile
    return sorted(children)


def registered_nodes(workers: Iterable[WorkerRecord]) -> dict[str, WorkerRecord]:
    """The node rows among ``workers`` (a store's worker list), by node name."""
    return {w.name: w for w in workers if (w.info or {}).get("role") == NODE_ROLE}


def node_is_silent(node: WorkerRecord, as_of: float) -> bool:
    """Whether registered node ``node`` has not beaten for :func:`node_timeout` as of
    ``as_of`` (wall clock): it is dead, and so is every process of it."""
    return node.last_seen < as_of - node_timeout()


def node_of(worker: WorkerRecord, nodes: dict[str, WorkerRecord]) -> WorkerRecord | None:
    """The registered node ``worker`` is (a node's own row) or is a process of
    (``<node>:<pid>``); None when its node never registered."""
    return nodes.get(worker.name) or nodes.get(split_owner(worker.name)[0])


def node_says_alive(node: WorkerRecord, worker: WorkerRecord, as_of: float) -> bool:
    """Whether ``worker``, ``node`` itself or one of its processes, is alive as of
    ``as_of`` by its node's beat: the node is not silent (:func:`node_is_silent`), and a
    process is its main process, one it listed at that beat (an idle pool process writes
    nothing itself), or one that wrote after that beat (it started since). A pool process
    killed alone is missing from the node's next beat, so it is dead from then on."""
    if node_is_silent(node, as_of):
        return False
    if worker.name == node.name:
        return True
    _, pid = split_owner(worker.name)
    pids = (node.info or {}).get("pids")
    return (
        not pids  # a host without /proc: the node's beat is all there is to go by
        or pid == node.pid
        or pid in pids
        or worker.last_seen > node.last_seen
    )


def live_nodes(store: ResultStore, queue: str | None = None) -> list[WorkerRecord]:
    """Nodes that registered within :func:`node_timeout` (consuming ``queue`` if given),
    freshest first."""
    nodes = [
        w
        for w in store.list_workers(seen_within_s=node_timeout())
        if (w.info or {}).get("role") == NODE_ROLE
        and (queue is None or queue in ((w.info or {}).get("queues") or []))
    ]
    return sorted(nodes, key=lambda w: -w.last_seen)


def worker_processes(store: ResultStore, queue: str, consumers: int | None) -> int | None:
    """How many worker processes consume ``queue``, or None when nothing is known.

    ``consumers`` is what the broker says (one consumer per node; None when it could not be
    asked). The store says how many processes each registered node runs. A consumer the
    store does not know (a worker of an earlier release) counts as one process; a node
    registered but no longer consuming (it died within the timeout) does not count.
    """
    nodes = live_nodes(store, queue)
    if consumers is not None:
        nodes = nodes[:consumers]
    processes = sum(max(1, int((w.info or {}).get("concurrency") or 1)) for w in nodes)
    if consumers is not None:
        processes += max(0, consumers - len(nodes))
    return processes or None


def _process_started_at(pid: int) -> float | None:
    """Wall-clock start of process ``pid`` here; None if unknown (no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            ticks = int(fh.read().rpartition(")")[2].split()[19])
        with open("/proc/uptime", encoding="ascii") as fh:
            uptime = float(fh.read().split()[0])
    except (OSError, IndexError, ValueError):
        return None
    return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")


def owner_process_gone(pid: int, claimed_at: float | None) -> bool:
    """True when process ``pid`` of this host cannot be the one that claimed a trial at
    ``claimed_at``: it does not exist, is a zombie, or started after the claim."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # EPERM: someone's process has that pid; its start time still tells
        pass
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            if fh.read().rpartition(")")[2].split()[0] == "Z":
                return True
    except (OSError, IndexError):
        return False
    started = _process_started_at(pid)
    return claimed_at is not None and started is not None and started > claimed_at + _START_SLACK_S


def owner_gone_here(trial: TrialRecord, node: str) -> bool:
    """True when ``trial`` is RUNNING under a process of ``node`` (this node) that is gone."""
    owner_node, pid = split_owner(trial.worker)
    return (
        trial.state is TrialState.RUNNING
        and owner_node == node
        and pid is not None
        and owner_process_gone(pid, trial.started_at)
    )


def dead_node_trials(
    store: ResultStore, as_of: float, running: Iterable[TrialRecord] | None = None
) -> dict[str, str]:
    """RUNNING trials abandoned by a dead node, as of ``as_of`` (wall clock): their owner's
    node registered once but not within :func:`node_timeout`, and the trial's own heartbeat
    is that old too. Returns ``{trial_id: owner}``."""
    timeout = node_timeout()
    nodes = registered_nodes(store.list_workers())
    if running is None:
        running = store.running_owners()
    dead: dict[str, str] = {}
    for t in running:
        node = nodes.get(split_owner(t.worker)[0])
        if (
            node is not None
            and node_is_silent(node, as_of)
            and (t.heartbeat_at or 0.0) < as_of - timeout
        ):
            dead[t.id] = t.worker or ""
    return dead
