"""MongoDB backend (``mongodb://host/db``; ``mongomock://`` in tests). Contract: see base.py.

Experiments and queries here; the trial life cycle in mongo_trials.py; leases, the dispatch
outbox, workers and notes in mongo_leases.py, mongo_outbox.py, mongo_workers.py and
mongo_notes.py.

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

from typing import Any

from pymongo import ReturnDocument
from pymongo.errors import BulkWriteError

from ..exceptions import NotFoundError
from ..metrics import is_number
from .base import ResultStore, json_safe, now
from .checks import active_error
from .lifecycle import ACTIVE, QUEUED, REQUEUE_RESET, TrialUpdate, cancel_before_start
from .mongo_connect import WriteCall, connect, init_schema, redact, retry, retry_write
from .mongo_leases import MongoLeases
from .mongo_notes import MongoNotes, note_key
from .mongo_outbox import MongoOutbox
from .mongo_trials import MongoTrials, left_out, trial_record
from .mongo_workers import MongoWorkers
from .mongoseq import SeqCounter
from .records import (
    ExperimentRecord,
    TrialRecord,
    TrialState,
    TrialTally,
    tally_rows,
)
from .sorting import resolve_sort_path

__all__ = ["MongoStore", "redact"]

# A reserved seq block whose write has not landed after this long is taken for abandoned
# (its writer died): readers stop waiting for it.
INFLIGHT_TTL_S = 60.0


class MongoStore(MongoLeases, MongoNotes, MongoOutbox, MongoWorkers, MongoTrials, ResultStore):
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
            {"_id": counter},
            {"$inc": {"value": n}},
            upsert=True,
            return_document=ReturnDocument.AFTER,
        )
        return int(doc["value"])

    def close(self) -> None:
        if not self.url.startswith("mongomock://"):
            self._db.client.close()

    # ------------------------------------------------------------ experiments
    @retry
    def _create_experiment(
        self, experiment_id: str, name: str, spec: dict[str, Any], n_trials: int
    ) -> ExperimentRecord:
        self._db.experiments.update_one(
            {"_id": experiment_id},
            {
                "$setOnInsert": {
                    "name": name,
                    "spec": json_safe(spec),
                    "n_trials": n_trials,
                    "created_at": now(),
                    "cancel_requested": False,
                    "order": self._next("experiment_order"),
                }
            },
            upsert=True,
        )
        return self.get_experiment(experiment_id)

    @staticmethod
    def _experiment(doc: dict[str, Any], tally: TrialTally) -> ExperimentRecord:
        return ExperimentRecord(
            id=doc["_id"],
            name=doc["name"],
            spec=doc["spec"],
            n_trials=doc["n_trials"],
            created_at=doc["created_at"],
            cancel_requested=bool(doc.get("cancel_requested")),
            counts=tally.counts,
            reruns=tally.reruns,
        )

    @retry
    def _get_experiment(self, experiment_id: str) -> ExperimentRecord:
        doc = self._db.experiments.find_one({"_id": experiment_id})
        if doc is None:
            raise NotFoundError(f"experiment {experiment_id!r} not found in {redact(self.url)}")
        return self._experiment(
            doc, self._tally_many([experiment_id]).get(experiment_id, TrialTally())
        )

    @retry
    def _list_experiments(self, limit: int | None, offset: int) -> list[ExperimentRecord]:
        if limit == 0:
            return []
        cur = self._db.experiments.find().sort([("created_at", -1), ("order", -1)]).skip(offset)
        if limit is not None:
            cur = cur.limit(limit)
        docs = list(cur)
        tallies = self._tally_many([d["_id"] for d in docs])
        return [self._experiment(d, tallies.get(d["_id"], TrialTally())) for d in docs]

    @retry
    def _count_states(self, experiment_id: str | None) -> dict[str, int]:
        match = {} if experiment_id is None else {"experiment_ids": experiment_id}
        rows = self._db.trials.aggregate(
            [{"$match": match}, {"$group": {"_id": "$state", "n": {"$sum": 1}}}]
        )
        return {r["_id"]: r["n"] for r in rows}

    @retry
    def _tally_many(self, experiment_ids: list[str]) -> dict[str, TrialTally]:
        # a trial counts once for each of the wanted experiments it belongs to
        wanted = {"experiment_ids": {"$in": experiment_ids}}
        rows = self._db.trials.aggregate(
            [
                {"$match": wanted},
                {
                    "$project": {
                        "experiment_ids": 1,
                        "state": 1,
                        "rerun": {"$gt": [{"$ifNull": ["$attempts", 0]}, 1]},
                    }
                },
                {"$unwind": "$experiment_ids"},
                {"$match": wanted},
                {
                    "$group": {
                        "_id": {"e": "$experiment_ids", "s": "$state", "r": "$rerun"},
                        "n": {"$sum": 1},
                    }
                },
            ]
        )
        return tally_rows((r["_id"]["e"], r["_id"]["s"], r["_id"]["r"], r["n"]) for r in rows)

    @retry_write
    def _cancel_experiment(self, experiment_id: str, *, call: WriteCall) -> int:
        res = self._db.experiments.update_one(
            {"_id": experiment_id}, {"$set": {"cancel_requested": True}}
        )
        if res.matched_count == 0:
            raise NotFoundError(f"experiment {experiment_id!r} not found in {redact(self.url)}")
        live = [
            d["_id"] for d in self._db.experiments.find({"cancel_requested": False}, {"_id": 1})
        ]
        query = {
            "$and": [{"experiment_ids": experiment_id}, {"experiment_ids": {"$nin": live}}],
            "state": QUEUED,
        }
        return len(self._update_each(query, cancel_before_start(now()), call))

    @retry_write
    def _delete_experiment(self, experiment_id: str, *, call: WriteCall) -> int:
        if self._db.experiments.find_one({"_id": experiment_id}, {"_id": 1}) is None:
            return 0
        alone = {"experiment_ids": [experiment_id]}  # linked to this experiment only
        active = [
            d["_id"]
            for d in self._db.trials.find(
                {**alone, "state": {"$in": list(ACTIVE)}}, {"_id": 1}
            ).sort("order", 1)
        ]
        if active:
            raise active_error(experiment_id, active)
        own = [d["_id"] for d in self._db.trials.find(alone, {"_id": 1})]
        # the experiment goes last: a retry after a lost connection finds it and finishes
        self._db.held_dispatch.delete_many({"_id": {"$in": own}})
        self._db.trials.delete_many({**alone, "_id": {"$in": own}, "state": {"$nin": list(ACTIVE)}})
        self._db.notes.delete_many(
            {
                "_id": {
                    "$in": [
                        note_key("experiment", experiment_id),
                        *(note_key("trial", t) for t in own),
                    ]
                }
            }
        )
        shared = {"experiment_ids": experiment_id}
        ids = [d["_id"] for d in self._db.trials.find(shared, {"_id": 1})]
        self._db.trials.update_many(shared, {"$pull": {"experiment_ids": experiment_id}})
        if ids:
            self._update_each({"_id": {"$in": ids}}, TrialUpdate({}), call)
        self._db.experiments.delete_one({"_id": experiment_id})
        return len(own)

    @retry_write
    def _requeue_trials(
        self, experiment_id: str, names: list[str], *, call: WriteCall
    ) -> list[str]:
        res = self._db.experiments.update_one(
            {"_id": experiment_id}, {"$set": {"cancel_requested": False}}
        )
        if res.matched_count == 0:
            raise NotFoundError(f"experiment {experiment_id!r} not found in {redact(self.url)}")
        if not names:
            return []
        query = {"experiment_ids": experiment_id, "state": {"$in": names}}
        return sorted(self._update_each(query, REQUEUE_RESET, call))

    # ------------------------------------------------------------ trials
    @retry_write
    def _create_trials(
        self, experiment_id: str, trials: list[tuple[str, dict[str, Any]]], *, call: WriteCall
    ) -> int:
        items = [(tid, json_safe(config)) for tid, config in trials]
        if self._db.experiments.find_one({"_id": experiment_id}, {"_id": 1}) is None:
            raise NotFoundError(f"experiment {experiment_id!r} not found in {redact(self.url)}")
        ids = list(dict.fromkeys(t for t, _ in items))
        existing: set[str] = set()
        created = 0  # by an earlier attempt of this call, whose answer was lost
        for i in range(0, len(ids), 10_000):
            for d in self._db.trials.find({"_id": {"$in": ids[i : i + 10_000]}}, {"op": 1}):
                existing.add(d["_id"])
                created += d.get("op") == call.op
        new = [(t, c) for t, c in dict(items).items() if t not in existing]
        if new:
            # One seq per document, reserved with one $inc: a cursor reader paging with a
            # limit must never meet a tie larger than its page.
            last = self._next("trial_order", len(new))
            t = now()
            with self._seq.block(len(new)) as first_seq:
                docs = [
                    {
                        "_id": tid,
                        "experiment_ids": [experiment_id],
                        "state": QUEUED,
                        "config": c,
                        "result": None,
                        "metrics": [],
                        "error": None,
                        "worker": None,
                        "attempts": 0,
                        "created_at": t,
                        "started_at": None,
                        "finished_at": None,
                        "heartbeat_at": None,
                        "seq": first_seq + k,
                        "order": last - len(new) + 1 + k,
                        "op": call.op,
                    }
                    for k, (tid, c) in enumerate(new)
                ]
                try:
                    created += len(self._db.trials.insert_many(docs, ordered=False).inserted_ids)
                except BulkWriteError as e:  # a concurrent submit created some of them first
                    created += e.details.get("nInserted", 0)
        if existing or created < len(new):
            self._db.trials.update_many(
                {"_id": {"$in": ids}}, {"$addToSet": {"experiment_ids": experiment_id}}
            )
        return created

    @retry
    def _get_trial(self, trial_id: str) -> TrialRecord:
        doc = self._db.trials.find_one({"_id": trial_id})
        if doc is None:
            raise NotFoundError(f"trial {trial_id!r} not found in {redact(self.url)}")
        return trial_record(doc)

    @retry
    def _get_trials(self, trial_ids: list[str], fields: frozenset[str]) -> list[TrialRecord]:
        docs = self._find_all(trial_ids, left_out(fields))
        return [trial_record(docs[tid]) for tid in trial_ids]

    @retry
    def _list_trials(
        self,
        experiment_id: str | None,
        states: list[str] | None,
        sort_by: str | None,
        descending: bool,
        limit: int | None,
        offset: int,
        since: int | None,
        fields: frozenset[str],
    ) -> list[TrialRecord]:
        match: dict[str, Any] = {}
        if experiment_id is not None:
            match["experiment_ids"] = experiment_id
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
            keys = (
                [("seq", direction), ("order", direction)]
                if since is not None
                else [("created_at", direction), ("order", direction)]
            )
            cur = self._db.trials.find(match, left_out(fields)).sort(keys).skip(offset)
            if limit is not None:
                cur = cur.limit(limit)
            return [trial_record(d) for d in cur]
        path = resolve_sort_path(sort_by)
        field = "_id" if path == "id" else path  # validated identifiers only: no operators
        pipeline: list[dict[str, Any]] = [
            {"$match": match},
            {"$addFields": {"_sort_key": f"${field}"}},
            # Mongo sorts null/missing first ascending; dnnframe wants them last both ways.
            {
                "$addFields": {
                    "_sort_null": {
                        "$cond": [{"$eq": [{"$ifNull": ["$_sort_key", None]}, None]}, 1, 0]
                    }
                }
            },
            {"$sort": {"_sort_null": 1, "_sort_key": direction, "order": 1}},
            {"$skip": offset},
        ]
        if limit is not None:
            pipeline.append({"$limit": limit})
        pipeline.append({"$project": {"_sort_key": 0, "_sort_null": 0, **(left_out(fields) or {})}})
        return [trial_record(d) for d in self._db.trials.aggregate(pipeline)]

    @retry
    def _rung_values(self, experiment_id: str, epoch: int, metric: str) -> list[float]:
        docs = self._db.trials.find(
            {"experiment_ids": experiment_id, f"metrics.{epoch - 1}.epoch": epoch},
            {"_id": 0, "metrics": {"$slice": [epoch - 1, 1]}},
        )
        values = [d["metrics"][0].get(metric) for d in docs if d.get("metrics")]
        return [float(v) for v in values if is_number(v)]

    @retry
    def _trial_values(self, experiment_id: str, paths: tuple[str, ...]) -> list[dict[str, Any]]:
        # project only the paths (a path inside another one asked for is read with it)
        wanted = [p for p in paths if not any(p.startswith(q + ".") for q in paths)]
        docs = self._db.trials.find(
            {"experiment_ids": experiment_id}, {"state": 1, "error": 1, **dict.fromkeys(wanted, 1)}
        ).sort([("created_at", 1), ("order", 1)])
        out = []
        for d in docs:
            row: dict[str, Any] = {
                "id": d["_id"],
                "state": TrialState(d["state"]),
                "error": d.get("error"),
            }
            for path in paths:
                value: Any = d
                for key in path.split("."):
                    value = value.get(key) if isinstance(value, dict) else None
                row[path] = value
            out.append(row)
        return out

    @retry
    def latest_seq(self) -> int:
        return self._seq.visible()
