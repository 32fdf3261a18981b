"""The PostgreSQL store's trial life cycle: claims, heartbeats, metrics, finishing and
requeues. Each call is one transaction that locks the rows it decides
on (see postgresql.py for the locking rules) and then applies the rules of lifecycle.py,
so nothing changes between the decision and the write."""

from __future__ import annotations

from typing import Any

from ..exceptions import NotFoundError
from ..jsonsafe import dumps
from .base_trials import now
from .checks import CheckedFinish, epochs_to_store
from .lifecycle import (
    RELEASE,
    REQUEUE_STALE,
    ClaimOutcome,
    decide_claim,
    finish_update,
    may_finish,
    owns,
    stop_requested,
)
from .postgresql_conn import PgConnections
from .postgresql_sql import (
    ALL_EXPERIMENTS_CANCELLED,
    Conn,
    apply_updates,
    lock_trials,
    reserve,
    trial_cols,
    trial_record,
    update_each,
)
from .records import BULKY_FIELDS, TrialRecord


class PostgresTrials:
    """The trial life-cycle methods of :class:`~dnnframe.store.postgresql.PostgresStore`."""

    _db: PgConnections
    _where: str

    def _require(self, c: Conn, ids: list[str]) -> None:
        found = {r[0] for r in c.execute("SELECT id FROM trials WHERE id = ANY(%s)", (ids,))}
        missing = [tid for tid in ids if tid not in found]
        if missing:
            raise NotFoundError(
                f"trial {missing[0]!r} not found in {self._where}"
                + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
            )

    def _records(
        self, c: Conn, ids: list[str], fields: frozenset[str] = frozenset(BULKY_FIELDS)
    ) -> list[TrialRecord]:
        got = {
            r[0]: trial_record(r)
            for r in c.execute(
                f"SELECT {trial_cols(fields)} FROM trials t WHERE t.id = ANY(%s)", (ids,)
            )
        }
        return [got[tid] for tid in ids if tid in got]

    def _claim_trials(
        self, trial_ids: list[str], worker: str, max_attempts: int | None
    ) -> list[TrialRecord]:
        t = now()

        def body(c: Conn) -> list[TrialRecord]:
            self._require(c, trial_ids)
            # A QUEUED row locked by another transaction is being claimed (or cancelled)
            # by it: skip it rather than wait, it is not ours to run.
            found = {
                r[0]: r[1:]
                for r in c.execute(
                    f"SELECT t.id, t.state, t.attempts, {ALL_EXPERIMENTS_CANCELLED} FROM trials t "
                    "WHERE t.id = ANY(%s) AND t.state = 'QUEUED' ORDER BY t.id "
                    "FOR NO KEY UPDATE OF t SKIP LOCKED",
                    (trial_ids,),
                )
            }
            order = [tid for tid in trial_ids if tid in found]
            if not order:
                return []
            first = reserve(c, len(order))
            rows, won = [], []
            for k, tid in enumerate(order):
                state, attempts, cancelled = found[tid]
                outcome, update = decide_claim(state, attempts, cancelled, max_attempts, worker, t)
                if update is not None:
                    rows.append((tid, first + k, update))
                if outcome is ClaimOutcome.WON:
                    won.append(tid)
            apply_updates(c, rows)
            return self._records(c, won) if won else []

        answer, replayed = self._db.write(body, encode=lambda recs: [r.id for r in recs])
        if replayed:  # won by an earlier attempt whose answer was lost
            return self._db.read(lambda c: self._records(c, answer))
        return answer

    def _heartbeat_trials(self, trial_ids: list[str], worker: str) -> set[str]:
        t = now()
        # lifecycle.owns as a filter: one statement, and heartbeats move no seq
        return self._db.write(
            lambda c: {
                r[0]
                for r in c.execute(
                    "UPDATE trials SET heartbeat_at = %s WHERE id IN (SELECT id FROM trials WHERE "
                    "id = ANY(%s) AND state = 'RUNNING' AND worker = %s ORDER BY id "
                    "FOR NO KEY UPDATE) RETURNING id",
                    (t, trial_ids, worker),
                )
            },
            record=False,
        )[0]

    def _append_metrics_many(
        self, epochs_by_id: dict[str, list[dict[str, Any]]], worker: str | None
    ) -> set[str]:
        ids, t = list(epochs_by_id), now()

        def body(c: Conn) -> list[str]:
            # Under the row locks what each curve ends with cannot change before the update.
            last = {
                r[0]: r[3]
                for r in c.execute(
                    "SELECT t.id, t.state, t.worker, t.metrics -> -1 -> 'epoch' FROM trials t "
                    "WHERE t.id = ANY(%s) AND t.state = 'RUNNING' ORDER BY t.id "
                    "FOR NO KEY UPDATE OF t",
                    (ids,),
                )
                if owns(r[1], r[2], worker)
            }
            written = [tid for tid in ids if tid in last]
            if written:
                tails = [dumps(epochs_to_store(epochs_by_id[tid], last[tid])) for tid in written]
                first = reserve(c, len(written))
                c.execute(
                    "UPDATE trials SET heartbeat_at = %s, seq = %s + u.k - 1, "
                    "metrics = metrics || u.tail::jsonb FROM unnest(%s::text[], %s::text[]) "
                    "WITH ORDINALITY AS u(id, tail, k) WHERE trials.id = u.id",
                    (t, first, written, tails),
                )
            return written

        return set(self._db.write(body)[0])

    def _finish_trials(
        self,
        items: list[CheckedFinish],
        worker: str | None,
        epochs: dict[str, list[dict[str, Any]]],
    ) -> set[str]:
        ids, t = [tid for tid, *_ in items], now()
        # how each curve ends is read only where epochs come with the end
        last = "t.metrics -> -1 -> 'epoch'" if epochs else "NULL"

        def body(c: Conn) -> list[str]:
            # In id order, as every writer locks: two batches never deadlock on each other.
            found = {
                tid: (state, owner, ends_at)
                for tid, state, owner, ends_at in c.execute(
                    f"SELECT t.id, t.state, t.worker, {last} FROM trials t "
                    "WHERE t.id = ANY(%s) ORDER BY t.id FOR NO KEY UPDATE OF t",
                    (ids,),
                )
            }
            self._require(c, ids)  # raising rolls the batch back: an unknown id finishes nothing
            done = [
                (tid, st, result, error)
                for tid, st, result, error in items
                if may_finish(*found[tid][:2], st, worker)
            ]
            if done:
                first = reserve(c, len(done))
                apply_updates(
                    c,
                    [
                        (tid, first + k, finish_update(st, result, error, t))
                        for k, (tid, st, result, error) in enumerate(done)
                    ],
                    {
                        tid: dumps(epochs_to_store(epochs[tid], found[tid][2]))
                        for tid, *_ in done
                        if tid in epochs
                    },
                )
            return [tid for tid, *_ in done]

        return set(self._db.write(body)[0])

    def _cancel_requested(self, trial_ids: list[str]) -> set[str]:
        def body(c: Conn) -> set[str]:
            self._require(c, trial_ids)
            return {
                r[0]
                for r in c.execute(
                    f"SELECT t.id, t.state, {ALL_EXPERIMENTS_CANCELLED} FROM trials t "
                    "WHERE t.id = ANY(%s)",
                    (trial_ids,),
                )
                if stop_requested(r[1], r[2])
            }

        return self._db.read(body)

    def _requeue_stale(self, cutoff: float) -> list[str]:
        def body(c: Conn) -> list[str]:
            # Waits for a row a heartbeat is writing; the recheck then finds it fresh.
            ids = lock_trials(c, "t.state = 'RUNNING' AND t.heartbeat_at < %s", (cutoff,))
            update_each(c, REQUEUE_STALE, ids)
            return sorted(ids)

        return self._db.write(body)[0]

    def _release_trial(self, trial_id: str, worker: str) -> bool:
        def body(c: Conn) -> bool:
            row = c.execute(
                "SELECT state, worker FROM trials WHERE id = %s FOR NO KEY UPDATE", (trial_id,)
            ).fetchone()
            if row is None:
                raise NotFoundError(f"trial {trial_id!r} not found in {self._where}")
            if not owns(row[0], row[1], worker):
                return False
            update_each(c, RELEASE, [trial_id])
            return True

        return self._db.write(body)[0]
