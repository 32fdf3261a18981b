"""Reaching a MongoDB store: connect by URL, retry hiccups, check or create the schema."""

from __future__ import annotations

import functools
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar
from urllib.parse import urlsplit

import pymongo
from pymongo.errors import (
    AutoReconnect,
    ConfigurationError,
    DuplicateKeyError,
    InvalidURI,
    PyMongoError,
)

from .. import settings
from ..exceptions import SchemaVersionError, StoreCorruptError, StoreError
from ..retrying import STORE_WRITE
from ..urls import redact
from .base import SCHEMA_VERSION, now


class _Located(Protocol):
    """A store method's ``self``: the URL its errors name."""

    url: str


S = TypeVar("S", bound=_Located)
P = ParamSpec("P")
R = TypeVar("R")
COLLECTIONS = (
    "meta",
    "experiments",
    "trials",
    "workers",
    "counters",
    "held_dispatch",
    "leases",
    "notes",
)
# mongomock clients do not share data; one per host per process lets a second open_store()
# of the same mongomock:// URL (a test's dashboard and runner) see the same documents.
_MOCK_CLIENTS: dict[str, Any] = {}
_MOCK_LOCK = threading.Lock()


def retry(fn: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """Retry on AutoReconnect (primary step-down, dropped connection) by the
    :data:`~dnnframe.retrying.STORE_WRITE` policy; other driver errors become StoreError
    naming the URL."""

    @functools.wraps(fn)
    def wrapper(self: S, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return STORE_WRITE.call(
                functools.partial(fn, self, *args, **kwargs), what=f"store {redact(self.url)}"
            )
        except AutoReconnect as e:
            raise StoreError(
                f"store {redact(self.url)}: still unreachable after "
                f"{STORE_WRITE.attempts} attempts: {e}"
            ) from e
        except PyMongoError as e:
            raise StoreError(f"store {redact(self.url)}: {e}") from e

    return wrapper


@dataclass
class WriteCall:
    """One call of a retried write: ``op`` is the same on every attempt, so what an attempt
    wrote before its connection dropped can be recognised (stamped on the documents as
    ``op``) by the next attempt instead of being applied twice or reported lost."""

    op: str
    attempt: int = 0


def retry_write(fn: Callable[Concatenate[S, ...], R]) -> Callable[Concatenate[S, ...], R]:
    """:func:`retry` for a write that an attempt may have applied before the connection
    dropped: the method gets ``call=WriteCall(...)``, one per call, shared by its attempts.
    (Its callers' arguments go unchecked: a ParamSpec cannot say "less ``call``".)"""

    @functools.wraps(fn)
    def wrapper(self: S, *args: Any, **kwargs: Any) -> R:
        call = WriteCall(uuid.uuid4().hex)

        def attempt(self: S) -> R:
            try:
                return fn(self, *args, call=call, **kwargs)
            finally:
                call.attempt += 1

        return retry(attempt)(self)

    return wrapper


def connect(url: str) -> Any:
    """The database named in ``url`` (default ``dnnframe``), after checking the server answers."""
    if url.startswith("mongomock://"):
        try:
            import mongomock
        except ImportError as e:
            raise StoreError(
                f"store URL {url!r} needs the mongomock package (pip install mongomock)"
            ) from e
        name = urlsplit(url).path.strip("/") or "dnnframe"
        key = urlsplit(url).netloc  # one fake server per host, like a real one
        with _MOCK_LOCK:
            client = _MOCK_CLIENTS.setdefault(key, mongomock.MongoClient())
        return client[name]
    try:
        parsed = pymongo.uri_parser.parse_uri(url)
        timeout_ms = int(settings.get().mongo_timeout_s * 1000)
        client = pymongo.MongoClient(
            url, serverSelectionTimeoutMS=timeout_ms, connectTimeoutMS=timeout_ms, retryWrites=True
        )
        client.admin.command("ping")
    except (InvalidURI, ConfigurationError, ValueError) as e:
        raise StoreError(f"store URL {redact(url)!r} is not a valid MongoDB URL: {e}") from e
    except PyMongoError as e:
        raise StoreError(f"store URL {redact(url)!r}: MongoDB server unreachable: {e}") from e
    return client[parsed.get("database") or "dnnframe"]


def init_schema(db: Any, url: str, create: bool) -> None:
    """Check the schema document (create it, and the indexes, in a new database).

    Raises:
        StoreError: nothing there and ``create`` is False.  StoreCorruptError: a database
        with other collections and no schema document.  SchemaVersionError: a newer schema.
    """
    meta = db.meta.find_one({"_id": "schema"})
    if meta is None and not create:
        raise StoreError(
            f"no store at {redact(url)!r}: database {db.name!r} "
            "holds no dnnframe data (nothing has been run with this store yet?)"
        )
    if meta is None:
        foreign = sorted(set(db.list_collection_names()) - set(COLLECTIONS))
        if foreign:
            raise StoreCorruptError(
                f"store {redact(url)!r}: database {db.name!r} holds other "
                f"collections ({', '.join(foreign)}) and no dnnframe schema document; "
                "it was left untouched. Use another database name in the URL."
            )
        try:
            db.meta.insert_one(
                {"_id": "schema", "version": SCHEMA_VERSION, "app": "dnnframe", "created_at": now()}
            )
        except DuplicateKeyError:  # another process initialised it first
            pass
        meta = db.meta.find_one({"_id": "schema"})
    version = int(meta.get("version", 0))
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"store {redact(url)!r} has schema version {version}, written by a newer "
            f"dnnframe; this dnnframe reads up to version {SCHEMA_VERSION}. Upgrade dnnframe."
        )
    t = db.trials
    t.create_index([("experiment_ids", 1), ("order", 1)])
    t.create_index([("state", 1), ("heartbeat_at", 1)])
    t.create_index([("seq", 1)])
    t.create_index([("order", 1)])
    db.experiments.create_index([("created_at", -1)])
