"""Handing trials to the one local pool of a server, through the store.

Without a broker, a server's web processes (gunicorn's workers) do not each start a process
pool: :class:`HandoffExecutor` only leaves the submitted trials in the store's dispatch
list under :data:`LOCAL_POOL_QUEUE`, and the server's driver service
(:class:`dnnframe.search.service.DriverService`, ``dnnframe drive``), which owns the one
pool, takes them with :func:`take_handed` and trains them. Taking is atomic per trial, so
several driver services on one store (one per host) share the work and none runs a trial
twice; the store's claim is the last word anyway.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..exceptions import NotFoundError, SpecError
from ..spec import parse_spec
from ..states import TrialState
from ..store.base import ResultStore
from .base import Executor
from .packing import compile_key, make_packs, resolve_pack_size

#: The dispatch list name of trials waiting for a server's local pool (never a Celery queue).
LOCAL_POOL_QUEUE = "dnnframe.local-pool"


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
        items = [(tid, LOCAL_POOL_QUEUE) for pack in packs for tid in pack]
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
    while batch := store.list_trials(state=TrialState.QUEUED, limit=page, offset=offset,
                                     fields=()):
        store.hold_dispatch([(t.id, LOCAL_POOL_QUEUE) for t in batch])
        handed += len(batch)
        offset += page
    return handed


def take_handed(store: ResultStore, executor: Executor, limit: int = 500) -> int:
    """Take the trials handed to a local pool and submit them to ``executor`` (the pool),
    in packs sized for it with each experiment's pack size; returns how many were submitted.

    Entries for other queues (a broker's, held while it was down) are put back untouched.
    """
    submitted = 0
    while items := store.take_dispatch(limit=limit):
        mine = [tid for tid, queue in items if queue == LOCAL_POOL_QUEUE]
        others = [item for item in items if item[1] != LOCAL_POOL_QUEUE]
        try:
            packs = _packs(store, mine, executor.parallelism)
            if packs:
                configs = {t.id: t.config for t in store.get_trials(
                    [p[0] for p in packs], fields=["config"])}
                executor.submit(packs, compile_keys=[compile_key(configs[p[0]], len(p)) for p in packs])
        except Exception:
            store.hold_dispatch([(tid, LOCAL_POOL_QUEUE) for tid in mine])
            raise
        finally:
            if others:
                store.hold_dispatch(others)
        submitted += sum(len(p) for p in packs)
        if len(items) < limit or not mine:
            break
    return submitted


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
        spec = parse_spec(store.get_experiment(experiment_id).spec,
                          source=f"experiment {experiment_id}")
    except (NotFoundError, SpecError):
        spec = None  # deleted meanwhile, or stored by another version: size them as usual
    return resolve_pack_size(spec)
