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

Experiments and queries here; the trial life cycle in postgresql_trials.py; leases, the
dispatch outbox, workers and notes in lease_backends.py, outbox_backends.py,
worker_backends.py and note_backends.py.
Retries: see postgresql_conn.py (op ids recorded with the answer, in the same transaction).
"""

from __future__ import annotations

from typing import Any

from ..exceptions import NotFoundError
from ..metrics import is_number
from .base import ResultStore, dumps, now
from .checks import active_error
from .lease_backends import PostgresLeases
from .lifecycle import REQUEUE_RESET, TrialUpdate, cancel_before_start
from .note_backends import PostgresNotes
from .outbox_backends import PostgresOutbox
from .postgresql_conn import PgConnections
from .postgresql_sql import (
    ALL_EXPERIMENTS_CANCELLED,
    EXP_COLS,
    Conn,
    lock_trials,
    reserve,
    statement,
    trial_record,
    trials_query,
    update_each,
)
from .postgresql_trials import PostgresTrials
from .records import (
    ExperimentRecord,
    TrialRecord,
    TrialState,
    TrialTally,
    tally_rows,
)
from .worker_backends import PostgresWorkers

__all__ = ["PostgresStore"]


class PostgresStore(
    PostgresLeases, PostgresNotes, PostgresOutbox, PostgresWorkers, PostgresTrials, ResultStore
):
    """ResultStore in a PostgreSQL database (the schema of the connection's search_path)."""

    def __init__(self, url: str, create: bool = True):
        self.url = url
        self._db = PgConnections(url, create)
        self._where = self._db.where

    def close(self) -> None:
        self._db.close()

    def _missing(self, what: str, key: str) -> NotFoundError:
        return NotFoundError(f"{what} {key!r} not found in {self._where}")

    # ------------------------------------------------------------ experiments
    def _create_experiment(
        self, experiment_id: str, name: str, spec: dict[str, Any], n_trials: int
    ) -> ExperimentRecord:
        self._db.write(
            statement(
                "INSERT INTO experiments (id, name, spec, n_trials, created_at) "
                "VALUES (%s, %s, %s::jsonb, %s, %s) ON CONFLICT (id) DO NOTHING",
                (experiment_id, name, dumps(spec), n_trials, now()),
            ),
            record=False,
        )
        return self.get_experiment(experiment_id)

    def _experiments(self, c: Conn, rows: list[tuple]) -> list[ExperimentRecord]:
        tallies = self._tallies(c, [r[0] for r in rows])
        return [
            ExperimentRecord(
                id=r[0],
                name=r[1],
                spec=r[2],
                n_trials=r[3],
                created_at=r[4],
                cancel_requested=r[5],
                counts=tally.counts,
                reruns=tally.reruns,
            )
            for r in rows
            for tally in [tallies.get(r[0], TrialTally())]
        ]

    def _get_experiment(self, experiment_id: str) -> ExperimentRecord:
        def body(c: Conn) -> ExperimentRecord:
            rows = c.execute(
                f"SELECT {EXP_COLS} FROM experiments WHERE id = %s", (experiment_id,)
            ).fetchall()
            if not rows:
                raise self._missing("experiment", experiment_id)
            return self._experiments(c, rows)[0]

        return self._db.read(body)

    def _list_experiments(self, limit: int | None, offset: int) -> list[ExperimentRecord]:
        return self._db.read(
            lambda c: self._experiments(
                c,
                c.execute(
                    f"SELECT {EXP_COLS} FROM experiments ORDER BY created_at DESC, ord DESC "
                    "LIMIT %s OFFSET %s",
                    (limit, offset),
                ).fetchall(),
            )
        )

    def _counts(self, c: Conn, experiment_id: str | None) -> dict[str, int]:
        if experiment_id is None:
            rows = c.execute("SELECT state, count(*) FROM trials GROUP BY state")
        else:
            rows = c.execute(
                "SELECT t.state, count(*) FROM experiment_trials et JOIN trials t "
                "ON t.id = et.trial_id WHERE et.experiment_id = %s GROUP BY t.state",
                (experiment_id,),
            )
        return {s: n for s, n in rows}

    def _count_states(self, experiment_id: str | None) -> dict[str, int]:
        return self._db.read(lambda c: self._counts(c, experiment_id))

    @staticmethod
    def _tallies(c: Conn, experiment_ids: list[str]) -> dict[str, TrialTally]:
        return tally_rows(
            c.execute(
                "SELECT et.experiment_id, t.state, t.attempts > 1, count(*) FROM experiment_trials "
                "et JOIN trials t ON t.id = et.trial_id WHERE et.experiment_id = ANY(%s) "
                "GROUP BY 1, 2, 3",
                (experiment_ids,),
            )
        )

    def _tally_many(self, experiment_ids: list[str]) -> dict[str, TrialTally]:
        return self._db.read(lambda c: self._tallies(c, experiment_ids))

    def _set_cancel(self, c: Conn, experiment_id: str, value: bool) -> None:
        if (
            c.execute(
                "UPDATE experiments SET cancel_requested = %s WHERE id = %s", (value, experiment_id)
            ).rowcount
            == 0
        ):
            raise self._missing("experiment", experiment_id)

    def _cancel_experiment(self, experiment_id: str) -> int:
        def body(c: Conn) -> int:
            self._set_cancel(c, experiment_id, True)
            ids = lock_trials(
                c,
                "t.state = 'QUEUED' AND t.id IN (SELECT trial_id FROM "
                f"experiment_trials WHERE experiment_id = %s) AND "
                f"{ALL_EXPERIMENTS_CANCELLED}",
                (experiment_id,),
            )
            update_each(c, cancel_before_start(now()), ids)
            return len(ids)

        return self._db.write(body)[0]

    def _delete_experiment(self, experiment_id: str) -> int:

        def body(c: Conn) -> int:
            if (
                c.execute(
                    "SELECT 1 FROM experiments WHERE id = %s FOR UPDATE", (experiment_id,)
                ).fetchone()
                is None
            ):
                return 0
            ids = lock_trials(
                c,
                "t.id IN (SELECT trial_id FROM experiment_trials WHERE experiment_id = %s)",
                (experiment_id,),
            )
            shared = {
                r[0]
                for r in c.execute(
                    "SELECT DISTINCT trial_id FROM experiment_trials WHERE trial_id = ANY(%s) AND "
                    "experiment_id <> %s",
                    (ids, experiment_id),
                )
            }
            own = [tid for tid in ids if tid not in shared]
            active = [
                r[0]
                for r in c.execute(
                    "SELECT id FROM trials WHERE id = ANY(%s) AND state IN ('QUEUED', 'RUNNING') "
                    "ORDER BY ord",
                    (own,),
                )
            ]
            if active:
                raise active_error(experiment_id, active)
            c.execute("DELETE FROM experiment_trials WHERE experiment_id = %s", (experiment_id,))
            c.execute("DELETE FROM held_dispatch WHERE trial_id = ANY(%s)", (own,))
            c.execute("DELETE FROM trials WHERE id = ANY(%s)", (own,))
            # a shared trial's experiment_ids changed: it moves in the change order
            update_each(c, TrialUpdate({}), [tid for tid in ids if tid in shared])
            c.execute("DELETE FROM experiments WHERE id = %s", (experiment_id,))
            return len(own)

        return self._db.write(body)[0]

    def _requeue_trials(self, experiment_id: str, names: list[str]) -> list[str]:

        def body(c: Conn) -> list[str]:
            self._set_cancel(c, experiment_id, False)
            if not names:
                return []
            ids = lock_trials(
                c,
                "t.state = ANY(%s) AND t.id IN (SELECT trial_id FROM "
                "experiment_trials WHERE experiment_id = %s)",
                (names, experiment_id),
            )
            update_each(c, REQUEUE_RESET, ids)
            return sorted(ids)

        return self._db.write(body)[0]

    # ------------------------------------------------------------ trials
    def _create_trials(self, experiment_id: str, trials: list[tuple[str, dict[str, Any]]]) -> int:
        rows: dict[str, str] = {}
        for tid, config in trials:
            rows.setdefault(tid, dumps(config))  # the first of a repeated id counts
        ids, t = list(rows), now()

        def body(c: Conn) -> int:
            if (
                c.execute("SELECT 1 FROM experiments WHERE id = %s", (experiment_id,)).fetchone()
                is None
            ):
                raise self._missing("experiment", experiment_id)
            if not ids:
                return 0
            # One seq per row (an id that exists already leaves a harmless gap).
            first = reserve(c, len(ids))
            created = c.execute(
                "INSERT INTO trials (id, state, config, created_at, seq) "
                "SELECT u.id, 'QUEUED', u.cfg::jsonb, %s, %s + u.k - 1 FROM "
                "unnest(%s::text[], %s::text[]) WITH ORDINALITY AS u(id, cfg, k) ORDER BY u.k "
                "ON CONFLICT (id) DO NOTHING",
                (t, first, ids, list(rows.values())),
            ).rowcount
            c.execute(
                "INSERT INTO experiment_trials (experiment_id, trial_id) "
                "SELECT %s, unnest(%s::text[]) ON CONFLICT DO NOTHING",
                (experiment_id, ids),
            )
            return created

        return self._db.write(body)[0]

    # ------------------------------------------------------------ queries
    def _get_trial(self, trial_id: str) -> TrialRecord:
        rows = self._db.read(lambda c: self._records(c, [trial_id]))
        if not rows:
            raise self._missing("trial", trial_id)
        return rows[0]

    def _get_trials(self, trial_ids: list[str], fields: frozenset[str]) -> list[TrialRecord]:
        rows = self._db.read(lambda c: self._records(c, trial_ids, fields))
        if len(rows) < len(trial_ids):
            got = {t.id for t in rows}
            missing = [tid for tid in trial_ids if tid not in got]
            raise NotFoundError(
                f"trial {missing[0]!r} not found in {self._where}"
                + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
            )
        return rows

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
        sql, args = trials_query(
            experiment_id, states, sort_by, descending, limit, offset, since, fields
        )
        return self._db.read(lambda c: [trial_record(r) for r in c.execute(sql, args)])

    def _rung_values(self, experiment_id: str, epoch: int, metric: str) -> list[float]:
        rows = self._db.read(
            lambda c: c.execute(
                "SELECT t.metrics -> %s::int -> %s::text FROM experiment_trials et JOIN trials t "
                "ON t.id = et.trial_id WHERE et.experiment_id = %s AND "
                "t.metrics -> %s::int -> 'epoch' = to_jsonb(%s::int)",
                (epoch - 1, metric, experiment_id, epoch - 1, epoch),
            ).fetchall()
        )
        return [float(v) for (v,) in rows if is_number(v)]

    def _trial_values(self, experiment_id: str, paths: tuple[str, ...]) -> list[dict[str, Any]]:
        cols = "".join(f", t.{p.split('.')[0]} #> %s::text[]" for p in paths)
        args = [p.split(".")[1:] for p in paths]
        rows = self._db.read(
            lambda c: c.execute(
                f"SELECT t.id, t.state, t.error{cols} FROM trials t WHERE t.id IN (SELECT trial_id "
                "FROM experiment_trials WHERE experiment_id = %s) ORDER BY t.created_at, t.ord",
                (*args, experiment_id),
            ).fetchall()
        )
        return [
            {"id": r[0], "state": TrialState(r[1]), "error": r[2], **dict(zip(paths, r[3:]))}
            for r in rows
        ]

    def latest_seq(self) -> int:
        return self._db.read(lambda c: c.execute("SELECT value FROM change_counter").fetchone()[0])
