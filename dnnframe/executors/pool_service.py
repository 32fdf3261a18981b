"""A server's one local pool as a service, and the loop that runs a server's services.

Without a broker, a server's web processes start no pool: they hand the trials of every
submission to the store (:mod:`.handoff`), and :class:`LocalPoolService` takes them on each
pass and trains them in the one pool it owns. It also owns the recovery of trials whose
worker stopped (:class:`~dnnframe.recovery.StoreRecovery`): each pass puts them back and
hands them to its pool. ``dnnframe drive`` (which ``dnnframe serve`` starts) runs it beside
the search drivers (:class:`dnnframe.search.service.DriverService`), whose trials go to the
same pool; with a broker there is no such service and the Celery workers' reapers recover.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

from ..exceptions import DnnframeError
from ..recovery import StoreRecovery
from ..store.base import ResultStore
from .base import Executor
from .handoff import LOCAL_POOL_QUEUE, hand_all_queued, take_handed

log = logging.getLogger(__name__)


class Service(Protocol):
    """What :func:`serve` runs: one pass at a time, then a stop."""

    def poll(self) -> object: ...

    def shutdown(self) -> None: ...


class LocalPoolService:
    """The pool of a server without a broker (see the module docstring).

    Args:
        store: the store the web processes hand trials to.
        executor: makes the pool (called once, at the first pass or the first
            :meth:`executor` call: a search driver may need it first).
        owner: the recovery lease's owner (default ``host:pid``).
        ttl_s: the recovery lease's time to live (default ``$DNNFRAME_DRIVER_LEASE_S``).
    """

    def __init__(
        self,
        store: ResultStore,
        executor: Callable[[], Executor],
        owner: str | None = None,
        ttl_s: float | None = None,
    ):
        self.store, self._make_executor = store, executor
        self.recovery = StoreRecovery(store, owner, ttl_s)
        self._executor: Executor | None = None
        self._lock = threading.Lock()  # search drivers ask for the pool on threads of their own
        self._handed_queued = False

    @property
    def owner(self) -> str:
        return self.recovery.owner

    def executor(self) -> Executor:
        """The pool, made at the first call."""
        with self._lock:
            if self._executor is None:
                self._executor = self._make_executor()
            return self._executor

    def poll(self) -> int:
        """One pass: recover abandoned trials, then train every trial handed to the pool;
        returns how many trials were given to the pool."""
        recovered = self.recovery.poll()
        if not self._handed_queued:
            # what a previous service took but never trained (it died with its pool); the
            # trials recovered now are QUEUED, so they are among them
            hand_all_queued(self.store)
            self._handed_queued = True
        elif recovered:
            self.store.hold_dispatch([(tid, LOCAL_POOL_QUEUE) for tid in recovered])
        return take_handed(self.store, self.executor())

    def shutdown(self) -> None:
        """Give the recovery lease up and stop the pool (its running trials are recorded
        CANCELLED, as a stopped pool's are; a next service trains them again)."""
        self.recovery.release()
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False)


def serve(
    services: Sequence[Service], stop: threading.Event, poll_s: float, parent_pid: int | None = None
) -> None:
    """Poll each of ``services`` every ``poll_s`` until ``stop`` is set (or, with
    ``parent_pid``, until that process, the one that started this one, is gone), then shut
    them down, the last first (a search driver stops asking before its pool stops)."""
    try:
        while not stop.is_set():
            if parent_pid is not None and os.getppid() != parent_pid:
                log.warning("the process that started this service ended; stopping")
                break
            for service in services:
                try:
                    service.poll()
                except DnnframeError as exc:  # the store is down: the next pass tries again
                    log.error("%s: cannot read the store: %s", type(service).__name__, exc)
            stop.wait(poll_s)
    finally:
        for service in reversed(services):
            service.shutdown()
