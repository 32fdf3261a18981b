"""One SQLite store file: refuse what is not ours, open per-process connections, transact.

WAL mode with a busy timeout; every write is ``BEGIN IMMEDIATE`` (take the write lock up
front, so two writers never deadlock upgrading read locks), retried while the file is busy.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from ..exceptions import SchemaVersionError, StoreCorruptError, StoreError
from ..retrying import SQLITE_BUSY
from .base import SCHEMA_VERSION, now

_HEADER = b"SQLite format 3\x00"
_META = "dnnframe_meta"
_BUSY_TIMEOUT_S = 30.0
# Connections inherited through fork must never be closed (or garbage-collected, which
# closes them) in the child: that would release the parent's locks. They are parked here.
_FORK_ORPHANS: list[sqlite3.Connection] = []

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {_META} (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS experiments (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, spec TEXT NOT NULL, n_trials INTEGER NOT NULL,
    created_at REAL NOT NULL, cancel_requested INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS trials (
    id TEXT PRIMARY KEY, state TEXT NOT NULL, config TEXT NOT NULL, result TEXT,
    metrics TEXT NOT NULL DEFAULT '[]', error TEXT, worker TEXT,
    attempts INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL, started_at REAL,
    finished_at REAL, heartbeat_at REAL, seq INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS trials_seq ON trials (seq);
CREATE INDEX IF NOT EXISTS trials_state ON trials (state, heartbeat_at);
CREATE TABLE IF NOT EXISTS experiment_trials (
    experiment_id TEXT NOT NULL REFERENCES experiments(id), trial_id TEXT NOT NULL REFERENCES trials(id),
    PRIMARY KEY (experiment_id, trial_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS experiment_trials_trial ON experiment_trials (trial_id, experiment_id);
CREATE TABLE IF NOT EXISTS workers (
    name TEXT PRIMARY KEY, host TEXT, pid INTEGER, current_trial TEXT,
    trials_done INTEGER NOT NULL DEFAULT 0, last_seen REAL NOT NULL, info TEXT NOT NULL DEFAULT '{{}}');
CREATE TABLE IF NOT EXISTS held_dispatch (
    trial_id TEXT PRIMARY KEY, queue TEXT NOT NULL, held_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS leases (
    name TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS experiment_notes (
    experiment_id TEXT PRIMARY KEY REFERENCES experiments(id) ON DELETE CASCADE,
    text TEXT NOT NULL, version INTEGER NOT NULL, updated_at REAL NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS trial_notes (
    trial_id TEXT PRIMARY KEY REFERENCES trials(id) ON DELETE CASCADE,
    text TEXT NOT NULL, version INTEGER NOT NULL, updated_at REAL NOT NULL) WITHOUT ROWID;
"""


def parse_sqlite_url(url: str) -> Path:
    """``sqlite:///rel/path.db`` → ``rel/path.db``; ``sqlite:////abs/path.db`` → ``/abs/path.db``."""
    if not url.startswith("sqlite:///"):
        raise StoreError(
            f"store URL {url!r}: a SQLite URL looks like sqlite:///relative/path.db "
            "or sqlite:////absolute/path.db"
        )
    path = url[len("sqlite:///") :]
    if path in ("", ":memory:") or path.startswith("file:"):
        raise StoreError(
            f"store URL {url!r}: an in-memory or URI SQLite store cannot be shared "
            "by worker processes; give a file path"
        )
    return Path(path)


class SQLiteFile:
    """Connections (one per process and thread) and transactions on one store file."""

    def __init__(self, path: str | Path, url: str | None = None, create: bool = True):
        self.path = Path(path)
        self.url = url or f"sqlite:///{self.path}"
        self._local = threading.local()
        self._lock = threading.Lock()
        # every connection of this process with the lock its user holds while using it:
        # close() takes it, so it never closes a connection another thread is reading
        # through (SQLite then frees what that read is using: a crash, not an error);
        # reentrant, so a read its thread makes inside its own transaction never waits
        self._conns: list[tuple[int, sqlite3.Connection, threading.RLock]] = []
        self._closed = False
        if not self._check_existing() and not create:
            # Read-only callers (status, ls, export, report) must not leave an empty store
            # behind for a mistyped path; an existing empty database is left untouched too.
            what = "the file is an empty database" if self.path.exists() else "no such file"
            raise StoreError(
                f"no store at {str(self.path)!r} ({what}; nothing has been run "
                "with this store yet?)"
            )
        self._init_schema()

    # ------------------------------------------------------------ opening and safety
    def _check_existing(self) -> bool:
        """Refuse, without writing a byte, a file that is not a (compatible) dnnframe store.

        Returns True when the file already holds a dnnframe store, False when there is no
        file yet or an empty database."""
        p = self.path
        if not p.parent.is_dir():
            raise StoreError(f"store URL {self.url!r}: directory {str(p.parent)!r} does not exist")
        if not p.exists():
            return False
        if p.is_dir():
            raise StoreError(f"store URL {self.url!r}: {str(p)!r} is a directory, not a file")
        # The header is checked by SQLite itself ("file is not a database"), never by
        # opening the file with open(): closing any descriptor of a database file drops every
        # POSIX lock this process holds on it, so another process could then believe it is
        # the last user, checkpoint and delete the WAL under our live connections (writes lost).
        if not os.access(p, os.R_OK):
            raise StoreError(f"store file {str(p)!r} cannot be read (permission denied)")
        try:
            ro = sqlite3.connect(f"file:{p.resolve()}?mode=ro", uri=True, timeout=_BUSY_TIMEOUT_S)
        except sqlite3.Error as e:
            raise StoreError(f"store file {str(p)!r} cannot be opened: {e}") from e
        try:
            tables = {
                r[0] for r in ro.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
            if not tables:
                return False
            if _META not in tables:
                raise StoreCorruptError(
                    f"store file {str(p)!r} is a SQLite database but not a dnnframe store "
                    f"(tables: {', '.join(sorted(tables))}); it was left untouched."
                )
            row = ro.execute(f"SELECT value FROM {_META} WHERE key = 'schema_version'").fetchone()
            version = int(row[0]) if row else 0
            if version > SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"store file {str(p)!r} has schema version {version}, written by a newer "
                    f"dnnframe; this dnnframe reads up to version {SCHEMA_VERSION}. Upgrade "
                    "dnnframe (pip install -U dnnframe) to open it."
                )
            return True
        except sqlite3.DatabaseError as e:
            if "not a database" in str(e):
                raise StoreCorruptError(
                    f"store file {str(p)!r} is not a SQLite database (bad header); it was left "
                    "untouched. Point DNNFRAME_STORE_URL at another file or move this one away."
                ) from e
            raise StoreCorruptError(
                f"store file {str(p)!r} is damaged ({e}); it was left untouched."
            ) from e
        finally:
            ro.close()

    def _init_schema(self) -> None:
        with self.tx() as c:
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    c.execute(stmt)
            c.execute(
                f"INSERT OR IGNORE INTO {_META} VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
            c.execute(f"INSERT OR IGNORE INTO {_META} VALUES ('created_at', ?)", (str(now()),))

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                str(self.path),
                timeout=_BUSY_TIMEOUT_S,
                isolation_level=None,
                check_same_thread=False,
            )
            # WAL: readers never block the writer; NORMAL sync is durable across crashes of the
            # process (the OS keeps the WAL), only a power cut may lose the last commits.
            # retried like a write: opening while another process creates, closes or
            # checkpoints the file can answer "database is locked" at once, past busy_timeout
            mode = SQLITE_BUSY.call(
                conn.execute, "PRAGMA journal_mode=WAL", what=f"store {self.url!r}"
            ).fetchone()[0]
            if mode.lower() != "wal":
                raise StoreError(
                    f"store file {str(self.path)!r}: cannot switch to WAL mode ({mode})"
                )
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
        except sqlite3.DatabaseError as e:
            raise self._wrap(e) from e
        return conn

    def _conn(self) -> tuple[sqlite3.Connection, threading.Lock]:
        """This thread's connection and the lock to hold while using it."""
        if self._closed:
            raise StoreError(f"store {self.url!r} is closed")
        pid = os.getpid()
        local = self._local
        if getattr(local, "pid", None) != pid:
            if getattr(local, "conn", None) is not None:
                _FORK_ORPHANS.append(local.conn)  # inherited through fork: never touch it
            local.conn, local.using = self._connect(), threading.RLock()
            local.pid = pid
            with self._lock:
                self._conns.append((pid, local.conn, local.using))
        return local.conn, local.using

    def _wrap(self, e: sqlite3.Error) -> StoreError:
        msg = str(e)
        if isinstance(e, sqlite3.DatabaseError) and ("malformed" in msg or "not a database" in msg):
            return StoreCorruptError(f"store file {str(self.path)!r} is damaged: {msg}")
        return StoreError(f"store {self.url!r}: {msg}")

    @contextlib.contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE: take the write lock up front, so two
        writers never deadlock upgrading read locks), retried while the file is busy."""
        conn, using = self._conn()
        with using:
            try:
                SQLITE_BUSY.call(conn.execute, "BEGIN IMMEDIATE", what=f"store {self.url!r}")
            except sqlite3.Error as e:  # a closed connection's ProgrammingError included
                if SQLITE_BUSY.retries(e):
                    raise StoreError(
                        f"store {self.url!r} stayed locked by other writers for "
                        f"over {_BUSY_TIMEOUT_S * SQLITE_BUSY.attempts:.0f}s"
                    ) from e
                raise self._wrap(e) from e
            try:
                yield conn
            except BaseException as e:
                conn.execute("ROLLBACK")
                if isinstance(e, sqlite3.Error):
                    raise self._wrap(e) from e
                raise
            else:
                conn.execute("COMMIT")

    def read(self, sql: str, params: tuple | list = ()) -> list[tuple]:
        conn, using = self._conn()
        try:
            with using:
                return conn.execute(sql, params).fetchall()
        except sqlite3.Error as e:  # on a connection closed meanwhile too
            raise self._wrap(e) from e

    def close(self) -> None:
        """Close every connection of this process, each once no thread is using it; a
        thread that asks for the store after this gets a StoreError."""
        self._closed = True
        pid = os.getpid()
        with self._lock:
            mine = [(c, using) for p, c, using in self._conns if p == pid]
            self._conns = []
        for c, using in mine:
            with using, contextlib.suppress(sqlite3.Error):
                c.close()
