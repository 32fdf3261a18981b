"""SQLite backend: the embedded default (``sqlite:///dnnframe.db``). Contract: see base.py.

Experiments and queries here; the trial life cycle in sqlite_trials.py; leases, the
dispatch outbox, workers and notes in lease_backends.py, outbox_backends.py,
worker_backends.py and note_backends.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..exceptions import NotFoundError
from ..jsonsafe import loads
from ..metrics import is_number
from .base import ResultStore, dumps, now
from .checks import active_error
from .lease_backends import SQLiteLeases
from .lifecycle import ACTIVE, REQUEUE_RESET, TrialUpdate, cancel_before_start
from .note_backends import SQLiteNotes
from .outbox_backends import SQLiteOutbox
from .records import (
    ExperimentRecord,
    TrialRecord,
    TrialState,
    TrialTally,
    tally_rows,
)
from .sorting import resolve_sort_path
from .sqlite_file import SQLiteFile, parse_sqlite_url
from .sqlite_sql import (
    ALL_EXPERIMENTS_CANCELLED,
    TRIAL_COLS,
    chunks,
    marks,
    next_seq,
    trial_cols,
    trial_record,
    update_each,
)
from .sqlite_trials import SQLiteTrials
from .worker_backends import SQLiteWorkers

__all__ = ["SQLiteStore", "parse_sqlite_url"]


class SQLiteStore(
    SQLiteLeases, SQLiteNotes, SQLiteOutbox, SQLiteWorkers, SQLiteTrials, ResultStore
):
    """ResultStore in one SQLite file (WAL mode); one connection per process and thread."""

    def __init__(self, path: str | Path, url: str | None = None, create: bool = True):
        self._file = SQLiteFile(path, url, create)
        self.path, self.url = self._file.path, self._file.url
        self._tx, self._read = self._file.tx, self._file.read

    def close(self) -> None:
        self._file.close()

    # ------------------------------------------------------------ experiments
    def _create_experiment(
        self, experiment_id: str, name: str, spec: dict[str, Any], n_trials: int
    ) -> ExperimentRecord:
        with self._tx() as c:
            c.execute(
                "INSERT OR IGNORE INTO experiments (id, name, spec, n_trials, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (experiment_id, name, dumps(spec), n_trials, now()),
            )
        return self.get_experiment(experiment_id)

    @staticmethod
    def _experiment(row: tuple, tally: TrialTally) -> ExperimentRecord:
        return ExperimentRecord(
            id=row[0],
            name=row[1],
            spec=json.loads(row[2]),
            n_trials=row[3],
            created_at=row[4],
            cancel_requested=bool(row[5]),
            counts=tally.counts,
            reruns=tally.reruns,
        )

    def _get_experiment(self, experiment_id: str) -> ExperimentRecord:
        rows = self._read(
            "SELECT id, name, spec, n_trials, created_at, cancel_requested "
            "FROM experiments WHERE id = ?",
            (experiment_id,),
        )
        if not rows:
            raise NotFoundError(f"experiment {experiment_id!r} not found in {self.url}")
        return self._experiment(
            rows[0], self._tally_many([experiment_id]).get(experiment_id, TrialTally())
        )

    def _list_experiments(self, limit: int | None, offset: int) -> list[ExperimentRecord]:
        rows = self._read(
            "SELECT id, name, spec, n_trials, created_at, cancel_requested "
            "FROM experiments ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?",
            (-1 if limit is None else limit, offset),
        )
        tallies = self._tally_many([r[0] for r in rows])
        return [self._experiment(r, tallies.get(r[0], TrialTally())) for r in rows]

    def _delete_experiment(self, experiment_id: str) -> int:
        with self._tx() as c:
            if (
                c.execute("SELECT 1 FROM experiments WHERE id = ?", (experiment_id,)).fetchone()
                is None
            ):
                return 0
            rows = c.execute(
                "SELECT t.id, t.state, EXISTS (SELECT 1 FROM experiment_trials o WHERE "
                "o.trial_id = t.id AND o.experiment_id != ?) FROM experiment_trials et JOIN "
                "trials t ON t.id = et.trial_id WHERE et.experiment_id = ? ORDER BY t.rowid",
                (experiment_id, experiment_id),
            ).fetchall()
            own = [tid for tid, _, shared in rows if not shared]
            active = [tid for tid, state, shared in rows if not shared and state in ACTIVE]
            if active:
                raise active_error(experiment_id, active)
            c.execute("DELETE FROM experiment_trials WHERE experiment_id = ?", (experiment_id,))
            for chunk in chunks(own):
                c.execute(f"DELETE FROM held_dispatch WHERE trial_id IN ({marks(chunk)})", chunk)
                c.execute(f"DELETE FROM trials WHERE id IN ({marks(chunk)})", chunk)
            update_each(c, TrialUpdate({}), [tid for tid, _, shared in rows if shared])
            c.execute("DELETE FROM experiments WHERE id = ?", (experiment_id,))
            return len(own)

    def _count_states(self, experiment_id: str | None) -> dict[str, int]:
        if experiment_id is None:
            rows = self._read("SELECT state, count(*) FROM trials GROUP BY state")
        else:
            rows = self._read(
                "SELECT t.state, count(*) FROM experiment_trials et JOIN trials t "
                "ON t.id = et.trial_id WHERE et.experiment_id = ? GROUP BY t.state",
                (experiment_id,),
            )
        return {s: n for s, n in rows}

    def _tally_many(self, experiment_ids: list[str]) -> dict[str, TrialTally]:
        rows: list[tuple] = []
        for chunk in chunks(experiment_ids):
            rows += self._read(
                "SELECT et.experiment_id, t.state, t.attempts > 1, count(*) FROM "
                "experiment_trials et JOIN trials t ON t.id = et.trial_id WHERE "
                f"et.experiment_id IN ({marks(chunk)}) GROUP BY 1, 2, 3",
                chunk,
            )
        return tally_rows(rows)

    def _cancel_experiment(self, experiment_id: str) -> int:
        with self._tx() as c:
            if (
                c.execute(
                    "UPDATE experiments SET cancel_requested = 1 WHERE id = ?", (experiment_id,)
                ).rowcount
                == 0
            ):
                raise NotFoundError(f"experiment {experiment_id!r} not found in {self.url}")
            ids = [
                r[0]
                for r in c.execute(
                    "SELECT id FROM trials WHERE state = 'QUEUED' AND id IN (SELECT trial_id FROM "
                    f"experiment_trials WHERE experiment_id = ?) AND {ALL_EXPERIMENTS_CANCELLED} "
                    "ORDER BY rowid",
                    (experiment_id,),
                )
            ]
            update_each(c, cancel_before_start(now()), ids)
            return len(ids)

    def _requeue_trials(self, experiment_id: str, names: list[str]) -> list[str]:
        with self._tx() as c:
            if (
                c.execute(
                    "UPDATE experiments SET cancel_requested = 0 WHERE id = ?", (experiment_id,)
                ).rowcount
                == 0
            ):
                raise NotFoundError(f"experiment {experiment_id!r} not found in {self.url}")
            if not names:
                return []
            ids = [
                r[0]
                for r in c.execute(
                    f"SELECT id FROM trials WHERE state IN ({', '.join('?' * len(names))}) AND id IN "
                    "(SELECT trial_id FROM experiment_trials WHERE experiment_id = ?) ORDER BY rowid",
                    (*names, experiment_id),
                )
            ]
            update_each(c, REQUEUE_RESET, ids)
        return sorted(ids)

    # ------------------------------------------------------------ trials
    def _create_trials(self, experiment_id: str, trials: list[tuple[str, dict[str, Any]]]) -> int:
        rows = [(tid, dumps(config)) for tid, config in trials]
        t = now()
        with self._tx() as c:
            if (
                c.execute("SELECT 1 FROM experiments WHERE id = ?", (experiment_id,)).fetchone()
                is None
            ):
                raise NotFoundError(f"experiment {experiment_id!r} not found in {self.url}")
            # One seq per row (gaps where an existing id is ignored are harmless): a cursor
            # reader paging with a limit must never meet a tie larger than its page.
            seq = next_seq(c)
            before = c.total_changes
            c.executemany(
                "INSERT OR IGNORE INTO trials (id, state, config, created_at, seq) "
                f"VALUES (?, 'QUEUED', ?, {t!r}, ?)",
                [(tid, cfg, seq + i) for i, (tid, cfg) in enumerate(rows)],
            )
            created = c.total_changes - before
            c.executemany(
                "INSERT OR IGNORE INTO experiment_trials (experiment_id, trial_id) VALUES (?, ?)",
                [(experiment_id, r[0]) for r in rows],
            )
        return created

    # ------------------------------------------------------------ queries
    def _get_trial(self, trial_id: str) -> TrialRecord:
        rows = self._read(f"SELECT {TRIAL_COLS} FROM trials t WHERE t.id = ?", (trial_id,))
        if not rows:
            raise NotFoundError(f"trial {trial_id!r} not found in {self.url}")
        return trial_record(rows[0])

    def _get_trials(self, trial_ids: list[str], fields: frozenset[str]) -> list[TrialRecord]:
        got = {
            r[0]: trial_record(r)
            for chunk in chunks(trial_ids)
            for r in self._read(
                f"SELECT {trial_cols(fields)} FROM trials t WHERE t.id IN ({marks(chunk)})", chunk
            )
        }
        self._require(trial_ids, got)
        return [got[tid] for tid in trial_ids]

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
        where: list[str] = []
        params: list[str | int] = []
        if experiment_id is not None:
            where.append("t.id IN (SELECT trial_id FROM experiment_trials WHERE experiment_id = ?)")
            params.append(experiment_id)
        if states is not None:
            where.append(f"t.state IN ({', '.join('?' * len(states))})")
            params.extend(states)
        if since is not None:
            where.append("t.seq > ?")
            params.append(since)
        direction = "DESC" if descending else "ASC"
        if sort_by is None:
            order = (
                f"t.seq {direction}, t.rowid {direction}"
                if since is not None
                else f"t.created_at {direction}, t.rowid {direction}"
            )
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
        sql = f"SELECT {trial_cols(fields)} FROM trials t"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += f" ORDER BY {order} LIMIT ? OFFSET ?"
        params.extend([-1 if limit is None else limit, offset])
        return [trial_record(r) for r in self._read(sql, params)]

    def _rung_values(self, experiment_id: str, epoch: int, metric: str) -> list[float]:
        at = f"$[{epoch - 1}]"
        rows = self._read(
            "SELECT json_extract(t.metrics, ?) FROM experiment_trials et JOIN trials t "
            "ON t.id = et.trial_id WHERE et.experiment_id = ? AND "
            "json_extract(t.metrics, ?) = ?",
            (f"{at}.{metric}", experiment_id, f"{at}.epoch", epoch),
        )
        return [float(v) for (v,) in rows if is_number(v)]

    def _trial_values(self, experiment_id: str, paths: tuple[str, ...]) -> list[dict[str, Any]]:
        # one json_extract of several paths per column: a JSON array of their values, parsed
        # once per row (a path and its json_type each cost a pass, and a Python branch, per
        # value: a 10,000-trial summary took twice as long). A single path is asked twice, so
        # the answer is still an array (alone, it would be a bare SQL value).
        by_column: dict[str, list[str]] = {}
        for p in paths:
            by_column.setdefault(p.split(".")[0], []).append("$." + p.split(".", 1)[1])
        columns = list(by_column)
        cols = "".join(
            f", json_extract(t.{c}, {', '.join('?' * max(2, len(by_column[c])))})" for c in columns
        )
        params: list[Any] = [
            q
            for c in columns
            for q in (by_column[c] * 2 if len(by_column[c]) == 1 else by_column[c])
        ]
        rows = self._read(
            f"SELECT t.id, t.state, t.error{cols} FROM trials t WHERE t.id IN (SELECT trial_id "
            "FROM experiment_trials WHERE experiment_id = ?) ORDER BY t.created_at, t.rowid",
            [*params, experiment_id],
        )
        names = [[p for p in paths if p.split(".")[0] == c] for c in columns]
        nothing = [[None] * len(n) for n in names]
        out = []
        for r in rows:
            row: dict[str, Any] = {"id": r[0], "state": TrialState(r[1]), "error": r[2]}
            for k, keys in enumerate(names):
                text = r[3 + k]
                row.update(zip(keys, nothing[k] if text is None else loads(text)))
            out.append(row)
        return out

    def latest_seq(self) -> int:
        return self._read("SELECT coalesce(max(seq), 0) FROM trials")[0][0]

    def _changed_states(self, since: int) -> list[tuple[str, TrialState, int]]:
        # id and state lead the row and seq is in its index: SQLite reaches them without
        # walking the curve and result stored before the other columns (a lean row read
        # them too: 7 us a row against 2, at 10,000 trials of 20 epochs)
        rows = self._read(
            "SELECT id, state, seq FROM trials WHERE seq > ? ORDER BY seq, rowid", [since]
        )
        return [(tid, TrialState(state), seq) for tid, state, seq in rows]
