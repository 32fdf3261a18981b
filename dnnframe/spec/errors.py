"""Spec errors as the user sees them: a key path, the rule, the value, said once."""

from __future__ import annotations

import difflib
import re
import typing
from collections.abc import Mapping
from typing import Any, TypeGuard, TypeVar

from pydantic import BaseModel, ValidationError

from ..exceptions import brief

# A location in a spec document: mapping keys and list indices, outermost first.
KeyPath = tuple[Any, ...]
# one error of a pydantic ValidationError (pydantic_core's ErrorDetails)
E = TypeVar("E", bound=Mapping[str, Any])

# Keys printed as they are in a path; any other is quoted so the path reads unambiguously.
_LONGEST_PLAIN_KEY = 40
_PLAIN_KEY = re.compile(r"[^\s.\[\]'\"]+")

UNKNOWN_KEY = "unknown key (not part of the spec format)"

# pydantic appends the member of a union (e.g. 'int', 'list[...]') to an error's location;
# the user wrote no such key
_UNION_TAGS = ("int", "float", "str", "bool")


def fmt_path(path: KeyPath) -> str:
    """``("model", "width", "grid", 2)`` → ``model.width.grid[2]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(str(part)) and len(str(part)) <= _LONGEST_PLAIN_KEY:
            out += ("." if out else "") + str(part)
        else:  # a key that would read as more than one step (``a.b``, ``x[1]``), or a long one
            out += f"[{brief(str(part))}]"
    return out


def is_ancestor(parent: str, child: str) -> bool:
    """Whether the formatted path ``parent`` contains (or is) ``child``."""
    return (
        parent == ""
        or child == parent
        or child.startswith(parent + ".")
        or child.startswith(parent + "[")
    )


class ErrorList:
    """Problems found so far, each kept once, in the order found."""

    def __init__(self) -> None:
        self.items: list[dict[str, str]] = []
        self._seen: set[tuple[str, str]] = set()

    def add(self, path: KeyPath | str, message: str) -> None:
        """Record a problem at ``path`` (a tuple, or an already formatted path)."""
        where = path if isinstance(path, str) else fmt_path(path)
        if (where, message) not in self._seen:
            self._seen.add((where, message))
            self.items.append({"path": where, "message": message})

    def extend(self, errors: list[dict[str, str]]) -> None:
        for e in errors:
            self.add(e["path"], e["message"])

    def __bool__(self) -> bool:
        return bool(self.items)


def _is_union_tag(part: Any) -> TypeGuard[str]:
    return isinstance(part, str) and ("[" in part or "-" in part or part in _UNION_TAGS)


def user_loc(err: Mapping[str, Any]) -> KeyPath:
    """An error's location as the user wrote it: pydantic's union member names left out.
    The key an unknown-key error names is the user's own, whatever it looks like
    (``x-note``, ``a[1]``)."""
    loc = tuple(err["loc"])
    own = loc[-1:] if err["type"] == "extra_forbidden" else ()
    return tuple(p for p in loc[: len(loc) - len(own)] if not _is_union_tag(p)) + own


def without_key(doc: Any, loc: KeyPath) -> Any:
    """``doc`` without the mapping key that ``loc`` is at or inside (the innermost one), the
    mappings on the way copied and everything else shared; ``doc`` itself when ``loc``
    names no key that is there."""
    keys = [i for i, part in enumerate(loc) if isinstance(part, str)]
    if not keys:
        return doc
    last = keys[-1]

    def drop(node: Any, depth: int) -> Any:
        if not isinstance(node, dict) or loc[depth] not in node:
            return node
        if depth == last:
            return {k: v for k, v in node.items() if k != loc[depth]}
        if not isinstance(loc[depth], str):
            return node
        child = drop(node[loc[depth]], depth + 1)
        return node if child is node[loc[depth]] else {**node, loc[depth]: child}

    return drop(doc, 0)


def _one_union_member(errors: list[E]) -> list[E]:
    """Of the errors a union reports for each member, keep the member the input was meant
    for: a member whose only complaint is the input's type (``width: 0`` is not a list)
    was not meant, unless no member was."""
    members: dict[tuple, dict[str, list[int]]] = {}
    for i, err in enumerate(errors):
        loc = err["loc"]
        if err["type"] == "extra_forbidden":
            loc = loc[:-1]  # the last part is the user's key, not a union member
        for at, part in enumerate(loc):
            if _is_union_tag(part):
                members.setdefault(tuple(loc[:at]), {}).setdefault(part, []).append(i)
                break
    drop: set[int] = set()
    for prefix, by_member in members.items():
        if len(by_member) < 2:
            continue
        depth = len(prefix) + 1
        meant = [
            m
            for m, ix in by_member.items()
            if not all(
                errors[i]["type"].endswith("_type") and len(errors[i]["loc"]) == depth for i in ix
            )
        ]
        keep = meant or [next(iter(by_member))]
        drop.update(i for m, ix in by_member.items() if m not in keep for i in ix)
    return [err for i, err in enumerate(errors) if i not in drop] if drop else errors


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _known_keys(root: type[BaseModel], loc: KeyPath) -> list[str]:
    """The keys the model at ``loc`` (a path of field names from ``root``) accepts."""
    model = root
    for part in loc:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        inner = _model_in(field.annotation) if field is not None else None
        if inner is None:
            return []
        model = inner
    return list(model.model_fields)


def unknown_key_message(key: str, known: list[str]) -> str:
    """The unknown-key message, with the closest known key when one is close enough."""
    close = difflib.get_close_matches(key, known, n=1)
    return UNKNOWN_KEY + (f"; did you mean {close[0]!r}?" if close else "")


def pydantic_errors(
    exc: ValidationError, root: type[BaseModel], remap: dict[KeyPath, KeyPath] | None = None
) -> list[dict[str, str]]:
    """Turn a ValidationError of ``root`` into ``{"path", "message"}`` entries.

    ``remap`` moves errors under a path to another path (a value checked in place of a
    search space is reported at its element: ``model.activation.grid[2]``). Unknown keys
    are reported where they are written, with a suggestion, and never remapped: a search
    space under a misspelt key is one mistake, not one per value.
    """
    out = ErrorList()
    for err in _one_union_member(exc.errors(include_url=False)):
        loc = user_loc(err)
        unknown = err["type"] == "extra_forbidden"
        msg = (
            unknown_key_message(str(loc[-1]), _known_keys(root, loc[:-1]))
            if unknown
            else err["msg"]
        )
        for src, dst in (remap or {}).items():
            # a key inside a space's value moves with the value; the space's own key does not
            if loc[: len(src)] == src and not (unknown and len(loc) == len(src)):
                loc = dst + loc[len(src) :]
                break
        if unknown:
            out.add(loc, msg)
            continue
        if err["type"] == "value_error" and "error" in err.get("ctx", {}):
            msg = str(err["ctx"]["error"])  # our own rule's message, without pydantic's prefix
        if (
            "input" in err
            and err["type"] != "missing"
            and not isinstance(err["input"], (dict, list))
        ):
            msg = f"{msg}, but got {brief(err['input'])}"
        out.add(loc, msg)
    return out.items
