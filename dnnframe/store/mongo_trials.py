"""The MongoDB store's trial life cycle: claims, heartbeats, metrics, finishing and
requeues (see mongodb.py for the retry and change-order rules they follow).

MongoDB has no multi-document transaction here: each write decides with lifecycle.py on
what it read, then applies the decision with a filter that re-checks the state it was made
on, so a trial that changed meanwhile is left alone.
"""

from __future__ import annotations

from typing import Any

from pymongo import UpdateOne

from ..exceptions import NotFoundError
from ..jsonsafe import json_safe
from .base_trials import now
from .checks import CheckedFinish, epochs_to_store
from .lifecycle import (
    QUEUED,
    RELEASE,
    REQUEUE_STALE,
    RUNNING,
    ClaimOutcome,
    TrialUpdate,
    all_experiments_cancelled,
    decide_claim,
    finish_update,
    finishable_from,
    stop_requested,
)
from .mongo_connect import WriteCall, redact, retry, retry_write
from .mongoseq import SeqCounter
from .records import BULKY_FIELDS, TrialRecord, TrialState

# Reads and guarded pushes per append call before a curve that keeps changing under it (a
# concurrent writer of the same trial) is given up on and reported not written.
_APPEND_ROUNDS = 3


def left_out(fields: frozenset[str]) -> dict[str, int] | None:
    """The projection leaving out the bulky fields not in ``fields`` (None: every field)."""
    return {name: 0 for name in BULKY_FIELDS if name not in fields} or None


def trial_record(doc: dict[str, Any]) -> TrialRecord:
    return TrialRecord(
        id=doc["_id"],
        experiment_ids=sorted(doc.get("experiment_ids", [])),
        state=TrialState(doc["state"]),
        config=doc.get("config") or {},
        result=doc.get("result"),
        metrics=doc.get("metrics") or [],
        error=doc.get("error"),
        worker=doc.get("worker"),
        attempts=doc.get("attempts", 0),
        created_at=doc.get("created_at", 0.0),
        started_at=doc.get("started_at"),
        finished_at=doc.get("finished_at"),
        heartbeat_at=doc.get("heartbeat_at"),
        seq=doc.get("seq", 0),
    )


def write_of(update: TrialUpdate, **stamps: Any) -> dict[str, Any]:
    """A life-cycle update as MongoDB operators, with ``stamps`` (seq, op) set as well."""
    ops: dict[str, Any] = {"$set": {**json_safe(dict(update.set)), **stamps}}
    if update.inc:
        ops["$inc"] = dict(update.inc)
    return ops


class MongoTrials:
    """The trial life-cycle methods of :class:`~dnnframe.store.mongodb.MongoStore`."""

    url: str
    _db: Any
    _seq: SeqCounter

    def _update_each(
        self, query: dict[str, Any], update: TrialUpdate, call: WriteCall
    ) -> list[str]:
        """``update`` (assignments only) on every trial matching ``query``, each with its
        own ``seq``.

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
        assert not update.inc, "a pipeline update sets values only"
        changes = {**json_safe(dict(update.set)), "op": call.op}
        if any(not isinstance(o, int) for o in orders):  # no order to number by: one by one
            with self._seq.block(len(ids)) as first:
                for k, tid in enumerate(ids):
                    self._db.trials.update_one(
                        {**query, "_id": tid}, {"$set": {**changes, "seq": first + k}}
                    )
            return list(dict.fromkeys(self._stamped(ids, call) + earlier))
        low, span = orders[0], orders[-1] - orders[0] + 1
        sets = {k: {"$literal": v} for k, v in changes.items()}  # values, never expressions
        with self._seq.block(span) as first:
            base = first - low
            res = self._db.trials.update_many(
                {**query, "_id": {"$in": ids}},
                [{"$set": {**sets, "seq": {"$add": ["$order", base]}}}],
            )
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
        return {
            d["_id"]
            for d in self._db.trials.find(
                {"_id": {"$in": ids}, "seq": {"$gte": first, "$lt": first + n}}, {"_id": 1}
            )
        }

    def _live_experiments(self, experiment_ids: set[str]) -> set[str]:
        """Those of ``experiment_ids`` that have not asked to cancel."""
        return {
            d["_id"]
            for d in self._db.experiments.find(
                {"_id": {"$in": sorted(experiment_ids)}, "cancel_requested": False}, {"_id": 1}
            )
        }

    def _update_all(self, ops: list[tuple[dict[str, Any], dict[str, Any]]]) -> int:
        """Apply ``(filter, update)`` pairs to trials in one bulk write; returns how many
        documents changed. mongomock cannot take pymongo's bulk operations: one by one."""
        if not ops:
            return 0
        if self.url.startswith("mongomock://"):
            return sum(self._db.trials.update_one(f, u).modified_count for f, u in ops)
        return self._db.trials.bulk_write(
            [UpdateOne(f, u) for f, u in ops], ordered=False
        ).modified_count

    def _find_all(self, ids: list[str], fields: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
        docs = {d["_id"]: d for d in self._db.trials.find({"_id": {"$in": ids}}, fields)}
        missing = [tid for tid in ids if tid not in docs]
        if missing:
            raise NotFoundError(
                f"trial {missing[0]!r} not found in {redact(self.url)}"
                + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
            )
        return docs

    @retry_write
    def _claim_trials(
        self, ids: list[str], worker: str, max_attempts: int | None, *, call: WriteCall
    ) -> list[TrialRecord]:
        docs = self._find_all(ids, {"state": 1, "attempts": 1, "experiment_ids": 1, "op": 1})
        # won by an earlier attempt of this call, whose answer was lost
        mine = [
            tid for tid in ids if docs[tid]["state"] == RUNNING and docs[tid].get("op") == call.op
        ]
        queued = [tid for tid in ids if docs[tid]["state"] == QUEUED]
        if not queued and not mine:
            return []
        live = self._live_experiments(
            {e for tid in queued for e in docs[tid].get("experiment_ids", [])}
        )
        t = now()
        ops, claims = [], []
        with self._seq.block(len(queued)) as first:
            for k, tid in enumerate(queued):
                doc = docs[tid]
                query: dict[str, Any] = {"_id": tid, "state": QUEUED}
                attempts = doc.get("attempts", 0)
                outcome, update = decide_claim(
                    QUEUED,
                    attempts,
                    all_experiments_cancelled(doc.get("experiment_ids", []), live),
                    max_attempts,
                    worker,
                    t,
                )
                assert update is not None, "claiming a QUEUED trial always writes"
                # the filter re-checks the attempts the decision was made on
                if max_attempts is not None and outcome is ClaimOutcome.CAPPED:
                    query["attempts"] = {"$gte": max_attempts}
                elif max_attempts is not None and outcome is ClaimOutcome.WON:
                    query["attempts"] = {"$lt": max_attempts}
                ops.append((query, write_of(update, seq=first + k, op=call.op)))
                if outcome is ClaimOutcome.WON:
                    claims.append(tid)
            self._update_all(ops)
        if not claims and not mine:
            return []
        # A claim was won when the trial runs under this worker and carries this call's op.
        won = {
            d["_id"]: trial_record(d)
            for d in self._db.trials.find(
                {"_id": {"$in": claims + mine}, "state": RUNNING, "worker": worker, "op": call.op}
            )
        }
        return [won[tid] for tid in ids if tid in won]

    @retry
    def _heartbeat_trials(self, ids: list[str], worker: str) -> set[str]:
        # lifecycle.owns as a filter
        owned = {"_id": {"$in": ids}, "state": RUNNING, "worker": worker}
        self._db.trials.update_many(owned, {"$set": {"heartbeat_at": now()}})
        return {d["_id"] for d in self._db.trials.find(owned, {"_id": 1})}

    @retry
    def _append_metrics_many(
        self, epochs_by_id: dict[str, list[dict[str, Any]]], worker: str | None
    ) -> set[str]:
        pending = dict(epochs_by_id)
        written: set[str] = set()
        # Read how each curve ends, then push only the epochs it lacks, guarded by its length:
        # a push that was applied before the connection dropped is not applied again when
        # this call is retried. A curve that grew meanwhile is read again.
        for _ in range(_APPEND_ROUNDS):
            if not pending:
                break
            # lifecycle.owns as a filter, re-checked by each guarded push
            owned: dict[str, Any] = {"_id": {"$in": list(pending)}, "state": RUNNING}
            if worker is not None:
                owned["worker"] = worker
            ends = {
                d["_id"]: d
                for d in self._db.trials.aggregate(
                    [
                        {"$match": owned},
                        {
                            "$project": {
                                "n": {"$size": "$metrics"},
                                "last": {"$arrayElemAt": ["$metrics", -1]},
                            }
                        },
                    ]
                )
            }
            pending = {tid: epochs for tid, epochs in pending.items() if tid in ends}
            if not pending:
                break
            t = now()
            with self._seq.block(len(pending)) as first:
                ops = []
                for k, (tid, epochs) in enumerate(pending.items()):
                    end = ends[tid]
                    tail = epochs_to_store(epochs, (end.get("last") or {}).get("epoch"))
                    ops.append(
                        (
                            {**owned, "_id": tid, "metrics": {"$size": end["n"]}},
                            {
                                "$push": {"metrics": {"$each": json_safe(tail)}},
                                "$set": {"heartbeat_at": t, "seq": first + k},
                            },
                        )
                    )
                modified = self._update_all(ops)
                done = (
                    set(pending)
                    if modified == len(pending)
                    else self._in_block(list(pending), first, len(pending))
                )
            written |= done
            pending = {tid: epochs for tid, epochs in pending.items() if tid not in done}
        return written

    @retry_write
    def _finish_trials(
        self,
        items: list[CheckedFinish],
        worker: str | None,
        epochs: dict[str, list[dict[str, Any]]],
        *,
        call: WriteCall,
    ) -> set[str]:
        ids = [tid for tid, *_ in items]
        # how each curve ends is read only where epochs come with the end
        ends = self._find_all(ids, {"_id": 1, "metrics": {"$slice": -1}} if epochs else {"_id": 1})
        t = now()
        with self._seq.block(len(items)) as first:
            ops = []
            for k, (tid, st, result, error) in enumerate(items):
                # lifecycle.may_finish as a filter: the owner counts for a RUNNING trial only
                allowed = [
                    {"state": s, "worker": worker}
                    if s == RUNNING and worker is not None
                    else {"state": s}
                    for s in finishable_from(st)
                ]
                write = write_of(finish_update(st, result, error, t), seq=first + k, op=call.op)
                # In the finishing update itself: a refused trial's curve stays as it was,
                # and an attempt applied before the connection dropped (the trial is
                # finished now) is not applied again.
                curve = ends[tid].get("metrics") or [{}]
                tail = epochs_to_store(epochs[tid], curve[-1].get("epoch")) if tid in epochs else []
                if tail:
                    write["$push"] = {"metrics": {"$each": json_safe(tail)}}
                ops.append(({"_id": tid, "$or": allowed}, write))
            modified = self._update_all(ops)
        if modified == len(ids):
            return set(ids)
        return set(self._stamped(ids, call))

    @retry
    def _cancel_requested(self, ids: list[str]) -> set[str]:
        docs = self._find_all(ids, {"state": 1, "experiment_ids": 1})
        live = self._live_experiments(
            {e for d in docs.values() for e in d.get("experiment_ids", [])}
        )
        return {
            tid
            for tid, d in docs.items()
            if stop_requested(
                d["state"], all_experiments_cancelled(d.get("experiment_ids", []), live)
            )
        }

    @retry_write
    def _requeue_stale(self, cutoff: float, *, call: WriteCall) -> list[str]:
        # Guarded per trial: one that heartbeats meanwhile stays RUNNING.
        stale = {"state": RUNNING, "heartbeat_at": {"$lt": cutoff}}
        return sorted(self._update_each(stale, REQUEUE_STALE, call))

    @retry_write
    def _release_trial(self, trial_id: str, worker: str, *, call: WriteCall) -> bool:
        with self._seq.block() as seq:
            # lifecycle.owns as a filter
            res = self._db.trials.update_one(
                {"_id": trial_id, "state": RUNNING, "worker": worker},
                write_of(RELEASE, seq=seq, op=call.op),
            )
        if res.matched_count:
            return True
        doc = self._db.trials.find_one({"_id": trial_id}, {"op": 1, "state": 1})
        if doc is None:
            raise NotFoundError(f"trial {trial_id!r} not found in {redact(self.url)}")
        # released by an earlier attempt of this call, whose answer was lost
        return doc.get("op") == call.op and doc["state"] == QUEUED
