"""How the memory, SQLite and PostgreSQL backends keep the dispatch outbox (the contract is
in outbox.py; MongoDB's, which needs pymongo, in mongo_outbox.py): one small mixin per
backend, each taking an entry in one atomic step, so it goes to exactly one taker."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from typing import Any

from .base_trials import now


class MemoryOutbox:
    """The outbox of :class:`~dnnframe.store.memory.MemoryStore` (under the store's lock)."""

    _locked: Callable[[], contextlib.AbstractContextManager[Any]]

    def _hold_dispatch(self, items: list[tuple[str, str]]) -> None:
        with self._locked() as d:
            for tid, queue in items:
                d.held.pop(tid, None)  # held again: it moves to the back, with its new queue
                d.held[tid] = queue

    def _take_dispatch(self, limit: int) -> list[tuple[str, str]]:
        with self._locked() as d:
            taken = list(d.held.items())[:limit]
            for tid, _ in taken:
                del d.held[tid]
            return taken


class SQLiteOutbox:
    """The outbox of :class:`~dnnframe.store.sqlite.SQLiteStore`: each call one
    ``BEGIN IMMEDIATE`` transaction."""

    _tx: Callable[[], contextlib.AbstractContextManager[sqlite3.Connection]]

    def _hold_dispatch(self, items: list[tuple[str, str]]) -> None:
        with self._tx() as c:
            c.executemany(
                "INSERT OR REPLACE INTO held_dispatch (trial_id, queue, held_at) VALUES (?, ?, ?)",
                [(tid, queue, now()) for tid, queue in items],
            )

    def _take_dispatch(self, limit: int) -> list[tuple[str, str]]:
        with self._tx() as c:
            rows = c.execute(
                "SELECT trial_id, queue FROM held_dispatch ORDER BY held_at, rowid LIMIT ?",
                (limit,),
            ).fetchall()
            c.executemany("DELETE FROM held_dispatch WHERE trial_id = ?", [(r[0],) for r in rows])
        return [(r[0], r[1]) for r in rows]


class PostgresOutbox:
    """The outbox of :class:`~dnnframe.store.postgresql.PostgresStore`: one upsert to hold,
    one ``DELETE ... RETURNING`` to take."""

    _db: Any

    def _hold_dispatch(self, items: list[tuple[str, str]]) -> None:
        latest = dict(items)  # held twice in one call: the latest queue
        if not latest:
            return
        params = (now(), list(latest), list(latest.values()))  # one time for every attempt

        def body(c: Any) -> None:
            c.execute(
                "INSERT INTO held_dispatch (trial_id, queue, held_at) "
                "SELECT u.id, u.q, %s FROM unnest(%s::text[], %s::text[]) AS u(id, q) "
                "ON CONFLICT (trial_id) DO UPDATE SET queue = EXCLUDED.queue, "
                "held_at = EXCLUDED.held_at, ord = DEFAULT",
                params,
            )

        self._db.write(body, record=False)

    def _take_dispatch(self, limit: int) -> list[tuple[str, str]]:
        def body(c: Any) -> list[list[str]]:
            # An entry another taker is removing right now is theirs: skip it.
            rows = c.execute(
                "DELETE FROM held_dispatch WHERE trial_id IN (SELECT trial_id FROM "
                "held_dispatch ORDER BY held_at, ord LIMIT %s FOR UPDATE SKIP LOCKED) "
                "RETURNING trial_id, queue, held_at, ord",
                (limit,),
            ).fetchall()
            return [[r[0], r[1]] for r in sorted(rows, key=lambda r: (r[2], r[3]))]

        return [(tid, queue) for tid, queue in self._db.write(body)[0]]
