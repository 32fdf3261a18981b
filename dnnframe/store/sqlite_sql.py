"""SQL shared by the SQLite store's methods: row decoding, per-row seqs, batched writes."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterator
from typing import Any

from ..jsonsafe import dumps, loads
from .lifecycle import TrialUpdate
from .records import TrialRecord, TrialState, columns_reading

TRIAL_COLS = (
    "t.id, t.state, t.config, t.result, t.metrics, t.error, t.worker, t.attempts, "
    "t.created_at, t.started_at, t.finished_at, t.heartbeat_at, t.seq, "
    "(SELECT json_group_array(experiment_id) FROM experiment_trials "
    "WHERE trial_id = t.id)"
)


@functools.cache
def trial_cols(fields: frozenset[str]) -> str:
    """:data:`TRIAL_COLS` reading only the bulky ``fields`` given (NULL for the others, so
    :func:`trial_record` decodes every row alike)."""
    return columns_reading(TRIAL_COLS, fields)


NEXT_SEQ = "(SELECT coalesce(max(seq), 0) + 1 FROM trials)"
# lifecycle.all_experiments_cancelled of the row ``trials``, as SQL.
ALL_EXPERIMENTS_CANCELLED = (
    "(EXISTS (SELECT 1 FROM experiment_trials WHERE trial_id = trials.id) AND NOT EXISTS "
    "(SELECT 1 FROM experiment_trials et JOIN experiments e ON e.id = et.experiment_id "
    "WHERE et.trial_id = trials.id AND e.cancel_requested = 0))"
)
# Columns holding JSON text.
_JSON_COLUMNS = ("result", "metrics")


def next_seq(c: sqlite3.Connection) -> int:
    return c.execute(f"SELECT {NEXT_SEQ}").fetchone()[0]


def marks(ids: list[str]) -> str:
    return ", ".join("?" * len(ids))


def chunks(items: list[Any], size: int = 500) -> Iterator[list[Any]]:
    """Slices of ``items`` small enough for SQLite's limit on bound parameters."""
    for i in range(0, len(items), size):
        yield items[i : i + size]


def trial_record(row: tuple) -> TrialRecord:
    """A row of :func:`trial_cols` (a bulky field not read is NULL: its empty value)."""
    return TrialRecord(
        id=row[0],
        state=TrialState(row[1]),
        config=loads(row[2]) if row[2] is not None else {},
        result=loads(row[3]) if row[3] is not None else None,
        metrics=loads(row[4]) if row[4] is not None else [],
        error=row[5],
        worker=row[6],
        attempts=row[7],
        created_at=row[8],
        started_at=row[9],
        finished_at=row[10],
        heartbeat_at=row[11],
        seq=row[12],
        experiment_ids=sorted(loads(row[13])) if row[13] else [],
    )


@functools.cache
def _update_sql(sets: tuple[str, ...], incs: tuple[str, ...], tail: bool) -> str:
    """The ``UPDATE`` of a life-cycle update with these fields (names come from
    lifecycle.py, never from a caller), numbered parameters in the order ``apply_updates``
    gives them; with ``tail``, the curve gets epochs appended in the same statement."""
    assign = [f"{name} = ?" for name in sets] + [f"{name} = {name} + ?" for name in incs]
    assign.append("seq = ?")
    numbered = [a.replace("?", f"?{i}") for i, a in enumerate(assign, 1)]
    if tail:
        numbered.append(f"metrics = {_joined(f'?{len(numbered) + 1}')}")
    return f"UPDATE trials SET {', '.join(numbered)} WHERE id = ?{len(numbered) + 1}"


def apply_updates(
    c: sqlite3.Connection,
    rows: list[tuple[str, int, TrialUpdate]],
    tails: dict[str, str] | None = None,
) -> None:
    """Write ``(trial_id, seq, update)`` rows inside the caller's transaction: one
    statement per kind of update, run for all its rows. ``tails``: trial id -> the epochs
    to append to its curve in the same statement (compact JSON array text, as
    :func:`append_epochs` takes it)."""
    groups: dict[tuple[tuple[str, ...], tuple[str, ...], bool], list[tuple]] = {}
    for tid, seq, update in rows:
        params = [
            dumps(value) if name in _JSON_COLUMNS and value is not None else value
            for name, value in update.set.items()
        ]
        tail = tails.get(tid) if tails else None
        groups.setdefault((tuple(update.set), tuple(update.inc), tail is not None), []).append(
            (*params, *update.inc.values(), seq, *(() if tail is None else (tail,)), tid)
        )
    for fields, group in groups.items():
        c.executemany(_update_sql(*fields), group)


def update_each(c: sqlite3.Connection, update: TrialUpdate, ids: list[str]) -> None:
    """Apply ``update`` to each of ``ids`` (inside the caller's transaction), giving every
    row its own ``seq``: a cursor reader paging with ``limit`` must never meet a tie
    larger than its page (it would skip the rest of the tied rows)."""
    seq = next_seq(c)
    apply_updates(c, [(tid, seq + i, update) for i, tid in enumerate(ids)])


# A curve and the epochs to append are JSON arrays, each written minified: the curve
# without its closing bracket, a comma and the tail without its opening one is the longer
# array. One text per trial, built by C code, however many epochs it carries (a
# json_insert pair per epoch needed a Python object and a parse of each). The epochs are
# this store's own compact JSON; a curve shaped as the store writes one ("[{...}]") is
# joined as it is, since parsing it with json() on every write cost more than the update
# itself; any other stored text (an empty curve, one another program wrote) goes through
# json() first.
def _joined(tail: str) -> str:
    """The curve with the epochs of parameter ``tail`` (JSON array text) appended."""
    return (
        f"CASE WHEN {tail} = '[]' THEN metrics "
        f"WHEN metrics LIKE '[{{%}}]' THEN substr(metrics, 1, length(metrics) - 1) || ',' || "
        f"substr({tail}, 2) "
        f"WHEN json_array_length(metrics) = 0 THEN {tail} "
        f"ELSE substr(json(metrics), 1, length(json(metrics)) - 1) || ',' || substr({tail}, 2) "
        "END"
    )


_APPEND = f"UPDATE trials SET heartbeat_at = ?1, seq = ?2, metrics = {_joined('?3')} WHERE id = ?4"


def append_epochs(c: sqlite3.Connection, rows: list[tuple[float, int, str, str]]) -> None:
    """Append to each trial's curve its epochs, given as ``(heartbeat_at, seq, compact JSON
    array text of the epochs in order, as :func:`~dnnframe.jsonsafe.dumps` writes it, trial
    id)``; the heartbeat and change number are set in the same statement."""
    c.executemany(_APPEND, rows)
