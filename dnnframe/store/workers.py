"""The worker registry of the ResultStore contract (``ResultStore`` inherits
:class:`WorkerMethods`): what each worker says it is doing and when it last said so, which
liveness checks, the reaper and the dashboard's worker pages read.

A worker is keyed by its name; each registration replaces its whole record and stamps
``last_seen`` with the store's clock, so repeating one is harmless. How each backend
stores them: worker_backends.py (memory, SQLite, PostgreSQL), mongo_workers.py.
"""

from __future__ import annotations

import abc
from typing import Any

from .checks import check_worker
from .records import WorkerRecord

__all__ = ["WorkerMethods"]


class WorkerMethods(abc.ABC):
    """The worker registry of :class:`~dnnframe.store.base.ResultStore` (see the module
    docstring)."""

    def register_worker(
        self,
        name: str,
        host: str | None = None,
        pid: int | None = None,
        current_trial: str | None = None,
        trials_done: int = 0,
        info: dict[str, Any] | None = None,
    ) -> None:
        """Record what worker ``name`` is doing now (a full upsert; ``last_seen`` = now)."""
        check_worker(name, "worker name")
        self._register_worker(name, host, pid, current_trial, trials_done, info)

    @abc.abstractmethod
    def list_workers(self, seen_within_s: float | None = None) -> list[WorkerRecord]:
        """Workers by name; with ``seen_within_s``, only those seen that recently."""

    @abc.abstractmethod
    def _register_worker(
        self,
        name: str,
        host: str | None,
        pid: int | None,
        current_trial: str | None,
        trials_done: int,
        info: dict[str, Any] | None,
    ) -> None:
        """:meth:`register_worker`, its arguments checked."""
