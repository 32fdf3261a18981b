"""How the memory, SQLite and PostgreSQL backends keep the worker registry (the contract is
in workers.py; MongoDB's, which needs pymongo, in mongo_workers.py): one small mixin per
backend, each registration one upsert of the worker's whole record."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..jsonsafe import dumps, json_copy
from .base_trials import now
from .records import WorkerRecord


class MemoryWorkers:
    """The workers of :class:`~dnnframe.store.memory.MemoryStore` (under the store's lock;
    records are copied in and out, so nothing a caller holds is shared)."""

    _locked: Callable[[], contextlib.AbstractContextManager[Any]]

    def _register_worker(
        self,
        name: str,
        host: str | None,
        pid: int | None,
        current_trial: str | None,
        trials_done: int,
        info: dict[str, Any] | None,
    ) -> None:
        with self._locked() as d:
            d.workers[name] = WorkerRecord(
                name=name,
                host=host,
                pid=pid,
                current_trial=current_trial,
                trials_done=trials_done,
                last_seen=now(),
                info=json_copy(info or {}),
            )

    def list_workers(self, seen_within_s: float | None = None) -> list[WorkerRecord]:
        with self._locked() as d:
            since = None if seen_within_s is None else now() - seen_within_s
            return [
                replace(w, info=json_copy(w.info))
                for _, w in sorted(d.workers.items())
                if since is None or w.last_seen >= since
            ]


class SQLiteWorkers:
    """The workers of :class:`~dnnframe.store.sqlite.SQLiteStore`."""

    _tx: Callable[[], contextlib.AbstractContextManager[sqlite3.Connection]]
    _read: Callable[..., list[tuple]]

    def _register_worker(
        self,
        name: str,
        host: str | None,
        pid: int | None,
        current_trial: str | None,
        trials_done: int,
        info: dict[str, Any] | None,
    ) -> None:
        with self._tx() as c:
            c.execute(
                "INSERT OR REPLACE INTO workers (name, host, pid, current_trial, trials_done, "
                "last_seen, info) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (name, host, pid, current_trial, trials_done, now(), dumps(info or {})),
            )

    def list_workers(self, seen_within_s: float | None = None) -> list[WorkerRecord]:
        sql = "SELECT name, host, pid, current_trial, trials_done, last_seen, info FROM workers"
        params: tuple = ()
        if seen_within_s is not None:
            sql += " WHERE last_seen >= ?"
            params = (now() - seen_within_s,)
        rows = self._read(sql + " ORDER BY name", params)
        return [
            WorkerRecord(
                name=r[0],
                host=r[1],
                pid=r[2],
                current_trial=r[3],
                trials_done=r[4],
                last_seen=r[5],
                info=json.loads(r[6]),
            )
            for r in rows
        ]


class PostgresWorkers:
    """The workers of :class:`~dnnframe.store.postgresql.PostgresStore`: one upsert each."""

    _db: Any

    def _register_worker(
        self,
        name: str,
        host: str | None,
        pid: int | None,
        current_trial: str | None,
        trials_done: int,
        info: dict[str, Any] | None,
    ) -> None:
        params = (name, host, pid, current_trial, trials_done, now(), dumps(info or {}))

        def body(c: Any) -> None:
            c.execute(
                "INSERT INTO workers (name, host, pid, current_trial, trials_done, last_seen, "
                "info) VALUES (%s, %s, %s, %s, %s, %s, %s::jsonb) ON CONFLICT (name) DO UPDATE "
                "SET host = EXCLUDED.host, pid = EXCLUDED.pid, "
                "current_trial = EXCLUDED.current_trial, trials_done = EXCLUDED.trials_done, "
                "last_seen = EXCLUDED.last_seen, info = EXCLUDED.info",
                params,
            )

        self._db.write(body, record=False)

    def list_workers(self, seen_within_s: float | None = None) -> list[WorkerRecord]:
        sql = "SELECT name, host, pid, current_trial, trials_done, last_seen, info FROM workers"
        params: tuple = ()
        if seen_within_s is not None:
            sql += " WHERE last_seen >= %s"
            params = (now() - seen_within_s,)
        rows = self._db.read(lambda c: c.execute(sql + " ORDER BY name", params).fetchall())
        return [
            WorkerRecord(
                name=r[0],
                host=r[1],
                pid=r[2],
                current_trial=r[3],
                trials_done=r[4],
                last_seen=r[5],
                info=r[6],
            )
            for r in rows
        ]
