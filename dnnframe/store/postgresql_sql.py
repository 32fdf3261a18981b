"""SQL shared by the PostgreSQL store's methods (see postgresql.py for the locking rules)."""

from __future__ import annotations

import functools
from typing import Any

import psycopg

from ..jsonsafe import dumps
from .lifecycle import TrialUpdate
from .records import TrialRecord, TrialState, columns_reading
from .sorting import resolve_sort_path

Conn = psycopg.Connection
TRIAL_COLS = (
    "t.id, t.state, t.config, t.result, t.metrics, t.error, t.worker, t.attempts, "
    "t.created_at, t.started_at, t.finished_at, t.heartbeat_at, t.seq, "
    "ARRAY(SELECT experiment_id FROM experiment_trials WHERE trial_id = t.id "
    "ORDER BY experiment_id)"
)


@functools.cache
def trial_cols(fields: frozenset[str]) -> str:
    """:data:`TRIAL_COLS` reading only the bulky ``fields`` given (NULL for the others, so
    :func:`trial_record` decodes every row alike)."""
    return columns_reading(TRIAL_COLS, fields, "NULL::jsonb")


EXP_COLS = "id, name, spec, n_trials, created_at, cancel_requested"
# lifecycle.all_experiments_cancelled of the row ``t``, as SQL.
ALL_EXPERIMENTS_CANCELLED = (
    "(EXISTS (SELECT 1 FROM experiment_trials WHERE trial_id = t.id) AND NOT EXISTS "
    "(SELECT 1 FROM experiment_trials et JOIN experiments e ON e.id = et.experiment_id "
    "WHERE et.trial_id = t.id AND NOT e.cancel_requested))"
)
# The SQL type of each column a life-cycle update writes (values travel as typed arrays).
_COLUMN_TYPES = {
    "state": "text",
    "worker": "text",
    "error": "text",
    "result": "jsonb",
    "metrics": "jsonb",
    "attempts": "int",
    "started_at": "float8",
    "finished_at": "float8",
    "heartbeat_at": "float8",
}


def trial_record(row: tuple) -> TrialRecord:
    """A row of :func:`trial_cols` (a bulky field not read is NULL: its empty value)."""
    return TrialRecord(
        id=row[0],
        state=TrialState(row[1]),
        config=row[2] if row[2] is not None else {},
        result=row[3],
        metrics=row[4] if row[4] is not None else [],
        error=row[5],
        worker=row[6],
        attempts=row[7],
        created_at=row[8],
        started_at=row[9],
        finished_at=row[10],
        heartbeat_at=row[11],
        seq=row[12],
        experiment_ids=list(row[13]),
    )


def statement(sql: str, params: tuple) -> Any:
    """A transaction body running one statement, answering nothing."""

    def body(c: Conn) -> None:
        c.execute(sql, params)

    return body


def reserve(c: Conn, n: int) -> int:
    """Take ``n`` seqs (the counter row stays locked until commit); returns the first."""
    row = c.execute("UPDATE change_counter SET value = value + %s RETURNING value", (n,)).fetchone()
    assert row is not None, "the schema creates change_counter's one row"
    return row[0] - n + 1


def _column(name: str, values: list[Any]) -> tuple[str, list[Any]]:
    """The array type of one column's values, and the values as that type."""
    kind = _COLUMN_TYPES[name]
    if kind == "jsonb":
        return "text", [None if v is None else dumps(v) for v in values]
    if kind == "float8":  # psycopg refuses a list mixing ints and floats
        return kind, [None if v is None else float(v) for v in values]
    return kind, values


def apply_updates(
    c: Conn, rows: list[tuple[str, int, TrialUpdate]], tails: dict[str, str] | None = None
) -> None:
    """Write ``(trial_id, seq, update)`` rows (locked already): one statement per set of
    fields, its values sent as one array per column (field names come from lifecycle.py).
    ``tails``: trial id -> epochs (JSON array text) appended to its curve in the same
    statement."""
    tails = tails or {}
    groups: dict[tuple[tuple[str, ...], tuple[str, ...], bool], list[tuple[str, int, TrialUpdate]]]
    groups = {}
    for row in rows:
        groups.setdefault((tuple(row[2].set), tuple(row[2].inc), row[0] in tails), []).append(row)
    for (sets, incs, tailed), group in groups.items():
        arrays, params, names, assign = ["%s::text[]", "%s::bigint[]"], [], ["id", "seq"], []
        params += [[r[0] for r in group], [r[1] for r in group]]
        for i, name in enumerate(sets):
            kind, values = _column(name, [r[2].set[name] for r in group])
            arrays.append(f"%s::{kind}[]")
            params.append(values)
            names.append(f"s{i}")
            assign.append(
                f"{name} = u.s{i}" + ("::jsonb" if _COLUMN_TYPES[name] == "jsonb" else "")
            )
        for i, name in enumerate(incs):
            arrays.append("%s::int[]")
            params.append([r[2].inc[name] for r in group])
            names.append(f"i{i}")
            assign.append(f"{name} = {name} + u.i{i}")
        if tailed:
            arrays.append("%s::text[]")
            params.append([tails[r[0]] for r in group])
            names.append("tail")
            assign.append("metrics = metrics || u.tail::jsonb")
        c.execute(
            f"UPDATE trials SET {', '.join([*assign, 'seq = u.seq'])} FROM "
            f"unnest({', '.join(arrays)}) AS u({', '.join(names)}) "
            "WHERE trials.id = u.id",
            params,
        )


def update_each(c: Conn, update: TrialUpdate, ids: list[str]) -> None:
    """Apply ``update`` to each of ``ids`` (locked already), each with its own seq in the
    order given: a cursor reader paging with a limit never meets a tie."""
    if ids:
        first = reserve(c, len(ids))
        apply_updates(c, [(tid, first + k, update) for k, tid in enumerate(ids)])


def lock_trials(c: Conn, where: str, params: tuple) -> list[str]:
    """Lock the trials matching ``where`` in id order; their ids in creation order."""
    rows = c.execute(
        f"SELECT t.id, t.ord FROM trials t WHERE {where} ORDER BY t.id FOR NO KEY UPDATE OF t",
        params,
    ).fetchall()
    return [r[0] for r in sorted(rows, key=lambda r: r[1])]


def trials_query(
    experiment_id: str | None,
    states: list[str] | None,
    sort_by: str | None,
    descending: bool,
    limit: int | None,
    offset: int,
    since: int | None,
    fields: frozenset[str],
) -> tuple[str, tuple]:
    """The SELECT of ``list_trials`` (arguments checked already) and its parameters."""
    where: list[str] = []
    params: list[str | int | list[str]] = []
    order_params: list[list[str]] = []
    if experiment_id is not None:
        where.append("t.id IN (SELECT trial_id FROM experiment_trials WHERE experiment_id = %s)")
        params.append(experiment_id)
    if states is not None:
        where.append("t.state = ANY(%s)")
        params.append(states)
    if since is not None:
        # No upper bound needed: seqs commit in order (see postgresql.py).
        where.append("t.seq > %s")
        params.append(since)
    direction = "DESC" if descending else "ASC"
    if sort_by is None:
        key = "t.seq" if since is not None else "t.created_at"
        order = f"{key} {direction}, t.ord {direction}"
    else:
        path = resolve_sort_path(sort_by)
        if "." in path:
            column, _, rest = path.partition(".")
            # The path is a bound parameter and the column comes from a fixed set; a
            # stored JSON null sorts with the missing values, last.
            expr = f"nullif(t.{column} #> %s::text[], 'null'::jsonb)"
            order = f"{expr} IS NULL, {expr} {direction}, t.ord"
            order_params = [rest.split("."), rest.split(".")]
        else:
            order = f"t.{path} IS NULL, t.{path} {direction}, t.ord"
    sql = f"SELECT {trial_cols(fields)} FROM trials t"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += f" ORDER BY {order} LIMIT %s OFFSET %s"
    return sql, (*params, *order_params, limit, offset)
