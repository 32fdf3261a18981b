"""How the memory, SQLite and PostgreSQL backends store leases (the contract and the rule
are in leases.py; MongoDB's, which needs pymongo, in mongo_leases.py): one small mixin
per backend, each taking a lease in one atomic step."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from typing import Any

from .leases import LeaseRecord, may_take


class MemoryLeases:
    """Leases of :class:`~dnnframe.store.memory.MemoryStore` (under the store's lock)."""

    _locked: Callable[[], contextlib.AbstractContextManager[Any]]

    def _acquire_lease(self, name: str, owner: str, at: float, expires_at: float) -> bool:
        with self._locked() as d:
            held = d.leases.get(name)
            if held is not None and not may_take(held.owner, held.expires_at, owner, at):
                return False
            d.leases[name] = LeaseRecord(name, owner, expires_at)
            return True

    def _release_lease(self, name: str, owner: str) -> bool:
        with self._locked() as d:
            held = d.leases.get(name)
            if held is None or held.owner != owner:
                return False
            del d.leases[name]
            return True

    def _list_leases(self, prefix: str) -> list[LeaseRecord]:
        with self._locked() as d:
            return [r for n, r in d.leases.items() if n.startswith(prefix)]


class SQLiteLeases:
    """Leases of :class:`~dnnframe.store.sqlite.SQLiteStore`: read and write in one
    ``BEGIN IMMEDIATE`` transaction, so no other writer comes between."""

    _tx: Callable[[], contextlib.AbstractContextManager[sqlite3.Connection]]
    _read: Callable[..., list[tuple]]

    def _acquire_lease(self, name: str, owner: str, at: float, expires_at: float) -> bool:
        with self._tx() as c:
            row = c.execute(
                "SELECT owner, expires_at FROM leases WHERE name = ?", (name,)
            ).fetchone()
            if row is not None and not may_take(row[0], row[1], owner, at):
                return False
            c.execute(
                "INSERT OR REPLACE INTO leases (name, owner, expires_at) VALUES (?, ?, ?)",
                (name, owner, expires_at),
            )
            return True

    def _release_lease(self, name: str, owner: str) -> bool:
        with self._tx() as c:
            return (
                c.execute("DELETE FROM leases WHERE name = ? AND owner = ?", (name, owner)).rowcount
                > 0
            )

    def _list_leases(self, prefix: str) -> list[LeaseRecord]:
        rows = self._read(
            "SELECT name, owner, expires_at FROM leases WHERE substr(name, 1, ?) = ?",
            (len(prefix), prefix),
        )
        return [LeaseRecord(*r) for r in rows]


class PostgresLeases:
    """Leases of :class:`~dnnframe.store.postgresql.PostgresStore`: one conditional upsert
    (the row lock of ``ON CONFLICT DO UPDATE`` orders concurrent acquirers)."""

    _db: Any

    def _acquire_lease(self, name: str, owner: str, at: float, expires_at: float) -> bool:
        # The WHERE is may_take for a row that exists (a missing row is simply inserted).
        def body(c: Any) -> bool:
            return (
                c.execute(
                    "INSERT INTO leases (name, owner, expires_at) VALUES (%s, %s, %s) "
                    "ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, "
                    "expires_at = EXCLUDED.expires_at "
                    "WHERE leases.owner = EXCLUDED.owner OR leases.expires_at <= %s "
                    "RETURNING owner",
                    (name, owner, expires_at, at),
                ).fetchone()
                is not None
            )

        # not recorded: acquiring again after a lost answer renews what the first took
        return self._db.write(body, record=False)[0]

    def _release_lease(self, name: str, owner: str) -> bool:
        return self._db.write(
            lambda c: (
                c.execute(
                    "DELETE FROM leases WHERE name = %s AND owner = %s", (name, owner)
                ).rowcount
                > 0
            )
        )[0]

    def _list_leases(self, prefix: str) -> list[LeaseRecord]:
        rows = self._db.read(
            lambda c: c.execute(
                "SELECT name, owner, expires_at FROM leases WHERE left(name, %s) = %s",
                (len(prefix), prefix),
            ).fetchall()
        )
        return [LeaseRecord(*r) for r in rows]
