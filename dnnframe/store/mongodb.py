"""MongoDB backend (``mongodb://host/db``; ``mongomock://`` in tests). Contract: see base.py.

Each mutating call is made of atomic single-document updates whose filter re-checks the
state (batches go in one bulk write), so concurrent workers on many machines never both run
a trial. A network hiccup (``AutoReconnect``) is retried a few times with back-off rather
than killing a run (Sacred's lesson). A retried attempt must not apply a write twice nor
report lost what an earlier attempt applied before the connection dropped: appends are
guarded by the curve's length, and the other trial writes stamp the call's ``op`` on the
documents they change, by which a later attempt recognises them.

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

import math
from typing import Any

from pymongo import ReturnDocument, UpdateOne
from pymongo.errors import BulkWriteError, PyMongoError

from ..exceptions import NotFoundError, StoreError
from .base import FinishItem, ResultStore, json_safe, now
from .checks import (
    MetricsBatch,
    active_error,
    check_experiment_args,
    check_experiment_id,
    check_finish_items,
    check_held,
    check_ids,
    check_max_attempts,
    check_metrics_many,
    check_page,
    check_rung_args,
    check_take_limit,
    check_trial_items,
    check_worker,
    epochs_to_store,
    requeue_state_list,
    state_list,
)
from .mongo_connect import WriteCall, connect, init_schema, redact, retry, retry_write
from .mongoseq import SeqCounter
from .records import ExperimentRecord, TrialRecord, TrialState, WorkerRecord
from .sorting import check_since_order, resolve_sort_path

__all__ = ["MongoStore", "redact"]

# A reserved seq block whose write has not landed after this long is taken for abandoned
# (its writer died): readers stop waiting for it.
INFLIGHT_TTL_S = 60.0
# Reads and guarded pushes per append call before a curve that keeps changing under it (a
# concurrent writer of the same trial) is given up on and reported not written.
_APPEND_ROUNDS = 3
_CANCELLED_BEFORE_START = "experiment cancelled before the trial started"


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
        return cls(connect(url), url, create)

    @retry
    def _init_schema(self, create: bool = True) -> None:
        init_schema(self._db, self.url, create)

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
    @retry
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

    @retry
    def get_experiment(self, experiment_id: str) -> ExperimentRecord:
        doc = self._db.experiments.find_one({"_id": experiment_id})
        if doc is None:
            raise NotFoundError(f"experiment {experiment_id!r} not found in {redact(self.url)}")
        return self._experiment(doc)

    @retry
    def list_experiments(self, limit: int = 100, offset: int = 0) -> list[ExperimentRecord]:
        check_page(limit, offset)
        if limit == 0:
            return []
        cur = self._db.experiments.find().sort([("created_at", -1), ("order", -1)]).skip(offset)
        if limit is not None:
            cur = cur.limit(limit)
        return [self._experiment(d) for d in cur]

    @retry
    def _count_states(self, experiment_id: str | None) -> dict[str, int]:
        match = {} if experiment_id is None else {"experiment_ids": experiment_id}
        rows = self._db.trials.aggregate([{"$match": match},
                                          {"$group": {"_id": "$state", "n": {"$sum": 1}}}])
        return {r["_id"]: r["n"] for r in rows}

    @retry_write
    def cancel_experiment(self, experiment_id: str, *, call: WriteCall) -> int:
        res = self._db.experiments.update_one({"_id": experiment_id},
                                              {"$set": {"cancel_requested": True}})
        if res.matched_count == 0:
            raise NotFoundError(f"experiment {experiment_id!r} not found in {redact(self.url)}")
        live = [d["_id"] for d in self._db.experiments.find({"cancel_requested": False}, {"_id": 1})]
        query = {"$and": [{"experiment_ids": experiment_id}, {"experiment_ids": {"$nin": live}}],
                 "state": "QUEUED"}
        return len(self._update_each(query, {"state": "CANCELLED", "finished_at": now(),
                                             "error": "experiment cancelled before the trial "
                                                      "started"}, call))

    @retry_write
    def delete_experiment(self, experiment_id: str, *, call: WriteCall) -> int:
        check_experiment_id(experiment_id)
        if self._db.experiments.find_one({"_id": experiment_id}, {"_id": 1}) is None:
            return 0
        alone = {"experiment_ids": [experiment_id]}  # linked to this experiment only
        active = [d["_id"] for d in self._db.trials.find(
            {**alone, "state": {"$in": ["QUEUED", "RUNNING"]}}, {"_id": 1}).sort("order", 1)]
        if active:
            raise active_error(experiment_id, active)
        own = [d["_id"] for d in self._db.trials.find(alone, {"_id": 1})]
        # the experiment goes last: a retry after a lost connection finds it and finishes
        self._db.held_dispatch.delete_many({"_id": {"$in": own}})
        self._db.trials.delete_many(
            {**alone, "_id": {"$in": own}, "state": {"$nin": ["QUEUED", "RUNNING"]}})
        shared = {"experiment_ids": experiment_id}
        ids = [d["_id"] for d in self._db.trials.find(shared, {"_id": 1})]
        self._db.trials.update_many(shared, {"$pull": {"experiment_ids": experiment_id}})
        if ids:
            self._update_each({"_id": {"$in": ids}}, {}, call)
        self._db.experiments.delete_one({"_id": experiment_id})
        return len(own)

    def _update_each(self, query: dict[str, Any], changes: dict[str, Any],
                     call: WriteCall) -> list[str]:
        """``$set changes`` on every trial matching ``query``, each with its own ``seq``.

        One ``$inc`` reserves a block of seqs spanning the trials' (unique) ``order`` values
        and one pipeline update sets ``seq = base + order``: distinct per row, in creation
        order, in a single round trip (gaps in the block are harmless). The filter is
        re-checked by the update itself, so a trial that changed meanwhile is left alone.
        Returns the ids updated by this call, an earlier attempt of it included.
        """
        earlier = self._stamped(None, call) if call.attempt else []
        docs = list(self._db.trials.find(query, {"_id": 1, "order": 1}).sort("order", 1))
        if not docs:
            return earlier
        ids = [d["_id"] for d in docs]
        orders = [d.get("order") for d in docs]
        changes = {**changes, "op": call.op}
        if any(not isinstance(o, int) for o in orders):  # no order to number by: one by one
            with self._seq.block(len(ids)) as first:
                for k, tid in enumerate(ids):
                    self._db.trials.update_one({**query, "_id": tid},
                                               {"$set": {**changes, "seq": first + k}})
            return list(dict.fromkeys(self._stamped(ids, call) + earlier))
        low, span = orders[0], orders[-1] - orders[0] + 1
        sets = {k: {"$literal": v} for k, v in changes.items()}  # values, never expressions
        with self._seq.block(span) as first:
            base = first - low
            res = self._db.trials.update_many(
                {**query, "_id": {"$in": ids}},
                [{"$set": {**sets, "seq": {"$add": ["$order", base]}}}])
        if res.modified_count == len(ids):
            return list(dict.fromkeys(ids + earlier))
        # Some changed meanwhile: the ones updated carry this call's op (one written again
        # since, say claimed already, is left out: nobody needs to resubmit it).
        return list(dict.fromkeys(self._stamped(ids, call) + earlier))

    def _stamped(self, ids: list[str] | None, call: WriteCall) -> list[str]:
        """Which of ``ids`` (None: of all trials) carry ``call``'s op: written by this call
        and by nobody since. Without ids a scan, done only when an attempt was retried."""
        query: dict[str, Any] = {"op": call.op}
        if ids is not None:
            query["_id"] = {"$in": ids}
        found = {d["_id"] for d in self._db.trials.find(query, {"_id": 1})}
        return [tid for tid in ids if tid in found] if ids is not None else sorted(found)

    def _in_block(self, ids: list[str], first: int, n: int) -> set[str]:
        """Which of ``ids`` still carry a seq of the block ``[first, first + n)``."""
        return {d["_id"] for d in self._db.trials.find(
            {"_id": {"$in": ids}, "seq": {"$gte": first, "$lt": first + n}}, {"_id": 1})}

    @retry_write
    def requeue_trials(self, experiment_id: str,
                       states: list[TrialState] | tuple[TrialState, ...] | TrialState
                       = (TrialState.CANCELLED,), *, call: WriteCall) -> list[str]:
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
                    "heartbeat_at": None, "metrics": []}, call))

    # ------------------------------------------------------------ trials
    @retry_write
    def create_trials(self, experiment_id: str, trials: list[tuple[str, dict[str, Any]]], *,
                      call: WriteCall) -> int:
        items = [(tid, json_safe(config)) for tid, config in check_trial_items(trials)]
        if self._db.experiments.find_one({"_id": experiment_id}, {"_id": 1}) is None:
            raise NotFoundError(f"experiment {experiment_id!r} not found in {redact(self.url)}")
        ids = list(dict.fromkeys(t for t, _ in items))
        existing: set[str] = set()
        created = 0  # by an earlier attempt of this call, whose answer was lost
        for i in range(0, len(ids), 10_000):
            for d in self._db.trials.find({"_id": {"$in": ids[i:i + 10_000]}}, {"op": 1}):
                existing.add(d["_id"])
                created += d.get("op") == call.op
        new = [(t, c) for t, c in dict(items).items() if t not in existing]
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
                         "order": last - len(new) + 1 + k, "op": call.op}
                        for k, (tid, c) in enumerate(new)]
                try:
                    created += len(self._db.trials.insert_many(docs, ordered=False).inserted_ids)
                except BulkWriteError as e:  # a concurrent submit created some of them first
                    created += e.details.get("nInserted", 0)
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

    @retry_write
    def claim_trials(self, trial_ids: list[str], worker: str,
                     max_attempts: int | None = None, *, call: WriteCall) -> list[TrialRecord]:
        ids = check_ids(trial_ids)
        check_worker(worker)
        check_max_attempts(max_attempts)
        docs = self._find_all(ids, {"state": 1, "attempts": 1, "experiment_ids": 1, "op": 1})
        # won by an earlier attempt of this call, whose answer was lost
        mine = [tid for tid in ids if docs[tid]["state"] == "RUNNING"
                and docs[tid].get("op") == call.op]
        queued = [tid for tid in ids if docs[tid]["state"] == "QUEUED"]
        if not queued and not mine:
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
                        "error": _CANCELLED_BEFORE_START, "op": call.op}}))
                elif max_attempts is not None and doc.get("attempts", 0) >= max_attempts:
                    ops.append(({**query, "attempts": {"$gte": max_attempts}}, {"$set": {
                        "state": "FAILED", "finished_at": t, "seq": first + k,
                        "error": f"delivery cap reached: claimed {doc['attempts']} times, "
                                 f"max_attempts={max_attempts} (the trial keeps losing its "
                                 "worker)", "op": call.op}}))
                else:
                    if max_attempts is not None:
                        query["attempts"] = {"$lt": max_attempts}
                    ops.append((query, {"$set": {
                        "state": "RUNNING", "worker": worker, "started_at": t, "heartbeat_at": t,
                        "metrics": [], "seq": first + k, "op": call.op},
                        "$inc": {"attempts": 1}}))
                    claims.append(tid)
            self._update_all(ops)
        if not claims and not mine:
            return []
        # A claim was won when the trial runs under this worker and carries this call's op.
        won = {d["_id"]: _trial(d) for d in self._db.trials.find(
            {"_id": {"$in": claims + mine}, "state": "RUNNING", "worker": worker,
             "op": call.op})}
        return [won[tid] for tid in ids if tid in won]

    @retry
    def heartbeat_trials(self, trial_ids: list[str], worker: str) -> set[str]:
        ids = check_ids(trial_ids)
        owned = {"_id": {"$in": ids}, "state": "RUNNING", "worker": worker}
        self._db.trials.update_many(owned, {"$set": {"heartbeat_at": now()}})
        return {d["_id"] for d in self._db.trials.find(owned, {"_id": 1})}

    @retry
    def append_metrics_many(self, metrics_by_id: MetricsBatch,
                            worker: str | None = None) -> set[str]:
        pending = check_metrics_many(metrics_by_id)
        written: set[str] = set()
        # Read how each curve ends, then push only the epochs it lacks, guarded by its length:
        # a push that was applied before the connection dropped is not applied again when
        # this call is retried. A curve that grew meanwhile is read again.
        for _ in range(_APPEND_ROUNDS):
            if not pending:
                break
            owned: dict[str, Any] = {"_id": {"$in": list(pending)}, "state": "RUNNING"}
            if worker is not None:
                owned["worker"] = worker
            ends = {d["_id"]: d for d in self._db.trials.aggregate([
                {"$match": owned},
                {"$project": {"n": {"$size": "$metrics"},
                              "last": {"$arrayElemAt": ["$metrics", -1]}}}])}
            pending = {tid: epochs for tid, epochs in pending.items() if tid in ends}
            if not pending:
                break
            t = now()
            with self._seq.block(len(pending)) as first:
                ops = []
                for k, (tid, epochs) in enumerate(pending.items()):
                    end = ends[tid]
                    tail = epochs_to_store(epochs, (end.get("last") or {}).get("epoch"))
                    ops.append(({**owned, "_id": tid, "metrics": {"$size": end["n"]}},
                                {"$push": {"metrics": {"$each": json_safe(tail)}},
                                 "$set": {"heartbeat_at": t, "seq": first + k}}))
                modified = self._update_all(ops)
                done = set(pending) if modified == len(pending) else \
                    self._in_block(list(pending), first, len(pending))
            written |= done
            pending = {tid: epochs for tid, epochs in pending.items() if tid not in done}
        return written

    @retry_write
    def finish_trials(self, items: list[FinishItem], worker: str | None = None, *,
                      call: WriteCall) -> set[str]:
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
                    "error": error, "finished_at": t, "seq": first + k, "op": call.op}}))
            modified = self._update_all(ops)
        if modified == len(ids):
            return set(ids)
        return set(self._stamped(ids, call))

    @retry
    def cancel_requested(self, trial_ids: list[str]) -> set[str]:
        ids = check_ids(trial_ids)
        docs = self._find_all(ids, {"state": 1, "experiment_ids": 1})
        live = self._live_experiments({e for d in docs.values()
                                       for e in d.get("experiment_ids", [])})
        return {tid for tid, d in docs.items() if d["state"] == "CANCELLED" or (
            d.get("experiment_ids") and not live.intersection(d["experiment_ids"]))}

    def requeue_stale(self, timeout_s: float, as_of: float | None = None) -> list[str]:
        if timeout_s < 0:
            raise ValueError(f"timeout_s must be >= 0, got {timeout_s!r}")
        # taken once, before the retries: a reconnect wait must not age the heartbeats
        return self._requeue_older_than((now() if as_of is None else as_of) - timeout_s)

    @retry_write
    def _requeue_older_than(self, cutoff: float, *, call: WriteCall) -> list[str]:
        # Guarded per trial: one that heartbeats meanwhile stays RUNNING.
        stale = {"state": "RUNNING", "heartbeat_at": {"$lt": cutoff}}
        return sorted(self._update_each(stale, {"state": "QUEUED", "worker": None}, call))

    @retry_write
    def release_trial(self, trial_id: str, worker: str, *, call: WriteCall) -> bool:
        check_worker(worker)
        with self._seq.block() as seq:
            res = self._db.trials.update_one(
                {"_id": trial_id, "state": "RUNNING", "worker": worker},
                {"$set": {"state": "QUEUED", "worker": None, "heartbeat_at": None, "seq": seq,
                          "op": call.op}})
        if res.matched_count:
            return True
        doc = self._db.trials.find_one({"_id": trial_id}, {"op": 1, "state": 1})
        if doc is None:
            raise NotFoundError(f"trial {trial_id!r} not found in {redact(self.url)}")
        # released by an earlier attempt of this call, whose answer was lost
        return doc.get("op") == call.op and doc["state"] == "QUEUED"

    # ------------------------------------------------------------ queries
    @retry
    def get_trial(self, trial_id: str) -> TrialRecord:
        doc = self._db.trials.find_one({"_id": trial_id})
        if doc is None:
            raise NotFoundError(f"trial {trial_id!r} not found in {redact(self.url)}")
        return _trial(doc)

    @retry
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

    @retry
    def rung_values(self, experiment_id: str, epoch: int, metric: str) -> list[float]:
        check_rung_args(epoch, metric)
        docs = self._db.trials.find(
            {"experiment_ids": experiment_id, f"metrics.{epoch - 1}.epoch": epoch},
            {"_id": 0, "metrics": {"$slice": [epoch - 1, 1]}})
        values = [d["metrics"][0].get(metric) for d in docs if d.get("metrics")]
        return [float(v) for v in values
                if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]

    @retry
    def latest_seq(self) -> int:
        return self._seq.visible()

    # ------------------------------------------------------------ dispatch
    @retry
    def hold_dispatch(self, items: list[tuple[str, str]]) -> None:
        check_held(items)
        for tid, queue in items:  # rare (a broker outage): one round trip each is fine
            self._db.held_dispatch.replace_one({"_id": tid}, {"queue": queue, "held_at": now()},
                                               upsert=True)

    def take_dispatch(self, limit: int = 500) -> list[tuple[str, str]]:
        check_take_limit(limit)
        taken: list[tuple[str, str]] = []
        try:
            for doc in self._oldest_held(limit):
                # one atomic delete per entry: with several takers each entry goes to one
                if self._db.held_dispatch.find_one_and_delete({"_id": doc["_id"]}) is not None:
                    taken.append((doc["_id"], doc["queue"]))
        except PyMongoError as exc:
            # Not retried whole (a rerun would lose what was deleted already): give back
            # what this call took, then fail.
            if taken:
                self.hold_dispatch(taken)
            raise StoreError(f"store {redact(self.url)}: {exc}") from exc
        return taken

    @retry
    def _oldest_held(self, limit: int) -> list[dict[str, Any]]:
        return list(self._db.held_dispatch.find().sort([("held_at", 1), ("_id", 1)]).limit(limit))

    # ------------------------------------------------------------ workers
    @retry
    def register_worker(self, name: str, host: str | None = None, pid: int | None = None,
                        current_trial: str | None = None, trials_done: int = 0,
                        info: dict[str, Any] | None = None) -> None:
        check_worker(name, "worker name")
        self._db.workers.replace_one(
            {"_id": name},
            {"host": host, "pid": pid, "current_trial": current_trial, "trials_done": trials_done,
             "last_seen": now(), "info": json_safe(info or {})}, upsert=True)

    @retry
    def list_workers(self, seen_within_s: float | None = None) -> list[WorkerRecord]:
        query = {} if seen_within_s is None else {"last_seen": {"$gte": now() - seen_within_s}}
        return [WorkerRecord(name=d["_id"], host=d.get("host"), pid=d.get("pid"),
                             current_trial=d.get("current_trial"),
                             trials_done=d.get("trials_done", 0), last_seen=d["last_seen"],
                             info=d.get("info") or {})
                for d in self._db.workers.find(query).sort("_id", 1)]

