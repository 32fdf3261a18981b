"""The driver service: the long-running process (``dnnframe drive``) that runs the search
drivers of model-based experiments (``search.method: tpe | cmaes``), outside the web tier.

Every ``poll_s`` it looks for stored tpe/cmaes experiments with work left, takes each one's
store lease (``driver:<experiment id>``, see :mod:`dnnframe.search.lease`) and runs its
:class:`SearchDriver` on a thread while a :class:`LeaseKeeper` renews the lease. A driver
whose lease is lost asks nothing more and stops; the service that took the lease over
rebuilds the study from the stored trials and goes on. Any number of services (on one host
or many) may run against one store: each experiment is driven by one of them at a time, and
a killed service's experiments are taken over once its leases expire.

Without a broker the drivers' trials go to the server's one local pool, which
:class:`dnnframe.executors.pool_service.LocalPoolService` owns (it also trains what the web
processes hand it and recovers abandoned trials); ``dnnframe drive`` runs both services in
one loop (:func:`dnnframe.executors.pool_service.serve`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..exceptions import SpecError
from ..executors.base import Executor
from ..executors.pool_service import serve
from ..owners import default_worker_name
from ..spec import ExperimentSpec, count_trials, parse_spec
from ..spec.models import MODEL_BASED_METHODS, is_driven
from ..states import count_active
from ..store.base import ResultStore
from ..store.records import ExperimentRecord, TrialState
from ..submit import SubmitResult, experiment_exists
from .driver import SearchDriver
from .lease import LeaseKeeper, driver_lease_name

log = logging.getLogger(__name__)

# After a driver fails (an error, not a lost lease) its experiment is left alone this long
# before the service tries again, so a persistent error does not spin.
RETRY_AFTER_S = 30.0


def unfinished_driven(store: ResultStore, page: int = 100) -> list[ExperimentSpec]:
    """The specs of stored tpe/cmaes experiments whose driver has work left (fewer than
    ``num_samples`` trials, or some not finished) and that are not cancelled."""
    out, offset = [], 0
    while True:
        batch = store.list_experiments(limit=page, offset=offset)
        out += [s for s in (_driven_spec(e) for e in batch) if s is not None]
        if len(batch) < page:
            return out
        offset += page


def _driven_spec(exp: ExperimentRecord) -> ExperimentSpec | None:
    search = exp.spec.get("search") if isinstance(exp.spec, dict) else None
    if (
        exp.cancel_requested
        or not isinstance(search, dict)
        or search.get("method") not in MODEL_BASED_METHODS
    ):
        return None  # read every second: skip the others without validating their specs
    try:
        spec = parse_spec(exp.spec, source=f"experiment {exp.id}")
    except SpecError:
        # a spec stored by another version of dnnframe: nothing this service can drive
        log.warning(
            "experiment %s: its stored spec no longer validates; it is not driven",
            exp.id,
            exc_info=True,
        )
        return None
    if not is_driven(spec) or spec.experiment_id != exp.id:
        return None
    unfinished = count_active(exp.counts)
    return spec if unfinished or sum(exp.counts.values()) < spec.search.num_samples else None


@dataclass
class _Running:
    thread: threading.Thread
    lease: LeaseKeeper


class DriverService:
    """Runs the drivers of every driven experiment whose lease it can take.

    Args:
        store: the store to watch.
        executor: makes the executor the drivers share (called once, at the first driver).
        owner: the lease owner (default ``host:pid``).
        ttl_s: the leases' time to live (default ``$DNNFRAME_DRIVER_LEASE_S``).
        poll_s: how often the store is read for new or orphaned experiments.
        pack_size: as for :class:`SearchDriver`.
        owns_executor: stop the executor at :meth:`shutdown` (False when it is another
            service's, a :class:`~dnnframe.executors.pool_service.LocalPoolService`'s pool).
    """

    def __init__(
        self,
        store: ResultStore,
        executor: Callable[[], Executor],
        owner: str | None = None,
        ttl_s: float | None = None,
        poll_s: float = 1.0,
        pack_size: int | None = None,
        owns_executor: bool = True,
    ):
        self.store, self._make_executor = store, executor
        self._owns_executor = owns_executor
        self.owner = owner or default_worker_name()
        self.ttl_s, self.poll_s, self.pack_size = ttl_s, poll_s, pack_size
        self._executor: Executor | None = None
        self._executor_lock = threading.Lock()
        self._running: dict[str, _Running] = {}
        self._failed_at: dict[str, float] = {}
        self._stopping = threading.Event()

    @property
    def driving(self) -> list[str]:
        """The experiments this service drives now."""
        return sorted(eid for eid, r in self._running.items() if r.thread.is_alive())

    def poll(self) -> list[str]:
        """One look at the store: start a driver for every driven experiment with work left
        whose lease this service takes; returns the experiments started."""
        for eid in [e for e, r in self._running.items() if not r.thread.is_alive()]:
            self._running.pop(eid).thread.join()
        started = []
        for spec in unfinished_driven(self.store):
            eid = spec.experiment_id
            if eid in self._running or self._stopping.is_set():
                continue
            if time.monotonic() - self._failed_at.get(eid, -RETRY_AFTER_S) < RETRY_AFTER_S:
                continue
            lease = LeaseKeeper(self.store, driver_lease_name(eid), self.owner, self.ttl_s)
            if not lease.acquire():
                continue  # another process drives it
            log.info("experiment %s: took lease %s as %s; driving it", eid, lease.name, self.owner)
            thread = threading.Thread(
                target=self._drive, args=(spec, lease), daemon=True, name=f"dnnframe-driver-{eid}"
            )
            self._running[eid] = _Running(thread, lease)
            thread.start()
            started.append(eid)
        return started

    def serve(self, stop: threading.Event, parent_pid: int | None = None) -> None:
        """Poll until ``stop`` is set (or, with ``parent_pid``, until that process, the one
        that started this one, is gone), then stop every driver and release its lease."""
        serve([self], stop, self.poll_s, parent_pid)

    def shutdown(self) -> None:
        """Stop the drivers (they ask nothing more), release their leases, and stop the
        executor this service made."""
        self._stopping.set()
        for run in list(self._running.values()):
            run.thread.join()
        self._running.clear()
        if self._executor is not None and self._owns_executor:
            self._executor.shutdown(wait=False)
        self._executor = None

    def _executor_now(self) -> Executor:
        with self._executor_lock:  # drivers start on threads of their own
            if self._executor is None:
                self._executor = self._make_executor()
            return self._executor

    def _drive(self, spec: ExperimentSpec, lease: LeaseKeeper) -> None:
        eid = spec.experiment_id
        try:
            driver = SearchDriver(
                spec,
                self.store,
                self._executor_now(),
                pack_size=self.pack_size,
                keep_going=lambda: lease.held and not self._stopping.is_set(),
            )
            result = driver.run()
            if result.stopped and not self._stopping.is_set():
                log.warning(
                    "experiment %s: lost lease %s; stopped driving after %d asks",
                    eid,
                    lease.name,
                    len(result.asked),
                )
            else:
                log.info(
                    "experiment %s: driver done (%d asked, finished=%s, cancelled=%s)",
                    eid,
                    len(result.asked),
                    result.finished,
                    result.cancelled,
                )
        except Exception:  # noqa: BLE001 - a thread has no caller: say so, retry later
            self._failed_at[eid] = time.monotonic()
            log.exception(
                "experiment %s: its search driver failed; retrying in %.0f s", eid, RETRY_AFTER_S
            )
        finally:
            lease.release()


def store_driven(spec: ExperimentSpec, store: ResultStore) -> SubmitResult:
    """Submit a tpe/cmaes spec for a driver service to run: store the experiment (and lift
    an earlier cancel, so a resubmitted cancelled search goes on), start nothing. Returns at
    once with the experiment and the trials stored so far."""
    eid = spec.experiment_id
    created = not experiment_exists(store, eid)
    store.create_experiment(eid, spec.name, spec.to_dict(), count_trials(spec))
    requeued = store.requeue_trials(eid, [TrialState.CANCELLED])
    existing = [t.id for t in store.list_trials(eid, fields=())]
    return SubmitResult(
        store.get_experiment(eid), existing, [], requeued_trial_ids=requeued, created=created
    )
