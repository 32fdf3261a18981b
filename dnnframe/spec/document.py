"""Checks of a spec document as plain data, before any model sees it.

A spec must be plain JSON of bounded nesting, with finite numbers, string keys and no
control characters in strings. Nothing in a spec is ever executed, so free text (names,
descriptions) is otherwise accepted as written. Every walk here is iterative: a hostile
document may nest deeper than Python's recursion limit.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..exceptions import brief
from .errors import ErrorList, KeyPath

# Deepest nesting a spec may have (real specs need about 6).
MAX_NESTING = 32

_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")
# Free text where line breaks and tabs are expected.
_MULTILINE_FIELDS = {("description",)}


def nesting_depth(value: Any, limit: int = MAX_NESTING) -> int:
    """Nesting depth of plain JSON, or the first depth found beyond ``limit``."""
    deepest, stack = 1, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        for child in children:
            if isinstance(child, (dict, list, tuple)):
                if level + 1 > limit:
                    return level + 1
                deepest = max(deepest, level + 1)
                stack.append((child, level + 1))
    return deepest


def scan_values(value: Any, errors: ErrorList) -> None:
    """Record every non-finite number, non-string key, non-JSON value and control character."""
    stack: list[tuple[Any, KeyPath]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if path not in _MULTILINE_FIELDS and _CONTROL_CHARS.search(item):
                errors.add(path, f"must not contain control characters, but got {brief(item)}")
        elif item is None or isinstance(item, (bool, int)):
            continue
        elif isinstance(item, float):
            if not math.isfinite(item):
                errors.add(path, f"must be a finite number, but got {item}")
        elif isinstance(item, dict):
            for key, child in reversed(item.items()):
                if not isinstance(key, str):
                    errors.add(path, f"keys must be strings, but got {brief(key)}")
                    continue
                if _CONTROL_CHARS.search(key):
                    errors.add(
                        path, f"keys must not contain control characters, but got {brief(key)}"
                    )
                stack.append((child, (*path, key)))
        elif isinstance(item, (list, tuple)):
            stack.extend(((child, (*path, i)) for i, child in reversed(list(enumerate(item)))))
        else:
            errors.add(
                path,
                "must be plain JSON (string, number, bool, null, list or mapping), "
                f"but got {type(item).__name__}",
            )
