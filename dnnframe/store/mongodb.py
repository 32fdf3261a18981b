"""MongoDB backend (``mongodb://host/db``; ``mongomock://`` in tests). Contract: see base.py.

Each mutating call is made of atomic single-document updates whose filter re-checks the
state (batches go in one bulk write), so concurrent workers on many machines never both run
a trial. A network hiccup (``AutoReconnect``) is retried a few times with back-off rather
than killing a run (Sacred's lesson).

Change order: ``seq`` values come from a counter document, and the trial write that uses
them is a second operation, so writes can land out of ``seq`` order. Every writer therefore
reserves its block of seqs and, in the same atomic update of the counter, records the
block's first value as *in flight*; it removes that mark once its trial write has landed
(or failed). The *visible* cursor is one below the lowest mark in flight (or the counter
when none is): every seq up to it has landed, and ``since=`` queries return nothing above
it, so a reader that jumps to the largest seq it was given can never skip a write still in
flight. A mark older than ``INFLIGHT_TTL_S`` (a writer that died between reserving and
writing) stops holding readers back.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import pymongo
from pymongo import ReturnDocument, UpdateOne
from pymongo.errors import (
    AutoReconnect,
    BulkWriteError,
    ConfigurationError,
    DuplicateKeyError,
    InvalidURI,
    PyMongoError,
)

from ..exceptions import NotFoundError, SchemaVersionError, StoreCorruptError, StoreError
from .base import SCHEMA_VERSION, FinishItem, ResultStore, json_safe, now
from .checks import (
    check_experiment_args,
    check_finish_items,
    check_ids,
    check_max_attempts,
    check_metrics_many,
    check_page,
    check_trial_items,
    check_worker,
    requeue_state_list,
    state_list,
)
from .mongoseq import SeqCounter
from .records import ExperimentRecord, TrialRecord, TrialState, WorkerRecord
from .sorting import check_since_order, resolve_sort_path

F = TypeVar("F", bound=Callable[..., Any])
_RETRIES = 5
_COLLECTIONS = ("meta", "experiments", "trials", "workers", "counters")
# mongomock clients do not share data; one per host per process lets a second open_store()
# of the same mongomock:// URL (a test's dashboard and runner) see the same documents.
_MOCK_CLIENTS: dict[str, Any] = {}
_MOCK_LOCK = threading.Lock()
# A reserved seq block whose write has not landed after this long is taken for abandoned
# (its writer died): readers stop waiting for it.
INFLIGHT_TTL_S = 60.0
_CANCELLED_BEFORE_START = "experiment cancelled before the trial started"


def redact(url: str) -> str:
    """The URL with any password replaced by ``***`` (safe for error messages and logs)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _retry(fn: F) -> F:
    """Retry on AutoReconnect (primary step-down, dropped connection) with back-off; other
    driver errors become StoreError naming the URL."""

    @functools.wraps(fn)
    def wrapper(self: MongoStore, *args: Any, **kwargs: Any) -> Any:
        for attempt in range(_RETRIES):
            try:
                return fn(self, *args, **kwargs)
            except AutoReconnect as e:
                if attempt == _RETRIES - 1:
                    raise StoreError(f"store {redact(self.url)}: still unreachable after "
                                     f"{_RETRIES} attempts: {e}") from e
                time.sleep(min(0.2 * 2 ** attempt, 3.0))
            except PyMongoError as e:
                raise StoreError(f"store {redact(self.url)}: {e}") from e
        raise AssertionError("unreachable")

    return wrapper  # type: ignore[return-value]


def _trial(doc: dict[str, Any]) -> TrialRecord:
    return TrialRecord(
        id=doc["_id"], experiment_ids=sorted(doc.get("experiment_ids", [])),
        state=TrialState(doc["state"]), config=doc.get("config") or {}, result=doc.get("result"),
        metrics=doc.get("metrics") or [], error=doc.get("error"), worker=doc.get("worker"),
        attempts=doc.get("attempts", 0), created_at=doc.get("created_at", 0.0),
        started_at=doc.get("started_at"), finished_at=doc.get("finished_at"),
        heartbeat_at=doc.get("heartbeat_at"), seq=doc.get("seq", 0))


class MongoStore(ResultStore):
    """ResultStore in a MongoDB database: collections experiments, trials, workers, meta."""

    def __init__(self, db: Any, url: str, create: bool = True):
        self._db = db
        self.url = url
        self._seq = SeqCounter(db.counters, INFLIGHT_TTL_S)
        self._init_schema(create)

    @classmethod
    def from_url(cls, url: str, create: bool = True) -> MongoStore:
        """Connect (checking the server answers) and open the database named in the URL path."""
        if url.startswith("mongomock://"):
            try:
                import mongomock
            except ImportError as e:
                raise StoreError(f"store URL {url!r} needs the mongomock package "
                                 "(pip install mongomock)") from e
            name = urlsplit(url).path.strip("/") or "dnnframe"
            key = urlsplit(url).netloc  # one fake server per host, like a real one
            with _MOCK_LOCK:
                client = _MOCK_CLIENTS.setdefault(key, mongomock.MongoClient())
            return cls(client[name], url, create)
        try:
            parsed = pymongo.uri_parser.parse_uri(url)
            timeout_ms = int(float(os.environ.get("DNNFRAME_MONGO_TIMEOUT_S", "5")) * 1000)
            client = pymongo.MongoClient(url, serverSelectionTimeoutMS=timeout_ms,
                                         connectTimeoutMS=timeout_ms, retryWrites=True)
            client.admin.command("ping")
        except (InvalidURI, ConfigurationError, ValueError) as e:
            raise StoreError(f"store URL {redact(url)!r} is not a valid MongoDB URL: {e}") from e
        except PyMongoError as e:
            raise StoreError(f"store URL {redact(url)!r}: MongoDB server unreachable: {e}") from e
        return cls(client[parsed.get("database") or "dnnframe"], url, create)

    @_retry
    def _init_schema(self, create: bool = True) -> None:
        meta = self._db.meta.find_one({"_id": "schema"})
        if meta is None and not create:
            raise StoreError(f"no store at {redact(self.url)!r}: database {self._db.name!r} "
                             "holds no dnnframe data (nothing has been run with this store yet?)")
        if meta is None:
            foreign = sorted(set(self._db.list_collection_names()) - set(_COLLECTIONS))
            if foreign:
                raise StoreCorruptError(
                    f"store {redact(self.url)!r}: database {self._db.name!r} holds other "
                    f"collections ({', '.join(foreign)}) and no dnnframe schema document; "
                    "it was left untouched. Use another database name in the URL.")
            try:
                self._db.meta.insert_one({"_id": "schema", "version": SCHEMA_VERSION,
                                          "app": "dnnframe", "created_at": now()})
            except DuplicateKeyError:  # another process initialised it first
                pass
            meta = self._db.meta.find_one({"_id": "schema"})
        version = int(meta.get("version", 0))
        if version > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"store {redact(self.url)!r} has schema version {version}, written by a newer "
                f"dnnframe; this dnnframe reads up to version {SCHEMA_VERSION}. Upgrade dnnframe.")
        t = self._db.trials
        t.create_index([("experiment_ids", 1), ("order", 1)])
        t.create_index([("state", 1), ("heartbeat_at", 1)])
        t.create_index([("seq", 1)])
        t.create_index([("order", 1)])
        self._db.experiments.create_index([("created_at", -1)])

    def _next(self, counter: str, n: int = 1) -> int:
        """Reserve ``n`` values of an ordering counter (not ``seq``); returns the last one."""
        doc = self._db.counters.find_one_and_update(
            {"_id": counter}, {"$inc": {"value": n}}, upsert=True,
            return_document=ReturnDocument.AFTER)
        return int(doc["value"])

    def close(self) -> None:
        if not self.url.startswith("mongomock://"):
            self._db.client.close()

    # ------------------------------------------------------------ experiments
    @_retry
    def create_experiment(self, experiment_id: str, name: str, spec: dict[str, Any],
                          n_trials: int) -> ExperimentRecord:
        check_experiment_args(experiment_id, n_trials)
        self._db.experiments.update_one(
            {"_id": experiment_id},
            {"$setOnInsert": {"name": name, "spec": json_safe(spec), "n_trials": n_trials,
                              "created_at": now(), "cancel_requested": False,
                              "order": self._next("experiment_order")}},
            upsert=True)
        return self.get_experiment(experiment_id)

    def _experiment(self, doc: dict[str, Any]) -> ExperimentRecord:
        return ExperimentRecord(id=doc["_id"], name=doc["name"], spec=doc["spec"],
                                n_trials=doc["n_trials"], created_at=doc["created_at"],
                                cancel_requested=bool(doc.get("cancel_requested")),
                                counts=self._count_states(doc["_id"]))

    @_retry
    def get_experiment(self, experiment_id: str) -> ExperimentRecord:
        doc = self._db.experiments.find_one({"_id": experiment_id})
        if doc is None:
            raise NotFoundError(f"experiment {experiment_id!r} not found in {redact(self.url)}")
        return self._experiment(doc)

    @_retry
    def list_experiments(self, limit: int = 100, offset: int = 0) -> list[ExperimentRecord]:
        check_page(limit, offset)
        if limit == 0:
            return []
        cur = self._db.experiments.find().sort([("created_at", -1), ("order", -1)]).skip(offset)
        if limit is not None:
            cur = cur.limit(limit)
        return [self._experiment(d) for d in cur]

    @_retry
    def _count_states(self, experiment_id: str | None) -> dict[str, int]:
        match = {} if experiment_id is None else {"experiment_ids": experiment_id}
        rows = self._db.trials.aggregate([{"$match": match},
                                          {"$group": {"_id": "$state", "n": {"$sum": 1}}}])
        return {r["_id"]: r["n"] for r in rows}

    @_retry
    def cancel_experiment(self, experiment_id: str) -> int:
        res = self._db.experiments.update_one({"_id": experiment_id},
                                              {"$set": {"cancel_requested": True}})
        if res.matched_count == 0:
            raise NotFoundError(f"experiment {experiment_id!r} not found in {redact(self.url)}")
        live = [d["_id"] for d in self._db.experiments.find({"cancel_requested": False}, {"_id": 1})]
        query = {"$and": [{"experiment_ids": experiment_id}, {"experiment_ids": {"$nin": live}}],
                 "state": "QUEUED"}
        return len(self._update_each(query, {"state": "CANCELLED", "finished_at": now(),
                                             "error": "experiment cancelled before the trial "
                                                      "started"}))

    def _update_each(self, query: dict[str, Any], changes: dict[str, Any]) -> list[str]:
        """``$set changes`` on every trial matching ``query``, each with its own ``seq``.

        One ``$inc`` reserves a block of seqs spanning the trials' (unique) ``order`` values
        and one pipeline update sets ``seq = base + order``: distinct per row, in creation
        order, in a single round trip (gaps in the block are harmless). The filter is
        re-checked by the update itself, so a trial that changed meanwhile is left alone.
        Returns the ids updated.
        """
        docs = list(self._db.trials.find(query, {"_id": 1, "order": 1}).sort("order", 1))
        if not docs:
            return []
        ids = [d["_id"] for d in docs]
        orders = [d.get("order") for d in docs]
        if any(not isinstance(o, int) for o in orders):  # no order to number by: one by one
            with self._seq.block(len(ids)) as first:
                return [tid for k, tid in enumerate(ids) if self._db.trials.update_one(
                    {**query, "_id": tid}, {"$set": {**changes, "seq": first + k}}).modified_count]
        low, span = orders[0], orders[-1] - orders[0] + 1
        sets = {k: {"$literal": v} for k, v in changes.items()}  # values, never expressions
        with self._seq.block(span) as first:
            base = first - low
            res = self._db.trials.update_many(
                {**query, "_id": {"$in": ids}},
                [{"$set": {**sets, "seq": {"$add": ["$order", base]}}}])
        if res.modified_count == len(ids):
            return ids
        # Some changed meanwhile: the ones updated carry this call's seq block (one written
        # again since, say claimed already, is left out: nobody needs to resubmit it).
        return sorted(self._in_block(ids, first, span), key=ids.index)

    def _in_block(self, ids: list[str], first: int, n: int) -> set[str]:
        """Which of ``ids`` still carry a seq of the block ``[first, first + n)``."""
        return {d["_id"] for d in self._db.trials.find(
            {"_id": {"$in": ids}, "seq": {"$gte": first, "$lt": first + n}}, {"_id": 1})}

    @_retry
    def requeue_trials(self, experiment_id: str,
                       states: list[TrialState] | tuple[TrialState, ...] | TrialState
                       = (TrialState.CANCELLED,)) -> list[str]:
        names = requeue_state_list(states)
        res = self._db.experiments.update_one({"_id": experiment_id},
                                              {"$set": {"cancel_requested": False}})
        if res.matched_count == 0:
            raise NotFoundError(f"experiment {experiment_id!r} not found in {redact(self.url)}")
        if not names:
            return []
        query = {"experiment_ids": experiment_id, "state": {"$in": names}}
        return sorted(self._update_each(
            query, {"state": "QUEUED", "result": None, "error": None, "worker": None,
                    "attempts": 0, "started_at": None, "finished_at": None,
                    "heartbeat_at": None, "metrics": []}))

    # ------------------------------------------------------------ trials
    @_retry
    def create_trials(self, experiment_id: str, trials: list[tuple[str, dict[str, Any]]]) -> int:
        items = [(tid, json_safe(config)) for tid, config in check_trial_items(trials)]
        if self._db.experiments.find_one({"_id": experiment_id}, {"_id": 1}) is None:
            raise NotFoundError(f"experiment {experiment_id!r} not found in {redact(self.url)}")
        ids = list(dict.fromkeys(t for t, _ in items))
        existing: set[str] = set()
        for i in range(0, len(ids), 10_000):
            existing.update(d["_id"] for d in self._db.trials.find(
                {"_id": {"$in": ids[i:i + 10_000]}}, {"_id": 1}))
        new = [(t, c) for t, c in dict(items).items() if t not in existing]
        created = 0
        if new:
            # One seq per document, reserved with one $inc: a cursor reader paging with a
            # limit must never meet a tie larger than its page.
            last = self._next("trial_order", len(new))
            t = now()
            with self._seq.block(len(new)) as first_seq:
                docs = [{"_id": tid, "experiment_ids": [experiment_id], "state": "QUEUED",
                         "config": c, "result": None, "metrics": [], "error": None,
                         "worker": None, "attempts": 0, "created_at": t, "started_at": None,
                         "finished_at": None, "heartbeat_at": None, "seq": first_seq + k,
                         "order": last - len(new) + 1 + k}
                        for k, (tid, c) in enumerate(new)]
                try:
                    created = len(self._db.trials.insert_many(docs, ordered=False).inserted_ids)
                except BulkWriteError as e:  # a concurrent submit created some of them first
                    created = e.details.get("nInserted", 0)
        if existing or created < len(new):
            self._db.trials.update_many({"_id": {"$in": ids}},
                                        {"$addToSet": {"experiment_ids": experiment_id}})
        return created

    def _live_experiments(self, experiment_ids: set[str]) -> set[str]:
        """Those of ``experiment_ids`` that have not asked to cancel."""
        return {d["_id"] for d in self._db.experiments.find(
            {"_id": {"$in": sorted(experiment_ids)}, "cancel_requested": False}, {"_id": 1})}

    def _update_all(self, ops: list[tuple[dict[str, Any], dict[str, Any]]]) -> int:
        """Apply ``(filter, update)`` pairs to trials in one bulk write; returns how many
        documents changed. mongomock cannot take pymongo's bulk operations: one by one."""
        if not ops:
            return 0
        if self.url.startswith("mongomock://"):
            return sum(self._db.trials.update_one(f, u).modified_count for f, u in ops)
        return self._db.trials.bulk_write([UpdateOne(f, u) for f, u in ops],
                                          ordered=False).modified_count

    def _find_all(self, ids: list[str], fields: dict[str, int]) -> dict[str, dict[str, Any]]:
        docs = {d["_id"]: d for d in self._db.trials.find({"_id": {"$in": ids}}, fields)}
        missing = [tid for tid in ids if tid not in docs]
        if missing:
            raise NotFoundError(f"trial {missing[0]!r} not found in {redact(self.url)}"
                                + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
        return docs

    @_retry
    def claim_trials(self, trial_ids: list[str], worker: str,
                     max_attempts: int | None = None) -> list[TrialRecord]:
        ids = check_ids(trial_ids)
        check_worker(worker)
        check_max_attempts(max_attempts)
        docs = self._find_all(ids, {"state": 1, "attempts": 1, "experiment_ids": 1})
        queued = [tid for tid in ids if docs[tid]["state"] == "QUEUED"]
        if not queued:
            return []
        live = self._live_experiments({e for tid in queued
                                       for e in docs[tid].get("experiment_ids", [])})
        t = now()
        ops, claims = [], []
        with self._seq.block(len(queued)) as first:
            for k, tid in enumerate(queued):
                doc, query = docs[tid], {"_id": tid, "state": "QUEUED"}
                exps = doc.get("experiment_ids", [])
                if exps and not live.intersection(exps):
                    ops.append((query, {"$set": {
                        "state": "CANCELLED", "finished_at": t, "seq": first + k,
                        "error": _CANCELLED_BEFORE_START}}))
                elif max_attempts is not None and doc.get("attempts", 0) >= max_attempts:
                    ops.append(({**query, "attempts": {"$gte": max_attempts}}, {"$set": {
                        "state": "FAILED", "finished_at": t, "seq": first + k,
                        "error": f"delivery cap reached: claimed {doc['attempts']} times, "
                                 f"max_attempts={max_attempts} (the trial keeps losing its "
                                 "worker)"}}))
                else:
                    if max_attempts is not None:
                        query["attempts"] = {"$lt": max_attempts}
                    ops.append((query, {"$set": {
                        "state": "RUNNING", "worker": worker, "started_at": t, "heartbeat_at": t,
                        "metrics": [], "seq": first + k}, "$inc": {"attempts": 1}}))
                    claims.append(tid)
            self._update_all(ops)
        if not claims:
            return []
        # A claim was won when the trial carries this call's seq and this worker.
        won = {d["_id"]: _trial(d) for d in self._db.trials.find(
            {"_id": {"$in": claims}, "worker": worker,
             "seq": {"$gte": first, "$lt": first + len(queued)}})}
        return [won[tid] for tid in claims if tid in won]

    @_retry
    def heartbeat_trials(self, trial_ids: list[str], worker: str) -> set[str]:
        ids = check_ids(trial_ids)
        owned = {"_id": {"$in": ids}, "state": "RUNNING", "worker": worker}
        self._db.trials.update_many(owned, {"$set": {"heartbeat_at": now()}})
        return {d["_id"] for d in self._db.trials.find(owned, {"_id": 1})}

    @_retry
    def append_metrics_many(self, metrics_by_id: dict[str, dict[str, Any]],
                            worker: str | None = None) -> set[str]:
        items = list(check_metrics_many(metrics_by_id).items())
        if not items:
            return set()
        t = now()
        with self._seq.block(len(items)) as first:
            ops = []
            for k, (tid, metrics) in enumerate(items):
                query: dict[str, Any] = {"_id": tid, "state": "RUNNING"}
                if worker is not None:
                    query["worker"] = worker
                ops.append((query, {"$push": {"metrics": json_safe(metrics)},
                                             "$set": {"heartbeat_at": t, "seq": first + k}}))
            modified = self._update_all(ops)
        if modified == len(items):
            return {tid for tid, _ in items}
        return self._in_block([tid for tid, _ in items], first, len(items))

    @_retry
    def finish_trials(self, items: list[FinishItem], worker: str | None = None) -> set[str]:
        checked = check_finish_items(items)
        if not checked:
            return set()
        ids = [tid for tid, *_ in checked]
        self._find_all(ids, {"_id": 1})
        t = now()
        with self._seq.block(len(checked)) as first:
            ops = []
            for k, (tid, st, result, error) in enumerate(checked):
                running: dict[str, Any] = {"state": "RUNNING"}
                if worker is not None:
                    running["worker"] = worker
                allowed = [running] + ([{"state": "QUEUED"}] if st is TrialState.CANCELLED
                                       else [])
                ops.append(({"_id": tid, "$or": allowed}, {"$set": {
                    "state": st.value, "result": json_safe(result) if result is not None else None,
                    "error": error, "finished_at": t, "seq": first + k}}))
            modified = self._update_all(ops)
        if modified == len(ids):
            return set(ids)
        return self._in_block(ids, first, len(ids))

    @_retry
    def cancel_requested(self, trial_ids: list[str]) -> set[str]:
        ids = check_ids(trial_ids)
        docs = self._find_all(ids, {"state": 1, "experiment_ids": 1})
        live = self._live_experiments({e for d in docs.values()
                                       for e in d.get("experiment_ids", [])})
        return {tid for tid, d in docs.items() if d["state"] == "CANCELLED" or (
            d.get("experiment_ids") and not live.intersection(d["experiment_ids"]))}

    @_retry
    def requeue_stale(self, timeout_s: float) -> list[str]:
        if timeout_s < 0:
            raise ValueError(f"timeout_s must be >= 0, got {timeout_s!r}")
        # Guarded per trial: one that heartbeats meanwhile stays RUNNING.
        stale = {"state": "RUNNING", "heartbeat_at": {"$lt": now() - timeout_s}}
        return sorted(self._update_each(stale, {"state": "QUEUED", "worker": None}))

    @_retry
    def release_trial(self, trial_id: str, worker: str) -> bool:
        check_worker(worker)
        with self._seq.block() as seq:
            res = self._db.trials.update_one(
                {"_id": trial_id, "state": "RUNNING", "worker": worker},
                {"$set": {"state": "QUEUED", "worker": None, "heartbeat_at": None, "seq": seq}})
        if res.matched_count == 0 and self._db.trials.find_one({"_id": trial_id}, {"_id": 1}) is None:
            raise NotFoundError(f"trial {trial_id!r} not found in {redact(self.url)}")
        return res.matched_count > 0

    # ------------------------------------------------------------ queries
    @_retry
    def get_trial(self, trial_id: str) -> TrialRecord:
        doc = self._db.trials.find_one({"_id": trial_id})
        if doc is None:
            raise NotFoundError(f"trial {trial_id!r} not found in {redact(self.url)}")
        return _trial(doc)

    @_retry
    def list_trials(self, experiment_id: str | None = None,
                    state: TrialState | list[TrialState] | None = None,
                    sort_by: str | None = None, descending: bool = False,
                    limit: int | None = None, offset: int = 0,
                    since: int | None = None) -> list[TrialRecord]:
        check_page(limit, offset)
        check_since_order(since, sort_by, descending)
        match: dict[str, Any] = {}
        if experiment_id is not None:
            match["experiment_ids"] = experiment_id
        states = state_list(state)
        if states is not None:
            match["state"] = {"$in": states}
        if since is not None:
            # Nothing above the visible cursor: a write still in flight below it would be
            # skipped by a reader that jumps to the largest seq of this page.
            match["seq"] = {"$gt": since, "$lte": self._seq.visible()}
        if limit == 0:
            return []
        direction = -1 if descending else 1
        if sort_by is None:
            keys = [("seq", direction), ("order", direction)] if since is not None else \
                [("created_at", direction), ("order", direction)]
            cur = self._db.trials.find(match).sort(keys).skip(offset)
            if limit is not None:
                cur = cur.limit(limit)
            return [_trial(d) for d in cur]
        path = resolve_sort_path(sort_by)
        field = "_id" if path == "id" else path  # validated identifiers only: no operators
        pipeline: list[dict[str, Any]] = [
            {"$match": match},
            {"$addFields": {"_sort_key": f"${field}"}},
            # Mongo sorts null/missing first ascending; dnnframe wants them last both ways.
            {"$addFields": {"_sort_null": {"$cond": [
                {"$eq": [{"$ifNull": ["$_sort_key", None]}, None]}, 1, 0]}}},
            {"$sort": {"_sort_null": 1, "_sort_key": direction, "order": 1}},
            {"$skip": offset},
        ]
        if limit is not None:
            pipeline.append({"$limit": limit})
        pipeline.append({"$project": {"_sort_key": 0, "_sort_null": 0}})
        return [_trial(d) for d in self._db.trials.aggregate(pipeline)]

    @_retry
    def latest_seq(self) -> int:
        return self._seq.visible()

    # ------------------------------------------------------------ workers
    @_retry
    def register_worker(self, name: str, host: str | None = None, pid: int | None = None,
                        current_trial: str | None = None, trials_done: int = 0,
                        info: dict[str, Any] | None = None) -> None:
        check_worker(name, "worker name")
        self._db.workers.replace_one(
            {"_id": name},
            {"host": host, "pid": pid, "current_trial": current_trial, "trials_done": trials_done,
             "last_seen": now(), "info": json_safe(info or {})}, upsert=True)

    @_retry
    def list_workers(self, seen_within_s: float | None = None) -> list[WorkerRecord]:
        query = {} if seen_within_s is None else {"last_seen": {"$gte": now() - seen_within_s}}
        return [WorkerRecord(name=d["_id"], host=d.get("host"), pid=d.get("pid"),
                             current_trial=d.get("current_trial"),
                             trials_done=d.get("trials_done", 0), last_seen=d["last_seen"],
                             info=d.get("info") or {})
                for d in self._db.workers.find(query).sort("_id", 1)]

