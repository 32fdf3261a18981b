"""PostgreSQL backend (``postgresql://user:pw@host:5432/db``). Contract: see base.py.

Every call is one transaction (a batch included). Claims lock the QUEUED rows they take
with ``FOR NO KEY UPDATE SKIP LOCKED``: a row another worker is taking right now is not
waited for, it is theirs. Other writes lock their rows in id order (so two batches never
deadlock on each other) before they change them.

Change order: ``seq`` values come from the one-row ``change_counter``, incremented by the
writing transaction after it has locked its trial rows and just before it writes them. The
counter row stays locked until that transaction commits, so seq-giving transactions commit
one after another in seq order and a reader can never see seq n+1 while n is still in
flight: ``since=`` needs no upper bound, and ``latest_seq`` is the counter itself.
``FOR NO KEY UPDATE`` (not ``FOR UPDATE``) lets the foreign-key checks of a concurrent
``create_trials`` (which takes the counter first) pass a locked trial row: no deadlock.

Retries: see postgresql_conn.py (op ids recorded with the answer, in the same transaction).
"""

from __future__ import annotations

import math
from typing import Any

from ..exceptions import NotFoundError
from .base import FinishItem, ResultStore, dumps, now
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
from .postgresql_conn import PgConnections
from .postgresql_sql import (
    ALL_EXPERIMENTS_CANCELLED,
    CANCELLED_BEFORE_START,
    EXP_COLS,
    TRIAL_COLS,
    Conn,
    lock_trials,
    reserve,
    statement,
    trial_record,
    trials_query,
    update_each,
)
from .records import ExperimentRecord, TrialRecord, TrialState, WorkerRecord
from .sorting import check_since_order

__all__ = ["PostgresStore"]


class PostgresStore(ResultStore):
    """ResultStore in a PostgreSQL database (the schema of the connection's search_path)."""

    def __init__(self, url: str, create: bool = True):
        self.url = url
        self._db = PgConnections(url, create)
        self._where = self._db.where

    def close(self) -> None:
        self._db.close()

    def _missing(self, what: str, key: str) -> NotFoundError:
        return NotFoundError(f"{what} {key!r} not found in {self._where}")

    def _require(self, c: Conn, ids: list[str]) -> None:
        found = {r[0] for r in c.execute("SELECT id FROM trials WHERE id = ANY(%s)", (ids,))}
        missing = [tid for tid in ids if tid not in found]
        if missing:
            raise NotFoundError(f"trial {missing[0]!r} not found in {self._where}"
                                + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))

    # ------------------------------------------------------------ experiments
    def create_experiment(self, experiment_id: str, name: str, spec: dict[str, Any],
                          n_trials: int) -> ExperimentRecord:
        check_experiment_args(experiment_id, n_trials)
        self._db.write(statement(
            "INSERT INTO experiments (id, name, spec, n_trials, created_at) "
            "VALUES (%s, %s, %s::jsonb, %s, %s) ON CONFLICT (id) DO NOTHING",
            (experiment_id, name, dumps(spec), n_trials, now())), record=False)
        return self.get_experiment(experiment_id)

    def _experiments(self, c: Conn, rows: list[tuple]) -> list[ExperimentRecord]:
        return [ExperimentRecord(id=r[0], name=r[1], spec=r[2], n_trials=r[3], created_at=r[4],
                                 cancel_requested=r[5], counts=self._counts(c, r[0]))
                for r in rows]

    def get_experiment(self, experiment_id: str) -> ExperimentRecord:
        def body(c: Conn) -> ExperimentRecord:
            rows = c.execute(f"SELECT {EXP_COLS} FROM experiments WHERE id = %s",
                             (experiment_id,)).fetchall()
            if not rows:
                raise self._missing("experiment", experiment_id)
            return self._experiments(c, rows)[0]
        return self._db.read(body)

    def list_experiments(self, limit: int = 100, offset: int = 0) -> list[ExperimentRecord]:
        check_page(limit, offset)
        return self._db.read(lambda c: self._experiments(c, c.execute(
            f"SELECT {EXP_COLS} FROM experiments ORDER BY created_at DESC, ord DESC "
            "LIMIT %s OFFSET %s", (limit, offset)).fetchall()))

    def _counts(self, c: Conn, experiment_id: str | None) -> dict[str, int]:
        if experiment_id is None:
            rows = c.execute("SELECT state, count(*) FROM trials GROUP BY state")
        else:
            rows = c.execute("SELECT t.state, count(*) FROM experiment_trials et JOIN trials t "
                             "ON t.id = et.trial_id WHERE et.experiment_id = %s GROUP BY t.state",
                             (experiment_id,))
        return {s: n for s, n in rows}

    def _count_states(self, experiment_id: str | None) -> dict[str, int]:
        return self._db.read(lambda c: self._counts(c, experiment_id))

    def _set_cancel(self, c: Conn, experiment_id: str, value: bool) -> None:
        if c.execute("UPDATE experiments SET cancel_requested = %s WHERE id = %s",
                     (value, experiment_id)).rowcount == 0:
            raise self._missing("experiment", experiment_id)

    def cancel_experiment(self, experiment_id: str) -> int:
        def body(c: Conn) -> int:
            self._set_cancel(c, experiment_id, True)
            ids = lock_trials(c, "t.state = 'QUEUED' AND t.id IN (SELECT trial_id FROM "
                           f"experiment_trials WHERE experiment_id = %s) AND "
                           f"{ALL_EXPERIMENTS_CANCELLED}", (experiment_id,))
            update_each(c, "state = 'CANCELLED', finished_at = %s, error = %s", ids,
                         (now(), CANCELLED_BEFORE_START))
            return len(ids)
        return self._db.write(body)[0]

    def delete_experiment(self, experiment_id: str) -> int:
        check_experiment_id(experiment_id)

        def body(c: Conn) -> int:
            if c.execute("SELECT 1 FROM experiments WHERE id = %s FOR UPDATE",
                         (experiment_id,)).fetchone() is None:
                return 0
            ids = lock_trials(c, "t.id IN (SELECT trial_id FROM experiment_trials WHERE "
                                 "experiment_id = %s)", (experiment_id,))
            shared = {r[0] for r in c.execute(
                "SELECT DISTINCT trial_id FROM experiment_trials WHERE trial_id = ANY(%s) AND "
                "experiment_id <> %s", (ids, experiment_id))}
            own = [tid for tid in ids if tid not in shared]
            active = [r[0] for r in c.execute(
                "SELECT id FROM trials WHERE id = ANY(%s) AND state IN ('QUEUED', 'RUNNING') "
                "ORDER BY ord", (own,))]
            if active:
                raise active_error(experiment_id, active)
            c.execute("DELETE FROM experiment_trials WHERE experiment_id = %s", (experiment_id,))
            c.execute("DELETE FROM held_dispatch WHERE trial_id = ANY(%s)", (own,))
            c.execute("DELETE FROM trials WHERE id = ANY(%s)", (own,))
            # a shared trial's experiment_ids changed: it moves in the change order
            update_each(c, "state = state", [tid for tid in ids if tid in shared])
            c.execute("DELETE FROM experiments WHERE id = %s", (experiment_id,))
            return len(own)
        return self._db.write(body)[0]

    def requeue_trials(self, experiment_id: str,
                       states: list[TrialState] | tuple[TrialState, ...] | TrialState
                       = (TrialState.CANCELLED,)) -> list[str]:
        names = requeue_state_list(states)

        def body(c: Conn) -> list[str]:
            self._set_cancel(c, experiment_id, False)
            if not names:
                return []
            ids = lock_trials(c, "t.state = ANY(%s) AND t.id IN (SELECT trial_id FROM "
                           "experiment_trials WHERE experiment_id = %s)", (names, experiment_id))
            update_each(c, "state = 'QUEUED', result = NULL, error = NULL, worker = NULL, "
                            "attempts = 0, started_at = NULL, finished_at = NULL, "
                            "heartbeat_at = NULL, metrics = '[]'", ids)
            return sorted(ids)
        return self._db.write(body)[0]

    # ------------------------------------------------------------ trials
    def create_trials(self, experiment_id: str, trials: list[tuple[str, dict[str, Any]]]) -> int:
        rows: dict[str, str] = {}
        for tid, config in check_trial_items(trials):
            rows.setdefault(tid, dumps(config))  # the first of a repeated id counts
        ids, t = list(rows), now()

        def body(c: Conn) -> int:
            if c.execute("SELECT 1 FROM experiments WHERE id = %s",
                         (experiment_id,)).fetchone() is None:
                raise self._missing("experiment", experiment_id)
            if not ids:
                return 0
            # One seq per row (an id that exists already leaves a harmless gap).
            first = reserve(c, len(ids))
            created = c.execute(
                "INSERT INTO trials (id, state, config, created_at, seq) "
                "SELECT u.id, 'QUEUED', u.cfg::jsonb, %s, %s + u.k - 1 FROM "
                "unnest(%s::text[], %s::text[]) WITH ORDINALITY AS u(id, cfg, k) ORDER BY u.k "
                "ON CONFLICT (id) DO NOTHING", (t, first, ids, list(rows.values()))).rowcount
            c.execute("INSERT INTO experiment_trials (experiment_id, trial_id) "
                      "SELECT %s, unnest(%s::text[]) ON CONFLICT DO NOTHING", (experiment_id, ids))
            return created
        return self._db.write(body)[0]

    def _records(self, c: Conn, ids: list[str]) -> list[TrialRecord]:
        got = {r[0]: trial_record(r) for r in c.execute(
            f"SELECT {TRIAL_COLS} FROM trials t WHERE t.id = ANY(%s)", (ids,))}
        return [got[tid] for tid in ids if tid in got]

    def claim_trials(self, trial_ids: list[str], worker: str,
                     max_attempts: int | None = None) -> list[TrialRecord]:
        ids = check_ids(trial_ids)
        check_worker(worker)
        check_max_attempts(max_attempts)
        t = now()

        def body(c: Conn) -> list[TrialRecord]:
            self._require(c, ids)
            # A QUEUED row locked by another transaction is being claimed (or cancelled)
            # by it: skip it rather than wait, it is not ours to run.
            found = {r[0]: r[1:] for r in c.execute(
                f"SELECT t.id, t.attempts, {ALL_EXPERIMENTS_CANCELLED} FROM trials t "
                "WHERE t.id = ANY(%s) AND t.state = 'QUEUED' ORDER BY t.id "
                "FOR NO KEY UPDATE OF t SKIP LOCKED", (ids,))}
            order = [tid for tid in ids if tid in found]
            if not order:
                return []
            first = reserve(c, len(order))
            cancelled, capped, won = [], [], []
            for k, tid in enumerate(order):
                attempts, is_cancelled = found[tid]
                if is_cancelled:
                    cancelled.append((tid, first + k))
                elif max_attempts is not None and attempts >= max_attempts:
                    capped.append((tid, first + k, f"delivery cap reached: claimed {attempts} "
                                   f"times, max_attempts={max_attempts} (the trial keeps "
                                   "losing its worker)"))
                else:
                    won.append((tid, first + k))
            if cancelled:
                c.execute("UPDATE trials SET state = 'CANCELLED', finished_at = %s, error = %s, "
                          "seq = u.seq FROM unnest(%s::text[], %s::bigint[]) AS u(id, seq) "
                          "WHERE trials.id = u.id", (t, CANCELLED_BEFORE_START,
                                                     *map(list, zip(*cancelled))))
            if capped:
                c.execute("UPDATE trials SET state = 'FAILED', finished_at = %s, error = u.err, "
                          "seq = u.seq FROM unnest(%s::text[], %s::bigint[], %s::text[]) "
                          "AS u(id, seq, err) WHERE trials.id = u.id",
                          (t, *map(list, zip(*capped))))
            if not won:
                return []
            c.execute("UPDATE trials SET state = 'RUNNING', worker = %s, attempts = attempts + 1, "
                      "started_at = %s, heartbeat_at = %s, metrics = '[]', seq = u.seq "
                      "FROM unnest(%s::text[], %s::bigint[]) AS u(id, seq) "
                      "WHERE trials.id = u.id", (worker, t, t, *map(list, zip(*won))))
            return self._records(c, [tid for tid, _ in won])

        answer, replayed = self._db.write(body, encode=lambda recs: [r.id for r in recs])
        if replayed:  # won by an earlier attempt whose answer was lost
            return self._db.read(lambda c: self._records(c, answer))
        return answer

    def heartbeat_trials(self, trial_ids: list[str], worker: str) -> set[str]:
        ids = check_ids(trial_ids)
        t = now()
        return self._db.write(lambda c: {r[0] for r in c.execute(
            "UPDATE trials SET heartbeat_at = %s WHERE id IN (SELECT id FROM trials WHERE "
            "id = ANY(%s) AND state = 'RUNNING' AND worker = %s ORDER BY id "
            "FOR NO KEY UPDATE) RETURNING id", (t, ids, worker))}, record=False)[0]

    def append_metrics_many(self, metrics_by_id: MetricsBatch,
                            worker: str | None = None) -> set[str]:
        checked = check_metrics_many(metrics_by_id)
        if not checked:
            return set()
        ids, t = list(checked), now()
        owner = " AND t.worker = %s" if worker is not None else ""

        def body(c: Conn) -> list[str]:
            # Under the row locks what each curve ends with cannot change before the update.
            last = {r[0]: r[1] for r in c.execute(
                "SELECT t.id, t.metrics -> -1 -> 'epoch' FROM trials t WHERE t.id = ANY(%s) "
                f"AND t.state = 'RUNNING'{owner} ORDER BY t.id FOR NO KEY UPDATE OF t",
                (ids, *((worker,) if worker is not None else ())))}
            written = [tid for tid in ids if tid in last]
            if written:
                tails = [dumps(epochs_to_store(checked[tid], last[tid])) for tid in written]
                first = reserve(c, len(written))
                c.execute("UPDATE trials SET heartbeat_at = %s, seq = %s + u.k - 1, "
                          "metrics = metrics || u.tail::jsonb FROM unnest(%s::text[], %s::text[]) "
                          "WITH ORDINALITY AS u(id, tail, k) WHERE trials.id = u.id",
                          (t, first, written, tails))
            return written
        return set(self._db.write(body)[0])

    def finish_trials(self, items: list[FinishItem], worker: str | None = None) -> set[str]:
        checked = [(tid, st.value, dumps(result) if result is not None else None, error)
                   for tid, st, result, error in check_finish_items(items)]
        if not checked:
            return set()
        ids, t = [tid for tid, *_ in checked], now()
        owner = " AND t.worker = %s" if worker is not None else ""

        def body(c: Conn) -> list[str]:
            self._require(c, ids)  # raising rolls the batch back: an unknown id finishes nothing
            # From RUNNING (the owner's, when named) to any finished state; QUEUED → CANCELLED.
            locked = set(lock_trials(
                c, f"t.id = ANY(%s) AND ((t.state = 'RUNNING'{owner}) OR (t.state = 'QUEUED' "
                   "AND t.id = ANY(%s)))",
                (ids, *((worker,) if worker is not None else ()),
                 [tid for tid, st, *_ in checked if st == "CANCELLED"])))
            done = [row for row in checked if row[0] in locked]
            if done:
                first = reserve(c, len(done))
                c.execute("UPDATE trials SET state = u.st, result = u.res::jsonb, error = u.err, "
                          "finished_at = %s, seq = %s + u.k - 1 FROM unnest(%s::text[], "
                          "%s::text[], %s::text[], %s::text[]) WITH ORDINALITY "
                          "AS u(id, st, res, err, k) WHERE trials.id = u.id",
                          (t, first, *map(list, zip(*done))))
            return [row[0] for row in done]
        return set(self._db.write(body)[0])

    def cancel_requested(self, trial_ids: list[str]) -> set[str]:
        ids = check_ids(trial_ids)

        def body(c: Conn) -> set[str]:
            self._require(c, ids)
            return {r[0] for r in c.execute(
                "SELECT t.id FROM trials t WHERE t.id = ANY(%s) AND (t.state = 'CANCELLED' "
                f"OR {ALL_EXPERIMENTS_CANCELLED})", (ids,))}
        return self._db.read(body)

    def requeue_stale(self, timeout_s: float, as_of: float | None = None) -> list[str]:
        if timeout_s < 0:
            raise ValueError(f"timeout_s must be >= 0, got {timeout_s!r}")
        cutoff = (now() if as_of is None else as_of) - timeout_s  # before any wait or retry

        def body(c: Conn) -> list[str]:
            # Waits for a row a heartbeat is writing; the recheck then finds it fresh.
            ids = lock_trials(c, "t.state = 'RUNNING' AND t.heartbeat_at < %s", (cutoff,))
            update_each(c, "state = 'QUEUED', worker = NULL", ids)
            return sorted(ids)
        return self._db.write(body)[0]

    def release_trial(self, trial_id: str, worker: str) -> bool:
        check_worker(worker)

        def body(c: Conn) -> bool:
            ids = lock_trials(c, "t.id = %s AND t.state = 'RUNNING' AND t.worker = %s",
                        (trial_id, worker))
            if not ids:
                self._require(c, [trial_id])
                return False
            update_each(c, "state = 'QUEUED', worker = NULL, heartbeat_at = NULL", ids)
            return True
        return self._db.write(body)[0]

    # ------------------------------------------------------------ queries
    def get_trial(self, trial_id: str) -> TrialRecord:
        rows = self._db.read(lambda c: self._records(c, [trial_id]))
        if not rows:
            raise self._missing("trial", trial_id)
        return rows[0]

    def list_trials(self, experiment_id: str | None = None,
                    state: TrialState | list[TrialState] | None = None,
                    sort_by: str | None = None, descending: bool = False,
                    limit: int | None = None, offset: int = 0,
                    since: int | None = None) -> list[TrialRecord]:
        check_page(limit, offset)
        check_since_order(since, sort_by, descending)
        sql, args = trials_query(experiment_id, state_list(state), sort_by, descending, limit,
                                 offset, since)
        return self._db.read(lambda c: [trial_record(r) for r in c.execute(sql, args)])

    def rung_values(self, experiment_id: str, epoch: int, metric: str) -> list[float]:
        check_rung_args(epoch, metric)
        rows = self._db.read(lambda c: c.execute(
            "SELECT t.metrics -> %s::int -> %s::text FROM experiment_trials et JOIN trials t "
            "ON t.id = et.trial_id WHERE et.experiment_id = %s AND "
            "t.metrics -> %s::int -> 'epoch' = to_jsonb(%s::int)",
            (epoch - 1, metric, experiment_id, epoch - 1, epoch)).fetchall())
        return [float(v) for v, in rows if isinstance(v, (int, float))
                and not isinstance(v, bool) and math.isfinite(v)]

    def latest_seq(self) -> int:
        return self._db.read(lambda c: c.execute("SELECT value FROM change_counter").fetchone()[0])

    # ------------------------------------------------------------ dispatch
    def hold_dispatch(self, items: list[tuple[str, str]]) -> None:
        check_held(items)
        latest = dict(items)  # held twice in one call: the latest queue
        if latest:
            self._db.write(statement(
                "INSERT INTO held_dispatch (trial_id, queue, held_at) "
                "SELECT u.id, u.q, %s FROM unnest(%s::text[], %s::text[]) AS u(id, q) "
                "ON CONFLICT (trial_id) DO UPDATE SET queue = EXCLUDED.queue, "
                "held_at = EXCLUDED.held_at, ord = DEFAULT",
                (now(), list(latest), list(latest.values()))), record=False)

    def take_dispatch(self, limit: int = 500) -> list[tuple[str, str]]:
        check_take_limit(limit)

        def body(c: Conn) -> list[list[str]]:
            # An entry another taker is removing right now is theirs: skip it.
            rows = c.execute(
                "DELETE FROM held_dispatch WHERE trial_id IN (SELECT trial_id FROM "
                "held_dispatch ORDER BY held_at, ord LIMIT %s FOR UPDATE SKIP LOCKED) "
                "RETURNING trial_id, queue, held_at, ord", (limit,)).fetchall()
            return [[r[0], r[1]] for r in sorted(rows, key=lambda r: (r[2], r[3]))]
        return [(tid, queue) for tid, queue in self._db.write(body)[0]]

    # ------------------------------------------------------------ workers
    def register_worker(self, name: str, host: str | None = None, pid: int | None = None,
                        current_trial: str | None = None, trials_done: int = 0,
                        info: dict[str, Any] | None = None) -> None:
        check_worker(name, "worker name")
        self._db.write(statement(
            "INSERT INTO workers (name, host, pid, current_trial, trials_done, last_seen, info) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s::jsonb) ON CONFLICT (name) DO UPDATE SET "
            "host = EXCLUDED.host, pid = EXCLUDED.pid, current_trial = EXCLUDED.current_trial, "
            "trials_done = EXCLUDED.trials_done, last_seen = EXCLUDED.last_seen, "
            "info = EXCLUDED.info",
            (name, host, pid, current_trial, trials_done, now(), dumps(info or {}))),
            record=False)

    def list_workers(self, seen_within_s: float | None = None) -> list[WorkerRecord]:
        sql = "SELECT name, host, pid, current_trial, trials_done, last_seen, info FROM workers"
        params: tuple = ()
        if seen_within_s is not None:
            sql += " WHERE last_seen >= %s"
            params = (now() - seen_within_s,)
        rows = self._db.read(lambda c: c.execute(sql + " ORDER BY name", params).fetchall())
        return [WorkerRecord(name=r[0], host=r[1], pid=r[2], current_trial=r[3], trials_done=r[4],
                             last_seen=r[5], info=r[6]) for r in rows]
