"""Handing trials to the one local pool of a server, through the store.

Without a broker, a server's web processes (gunicorn's workers) do not each start a process
pool: :class:`HandoffExecutor` only leaves the submitted trials in the store's dispatch
list under :data:`LOCAL_POOL_QUEUE`, and the server's driver service
(:class:`dnnframe.search.service.DriverService`, ``dnnframe drive``), which owns the one
pool, takes them with :func:`take_handed` and trains them. Taking is atomic per trial, so
several driver services on one store (one per host) share the work and none runs a trial
twice; the store's claim is the last word anyway.

A submission's packs travel as packs: each entry's queue names the pool, its pack and the
pack's compile key (:func:`pack_queue`), so the service regroups them without reading a
configuration or parsing a spec (the worker's claim is the one read). Entries handed without
a pack (a starting service's :func:`hand_all_queued`, recovered trials) are packed from
their configurations when taken.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence

from ..exceptions import NotFoundError, SpecError
from ..spec import parse_spec
from ..states import TrialState
from ..store.base import ResultStore
from .base import Executor
from .packing import compile_key, make_packs, resolve_pack_size

#: The dispatch list name of trials waiting for a server's local pool (never a Celery queue).
LOCAL_POOL_QUEUE = "dnnframe.local-pool"
_PACK_SEP = "/"


def pack_queue(pack_id: str, compile_key: str) -> str:
    """The dispatch entry's queue for a member of a handed pack: the pool, the pack, its key."""
    return _PACK_SEP.join((LOCAL_POOL_QUEUE, pack_id, compile_key))


def is_pool_queue(queue: str) -> bool:
    """Whether a dispatch entry is for a server's local pool (packed or not), not a broker."""
    return queue == LOCAL_POOL_QUEUE or queue.startswith(LOCAL_POOL_QUEUE + _PACK_SEP)


class HandoffExecutor(Executor):
    """Leaves packs in the store for the driver service's local pool (see the module doc).

    Args:
        store: the store the server uses (its trials are stored QUEUED already).
        workers: the pool's processes, as the service is told (``$DNNFRAME_WORKERS``, else
            the cores): what a submission sizes its packs for.
    """

    def __init__(self, store: ResultStore, workers: int):
        self.store, self.workers = store, workers
        self._submitted: set[str] = set()

    @property
    def parallelism(self) -> int:
        return self.workers

    def submit(self, packs: Sequence[list[str]], compile_keys: Sequence[str] | None = None) -> None:
        keys = list(compile_keys) if compile_keys is not None else [""] * len(packs)
        items = []
        for pack, key in zip(packs, keys, strict=True):
            queue = pack_queue(uuid.uuid4().hex[:12], key)
            items += [(tid, queue) for tid in pack]
        if items:
            self.store.hold_dispatch(items)
            self._submitted.update(tid for tid, _ in items)

    def cancel(self, experiment_id: str) -> int:
        # handed trials the pool has not taken are CANCELLED in the store: its claim skips them
        return self.store.cancel_experiment(experiment_id)

    def wait(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            ids = list(self._submitted)
            left = [t for t in self.store.get_trials(ids, fields=()) if not t.state.is_finished]
            self._submitted = {t.id for t in left}
            if not left:
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.2)

    def shutdown(self, wait: bool = True) -> None:
        if wait:
            self.wait()


def hand_all_queued(store: ResultStore, page: int = 5000) -> int:
    """Hand every QUEUED trial of the store to a local pool; returns how many.

    For a driver service that starts: trials handed to a service that died with its pool
    (taken from the list, never trained) would otherwise wait for a resubmission. A trial
    handed twice, or also queued by a ``dnnframe run`` on the same store, is harmless: the
    store's claim runs it once.
    """
    handed, offset = 0, 0
    while batch := store.list_trials(state=TrialState.QUEUED, limit=page, offset=offset, fields=()):
        store.hold_dispatch([(t.id, LOCAL_POOL_QUEUE) for t in batch])
        handed += len(batch)
        offset += page
    return handed


def take_handed(store: ResultStore, executor: Executor, limit: int = 500) -> int:
    """Take the trials handed to a local pool and submit them to ``executor`` (the pool):
    handed packs as they were packed, unpacked entries in packs sized for it with each
    experiment's pack size; returns how many were submitted. Trials no longer QUEUED
    (cancelled meanwhile) are left out.

    Entries for other queues (a broker's, held while it was down) are put back untouched.
    """
    submitted = 0
    carried: list[tuple[str, str]] = []  # a pack the last take's limit may have cut
    while True:
        items = store.take_dispatch(limit=limit)
        full = len(items) == limit
        others = [item for item in items if not is_pool_queue(item[1])]
        mine, carried = carried + [item for item in items if is_pool_queue(item[1])], []
        if full and mine and mine[-1][1] != LOCAL_POOL_QUEUE:
            # the last pack may go on in the next take: keep it for then, unless it is all
            # there is (a pack larger than a take is trained in parts)
            cut = [item for item in mine if item[1] == mine[-1][1]]
            if len(cut) < len(mine):
                carried, mine = cut, mine[: len(mine) - len(cut)]
        try:
            packs, keys = _regroup(store, mine, executor.parallelism)
            if packs:
                executor.submit(packs, compile_keys=keys)
        except Exception:
            store.hold_dispatch(mine + carried)
            raise
        finally:
            if others:
                store.hold_dispatch(others)
        submitted += sum(len(p) for p in packs)
        if not full or not (mine or carried):
            return submitted


def _regroup(
    store: ResultStore, items: list[tuple[str, str]], workers: int
) -> tuple[list[list[str]], list[str]]:
    """Packs and their compile keys for the pool's entries ``items``: a handed pack's
    still-QUEUED members as one pack, unpacked trials packed by :func:`_packs`."""
    if not items:
        return [], []
    queued = {
        t.id
        for t in store.get_trials([tid for tid, _ in items], fields=())
        if t.state is TrialState.QUEUED
    }
    by_queue: dict[str, list[str]] = {}
    for tid, queue in items:
        if tid in queued:
            by_queue.setdefault(queue, []).append(tid)
    packs: list[list[str]] = []
    keys: list[str] = []
    for queue, ids in by_queue.items():
        if queue == LOCAL_POOL_QUEUE:
            loose = _packs(store, ids, workers)
            configs = (
                {t.id: t.config for t in store.get_trials([p[0] for p in loose], fields=["config"])}
                if loose
                else {}
            )
            packs += loose
            keys += [compile_key(configs[p[0]], len(p)) for p in loose]
        else:
            packs.append(ids)
            keys.append(queue.split(_PACK_SEP, 2)[2])
    return packs, keys


def _packs(store: ResultStore, trial_ids: list[str], workers: int) -> list[list[str]]:
    """The still-QUEUED trials of ``trial_ids`` in packs, grouped by the experiment that
    submitted them last, each with the pack size a submission of it uses."""
    by_experiment: dict[str, dict[str, dict]] = {}
    for t in store.get_trials(trial_ids, fields=["config"]):
        if t.state is TrialState.QUEUED:
            by_experiment.setdefault(t.experiment_ids[-1], {})[t.id] = t.config
    packs: list[list[str]] = []
    for eid, configs in by_experiment.items():
        packs += make_packs(list(configs), configs, _pack_size(store, eid), workers)
    return packs


def _pack_size(store: ResultStore, experiment_id: str) -> int | None:
    """The pack size a submission of the stored experiment uses (:func:`resolve_pack_size`)."""
    try:
        spec = parse_spec(
            store.get_experiment(experiment_id).spec, source=f"experiment {experiment_id}"
        )
    except (NotFoundError, SpecError):
        spec = None  # deleted meanwhile, or stored by another version: size them as usual
    return resolve_pack_size(spec)
