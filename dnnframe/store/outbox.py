"""The dispatch outbox of the ResultStore contract (``ResultStore`` inherits
:class:`OutboxMethods`): QUEUED trials whose message could not be sent yet (the broker was
down), kept in the store until someone who reaches the broker sends them.

An entry is ``(trial_id, queue)``, one per trial (holding it again replaces its queue and
moves it to the back). :meth:`OutboxMethods.take_dispatch` removes entries atomically, each
going to exactly one taker; unlike every other write it is not safe to retry (see base.py's
Retries). Deleting an experiment drops the entries of the trials that go with it. How each
backend stores them: outbox_backends.py (memory, SQLite, PostgreSQL), mongo_outbox.py.
"""

from __future__ import annotations

import abc

from .checks import check_held, check_take_limit

__all__ = ["OutboxMethods"]


class OutboxMethods(abc.ABC):
    """The dispatch outbox of :class:`~dnnframe.store.base.ResultStore` (see the module
    docstring)."""

    def hold_dispatch(self, items: list[tuple[str, str]]) -> None:
        """Remember QUEUED trials whose message could not be sent yet (the broker was
        down): ``(trial_id, queue)`` pairs. Idempotent: a trial held again keeps one entry,
        with the latest queue. Whoever reaches the broker later sends them (see
        :meth:`take_dispatch`). Raises ValueError for a malformed pair.
        """
        check_held(items)
        self._hold_dispatch(items)

    def take_dispatch(self, limit: int = 500) -> list[tuple[str, str]]:
        """Remove and return up to ``limit`` held ``(trial_id, queue)`` pairs, oldest first.

        Atomic per entry: with several callers at once each entry goes to exactly one. A
        caller that then fails to send them holds them again. Raises ValueError for a
        ``limit`` below 1.
        """
        check_take_limit(limit)
        return self._take_dispatch(limit)

    @abc.abstractmethod
    def _hold_dispatch(self, items: list[tuple[str, str]]) -> None:
        """:meth:`hold_dispatch`, its arguments checked."""

    @abc.abstractmethod
    def _take_dispatch(self, limit: int) -> list[tuple[str, str]]:
        """:meth:`take_dispatch`, its arguments checked."""
