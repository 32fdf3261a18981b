"""How the MongoDB backend stores notes (the contract is in notes.py): a ``notes`` collection
of one document per note, ``_id`` ``"<kind>:<id>"``, written by one conditional update."""

from __future__ import annotations

from typing import Any

from pymongo import ReturnDocument
from pymongo.errors import DuplicateKeyError

from ..exceptions import NotFoundError
from .mongo_connect import redact, retry
from .notes import NoteRecord, conflict


def note_key(kind: str, target_id: str) -> str:
    """The ``_id`` of the note of ``kind`` ``target_id``."""
    return f"{kind}:{target_id}"


def _note(doc: dict[str, Any] | None) -> NoteRecord:
    return (
        NoteRecord() if doc is None else NoteRecord(doc["text"], doc["version"], doc["updated_at"])
    )


class MongoNotes:
    """Notes of :class:`~dnnframe.store.mongodb.MongoStore`. A save is one update whose
    filter holds the version it expects (an upsert when it expects none): another save
    that came first makes it miss, or makes its insert fail on the unique ``_id``. The
    experiment or trial is looked up before the save and again after it: a note saved while
    its experiment was being deleted (which deletes the notes after the trials) is taken
    back, so none outlives what it was about."""

    _db: Any
    url: str

    def _note_target(self, kind: str, target_id: str) -> None:
        targets = self._db.experiments if kind == "experiment" else self._db.trials
        if targets.find_one({"_id": target_id}, {"_id": 1}) is None:
            raise NotFoundError(f"{kind} {target_id!r} not found in {redact(self.url)}")

    @retry
    def _read_note(self, kind: str, target_id: str) -> NoteRecord:
        self._note_target(kind, target_id)
        return _note(self._db.notes.find_one({"_id": note_key(kind, target_id)}))

    @retry
    def _write_note(
        self, kind: str, target_id: str, text: str, expected_version: int | None, at: float
    ) -> NoteRecord:
        self._note_target(kind, target_id)
        key = note_key(kind, target_id)
        held = _note(self._db.notes.find_one({"_id": key}))
        if held.text == text:  # a retry whose first attempt saved it finds it here too
            return held
        query: dict[str, Any] = {"_id": key}
        if expected_version is not None:
            query["version"] = expected_version
        change = {"$set": {"text": text, "updated_at": at}, "$inc": {"version": 1}}
        doc = None
        for _ in range(2):  # a first save racing another inserts once, then updates
            try:
                doc = self._db.notes.find_one_and_update(
                    query,
                    change,
                    upsert=expected_version in (None, 0),
                    return_document=ReturnDocument.AFTER,
                )
                break
            except DuplicateKeyError:  # the note exists: with a version expected, not that one
                if expected_version is not None:
                    break
        if doc is None:
            raise conflict(
                kind,
                target_id,
                expected_version or 0,
                _note(self._db.notes.find_one({"_id": key})).version,
            )
        try:
            self._note_target(kind, target_id)
        except NotFoundError:
            self._db.notes.delete_one({"_id": key})
            raise
        return _note(doc)
