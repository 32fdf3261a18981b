"""Reaching a PostgreSQL store: per-process connections, transactions, retried writes.

One connection per process and thread (a psycopg connection carries one transaction at a
time). A lost connection, a deadlock or a serialization failure is retried with back-off,
on a new connection when the old one broke. A write that is retried may have committed
before its answer was lost: every recorded write inserts its call's ``op`` id and its answer
into ``applied_ops`` in its own transaction, so the next attempt finds the answer there
instead of applying the write again (the primary key also makes an attempt that races a
still-running earlier one fail and read the earlier one's answer).
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import errors
from psycopg.types.json import Jsonb

from ..exceptions import NotFoundError, StoreError
from ..retrying import STORE_WRITE, AttemptAgain
from ..urls import redact
from .base import now
from .postgresql_schema import migrate

_CONNECT_TIMEOUT_S = 10
# A session stopped between the statements of a transaction (its host cut off the network,
# its process frozen) holds its row locks, and the change counter every write takes, until
# the server's TCP gives up, hours later: the server ends it after this long instead (the
# store's own transactions never wait on their client that long; a retry follows).
_IDLE_IN_TRANSACTION_S = 10
# Answers of recorded writes are kept this long: far longer than any retry of a call.
_OPS_KEPT_S = 3600.0
_PRUNE_EVERY = 500
# Connections inherited through fork must never be closed in the child (closing sends the
# server a goodbye on the parent's socket and ends the parent's session): parked here.
_FORK_ORPHANS: list[psycopg.Connection] = []


class _Unreachable(psycopg.OperationalError):
    """No connection could be opened (retried like a lost one, reported as unreachable)."""

    def __init__(self, error: psycopg.OperationalError):
        super().__init__(str(error))
        self.error = error


class PgConnections:
    """Connections and transactions of one store URL, safe across threads and fork."""

    def __init__(self, url: str, create: bool):
        self.url = url
        self.where = redact(url)
        self._local = threading.local()
        self._lock = threading.Lock()
        # (pid, thread, connection, the lock its thread holds while using it) of every
        # connection opened, to close them all: close() takes the lock, so it never ends a
        # connection under another thread's query (libpq would free what that query uses)
        self._conns: list[tuple[int, threading.Thread, psycopg.Connection, threading.RLock]] = []
        self._closed = False
        self._writes = 0
        try:
            params = psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.ProgrammingError as e:
            raise StoreError(f"store URL {self.where!r} is not a valid PostgreSQL URL: {e}") from e
        port = str(params.get("port") or "5432")
        if not all(p.isdigit() for p in port.split(",")):  # libpq would take it for a service
            raise StoreError(
                f"store URL {self.where!r} is not a valid PostgreSQL URL: "
                f"port {port!r} is not a number"
            )
        try:  # no retries here: a wrong URL is reported at once
            conn = self._conn()
        except psycopg.OperationalError as e:
            raise self._connect_error(e, create) from e
        try:
            migrate(conn, self.where, create)
        except BaseException:
            with contextlib.suppress(psycopg.Error):
                conn.rollback()
            raise

    # ------------------------------------------------------------ connections
    def _connect_error(self, e: psycopg.OperationalError, create: bool = True) -> StoreError:
        text = str(e).strip()
        if "does not exist" in text and "database" in text:
            hint = (
                "nothing has been run with this store yet?"
                if not create
                else "create it first, e.g. createdb -h HOST -U USER NAME"
            )
            return StoreError(f"no store at {self.where!r}: {text} ({hint})")
        return StoreError(f"store URL {self.where!r}: PostgreSQL server unreachable: {text}")

    def _conn(self) -> psycopg.Connection:
        if self._closed:
            raise StoreError(f"store {self.where!r} is closed")
        local, pid = self._local, os.getpid()
        if getattr(local, "pid", None) != pid or getattr(local, "conn", None) is None:
            if getattr(local, "pid", None) != pid and getattr(local, "conn", None) is not None:
                _FORK_ORPHANS.append(local.conn)  # inherited through fork: never touch it
            conn = psycopg.connect(
                self.url,
                connect_timeout=_CONNECT_TIMEOUT_S,
                application_name="dnnframe",
                autocommit=True,
            )
            try:
                conn.execute(
                    f"SET idle_in_transaction_session_timeout = '{_IDLE_IN_TRANSACTION_S}s'"
                )
                conn.autocommit = False
            except BaseException:
                conn.close()
                raise
            local.conn, local.pid, local.using = conn, pid, threading.RLock()
            # A thread per request (a threaded web server) would leave a server process
            # behind for each: close the connections of this process's finished threads.
            with self._lock:
                done = [c for p, t, c, _ in self._conns if p == pid and not t.is_alive()]
                self._conns = [
                    (p, t, c, u)
                    for p, t, c, u in self._conns
                    if not (p == pid and not t.is_alive())
                ]
                self._conns.append((pid, threading.current_thread(), local.conn, local.using))
            for c in done:
                with contextlib.suppress(Exception):
                    c.close()
        return local.conn

    def _discard(self, conn: psycopg.Connection) -> None:
        """Forget a broken connection of this thread (the next call opens another)."""
        with contextlib.suppress(Exception):
            conn.close()
        with self._lock:
            self._conns = [(p, t, c, u) for p, t, c, u in self._conns if c is not conn]
        self._local.conn = None

    def close(self) -> None:
        """Close every connection of this process, each once no thread is using it; a
        thread that asks for the store after this gets a StoreError."""
        self._closed = True
        pid = os.getpid()
        with self._lock:
            mine = [(c, using) for p, _, c, using in self._conns if p == pid]
            self._conns = []
        for c, using in mine:
            with using, contextlib.suppress(Exception):
                c.close()

    # ------------------------------------------------------------ transactions
    def _recover(self, conn: psycopg.Connection) -> None:
        """After a failed statement: roll back, or drop the connection if it broke."""
        if conn.broken or conn.closed:
            self._discard(conn)
            return
        try:
            conn.rollback()
        except psycopg.Error:
            self._discard(conn)

    def read(self, body: Callable[[psycopg.Connection], Any]) -> Any:
        """Run ``body`` in one (read) transaction, retried like a write."""
        return self._attempts(body, op=None)[0]

    def write(
        self,
        body: Callable[[psycopg.Connection], Any],
        record: bool = True,
        encode: Callable[[Any], Any] | None = None,
    ) -> tuple[Any, bool]:
        """Run ``body`` in one transaction and commit; returns ``(answer, replayed)``.

        With ``record`` the call's answer (``encode(answer)``, JSON) is stored with its op id
        in the same transaction; when an attempt committed but its answer was lost, the
        next one returns ``(stored answer, True)`` without running ``body`` again.
        """
        op = uuid.uuid4().hex if record else None
        return self._attempts(body, op=op, encode=encode)

    def _attempts(
        self,
        body: Callable[[psycopg.Connection], Any],
        op: str | None,
        encode: Callable[[Any], Any] | None = None,
    ) -> Any:
        try:
            for attempt in STORE_WRITE.retrying(f"store {self.where!r}"):
                with attempt:
                    return self._attempt(
                        body, op, encode, retried=attempt.retry_state.attempt_number > 1
                    )
        except _Unreachable as e:
            raise self._connect_error(e.error) from e.error
        except (psycopg.OperationalError, errors.IdleInTransactionSessionTimeout) as e:
            raise StoreError(
                f"store {self.where!r}: still failing after "
                f"{STORE_WRITE.attempts} attempts: {str(e).strip()}"
            ) from e
        except AttemptAgain as e:
            raise StoreError(
                f"store {self.where!r}: still failing after {STORE_WRITE.attempts} attempts"
            ) from e
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _attempt(
        self,
        body: Callable[[psycopg.Connection], Any],
        op: str | None,
        encode: Callable[[Any], Any] | None,
        retried: bool,
    ) -> Any:
        """One attempt of :meth:`_attempts`; raises what :data:`STORE_WRITE` retries when
        the server may answer the next one."""
        try:  # a server restarting refuses connections for a while: wait for it
            conn = self._conn()
        except psycopg.OperationalError as e:
            raise _Unreachable(e) from e
        with self._local.using:
            return self._run(conn, body, op, encode, retried)

    def _run(
        self,
        conn: psycopg.Connection,
        body: Callable[[psycopg.Connection], Any],
        op: str | None,
        encode: Callable[[Any], Any] | None,
        retried: bool,
    ) -> Any:
        """:meth:`_attempt`'s transaction on ``conn``, which this thread holds."""
        try:
            if retried and op is not None:
                row = conn.execute("SELECT answer FROM applied_ops WHERE op = %s", (op,)).fetchone()
                if row is not None:
                    conn.commit()
                    return row[0], True
            answer = body(conn)
            if op is not None:
                self._record(conn, op, encode(answer) if encode else answer)
            conn.commit()
            return answer, False
        except (NotFoundError, ValueError):
            self._recover(conn)
            raise
        except errors.UniqueViolation as e:
            self._recover(conn)
            if op is None or "applied_ops" not in str(e.diag.constraint_name or ""):
                raise StoreError(f"store {self.where!r}: {e}") from e
            # An earlier attempt of this call committed meanwhile: the next reads its answer.
            raise AttemptAgain(f"an earlier attempt of op {op} committed") from e
        except (psycopg.OperationalError, errors.IdleInTransactionSessionTimeout):
            # the second: the server ended a session stopped inside this transaction
            # (rolled back), like a lost connection; retried by STORE_WRITE
            self._recover(conn)
            raise
        except psycopg.Error as e:
            self._recover(conn)
            raise StoreError(f"store {self.where!r}: {str(e).strip()}") from e
        except BaseException:
            self._recover(conn)
            raise

    def _record(self, conn: psycopg.Connection, op: str, answer: Any) -> None:
        t = now()
        conn.execute(
            "INSERT INTO applied_ops (op, answer, at) VALUES (%s, %s, %s)", (op, Jsonb(answer), t)
        )
        self._writes += 1
        if self._writes % _PRUNE_EVERY == 0:
            conn.execute("DELETE FROM applied_ops WHERE at < %s", (t - _OPS_KEPT_S,))
