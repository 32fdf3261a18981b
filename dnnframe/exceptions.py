"""The one exception hierarchy of dnnframe: catch ``DnnframeError`` to catch them all."""

from __future__ import annotations

import re
import reprlib
import traceback

_MORE = re.compile(r"… and (\d+) more")

# How much of a bad value an error message repeats: enough to recognise it, never the
# megabytes someone sent.
_BRIEF = reprlib.Repr()
_BRIEF.maxstring = _BRIEF.maxother = 40
_BRIEF.maxlist = _BRIEF.maxtuple = _BRIEF.maxdict = _BRIEF.maxset = 3
_BRIEF.maxlevel = 2


def brief(value: object) -> str:
    """``repr(value)`` cut to a few dozen characters (``'xxxx...xxxx'``) for error messages."""
    return _BRIEF.repr(value)


class DnnframeError(Exception):
    """Root of every error dnnframe raises on purpose."""


class SpecError(DnnframeError, ValueError):
    """A spec (file, REST body or form) is invalid.

    ``errors`` lists the problems as ``{"path": "model.activation.grid[2]", "message": ...}``
    so the CLI can name the key and the API can answer 400 naming each field. At most
    ``MAX_LISTED`` are kept, followed by one ``"… and N more"`` entry; ``n_errors`` is the
    full count.
    """

    MAX_LISTED = 20

    def __init__(self, errors: list[dict[str, str]], source: str | None = None):
        # the errors of another SpecError may be passed on: count its "… and N more" as N
        listed, unlisted = [], 0
        for e in errors:
            more = _MORE.fullmatch(e["message"]) if not e["path"] else None
            if more:
                unlisted += int(more.group(1))
            else:
                listed.append(e)
        self.n_errors = len(listed) + unlisted
        self.errors = listed[: self.MAX_LISTED]
        if self.n_errors > len(self.errors):
            self.errors.append(
                {"path": "", "message": f"… and {self.n_errors - len(self.errors)} more"}
            )
        self.source = source
        super().__init__(
            "\n".join(self.lines()) or f"{source + ': ' if source else ''}invalid spec"
        )

    def lines(self, source: str | None = None) -> list[str]:
        """One line per problem: ``file: key.path: message`` (no key for the whole document)."""
        where = self.source or source
        prefix = f"{where}: " if where else ""
        return [
            f"{prefix}{e['path'] + ': ' if e['path'] else ''}{e['message']}" for e in self.errors
        ]


class DatasetError(DnnframeError, ValueError):
    """A dataset cannot be found, read or validated.

    ``field`` names the input at fault when there is one (``"file"``, ``"label_column"``).
    """

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


class ExplainedError(DnnframeError):
    """An error whose message says all there is to say (a missing GPU, say): a trial that
    fails with it records that one line, not a traceback of dnnframe's own code."""


def failure_text(exc: BaseException) -> str:
    """What a FAILED trial records for ``exc``: one line for an :class:`ExplainedError`,
    the whole traceback otherwise."""
    if isinstance(exc, ExplainedError):
        return f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}"
    return "".join(traceback.format_exception(exc))


class StoreError(DnnframeError):
    """The result store cannot be opened, read or written."""


class StoreCorruptError(StoreError):
    """The store file is not a dnnframe store (or is damaged); it is never overwritten."""


class SchemaVersionError(StoreError):
    """The store was written by a newer dnnframe than this one."""


class BrokerUnavailableError(DnnframeError):
    """The message broker cannot be reached. Trials already stored stay QUEUED and held;
    they are sent once a broker is reachable again (by a worker's reaper or the next submit)."""


class NotFoundError(DnnframeError, KeyError):
    """An experiment, trial or dataset id is unknown."""

    def __str__(self) -> str:  # KeyError quotes its message; we don't want that
        return str(self.args[0]) if self.args else "not found"


class ExperimentActiveError(DnnframeError):
    """An experiment still has trials queued or running where the operation needs it over
    (deleting it): cancel it and wait for its running trials to stop first."""


class NoteConflictError(DnnframeError):
    """A note was saved by someone else since the version the writer read: its write was
    refused, so neither text is lost (read the note again, then save over it knowingly)."""

    def __init__(self, message: str, current_version: int):
        super().__init__(message)
        self.current_version = current_version


class TrialCancelled(DnnframeError):
    """Raised inside a running trial when its experiment was cancelled."""
