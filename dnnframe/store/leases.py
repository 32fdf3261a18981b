"""Leases: a named piece of long-lived work (the search driver of one experiment) owned by
one process at a time, recorded in the store like a trial's claim (``ResultStore``
inherits :class:`LeaseMethods`).

A lease has a name, an owner (``host:pid``) and an expiry time. :meth:`acquire_lease`
takes a lease that is free or expired, or renews one its caller holds already; of several
processes acquiring one lease at once exactly one wins (memory: one lock; SQLite: a
``BEGIN IMMEDIATE`` transaction; PostgreSQL: one conditional upsert; MongoDB: one
conditional upsert on the ``_id``). An owner that stops renewing loses the lease when it
expires, and anyone may take it then. Expiry is judged with the acquiring process's clock,
as trial heartbeats are: hosts sharing a store must keep their clocks in step (NTP).

Every call is safe to retry after a lost connection: acquiring again renews what the first
attempt took, releasing again releases nothing more.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

from ..metrics import is_number
from .base_trials import now
from .checks import check_worker

__all__ = ["LeaseMethods", "LeaseRecord", "may_take"]


@dataclass(frozen=True)
class LeaseRecord:
    """Who holds lease ``name`` and until when (seconds since the epoch)."""

    name: str
    owner: str
    expires_at: float

    def live(self, at: float | None = None) -> bool:
        """Whether the lease still binds at ``at`` (default: now)."""
        return self.expires_at > (now() if at is None else at)


def may_take(held_owner: str | None, held_expires_at: float | None, owner: str, at: float) -> bool:
    """The one rule every backend applies: ``owner`` may take (or renew) a lease that is
    free, expired at ``at``, or its own."""
    return (
        held_owner is None
        or held_owner == owner
        or held_expires_at is None
        or held_expires_at <= at
    )


def _check_name(name: str) -> str:
    if not name or not isinstance(name, str):
        raise ValueError(f"lease name must be a non-empty string, got {name!r}")
    return name


def _check_ttl(ttl_s: float) -> float:
    if not is_number(ttl_s) or ttl_s <= 0:
        raise ValueError(f"ttl_s must be a finite number of seconds > 0, got {ttl_s!r}")
    return float(ttl_s)


class LeaseMethods(abc.ABC):
    """The lease half of the ResultStore contract (see the module docstring)."""

    def acquire_lease(self, name: str, owner: str, ttl_s: float) -> bool:
        """Take lease ``name`` for ``owner`` until ``ttl_s`` seconds from now, when it is
        free, expired or held by ``owner`` already (then this renews it).

        Returns:
            True when ``owner`` holds the lease now; False when another live owner does
            (nothing is changed then).
        Raises:
            ValueError: an empty name or owner, or ``ttl_s`` not a positive number.
        """
        _check_name(name)
        check_worker(owner, "lease owner")
        ttl = _check_ttl(ttl_s)
        t = now()
        return self._acquire_lease(name, owner, t, t + ttl)

    def release_lease(self, name: str, owner: str) -> bool:
        """Give lease ``name`` up, if ``owner`` holds it (live or expired); returns whether
        this call released it. Another owner's lease is left alone. Raises ValueError for an
        empty name or owner."""
        _check_name(name)
        check_worker(owner, "lease owner")
        return self._release_lease(name, owner)

    def get_lease(self, name: str) -> LeaseRecord | None:
        """Who holds lease ``name`` now, or None when it is free or expired. Raises
        ValueError for an empty name."""
        _check_name(name)
        t = now()
        found = [r for r in self._list_leases(name) if r.name == name and r.live(t)]
        return found[0] if found else None

    def list_leases(self, prefix: str = "") -> list[LeaseRecord]:
        """The live leases whose name starts with ``prefix``, by name (for status pages)."""
        if not isinstance(prefix, str):
            raise ValueError(f"prefix must be a string, got {prefix!r}")
        t = now()
        return sorted((r for r in self._list_leases(prefix) if r.live(t)), key=lambda r: r.name)

    @abc.abstractmethod
    def _acquire_lease(self, name: str, owner: str, at: float, expires_at: float) -> bool:
        """:meth:`acquire_lease`, its arguments checked: apply :func:`may_take` at ``at`` and
        write ``(owner, expires_at)`` atomically."""

    @abc.abstractmethod
    def _release_lease(self, name: str, owner: str) -> bool:
        """:meth:`release_lease`, its arguments checked."""

    @abc.abstractmethod
    def _list_leases(self, prefix: str) -> list[LeaseRecord]:
        """Every stored lease (expired ones too) whose name starts with ``prefix``."""
