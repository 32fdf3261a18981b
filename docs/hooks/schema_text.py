"""Markdown for JSON Schema fragments: a property's type, its allowed values, its default.

Shared by the spec and REST references, which both render schemas that pydantic wrote.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

# name of a $ref target -> its markdown (a link where the page has a section for it)
RefText = Callable[[str], str]

# the spec's pattern for plain one-line text, said by the type already
PLAIN_TEXT = "^[^\\x00-\\x1f\\x7f]*$"

_BOUNDS = (
    ("minimum", ">="),
    ("exclusiveMinimum", ">"),
    ("maximum", "<="),
    ("exclusiveMaximum", "<"),
)


def cell(text: object) -> str:
    """``text`` made safe for one cell of a markdown table."""
    return " ".join(str(text).split()).replace("|", "\\|")


def code(value: object) -> str:
    """``value`` as inline code, JSON-spelled (``null``, ``true``)."""
    text = value if isinstance(value, str) and value else json.dumps(value)
    return f"`{text}`" if "`" not in text else f"`` {text} ``"


def ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def type_text(schema: dict[str, Any], ref_text: RefText = code) -> str:
    """The type of ``schema`` in words: ``integer``, ``string or null``, ``list of integer``."""
    if "$ref" in schema:
        return ref_text(ref_name(schema["$ref"]))
    if "anyOf" in schema:
        parts = [type_text(option, ref_text) for option in schema["anyOf"]]
        return " or ".join(dict.fromkeys(parts))
    if "const" in schema:
        return code(schema["const"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind == "array":
        items = schema.get("items")
        return f"list of {type_text(items, ref_text)}" if items else "list"
    if kind == "object" and "properties" in schema and "title" in schema:
        return code(schema["title"])
    return kind or "any"


def allowed_text(schema: dict[str, Any]) -> str:
    """What values ``schema`` takes beyond its type: enums, bounds, lengths, patterns."""
    if "anyOf" in schema:
        parts = [allowed_text(option) for option in schema["anyOf"]]
        return "; ".join(part for part in dict.fromkeys(parts) if part)
    rules = []
    if "enum" in schema:
        rules.append(", ".join(code(value) for value in schema["enum"]))
    for key, sign in _BOUNDS:
        if key in schema:
            rules.append(f"{sign} {schema[key]}")
    if "minLength" in schema or "maxLength" in schema:
        rules.append(f"length {schema.get('minLength', 0)}..{schema.get('maxLength', '')}")
    if "minItems" in schema or "maxItems" in schema:
        rules.append(f"{schema.get('minItems', 0)}..{schema.get('maxItems', '')} items")
    if schema.get("type") == "array" and isinstance(schema.get("items"), dict):
        inner = allowed_text(schema["items"])
        if inner:
            rules.append(f"each {inner}")
    # long patterns spell out a list the description gives in words
    if "pattern" in schema and schema["pattern"] != PLAIN_TEXT and len(schema["pattern"]) < 60:
        rules.append(f"matches {code(schema['pattern'])}")
    return ", ".join(rules)


def default_text(schema: dict[str, Any], required: bool = False) -> str:
    if "default" in schema:
        return code(schema["default"])
    return "required" if required else ""
