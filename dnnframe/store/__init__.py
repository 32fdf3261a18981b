"""Result stores: one contract (``base.ResultStore``), backends chosen by URL.

>>> store = open_store("sqlite:///results.db")   # doctest: +SKIP
"""

from __future__ import annotations

from .. import settings
from ..exceptions import NotFoundError, SchemaVersionError, StoreCorruptError, StoreError
from ..extras import require
from .base import (
    SCHEMA_VERSION,
    ExperimentRecord,
    LeaseRecord,
    ResultStore,
    TrialRecord,
    TrialState,
    WorkerRecord,
)
from .memory import MEMORY_PREFIX, MemoryStore
from .notes import MAX_NOTE_CHARS, NoteRecord

DEFAULT_STORE_URL = "sqlite:///dnnframe.db"

__all__ = [
    "DEFAULT_STORE_URL",
    "MAX_NOTE_CHARS",
    "MEMORY_PREFIX",
    "SCHEMA_VERSION",
    "ExperimentRecord",
    "LeaseRecord",
    "NoteRecord",
    "NotFoundError",
    "ResultStore",
    "SchemaVersionError",
    "StoreCorruptError",
    "StoreError",
    "TrialRecord",
    "TrialState",
    "WorkerRecord",
    "default_store_url",
    "open_store",
]


def default_store_url() -> str:
    """``$DNNFRAME_STORE_URL`` if set, else ``sqlite:///dnnframe.db`` (in the working directory)."""
    return settings.get().store_url or DEFAULT_STORE_URL


def open_store(url: str | ResultStore | None = None, create: bool = True) -> ResultStore:
    """Turn ``None`` (the default URL), a URL or a store instance into a ResultStore.

    URLs: ``sqlite:///relative.db``, ``sqlite:////absolute/path.db``, ``mongodb://host/db``
    (``mongodb+srv://`` too; database defaults to ``dnnframe``),
    ``postgresql://user:password@host:5432/database`` (the database must exist; its tables
    are created on first use), ``mongomock://`` (an in-process fake MongoDB, tests only),
    ``memory://`` or ``memory://NAME`` (the in-memory reference backend: tests and
    one-process use only; stores opened with the same URL in one process share their data,
    and no other process can see it).

    With ``create=False`` (read-only commands) a store that does not exist yet is an error
    instead of being created: a mistyped path must not leave an empty database behind.

    Raises:
        StoreError: unknown scheme or unreachable store (the message names the URL); with
            ``create=False``, "no store at ..." when nothing exists there yet.
        StoreCorruptError: the file is not a dnnframe store (it is left untouched).
        SchemaVersionError: the store was written by a newer dnnframe.
    """
    if isinstance(url, ResultStore):
        return url
    if url is None:
        url = default_store_url()
    if not isinstance(url, str):
        raise StoreError(f"store URL must be a string, got {type(url).__name__}")
    url = url.strip()
    if url.startswith("sqlite:"):
        from .sqlite import SQLiteStore, parse_sqlite_url

        return SQLiteStore(parse_sqlite_url(url), url=url, create=create)
    if url.startswith(("mongodb://", "mongodb+srv://", "mongomock://")):
        require("pymongo", "mongo", "a mongodb:// store")
        from .mongodb import MongoStore

        return MongoStore.from_url(url, create=create)
    if url.startswith(("postgresql://", "postgres://")):
        from .postgresql import PostgresStore

        return PostgresStore(url, create=create)
    if url.startswith(MEMORY_PREFIX):
        return MemoryStore(url, create=create)
    raise StoreError(
        f"store URL {url!r} is not supported: use sqlite:///path/to/file.db, "
        "mongodb://host:port/database, postgresql://user:password@host:5432/database, "
        "or mongomock:// or memory:// (tests, one process)"
    )
