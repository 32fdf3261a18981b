"""JSON for storing and hashing: ``json_safe`` (Python/numpy values into strict JSON values),
``dumps`` (fast compact text), ``canonical_json`` (the one text every hash is taken of) and
``dotted_items`` (a nested document as dotted paths, for tables and charts). No heavy
imports."""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson


def canonical_json(value: Any) -> str:
    """Key-sorted compact ASCII JSON: the same value gives the same text on every platform.

    Every stored id and cache key is a hash of this text (trial and experiment ids, compile
    and pack keys), so its bytes must never change: a change would give stored trials new
    ids. NaN and infinities are refused (they have no JSON form).
    """
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    )


def json_safe(value: Any) -> Any:
    """Copy ``value`` into plain JSON: numpy scalars/arrays unwrapped, NaN/±inf become None.

    Stored documents and API answers must be strict JSON (SQLite's JSON functions and
    browsers reject NaN); a diverged loss is recorded as null, and the trial's state says why.

    Raises:
        TypeError: a value with no JSON form (named with its type).
    """
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, enum.Enum):
        return json_safe(value.value)
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "tolist"):  # numpy scalar or array, without importing numpy
        return json_safe(value.tolist())
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot store a value of type {type(value).__name__} ({value!r:.80}) as JSON")


# One encoder: json.dumps with non-default options builds a new one per call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
# orjson writes NaN and +-inf as null, enums by value and numpy scalars and arrays as
# numbers, as json_safe does; what it cannot take (a non-string key, an int beyond 64
# bits, another type) goes the slow way, which also names an unstorable type.
_ORJSON_OPTIONS = orjson.OPT_SERIALIZE_NUMPY


def dumps(value: Any) -> str:
    """Compact strict JSON of ``json_safe(value)``."""
    try:  # the common case, at C speed; the copy only when needed
        return orjson.dumps(value, option=_ORJSON_OPTIONS).decode()
    except TypeError:
        pass
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError):
        return _ENCODER.encode(json_safe(value))


def loads(text: str | bytes) -> Any:
    """Parse stored JSON at C speed; what orjson refuses (an integer beyond 64 bits, a
    NaN literal written by another program) is parsed by the standard library, which also
    raises the error for text that is not JSON."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def json_copy(value: Any) -> Any:
    """:func:`json_safe`, at C speed in the common case (a round trip through orjson is a
    deep copy). Dict keys that are not strings are spelled as JSON spells them (``true``,
    ``null``)."""
    try:
        return orjson.loads(orjson.dumps(value, option=_ORJSON_OPTIONS))
    except TypeError:
        pass
    try:
        return json.loads(_ENCODER.encode(value))
    except (TypeError, ValueError):
        return json_safe(value)


def dotted_items(
    value: Any, prefix: str = "", whole: Callable[[str, dict], bool] | None = None
) -> Iterator[tuple[str, Any]]:
    """The leaves of nested dicts as ``(dotted path, value)``, in document order: a leaf is
    anything but a dict, an empty dict, or a dict at a path that ``whole(path, d)`` keeps
    whole (a search space ``{"grid": [...]}`` shown as one setting). What a leaf becomes
    (lists as ``8x4`` or as JSON) is the caller's.

    >>> list(dotted_items({"model": {"width": [8, 4], "extra": {}}, "seed": 1}))
    [('model.width', [8, 4]), ('model.extra', {}), ('seed', 1)]
    """
    if isinstance(value, dict) and value and not (whole and prefix and whole(prefix, value)):
        for key, item in value.items():
            yield from dotted_items(item, f"{prefix}.{key}" if prefix else str(key), whole)
    else:
        yield prefix, value
