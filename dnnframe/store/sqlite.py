"""SQLite backend: the embedded default (``sqlite:///dnnframe.db``). Contract: see base.py."""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterator
from pathlib import Path
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
from .records import ExperimentRecord, TrialRecord, TrialState, WorkerRecord
from .sorting import check_since_order, resolve_sort_path
from .sqlite_file import SQLiteFile, parse_sqlite_url

__all__ = ["SQLiteStore", "parse_sqlite_url"]

_TRIAL_COLS = ("t.id, t.state, t.config, t.result, t.metrics, t.error, t.worker, t.attempts, "
               "t.created_at, t.started_at, t.finished_at, t.heartbeat_at, t.seq, "
               "(SELECT json_group_array(experiment_id) FROM experiment_trials "
               "WHERE trial_id = t.id)")
_NEXT_SEQ = "(SELECT coalesce(max(seq), 0) + 1 FROM trials)"
# A trial counts as cancelled when none of its experiments is still live.
_ALL_EXPERIMENTS_CANCELLED = (
    "NOT EXISTS (SELECT 1 FROM experiment_trials et JOIN experiments e ON e.id = et.experiment_id "
    "WHERE et.trial_id = trials.id AND e.cancel_requested = 0)")


def _next_seq(c: sqlite3.Connection) -> int:
    return c.execute(f"SELECT {_NEXT_SEQ}").fetchone()[0]


def _update_each(c: sqlite3.Connection, assignments: str, ids: list[str],
                 params: tuple = ()) -> None:
    """Apply ``SET assignments`` to each of ``ids`` (inside the caller's transaction), giving
    every row its own ``seq``: a cursor reader paging with ``limit`` must never meet a tie
    larger than its page (it would skip the rest of the tied rows)."""
    seq = _next_seq(c)
    c.executemany(f"UPDATE trials SET {assignments}, seq = ? WHERE id = ?",
                  [(*params, seq + i, tid) for i, tid in enumerate(ids)])


def _marks(ids: list[str]) -> str:
    return ", ".join("?" * len(ids))


def _chunks(items: list[Any], size: int = 500) -> Iterator[list[Any]]:
    """Slices of ``items`` small enough for SQLite's limit on bound parameters."""
    for i in range(0, len(items), size):
        yield items[i:i + size]


# json_insert takes one path/value pair per epoch, and SQLite caps a function's arguments
# (127 by default): longer runs of epochs are appended this many at a time.
_EPOCHS_PER_STATEMENT = 50


def _append_epochs(c: sqlite3.Connection, texts_by_id: dict[str, list[str]]) -> None:
    """Append each trial's epochs (JSON texts, in order) to its curve, however many there
    are: full slices first, all the same size so one statement serves them in order, then
    each trial's shorter remainder."""
    full: list[tuple[str, ...]] = []
    rest: dict[int, list[tuple[str, ...]]] = {}
    for tid, texts in texts_by_id.items():
        for part in _chunks(texts, _EPOCHS_PER_STATEMENT):
            if len(part) == _EPOCHS_PER_STATEMENT:
                full.append((*part, tid))
            else:
                rest.setdefault(len(part), []).append((*part, tid))
    for count, rows in [(_EPOCHS_PER_STATEMENT, full), *rest.items()]:
        if rows:
            # '$[#]' is past the end of the array so far: json_insert applies pairs in order
            pairs = ", ".join(["'$[#]', json(?)"] * count)
            c.executemany(f"UPDATE trials SET metrics = json_insert(metrics, {pairs}) "
                          "WHERE id = ?", rows)


def _trial(row: tuple) -> TrialRecord:
    return TrialRecord(
        id=row[0], state=TrialState(row[1]), config=json.loads(row[2]),
        result=json.loads(row[3]) if row[3] is not None else None, metrics=json.loads(row[4]),
        error=row[5], worker=row[6], attempts=row[7], created_at=row[8], started_at=row[9],
        finished_at=row[10], heartbeat_at=row[11], seq=row[12],
        experiment_ids=sorted(json.loads(row[13])) if row[13] else [])


class SQLiteStore(ResultStore):
    """ResultStore in one SQLite file (WAL mode); one connection per process and thread."""

    def __init__(self, path: str | Path, url: str | None = None, create: bool = True):
        self._file = SQLiteFile(path, url, create)
        self.path, self.url = self._file.path, self._file.url
        self._tx, self._read = self._file.tx, self._file.read

    def close(self) -> None:
        self._file.close()

    # ------------------------------------------------------------ experiments
    def create_experiment(self, experiment_id: str, name: str, spec: dict[str, Any],
                          n_trials: int) -> ExperimentRecord:
        check_experiment_args(experiment_id, n_trials)
        with self._tx() as c:
            c.execute("INSERT OR IGNORE INTO experiments (id, name, spec, n_trials, created_at) "
                      "VALUES (?, ?, ?, ?, ?)", (experiment_id, name, dumps(spec), n_trials, now()))
        return self.get_experiment(experiment_id)

    def _experiment(self, row: tuple) -> ExperimentRecord:
        return ExperimentRecord(id=row[0], name=row[1], spec=json.loads(row[2]), n_trials=row[3],
                                created_at=row[4], cancel_requested=bool(row[5]),
                                counts=self._count_states(row[0]))

    def get_experiment(self, experiment_id: str) -> ExperimentRecord:
        rows = self._read("SELECT id, name, spec, n_trials, created_at, cancel_requested "
                          "FROM experiments WHERE id = ?", (experiment_id,))
        if not rows:
            raise NotFoundError(f"experiment {experiment_id!r} not found in {self.url}")
        return self._experiment(rows[0])

    def list_experiments(self, limit: int = 100, offset: int = 0) -> list[ExperimentRecord]:
        check_page(limit, offset)
        rows = self._read("SELECT id, name, spec, n_trials, created_at, cancel_requested "
                          "FROM experiments ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?",
                          (-1 if limit is None else limit, offset))
        return [self._experiment(r) for r in rows]

    def delete_experiment(self, experiment_id: str) -> int:
        check_experiment_id(experiment_id)
        with self._tx() as c:
            if c.execute("SELECT 1 FROM experiments WHERE id = ?", (experiment_id,)).fetchone() is None:
                return 0
            rows = c.execute(
                "SELECT t.id, t.state, EXISTS (SELECT 1 FROM experiment_trials o WHERE "
                "o.trial_id = t.id AND o.experiment_id != ?) FROM experiment_trials et JOIN "
                "trials t ON t.id = et.trial_id WHERE et.experiment_id = ? ORDER BY t.rowid",
                (experiment_id, experiment_id)).fetchall()
            own = [tid for tid, _, shared in rows if not shared]
            active = [tid for tid, state, shared in rows
                      if not shared and state in ("QUEUED", "RUNNING")]
            if active:
                raise active_error(experiment_id, active)
            c.execute("DELETE FROM experiment_trials WHERE experiment_id = ?", (experiment_id,))
            for chunk in _chunks(own):
                c.execute(f"DELETE FROM held_dispatch WHERE trial_id IN ({_marks(chunk)})", chunk)
                c.execute(f"DELETE FROM trials WHERE id IN ({_marks(chunk)})", chunk)
            _update_each(c, "state = state", [tid for tid, _, shared in rows if shared])
            c.execute("DELETE FROM experiments WHERE id = ?", (experiment_id,))
            return len(own)

    def _count_states(self, experiment_id: str | None) -> dict[str, int]:
        if experiment_id is None:
            rows = self._read("SELECT state, count(*) FROM trials GROUP BY state")
        else:
            rows = self._read("SELECT t.state, count(*) FROM experiment_trials et JOIN trials t "
                              "ON t.id = et.trial_id WHERE et.experiment_id = ? GROUP BY t.state",
                              (experiment_id,))
        return {s: n for s, n in rows}

    def cancel_experiment(self, experiment_id: str) -> int:
        with self._tx() as c:
            if c.execute("UPDATE experiments SET cancel_requested = 1 WHERE id = ?",
                         (experiment_id,)).rowcount == 0:
                raise NotFoundError(f"experiment {experiment_id!r} not found in {self.url}")
            ids = [r[0] for r in c.execute(
                "SELECT id FROM trials WHERE state = 'QUEUED' AND id IN (SELECT trial_id FROM "
                f"experiment_trials WHERE experiment_id = ?) AND {_ALL_EXPERIMENTS_CANCELLED} "
                "ORDER BY rowid", (experiment_id,))]
            _update_each(c, "state = 'CANCELLED', finished_at = ?, "
                            "error = 'experiment cancelled before the trial started'",
                         ids, (now(),))
            return len(ids)

    def requeue_trials(self, experiment_id: str,
                       states: list[TrialState] | tuple[TrialState, ...] | TrialState
                       = (TrialState.CANCELLED,)) -> list[str]:
        names = requeue_state_list(states)
        with self._tx() as c:
            if c.execute("UPDATE experiments SET cancel_requested = 0 WHERE id = ?",
                         (experiment_id,)).rowcount == 0:
                raise NotFoundError(f"experiment {experiment_id!r} not found in {self.url}")
            if not names:
                return []
            ids = [r[0] for r in c.execute(
                f"SELECT id FROM trials WHERE state IN ({', '.join('?' * len(names))}) AND id IN "
                "(SELECT trial_id FROM experiment_trials WHERE experiment_id = ?) ORDER BY rowid",
                (*names, experiment_id))]
            _update_each(c, "state = 'QUEUED', result = NULL, error = NULL, worker = NULL, "
                            "attempts = 0, started_at = NULL, finished_at = NULL, "
                            "heartbeat_at = NULL, metrics = '[]'", ids)
        return sorted(ids)

    # ------------------------------------------------------------ trials
    def create_trials(self, experiment_id: str, trials: list[tuple[str, dict[str, Any]]]) -> int:
        rows = [(tid, dumps(config)) for tid, config in check_trial_items(trials)]
        t = now()
        with self._tx() as c:
            if c.execute("SELECT 1 FROM experiments WHERE id = ?", (experiment_id,)).fetchone() is None:
                raise NotFoundError(f"experiment {experiment_id!r} not found in {self.url}")
            # One seq per row (gaps where an existing id is ignored are harmless): a cursor
            # reader paging with a limit must never meet a tie larger than its page.
            seq = _next_seq(c)
            before = c.total_changes
            c.executemany("INSERT OR IGNORE INTO trials (id, state, config, created_at, seq) "
                          f"VALUES (?, 'QUEUED', ?, {t!r}, ?)",
                          [(tid, cfg, seq + i) for i, (tid, cfg) in enumerate(rows)])
            created = c.total_changes - before
            c.executemany("INSERT OR IGNORE INTO experiment_trials (experiment_id, trial_id) "
                          "VALUES (?, ?)", [(experiment_id, r[0]) for r in rows])
        return created

    def claim_trials(self, trial_ids: list[str], worker: str,
                     max_attempts: int | None = None) -> list[TrialRecord]:
        ids = check_ids(trial_ids)
        check_worker(worker)
        check_max_attempts(max_attempts)
        t = now()
        with self._tx() as c:
            found = {r[0]: r[1:] for chunk in _chunks(ids) for r in c.execute(
                f"SELECT id, state, attempts, {_ALL_EXPERIMENTS_CANCELLED} AND EXISTS "
                "(SELECT 1 FROM experiment_trials WHERE trial_id = trials.id) FROM trials "
                f"WHERE id IN ({_marks(chunk)})", chunk)}
            self._require(ids, found)
            seq = _next_seq(c)
            won: list[str] = []
            cancelled_rows, capped_rows, won_rows = [], [], []
            for tid in ids:
                state, attempts, cancelled = found[tid]
                if state != "QUEUED":
                    continue
                if cancelled:
                    cancelled_rows.append((t, seq, tid))
                elif max_attempts is not None and attempts >= max_attempts:
                    capped_rows.append((t, seq, f"delivery cap reached: claimed {attempts} "
                                        f"times, max_attempts={max_attempts} (the trial keeps "
                                        "losing its worker)", tid))
                else:
                    won_rows.append((worker, t, t, seq, tid))
                    won.append(tid)
                seq += 1
            c.executemany("UPDATE trials SET state = 'CANCELLED', finished_at = ?, seq = ?, "
                          "error = 'experiment cancelled before the trial started' "
                          "WHERE id = ?", cancelled_rows)
            c.executemany("UPDATE trials SET state = 'FAILED', finished_at = ?, seq = ?, "
                          "error = ? WHERE id = ?", capped_rows)
            c.executemany("UPDATE trials SET state = 'RUNNING', worker = ?, "
                          "attempts = attempts + 1, started_at = ?, heartbeat_at = ?, "
                          "metrics = '[]', seq = ? WHERE id = ?", won_rows)
            records = {r[0]: _trial(r) for chunk in _chunks(won) for r in c.execute(
                f"SELECT {_TRIAL_COLS} FROM trials t WHERE t.id IN ({_marks(chunk)})", chunk)}
        return [records[tid] for tid in won]

    def heartbeat_trials(self, trial_ids: list[str], worker: str) -> set[str]:
        ids = check_ids(trial_ids)
        t = now()
        with self._tx() as c:
            return {r[0] for chunk in _chunks(ids) for r in c.execute(
                f"UPDATE trials SET heartbeat_at = ? WHERE id IN ({_marks(chunk)}) AND "
                "state = 'RUNNING' AND worker = ? RETURNING id", (t, *chunk, worker))}

    def append_metrics_many(self, metrics_by_id: MetricsBatch,
                            worker: str | None = None) -> set[str]:
        checked = check_metrics_many(metrics_by_id)
        if not checked:
            return set()
        owner = " AND worker = ?" if worker is not None else ""
        t = now()
        ids = list(checked)
        with self._tx() as c:
            # Inside the write lock: what each curve ends with cannot change before the
            # updates below, so they need no guard of their own.
            last = {r[0]: r[1] for chunk in _chunks(ids) for r in c.execute(
                "SELECT id, json_extract(metrics, '$[#-1].epoch') FROM trials WHERE id IN "
                f"({_marks(chunk)}) AND state = 'RUNNING'{owner}",
                (*chunk, *((worker,) if worker is not None else ())))}
            written = [tid for tid in ids if tid in last]
            first = _next_seq(c)
            c.executemany("UPDATE trials SET heartbeat_at = ?, seq = ? WHERE id = ?",
                          [(t, first + k, tid) for k, tid in enumerate(written)])
            _append_epochs(c, {tid: [dumps(m) for m in epochs_to_store(checked[tid], last[tid])]
                               for tid in written})
        return set(written)

    def _in_block(self, c: sqlite3.Connection, ids: list[str], first: int) -> set[str]:
        """Which of ``ids`` this transaction gave a seq from ``first`` on."""
        return {r[0] for chunk in _chunks(ids) for r in c.execute(
            f"SELECT id FROM trials WHERE id IN ({_marks(chunk)}) AND seq >= ?", (*chunk, first))}

    def finish_trials(self, items: list[FinishItem], worker: str | None = None) -> set[str]:
        checked = [(tid, st.value, dumps(result) if result is not None else None, error)
                   for tid, st, result, error in check_finish_items(items)]
        if not checked:
            return set()
        owner = " AND (state = 'QUEUED' OR worker = ?)" if worker is not None else ""
        t = now()
        ids = [tid for tid, *_ in checked]
        with self._tx() as c:
            first = _next_seq(c)
            # From RUNNING to any finished state; from QUEUED only to CANCELLED.
            n = c.executemany(
                "UPDATE trials SET state = ?1, result = ?2, error = ?3, finished_at = ?4, "
                "seq = ?5 WHERE id = ?6 AND (state = 'RUNNING' OR (state = 'QUEUED' AND "
                f"?1 = 'CANCELLED')){owner.replace('?', '?7')}",
                [(st, result, error, t, first + k, tid, *((worker,) if worker is not None else ()))
                 for k, (tid, st, result, error) in enumerate(checked)]).rowcount
            if n == len(ids):
                return set(ids)
            # Raising rolls the whole batch back: an unknown id finishes nothing.
            self._require(ids, {r[0] for chunk in _chunks(ids) for r in c.execute(
                f"SELECT id FROM trials WHERE id IN ({_marks(chunk)})", chunk)})
            return self._in_block(c, ids, first)

    def cancel_requested(self, trial_ids: list[str]) -> set[str]:
        ids = check_ids(trial_ids)
        rows = [r for chunk in _chunks(ids) for r in self._read(
            f"SELECT id, state = 'CANCELLED' OR ({_ALL_EXPERIMENTS_CANCELLED} AND EXISTS "
            "(SELECT 1 FROM experiment_trials WHERE trial_id = trials.id)) "
            f"FROM trials WHERE id IN ({_marks(chunk)})", chunk)]
        self._require(ids, {r[0] for r in rows})
        return {tid for tid, cancelled in rows if cancelled}

    def _require(self, ids: list[str], found: set[str] | dict[str, Any]) -> None:
        missing = [tid for tid in ids if tid not in found]
        if missing:
            raise NotFoundError(f"trial {missing[0]!r} not found in {self.url}"
                                + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))

    def requeue_stale(self, timeout_s: float, as_of: float | None = None) -> list[str]:
        if timeout_s < 0:
            raise ValueError(f"timeout_s must be >= 0, got {timeout_s!r}")
        cutoff = (now() if as_of is None else as_of) - timeout_s  # before waiting for the lock
        with self._tx() as c:
            ids = [r[0] for r in c.execute(
                "SELECT id FROM trials WHERE state = 'RUNNING' AND heartbeat_at < ? ORDER BY rowid",
                (cutoff,))]
            _update_each(c, "state = 'QUEUED', worker = NULL", ids)
        return sorted(ids)

    def release_trial(self, trial_id: str, worker: str) -> bool:
        check_worker(worker)
        with self._tx() as c:
            n = c.execute(f"UPDATE trials SET state = 'QUEUED', worker = NULL, heartbeat_at = NULL, "
                          f"seq = {_NEXT_SEQ} WHERE id = ? AND state = 'RUNNING' AND worker = ?",
                          (trial_id, worker)).rowcount
            if n == 0 and c.execute("SELECT 1 FROM trials WHERE id = ?", (trial_id,)).fetchone() is None:
                raise NotFoundError(f"trial {trial_id!r} not found in {self.url}")
            return n > 0

    # ------------------------------------------------------------ queries
    def get_trial(self, trial_id: str) -> TrialRecord:
        rows = self._read(f"SELECT {_TRIAL_COLS} FROM trials t WHERE t.id = ?", (trial_id,))
        if not rows:
            raise NotFoundError(f"trial {trial_id!r} not found in {self.url}")
        return _trial(rows[0])

    def list_trials(self, experiment_id: str | None = None,
                    state: TrialState | list[TrialState] | None = None,
                    sort_by: str | None = None, descending: bool = False,
                    limit: int | None = None, offset: int = 0,
                    since: int | None = None) -> list[TrialRecord]:
        check_page(limit, offset)
        check_since_order(since, sort_by, descending)
        where, params = [], []
        if experiment_id is not None:
            where.append("t.id IN (SELECT trial_id FROM experiment_trials WHERE experiment_id = ?)")
            params.append(experiment_id)
        states = state_list(state)
        if states is not None:
            where.append(f"t.state IN ({', '.join('?' * len(states))})")
            params.extend(states)
        if since is not None:
            where.append("t.seq > ?")
            params.append(since)
        direction = "DESC" if descending else "ASC"
        if sort_by is None:
            order = f"t.seq {direction}, t.rowid {direction}" if since is not None else \
                f"t.created_at {direction}, t.rowid {direction}"
        else:
            path = resolve_sort_path(sort_by)
            if "." in path:
                column, _, rest = path.partition(".")
                # The JSON path is a bound parameter and the column comes from a fixed set.
                expr = f"json_extract(t.{column}, ?)"
                order = f"{expr} IS NULL, {expr} {direction}, t.rowid"
                params.extend([f"$.{rest}", f"$.{rest}"])
            else:
                order = f"t.{path} IS NULL, t.{path} {direction}, t.rowid"
        sql = f"SELECT {_TRIAL_COLS} FROM trials t"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += f" ORDER BY {order} LIMIT ? OFFSET ?"
        params.extend([-1 if limit is None else limit, offset])
        return [_trial(r) for r in self._read(sql, params)]

    def rung_values(self, experiment_id: str, epoch: int, metric: str) -> list[float]:
        check_rung_args(epoch, metric)
        at = f"$[{epoch - 1}]"
        rows = self._read(
            "SELECT json_extract(t.metrics, ?) FROM experiment_trials et JOIN trials t "
            "ON t.id = et.trial_id WHERE et.experiment_id = ? AND "
            "json_extract(t.metrics, ?) = ?", (f"{at}.{metric}", experiment_id, f"{at}.epoch", epoch))
        return [float(v) for v, in rows if isinstance(v, (int, float)) and math.isfinite(v)]

    def latest_seq(self) -> int:
        return self._read("SELECT coalesce(max(seq), 0) FROM trials")[0][0]

    # ------------------------------------------------------------ dispatch
    def hold_dispatch(self, items: list[tuple[str, str]]) -> None:
        check_held(items)
        with self._tx() as c:
            c.executemany("INSERT OR REPLACE INTO held_dispatch (trial_id, queue, held_at) "
                          "VALUES (?, ?, ?)", [(tid, queue, now()) for tid, queue in items])

    def take_dispatch(self, limit: int = 500) -> list[tuple[str, str]]:
        check_take_limit(limit)
        with self._tx() as c:
            rows = c.execute("SELECT trial_id, queue FROM held_dispatch ORDER BY held_at, rowid "
                             "LIMIT ?", (limit,)).fetchall()
            c.executemany("DELETE FROM held_dispatch WHERE trial_id = ?", [(r[0],) for r in rows])
        return [(r[0], r[1]) for r in rows]

    # ------------------------------------------------------------ workers
    def register_worker(self, name: str, host: str | None = None, pid: int | None = None,
                        current_trial: str | None = None, trials_done: int = 0,
                        info: dict[str, Any] | None = None) -> None:
        check_worker(name, "worker name")
        with self._tx() as c:
            c.execute("INSERT OR REPLACE INTO workers (name, host, pid, current_trial, trials_done, "
                      "last_seen, info) VALUES (?, ?, ?, ?, ?, ?, ?)",
                      (name, host, pid, current_trial, trials_done, now(), dumps(info or {})))

    def list_workers(self, seen_within_s: float | None = None) -> list[WorkerRecord]:
        sql = "SELECT name, host, pid, current_trial, trials_done, last_seen, info FROM workers"
        params: tuple = ()
        if seen_within_s is not None:
            sql += " WHERE last_seen >= ?"
            params = (now() - seen_within_s,)
        rows = self._read(sql + " ORDER BY name", params)
        return [WorkerRecord(name=r[0], host=r[1], pid=r[2], current_trial=r[3], trials_done=r[4],
                             last_seen=r[5], info=json.loads(r[6])) for r in rows]

