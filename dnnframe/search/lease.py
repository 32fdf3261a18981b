"""The store lease a search driver holds while it runs, so that one experiment has one
driver at a time across processes and hosts (the dashboard's driver service, ``dnnframe
run``, ``dnnframe drive`` on several machines).

A :class:`LeaseKeeper` takes the lease and renews it on a thread every third of its time to
live. :attr:`LeaseKeeper.held` turns False the moment a renewal is refused (someone else
took the lease over) and also when no renewal has landed within the time to live (the
store was unreachable: the lease may have expired and been taken), so a driver asking
``held`` before each ask never asks after another driver could have started.
"""

from __future__ import annotations

import logging
import threading
import time

from .. import settings
from ..exceptions import DnnframeError
from ..owners import default_worker_name
from ..store.base import ResultStore

log = logging.getLogger(__name__)

DRIVER_LEASE_PREFIX = "driver:"


def driver_lease_name(experiment_id: str) -> str:
    """The lease that whoever drives ``experiment_id`` holds."""
    return DRIVER_LEASE_PREFIX + experiment_id


class LeaseKeeper:
    """Holds one store lease and keeps it renewed (see the module docstring).

    Args:
        store: where the lease lives.
        name: the lease's name (:func:`driver_lease_name` for a driver).
        owner: who holds it (default ``host:pid`` of this process).
        ttl_s: how long the lease outlives its last renewal (default
            ``$DNNFRAME_DRIVER_LEASE_S``, 30 s); a dead holder's lease is free after that.
    """

    def __init__(
        self, store: ResultStore, name: str, owner: str | None = None, ttl_s: float | None = None
    ):
        self.store, self.name = store, name
        self.owner = owner or default_worker_name()
        self.ttl_s = float(ttl_s if ttl_s is not None else settings.get().driver_lease_s)
        self._valid_until = 0.0  # monotonic: the lease is surely ours until then
        self._lost = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def held(self) -> bool:
        """Whether this process surely holds the lease now."""
        return not self._lost.is_set() and time.monotonic() < self._valid_until

    def acquire(self) -> bool:
        """Take the lease (or renew it) and start renewing it; False when another owner
        holds it (nothing is started then)."""
        if not self._renew():
            return False
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._keep, daemon=True, name=f"dnnframe-lease-{self.name}"
            )
            self._thread.start()
        return True

    def release(self) -> None:
        """Stop renewing and give the lease up (if this process still holds it)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._lost.set()
        try:
            self.store.release_lease(self.name, self.owner)
        except DnnframeError as exc:  # it expires by itself
            log.warning(
                "lease %s: could not release it (%s); it expires within %.0f s",
                self.name,
                exc,
                self.ttl_s,
            )

    def _renew(self) -> bool:
        started = time.monotonic()  # the store's expiry is counted from later than this
        if not self.store.acquire_lease(self.name, self.owner, self.ttl_s):
            self._lost.set()
            return False
        self._valid_until = started + self.ttl_s
        return True

    def _keep(self) -> None:
        while not self._stop.wait(self.ttl_s / 3):
            try:
                if not self._renew():
                    log.warning(
                        "lease %s: lost to another owner (%s); this process stops driving",
                        self.name,
                        self._holder(),
                    )
                    return
            except DnnframeError as exc:
                # the store did not answer: keep trying while the lease may still be ours
                log.warning(
                    "lease %s: renewal failed (%s); held for %.1f s more at most",
                    self.name,
                    exc,
                    max(0.0, self._valid_until - time.monotonic()),
                )

    def _holder(self) -> str:
        try:
            held = self.store.get_lease(self.name)
        except DnnframeError:
            return "unknown"
        return held.owner if held is not None else "nobody now"
