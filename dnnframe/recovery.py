"""Putting trials whose worker stopped back to work, outside the web tier.

A trial is *abandoned* when it is RUNNING and either its owner was a process of this host
that is gone (a killed ``dnnframe run``, a driver service killed with its pool: a pid means
something only on its own host, so only this host can tell, and need not wait), or its
heartbeat is older than ``$DNNFRAME_HEARTBEAT_TIMEOUT`` (a lost machine). Putting one back
(:meth:`~dnnframe.store.base.ResultStore.release_trial`, atomic on its owner) keeps its
``attempts``, so the delivery cap still holds; :func:`recover_abandoned_trials` is the one
function that judges and does it. Who calls it:

* **Without a broker**, the service that owns a server's local pool
  (:class:`~dnnframe.executors.pool_service.LocalPoolService`, which ``dnnframe drive``
  runs beside the search drivers, and ``dnnframe serve`` starts) runs a :class:`StoreRecovery` on every pass: the
  service holding the store lease :data:`RECOVERY_LEASE` judges every trial's heartbeat,
  and every service its own host's pids; the trials it puts back go to its pool.
* **With Celery**, each worker's reaper (:mod:`dnnframe.executors.reaper`) does the same for
  its broker (node liveness, stalls of the store, retry queues); nothing here runs.
* ``dnnframe run`` calls :func:`recover_for_run` before it submits: the abandoned trials of
  its own spec only (a rerun of a killed run trains them again at once); other experiments'
  are left to their owner.

A submission (the REST API, the pages, ``submit_experiment``) recovers nothing: it stores
the trials and hands them on.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Iterable

from . import settings
from .exceptions import DnnframeError
from .executors.liveness import owner_gone_here
from .owners import default_worker_name
from .spec import ExperimentSpec, expand_documents
from .spec.models import is_driven
from .store.base import ResultStore
from .store.lifecycle import is_stale
from .store.records import TrialRecord

log = logging.getLogger(__name__)

#: The store lease of the one driver service that judges the heartbeats of a store's trials.
RECOVERY_LEASE = "recovery"


def recover_abandoned_trials(
    store: ResultStore,
    *,
    heartbeats: bool = True,
    within: Callable[[], Iterable[str]] | None = None,
    node: str | None = None,
) -> list[str]:
    """Put abandoned RUNNING trials (see the module docstring) back to QUEUED; their ids.

    Args:
        store: the store (one read of its RUNNING trials, one write per trial put back).
        heartbeats: also judge heartbeats (every host's trials); False judges only the
            pids of ``node``'s trials.
        within: only trials among these ids; called only when some trial is abandoned.
        node: the host whose pids are judged (default: this one).
    """
    node = node or socket.gethostname()
    # measured before the read: a trial is judged by its heartbeat as of then
    cutoff = time.time() - settings.get().heartbeat_timeout

    def abandoned(t: TrialRecord) -> bool:
        return bool(t.worker) and (
            owner_gone_here(t, node)
            or (heartbeats and is_stale(t.state.value, t.heartbeat_at, cutoff))
        )

    found = [t for t in store.running_owners() if abandoned(t)]
    if found and within is not None:
        wanted = set(within())
        found = [t for t in found if t.id in wanted]
    released = [t.id for t in found if store.release_trial(t.id, t.worker or "")]
    for t in found:
        if t.id in released:
            log.warning(
                "trial %s: its worker %s stopped (no such process, or no heartbeat "
                "since %s); put back to run again (attempt %d so far)",
                t.id,
                t.worker,
                t.heartbeat_at,
                t.attempts,
            )
    return released


def recover_for_run(store: ResultStore, spec: ExperimentSpec) -> list[str]:
    """What ``dnnframe run`` calls before it submits ``spec``: :func:`recover_abandoned_trials`
    of ``spec``'s own trials (its expansion; a tpe/cmaes spec's stored trials), so a rerun
    trains again, at once, the trials a killed earlier run left RUNNING."""

    def trial_ids() -> Iterable[str]:
        stored = {t.id for t in store.list_trials(spec.experiment_id, fields=())}
        if is_driven(spec):
            return stored
        return stored | {tid for tid, _ in expand_documents(spec)}

    return recover_abandoned_trials(store, within=trial_ids)


class StoreRecovery:
    """The recovery a local pool's service runs on each pass (see the module docstring).

    Args:
        store: the store.
        owner: the lease owner (default ``host:pid``).
        ttl_s: the lease's time to live (default ``$DNNFRAME_DRIVER_LEASE_S``): how long a
            killed holder keeps others from judging heartbeats. Each pass renews it.
    """

    def __init__(self, store: ResultStore, owner: str | None = None, ttl_s: float | None = None):
        self.store = store
        self.owner = owner or default_worker_name()
        self.ttl_s = float(ttl_s if ttl_s is not None else settings.get().driver_lease_s)
        self.holds_lease = False

    def poll(self) -> list[str]:
        """One pass: take or renew :data:`RECOVERY_LEASE`, then recover (every abandoned
        trial with the lease, this host's without); returns the ids put back. A store that
        does not answer raises (the service's next pass tries again)."""
        held = self.store.acquire_lease(RECOVERY_LEASE, self.owner, self.ttl_s)
        if held != self.holds_lease:
            log.info(
                "recovery: %s lease %s as %s",
                "took" if held else "lost",
                RECOVERY_LEASE,
                self.owner,
            )
        self.holds_lease = held
        return recover_abandoned_trials(self.store, heartbeats=held)

    def release(self) -> None:
        """Give the lease up (a service that stops), so another takes it over at once."""
        if self.holds_lease:
            self.holds_lease = False
            try:
                self.store.release_lease(RECOVERY_LEASE, self.owner)
            except DnnframeError as exc:  # it expires by itself
                log.warning("recovery: could not release lease %s (%s)", RECOVERY_LEASE, exc)
