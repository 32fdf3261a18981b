"""The REST API's notes: the free text kept on an experiment and on a trial
(:mod:`dnnframe.store.notes`), read and replaced whole; routes of the API's blueprint
(:mod:`.api`) like the others. Saving one is a write, guarded as the others are, and the
pages' signed-in sessions may save (with their CSRF token), as they call it themselves."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flask import jsonify, request

from dnnframe.exceptions import NoteConflictError
from dnnframe.store.notes import (
    MAX_NOTE_CHARS,
    MAX_NOTE_VERSION,
    NOTE_TEXT_PATTERN,
    NoteRecord,
    check_note_text,
    check_note_version,
)

from .api import EXPERIMENT, TRIAL, bp
from .context import services
from .errors import APIError
from .operations import answer, json_content, operation
from .security import require_token
from .web_specs import read_json_body

if TYPE_CHECKING:
    from .responses import Note

NOTE_FIELDS = ("text", "version")
NOTE_BODY = json_content(
    {
        "type": "object",
        "required": ["text"],
        "additionalProperties": False,
        "properties": {
            "text": {
                "type": "string",
                "maxLength": MAX_NOTE_CHARS,
                "pattern": NOTE_TEXT_PATTERN,
                "description": 'the whole note ("" empties it): free text, line breaks and '
                "tabs but no other control character; the pages show it as light "
                "markdown (headings, lists, **bold**, `code`, links), never as HTML",
            },
            "version": {
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_NOTE_VERSION,
                "description": "the version the text was edited from (as GET gave it): "
                "when another save came since, 409 and nothing is written; left out, "
                "this save replaces whatever is there",
            },
        },
        "examples": [{"text": "Width 8 beats 4 at every depth; seed 1 diverged.", "version": 0}],
    }
)
READ = answer("the note (empty text and version 0 when none was written)", "Note")
SAVED = answer(
    "saved: the note as it is stored now (saving the text it holds already changes nothing)", "Note"
)
CONFLICT = (
    "the note was saved by someone else since `version`: nothing was written; read "
    "it again before saving over it"
)


def note_json(note: NoteRecord) -> Note:
    """A stored note as the API answers it (and the pages embed it)."""
    return {"text": note.text, "version": note.version, "updated_at": note.updated_at}


def _note_body() -> tuple[str, int | None]:
    """The saved note's ``text`` and ``version`` from the JSON body, or a 400 naming each
    field that is wrong."""
    data: Any = read_json_body(request)
    if not isinstance(data, dict):
        raise APIError(
            400,
            'the body must be a JSON object: {"text": ..., "version": ...}',
            [{"path": "", "message": "expected a JSON object"}],
        )
    errors = [
        {"path": str(key), "message": "unknown field: a note has text and version"}
        for key in data
        if key not in NOTE_FIELDS
    ]
    if "text" not in data:
        errors.append({"path": "text", "message": "required: the whole note"})
    checks = {"text": check_note_text, "version": _check_version}
    checked: dict[str, Any] = {}
    for field, check in checks.items():
        if field in data:
            try:
                checked[field] = check(data[field])
            except ValueError as exc:
                errors.append({"path": field, "message": str(exc)})
    if errors:
        raise APIError(
            400,
            "the note is invalid: "
            + "; ".join(f"{e['path'] or '<root>'}: {e['message']}" for e in errors),
            errors,
        )
    return checked["text"], checked.get("version")


def _check_version(version: Any) -> int | None:
    if version is None:  # the store's "no version" is the field left out, not null
        raise ValueError(
            "note version must be an integer (leave it out to save over any version), got null"
        )
    if isinstance(version, float) and version.is_integer():
        version = int(version)  # 3.0 is an integer to JSON (and its Schema), if not to Python
    return check_note_version(version)


def _saved(save: Any) -> Any:
    try:
        return jsonify(note_json(save()))
    except NoteConflictError as exc:
        raise APIError(409, str(exc)) from None


@bp.get("/experiments/<experiment_id>/note")
@operation("getExperimentNote", path=EXPERIMENT, responses={200: READ})
def get_experiment_note(experiment_id: str) -> Any:
    """An experiment's note: the free text its researchers keep on it."""
    return jsonify(note_json(services().store.experiment_note(experiment_id)))


@bp.put("/experiments/<experiment_id>/note")
@require_token(json_only=True, allow_session=True)
@operation(
    "putExperimentNote",
    path=EXPERIMENT,
    body=NOTE_BODY,
    responses={200: SAVED},
    errors=(409,),
    conflict=CONFLICT,
)
def put_experiment_note(experiment_id: str) -> Any:
    """Save an experiment's note, replacing it whole.

    Send the `version` the text was edited from, and a save made meanwhile (another window,
    another person) is not overwritten: the answer is 409 and nothing is written. The trials
    and their results are untouched."""
    text, version = _note_body()
    return _saved(lambda: services().store.set_experiment_note(experiment_id, text, version))


@bp.get("/trials/<trial_id>/note")
@operation("getTrialNote", path=TRIAL, responses={200: READ})
def get_trial_note(trial_id: str) -> Any:
    """A trial's note (one note per trial, whichever experiments share it)."""
    return jsonify(note_json(services().store.trial_note(trial_id)))


@bp.put("/trials/<trial_id>/note")
@require_token(json_only=True, allow_session=True)
@operation(
    "putTrialNote",
    path=TRIAL,
    body=NOTE_BODY,
    responses={200: SAVED},
    errors=(409,),
    conflict=CONFLICT,
)
def put_trial_note(trial_id: str) -> Any:
    """Save a trial's note, replacing it whole.

    As an experiment's note: send `version` to be refused (409) rather than overwrite a
    save made meanwhile. The trial's state, results and place in the change order are
    untouched, whether it waits, runs or is over."""
    text, version = _note_body()
    return _saved(lambda: services().store.set_trial_note(trial_id, text, version))
