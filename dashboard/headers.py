"""The response headers the API sets, each declared once, beside the code that sets it: the
code sets the header by its declaration, and the OpenAPI document lists the declaration on
every answer that carries it (:func:`.operations.answer` and its siblings take them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Header:
    """A response header, declared beside the code that sets it: that code sets ``name``
    (to ``value`` when the header always says the same), and the responses that declare it
    document it."""

    name: str
    description: str
    # a header every such response carries; False: only some do (the description says which)
    required: bool = True
    value: str | None = None
    schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "string"})

    def object(self) -> dict[str, Any]:
        """The OpenAPI Header Object."""
        schema = (
            dict(self.schema) if self.value is None else {"type": "string", "const": self.value}
        )
        return {"description": self.description, "required": self.required, "schema": schema}

    def pair(self, value: str | None = None) -> dict[str, str]:
        """The header with ``value`` (by default its one value), to set on a response."""
        given = self.value if value is None else value
        if given is None:
            raise ValueError(f"the {self.name} header takes a value each time it is set")
        return {self.name: given}


# Retry-After as the API sends it: a number of seconds
SECONDS = {"type": "string", "pattern": "^[0-9]+$"}
