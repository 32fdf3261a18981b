"""The one exception hierarchy of dnnframe: catch ``DnnframeError`` to catch them all."""

from __future__ import annotations


class DnnframeError(Exception):
    """Root of every error dnnframe raises on purpose."""


class SpecError(DnnframeError, ValueError):
    """A spec (file, REST body or form) is invalid.

    ``errors`` lists every problem as ``{"path": "model.activation.grid[2]", "message": ...}``
    so the CLI can name the key and the API can answer 400 naming each field.
    """

    def __init__(self, errors: list[dict[str, str]], source: str | None = None):
        self.errors = list(errors)
        self.source = source
        where = f"{source}: " if source else ""
        lines = [f"{where}{e['path'] or '<root>'}: {e['message']}" for e in self.errors]
        super().__init__("\n".join(lines) if lines else f"{where}invalid spec")


class DatasetError(DnnframeError, ValueError):
    """A dataset cannot be found, read or validated."""


class StoreError(DnnframeError):
    """The result store cannot be opened, read or written."""


class StoreCorruptError(StoreError):
    """The store file exists but is not a dnnframe store (or is damaged); it is never overwritten."""


class SchemaVersionError(StoreError):
    """The store was written by a newer dnnframe than this one."""


class NotFoundError(DnnframeError, KeyError):
    """An experiment, trial or dataset id is unknown."""

    def __str__(self) -> str:  # KeyError quotes its message; we don't want that
        return str(self.args[0]) if self.args else "not found"


class TrialCancelled(DnnframeError):
    """Raised inside a running trial when its experiment was cancelled."""
