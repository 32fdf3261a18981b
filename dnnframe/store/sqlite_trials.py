"""The SQLite store's trial life cycle: claims, heartbeats, metrics, finishing and requeues.
Every write runs in one ``BEGIN IMMEDIATE`` transaction: the rows are read and the rules of
lifecycle.py applied under the write lock, so nothing changes between the decision and the
write."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

from ..exceptions import NotFoundError
from ..jsonsafe import dumps
from .base_trials import now
from .checks import CheckedFinish, epochs_to_store
from .lifecycle import (
    RELEASE,
    REQUEUE_STALE,
    ClaimOutcome,
    TrialUpdate,
    decide_claim,
    finish_update,
    may_finish,
    owns,
    stop_requested,
)
from .records import TrialRecord
from .sqlite_sql import (
    ALL_EXPERIMENTS_CANCELLED,
    TRIAL_COLS,
    append_epochs,
    apply_updates,
    chunks,
    marks,
    next_seq,
    trial_record,
    update_each,
)


class SQLiteTrials:
    """The trial life-cycle methods of :class:`~dnnframe.store.sqlite.SQLiteStore`."""

    url: str
    _tx: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _read: Callable[..., list[tuple]]

    def _require(self, ids: list[str], found: set[str] | dict[str, Any]) -> None:
        missing = [tid for tid in ids if tid not in found]
        if missing:
            raise NotFoundError(
                f"trial {missing[0]!r} not found in {self.url}"
                + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
            )

    def _rows(self, c: sqlite3.Connection, columns: str, ids: list[str]) -> Iterator[tuple]:
        for chunk in chunks(ids):
            yield from c.execute(
                f"SELECT id, {columns} FROM trials WHERE id IN ({marks(chunk)})", chunk
            )

    def _claim_trials(
        self, trial_ids: list[str], worker: str, max_attempts: int | None
    ) -> list[TrialRecord]:
        t = now()
        with self._tx() as c:
            found = {
                r[0]: r[1:]
                for r in self._rows(c, f"state, attempts, {ALL_EXPERIMENTS_CANCELLED}", trial_ids)
            }
            self._require(trial_ids, found)
            seq = next_seq(c)
            won: list[str] = []
            rows = []
            for tid in trial_ids:
                state, attempts, cancelled = found[tid]
                outcome, update = decide_claim(
                    state, attempts, bool(cancelled), max_attempts, worker, t
                )
                if update is None:
                    continue
                rows.append((tid, seq, update))
                seq += 1
                if outcome is ClaimOutcome.WON:
                    won.append(tid)
            apply_updates(c, rows)
            records = {
                r[0]: trial_record(r)
                for chunk in chunks(won)
                for r in c.execute(
                    f"SELECT {TRIAL_COLS} FROM trials t WHERE t.id IN ({marks(chunk)})", chunk
                )
            }
        return [records[tid] for tid in won]

    def _heartbeat_trials(self, trial_ids: list[str], worker: str) -> set[str]:
        t = now()
        with self._tx() as c:
            # lifecycle.owns as a filter: one statement, and heartbeats move no seq
            return {
                r[0]
                for chunk in chunks(trial_ids)
                for r in c.execute(
                    f"UPDATE trials SET heartbeat_at = ? WHERE id IN ({marks(chunk)}) AND "
                    "state = 'RUNNING' AND worker = ? RETURNING id",
                    (t, *chunk, worker),
                )
            }

    def _append_metrics_many(
        self, epochs_by_id: dict[str, list[dict[str, Any]]], worker: str | None
    ) -> set[str]:
        t = now()
        ids = list(epochs_by_id)
        with self._tx() as c:
            # Inside the write lock: what each curve ends with cannot change before the
            # updates below, so they need no guard of their own.
            last = {
                r[0]: r[3]
                for r in self._rows(c, "state, worker, json_extract(metrics, '$[#-1].epoch')", ids)
                if owns(r[1], r[2], worker)
            }
            written = [tid for tid in ids if tid in last]
            first = next_seq(c)
            append_epochs(
                c,
                [
                    (t, first + k, dumps(epochs_to_store(epochs_by_id[tid], last[tid])), tid)
                    for k, tid in enumerate(written)
                ],
            )
        return set(written)

    def _finish_trials(
        self,
        items: list[CheckedFinish],
        worker: str | None,
        epochs: dict[str, list[dict[str, Any]]],
    ) -> set[str]:
        t = now()
        ids = [tid for tid, *_ in items]
        with self._tx() as c:
            # how each curve ends is read only where epochs come with the end
            last = "json_extract(metrics, '$[#-1].epoch')" if epochs else "NULL"
            found = {r[0]: r[1:] for r in self._rows(c, f"state, worker, {last}", ids)}
            # Raising rolls the whole batch back: an unknown id finishes nothing.
            self._require(ids, found)
            first = next_seq(c)
            rows: list[tuple[str, int, TrialUpdate]] = []
            tails: dict[str, str] = {}
            for tid, st, result, error in items:
                state, owner, ends_at = found[tid]
                if may_finish(state, owner, st, worker):
                    rows.append((tid, first + len(rows), finish_update(st, result, error, t)))
                    if tid in epochs:
                        tails[tid] = dumps(epochs_to_store(epochs[tid], ends_at))
            apply_updates(c, rows, tails)
        return {tid for tid, _, _ in rows}

    def _cancel_requested(self, trial_ids: list[str]) -> set[str]:
        rows = [
            r
            for chunk in chunks(trial_ids)
            for r in self._read(
                f"SELECT id, state, {ALL_EXPERIMENTS_CANCELLED} FROM trials "
                f"WHERE id IN ({marks(chunk)})",
                chunk,
            )
        ]
        self._require(trial_ids, {r[0] for r in rows})
        return {tid for tid, state, cancelled in rows if stop_requested(state, bool(cancelled))}

    def _requeue_stale(self, cutoff: float) -> list[str]:
        with self._tx() as c:
            ids = [
                r[0]
                for r in c.execute(
                    "SELECT id FROM trials WHERE state = 'RUNNING' AND heartbeat_at < ? ORDER BY rowid",
                    (cutoff,),
                )
            ]
            update_each(c, REQUEUE_STALE, ids)
        return sorted(ids)

    def _release_trial(self, trial_id: str, worker: str) -> bool:
        with self._tx() as c:
            row = c.execute("SELECT state, worker FROM trials WHERE id = ?", (trial_id,)).fetchone()
            if row is None:
                raise NotFoundError(f"trial {trial_id!r} not found in {self.url}")
            if not owns(row[0], row[1], worker):
                return False
            update_each(c, RELEASE, [trial_id])
            return True
