"""Notes: the free text a researcher keeps on an experiment and on a trial (what it tried,
what it found), stored beside the results (``ResultStore`` inherits :class:`NoteMethods`).

A note is replaced whole by each save and is numbered: ``version`` counts its saves (0 for
a note never written). A writer may pass the version it read (``expected_version``): when
another save came in between, its write is refused with :class:`NoteConflictError`, so two
people editing one note never silently overwrite each other; without it, the last save wins.
Saving the text a note holds already changes nothing (its version stays) and is never
refused, so a save repeated after its answer was lost, by the store or by its caller,
changes nothing more.
Notes of different experiments or trials are separate records, so concurrent writers of
different notes never touch each other's, and no note write changes a trial's results,
state or ``seq``. Deleting an experiment deletes its note and the notes of the trials that
go with it (SQLite and PostgreSQL by a cascading foreign key, in the same transaction).

Each write is atomic: memory, the store's lock; SQLite, one ``BEGIN IMMEDIATE``
transaction; PostgreSQL, one transaction holding the note's row; MongoDB, one conditional
update of the note's document.
"""

from __future__ import annotations

import abc
import re
from dataclasses import dataclass

from ..exceptions import NoteConflictError
from .base_trials import now
from .checks import check_experiment_id

__all__ = [
    "MAX_NOTE_CHARS",
    "MAX_NOTE_VERSION",
    "NOTE_KINDS",
    "NOTE_TEXT_PATTERN",
    "NoteMethods",
    "NoteRecord",
    "check_note_text",
    "check_note_version",
    "conflict",
]

# A note is prose, not a data store: long enough for pages of findings, short enough that
# every page showing one stays light.
MAX_NOTE_CHARS = 10_000
# Saves are counted in a number a page's script holds exactly (a JavaScript number).
MAX_NOTE_VERSION = 2**53 - 1
# What a note is kept on; a backend's records are keyed by (kind, id).
NOTE_KINDS = ("experiment", "trial")
# Line breaks and tabs are expected in prose; other control characters (NUL, which
# PostgreSQL cannot store in text, among them) are refused.
_CONTROL = "\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f"
NOTE_TEXT_PATTERN = f"^[^{_CONTROL}]*$"  # the same rule as a JSON Schema pattern
_FORBIDDEN = re.compile(f"[{_CONTROL}]")


@dataclass(frozen=True)
class NoteRecord:
    """A note as stored: its text, how many times it was saved, and when it last was (Unix
    seconds; None for a note never written, whose text is empty)."""

    text: str = ""
    version: int = 0
    updated_at: float | None = None


def check_note_text(text: object) -> str:
    """A note's text: a string of at most :data:`MAX_NOTE_CHARS` characters, with no control
    character but tabs and line breaks, that UTF-8 can encode; else ValueError naming it."""
    if not isinstance(text, str):
        raise ValueError(f"note text must be a string, got {type(text).__name__}")
    if len(text) > MAX_NOTE_CHARS:
        raise ValueError(
            f"note text must be at most {MAX_NOTE_CHARS:,} characters, got {len(text):,}"
        )
    bad = _FORBIDDEN.search(text)
    if bad:
        raise ValueError(
            "note text must not contain control characters other than tabs and "
            f"line breaks, got {bad.group()!r} at character {bad.start() + 1}"
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:  # a lone surrogate, which no store can hold
        raise ValueError(
            f"note text must be valid Unicode, got a lone surrogate at character {e.start + 1}"
        ) from None
    return text


def check_note_version(version: object) -> int | None:
    """``expected_version``: None, or an integer from 0 to :data:`MAX_NOTE_VERSION`; else
    ValueError naming it."""
    if version is None:
        return None
    if (
        isinstance(version, bool)
        or not isinstance(version, int)
        or not 0 <= version <= MAX_NOTE_VERSION
    ):
        raise ValueError(
            f"note version must be an integer from 0 to {MAX_NOTE_VERSION}, got {version!r:.40}"
        )
    return version


def conflict(kind: str, target_id: str, expected: int, current: int) -> NoteConflictError:
    """The refusal of a save made from version ``expected`` of a note now at ``current``."""
    return NoteConflictError(
        f"the note of {kind} {target_id!r} was saved by someone else since version {expected} "
        f"(it is at version {current} now): read it again before saving over it",
        current,
    )


def _check_trial_id(trial_id: str) -> None:
    if not trial_id or not isinstance(trial_id, str):
        raise ValueError(f"trial_id must be a non-empty string, got {trial_id!r}")


class NoteMethods(abc.ABC):
    """The notes of the ResultStore contract (see the module docstring)."""

    def experiment_note(self, experiment_id: str) -> NoteRecord:
        """The note of an experiment (empty, version 0, when none was written).

        Raises:
            NotFoundError: unknown experiment.  ValueError: an empty id.
        """
        check_experiment_id(experiment_id)
        return self._read_note("experiment", experiment_id)

    def set_experiment_note(
        self, experiment_id: str, text: str, expected_version: int | None = None
    ) -> NoteRecord:
        """Replace an experiment's note with ``text`` (``""`` empties it); returns it as
        stored, its ``version`` one more than before (the same when it held ``text``).

        Raises:
            NotFoundError: unknown experiment.  NoteConflictError: ``expected_version``
            given and the note is at another version (nothing is written).  ValueError: an
            empty id, or a text or version :func:`check_note_text` or
            :func:`check_note_version` refuses.
        """
        check_experiment_id(experiment_id)
        return self._write_note(
            "experiment",
            experiment_id,
            check_note_text(text),
            check_note_version(expected_version),
            now(),
        )

    def trial_note(self, trial_id: str) -> NoteRecord:
        """The note of a trial (shared by every experiment the trial belongs to); as
        :meth:`experiment_note`."""
        _check_trial_id(trial_id)
        return self._read_note("trial", trial_id)

    def set_trial_note(
        self, trial_id: str, text: str, expected_version: int | None = None
    ) -> NoteRecord:
        """Replace a trial's note; as :meth:`set_experiment_note`. The trial's state,
        results and ``seq`` are untouched, whatever state it is in."""
        _check_trial_id(trial_id)
        return self._write_note(
            "trial", trial_id, check_note_text(text), check_note_version(expected_version), now()
        )

    @abc.abstractmethod
    def _read_note(self, kind: str, target_id: str) -> NoteRecord:
        """The note of ``kind`` (one of :data:`NOTE_KINDS`) ``target_id``; NotFoundError
        when that experiment or trial does not exist."""

    @abc.abstractmethod
    def _write_note(
        self, kind: str, target_id: str, text: str, expected_version: int | None, at: float
    ) -> NoteRecord:
        """Atomically: NotFoundError for an unknown target; the stored note unchanged when
        it holds ``text`` already; :func:`conflict` when ``expected_version`` is not None and
        differs from the stored version (0 when none); else store ``text`` at version + 1,
        updated at ``at``."""
