"""How the memory, SQLite and PostgreSQL backends store notes (the contract is in notes.py;
MongoDB's, which needs pymongo, in mongo_notes.py): one small mixin per backend, each write
checking the note's version and replacing it in one atomic step.

SQLite and PostgreSQL keep a table per kind, ``experiment_notes`` and ``trial_notes``, whose
key references the experiment or trial with ``ON DELETE CASCADE``: a note cannot outlive
what it is about, nor be written for something that does not exist.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from typing import Any

from ..exceptions import NotFoundError
from .notes import NoteRecord, conflict

# kind -> (notes table, its key column, the table that key references)
NOTE_TABLES = {
    "experiment": ("experiment_notes", "experiment_id", "experiments"),
    "trial": ("trial_notes", "trial_id", "trials"),
}


def _read_sql(kind: str, mark: str) -> str:
    """The target's id and its note's columns (NULL when it has none): no row, no target."""
    table, key, targets = NOTE_TABLES[kind]
    return (
        f"SELECT t.id, n.text, n.version, n.updated_at FROM {targets} t LEFT JOIN {table} n "
        f"ON n.{key} = t.id WHERE t.id = {mark}"
    )


def _note(row: tuple) -> NoteRecord:
    return NoteRecord() if row[2] is None else NoteRecord(row[1], row[2], row[3])


class MemoryNotes:
    """Notes of :class:`~dnnframe.store.memory.MemoryStore`: a dict keyed by (kind, id),
    under the store's lock."""

    _locked: Callable[[], contextlib.AbstractContextManager[Any]]
    url: str

    def _note_target(self, d: Any, kind: str, target_id: str) -> None:
        if target_id not in (d.experiments if kind == "experiment" else d.trials):
            raise NotFoundError(f"{kind} {target_id!r} not found in {self.url}")

    def _read_note(self, kind: str, target_id: str) -> NoteRecord:
        with self._locked() as d:
            self._note_target(d, kind, target_id)
            return d.notes.get((kind, target_id), NoteRecord())

    def _write_note(
        self, kind: str, target_id: str, text: str, expected_version: int | None, at: float
    ) -> NoteRecord:
        with self._locked() as d:
            self._note_target(d, kind, target_id)
            held = d.notes.get((kind, target_id), NoteRecord())
            if held.text == text:
                return held
            if expected_version is not None and expected_version != held.version:
                raise conflict(kind, target_id, expected_version, held.version)
            note = d.notes[(kind, target_id)] = NoteRecord(text, held.version + 1, at)
            return note

    @staticmethod
    def _drop_notes(d: Any, experiment_id: str, trial_ids: list[str]) -> None:
        """Forget the notes of a deleted experiment and of its trials that went with it."""
        d.notes.pop(("experiment", experiment_id), None)
        for tid in trial_ids:
            d.notes.pop(("trial", tid), None)


class SQLiteNotes:
    """Notes of :class:`~dnnframe.store.sqlite.SQLiteStore`: read, checked and written in one
    ``BEGIN IMMEDIATE`` transaction, so no other writer comes between."""

    _tx: Callable[[], contextlib.AbstractContextManager[sqlite3.Connection]]
    _read: Callable[..., list[tuple]]
    url: str

    def _read_note(self, kind: str, target_id: str) -> NoteRecord:
        rows = self._read(_read_sql(kind, "?"), (target_id,))
        if not rows:
            raise NotFoundError(f"{kind} {target_id!r} not found in {self.url}")
        return _note(rows[0])

    def _write_note(
        self, kind: str, target_id: str, text: str, expected_version: int | None, at: float
    ) -> NoteRecord:
        table, key, _ = NOTE_TABLES[kind]
        with self._tx() as c:
            row = c.execute(_read_sql(kind, "?"), (target_id,)).fetchone()
            if row is None:
                raise NotFoundError(f"{kind} {target_id!r} not found in {self.url}")
            held = _note(row)
            if held.text == text:
                return held
            current = held.version
            if expected_version is not None and expected_version != current:
                raise conflict(kind, target_id, expected_version, current)
            c.execute(
                f"INSERT OR REPLACE INTO {table} ({key}, text, version, updated_at) "
                "VALUES (?, ?, ?, ?)",
                (target_id, text, current + 1, at),
            )
        return NoteRecord(text, current + 1, at)


class PostgresNotes:
    """Notes of :class:`~dnnframe.store.postgresql.PostgresStore`: one transaction holds the
    target (``FOR KEY SHARE``: it cannot be deleted meanwhile, and trial writes, which take
    ``FOR NO KEY UPDATE``, are not held up) and the note's row, and upserts the note only
    if its version is still the one checked."""

    _db: Any
    _where: str

    def _read_note(self, kind: str, target_id: str) -> NoteRecord:
        row = self._db.read(lambda c: c.execute(_read_sql(kind, "%s"), (target_id,)).fetchone())
        if row is None:
            raise NotFoundError(f"{kind} {target_id!r} not found in {self._where}")
        return _note(row)

    def _write_note(
        self, kind: str, target_id: str, text: str, expected_version: int | None, at: float
    ) -> NoteRecord:
        table, key, targets = NOTE_TABLES[kind]

        def body(c: Any) -> NoteRecord:
            if (
                c.execute(
                    f"SELECT 1 FROM {targets} WHERE id = %s FOR KEY SHARE", (target_id,)
                ).fetchone()
                is None
            ):
                raise NotFoundError(f"{kind} {target_id!r} not found in {self._where}")
            row = c.execute(
                f"SELECT text, version, updated_at FROM {table} WHERE {key} = %s FOR UPDATE",
                (target_id,),
            ).fetchone()
            held = NoteRecord(*row) if row else NoteRecord()
            if held.text == text:
                return held
            current = held.version
            if expected_version is not None and expected_version != current:
                raise conflict(kind, target_id, expected_version, current)
            # a first save racing another finds the row there at the insert: the WHERE then
            # refuses it when it expected none (version 0), and counts on after it otherwise
            saved = c.execute(
                f"INSERT INTO {table} ({key}, text, version, updated_at) VALUES (%s, %s, 1, %s) "
                f"ON CONFLICT ({key}) DO UPDATE SET text = EXCLUDED.text, "
                f"version = {table}.version + 1, updated_at = EXCLUDED.updated_at "
                f"WHERE %s::bigint IS NULL OR {table}.version = %s::bigint RETURNING version",
                (target_id, text, at, expected_version, expected_version),
            ).fetchone()
            if saved is None:
                row = c.execute(
                    f"SELECT version FROM {table} WHERE {key} = %s", (target_id,)
                ).fetchone()
                raise conflict(kind, target_id, expected_version or 0, row[0] if row else 0)
            return NoteRecord(text, int(saved[0]), at)

        # not recorded: a retry after a lost answer finds its text saved, and changes nothing
        return self._db.write(body, record=False)[0]
