"""Model-based search for a long-lived process (the dashboard): one driver thread per
experiment, started when its spec is submitted.

A driver thread lives in the process that received the submission. If that process ends
(a restarted server, a recycled gunicorn worker), submitting the same spec again starts a
new driver, which rebuilds the study from the stored trials and goes on. Two drivers of one
experiment in different processes share the store's count of trials as their budget, so
together they stop at ``num_samples`` (give or take the configurations asked at once).
"""

from __future__ import annotations

import logging
import threading

from ..executors.base import Executor
from ..spec import ExperimentSpec, count_trials
from ..store.base import ResultStore
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
            log.exception("the search driver of experiment %s stopped; submit the spec again "
                          "to resume it", driver.experiment_id)


DRIVERS = DriverThreads()
"""The process's driver threads (the dashboard submits tpe/cmaes specs here)."""
