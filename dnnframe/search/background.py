"""Model-based search for a long-lived process (the dashboard): one driver thread per
experiment, started when its spec is submitted.

A driver thread lives in the process that received the submission. If that process ends
(a restarted server, a recycled gunicorn worker), the server resumes the drivers of every
unfinished model-based experiment when it starts again (:meth:`DriverThreads.resume`), and
submitting the same spec again does the same for one experiment: a new driver rebuilds the
study from the stored trials and goes on. Two drivers of one experiment in different
processes share the store's count of trials as their budget, so together they stop at
``num_samples`` (give or take the configurations asked at once).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ..exceptions import SpecError
from ..executors.base import Executor
from ..spec import ExperimentSpec, count_trials, parse_spec
from ..spec.models import is_driven
from ..states import count_active
from ..store.base import ResultStore
from ..store.records import ExperimentRecord
from ..submit import SubmitResult
from .driver import SearchDriver

log = logging.getLogger(__name__)


class DriverThreads:
    """Background :class:`SearchDriver` runs, at most one per experiment in this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: dict[str, threading.Thread] = {}

    def start(self, spec: ExperimentSpec, store: ResultStore, executor: Executor,
              pack_size: int | None = None) -> SubmitResult:
        """Store the experiment and start its driver unless one runs here already.

        Returns at once with the experiment and the trials stored so far (the driver adds
        the others as results arrive).
        """
        eid = spec.experiment_id
        existing = [t.id for t in store.list_trials(eid)]
        store.create_experiment(eid, spec.name, spec.to_dict(), count_trials(spec))
        with self._lock:
            running = self._threads.get(eid)
            if running is None or not running.is_alive():
                driver = SearchDriver(spec, store, executor, pack_size=pack_size)
                thread = threading.Thread(target=self._run, args=(driver,), daemon=True,
                                          name=f"dnnframe-driver-{eid}")
                self._threads[eid] = thread
                thread.start()
        return SubmitResult(store.get_experiment(eid), existing, [])

    def resume(self, store: ResultStore, executor: Callable[[], Executor]) -> list[str]:
        """Start a driver for every stored model-based experiment that is unfinished (fewer
        than ``num_samples`` trials, or some not finished) and not cancelled; returns their
        ids. ``executor`` is called only when there is one to resume."""
        ids = []
        for spec in unfinished_driven(store):
            self.start(spec, store, executor())
            ids.append(spec.experiment_id)
            log.info("resumed the search driver of experiment %s", spec.experiment_id)
        return ids

    def join(self, experiment_id: str, timeout: float | None = None) -> bool:
        """Wait for an experiment's driver; True when none runs (any more)."""
        with self._lock:
            thread = self._threads.get(experiment_id)
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

    @staticmethod
    def _run(driver: SearchDriver) -> None:
        try:
            driver.run()
        except Exception:  # noqa: BLE001 - a thread has no caller to raise to: say so loudly
            log.exception("the search driver of experiment %s stopped; restart the server or "
                          "submit the spec again to resume it", driver.experiment_id)


def unfinished_driven(store: ResultStore, page: int = 100) -> list[ExperimentSpec]:
    """The specs of stored tpe/cmaes experiments whose driver has work left."""
    out, offset = [], 0
    while True:
        batch = store.list_experiments(limit=page, offset=offset)
        out += [s for s in (_driven_spec(e) for e in batch) if s is not None]
        if len(batch) < page:
            return out
        offset += page


def _driven_spec(exp: ExperimentRecord) -> ExperimentSpec | None:
    if exp.cancel_requested:
        return None
    try:
        spec = parse_spec(exp.spec, source=f"experiment {exp.id}")
    except SpecError:
        # a spec stored by another version of dnnframe: nothing this server can drive
        log.warning("experiment %s: its stored spec no longer validates; its search is not "
                    "resumed", exp.id, exc_info=True)
        return None
    if not is_driven(spec) or spec.experiment_id != exp.id:
        return None
    unfinished = count_active(exp.counts)
    return spec if unfinished or sum(exp.counts.values()) < spec.search.num_samples else None


DRIVERS = DriverThreads()
"""The process's driver threads (the dashboard submits tpe/cmaes specs here)."""
