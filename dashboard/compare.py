"""Comparing experiments: which settings of their specs differ.

>>> spec_differences([{"name": "a", "model": {"width": 8, "hidden_layers": {"grid": [1, 2]}}},
...                   {"name": "b", "model": {"width": 8, "hidden_layers": 3}}])
[('name', ['a', 'b']), ('model.hidden_layers', ['{"grid": [1, 2]}', '3'])]
"""

from __future__ import annotations

import json
from typing import Any

from dnnframe.jsonsafe import dotted_items

MAX_COMPARED = 8


def _search_space(path: str, value: dict) -> bool:
    # a search space ({"grid": [...]}) below a section is one setting, shown as written
    return path.count(".") >= 1 and len(value) == 1 and isinstance(next(iter(value.values())), list)


def _flatten(prefix: str, value: Any, out: dict[str, str]) -> None:
    for path, leaf in dotted_items(value, prefix, whole=_search_space):
        out[path] = leaf if isinstance(leaf, str) else json.dumps(leaf)


def spec_differences(specs: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """The dotted paths whose values differ between the specs, with each spec's value
    (``""`` where a spec does not set it), in the order they first appear."""
    flat = []
    for spec in specs:
        out: dict[str, str] = {}
        _flatten("", spec, out)
        flat.append(out)
    paths = list(dict.fromkeys(p for f in flat for p in f))
    return [
        (p, [f.get(p, "") for f in flat]) for p in paths if len({f.get(p, "") for f in flat}) > 1
    ]
