"""The REST API's query arguments: integers within bounds, the sort key, and the trials
listing's filters, each refused with a 400 that names the argument."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from flask import request

from dnnframe.exceptions import brief
from dnnframe.states import TrialState
from dnnframe.store.base import resolve_sort_path
from dnnframe.store.sorting import since_order_fault, since_order_message

from .errors import APIError
from .service import SORT_KEYS, TRIAL_STATES

MAX_PAGE = 1000
# SQLite stores 64-bit signed integers; a larger offset or cursor cannot even be bound.
MAX_INT_ARG = 2**63 - 1
MAX_SEARCH_TEXT = 200
# What int() would also take ("+5", " 5", "5_000", other scripts' digits) is no JSON integer.
_INTEGER = re.compile(r"-?[0-9]+")
# A sort key beyond the short names: a dotted path of identifiers into the config or result.
SORT_PATH = r"(?:config|result)(?:\.[A-Za-z_][A-Za-z0-9_]*)+"
SPEC_FORMATS = ("json", "yaml")
EXPORT_FORMATS = ("csv", "jsonl")
HISTORY_CHOICES = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


def int_arg(name: str, default: int | None, low: int = 0, high: int | None = None) -> int | None:
    """The integer query parameter ``name`` within ``[low, high]``; ``default`` when absent."""
    raw = request.args.get(name)
    if raw is None:
        return default
    # empty ("limit=") is no integer either: the document says integer, so it is refused
    if not _INTEGER.fullmatch(raw):
        raise APIError(
            400,
            f"query parameter {name} must be an integer, but got {brief(raw)}",
            [{"path": name, "message": "must be an integer"}],
        )
    high = MAX_INT_ARG if high is None else min(high, MAX_INT_ARG)
    # more digits than any bound has is out of range (and int() refuses very long numbers)
    value = int(raw) if len(raw) <= 20 else None
    if value is None or value < low or value > high:
        bound = f"between {low} and {high}"
        raise APIError(
            400,
            f"query parameter {name} must be {bound}, but got {brief(raw)}",
            [{"path": name, "message": f"must be {bound}"}],
        )
    return value


def choice_arg(name: str, choices: Sequence[str], default: str) -> str:
    """The query parameter ``name``, one of ``choices`` in any case (lower-cased when they
    are); ``default`` when absent or empty."""
    raw = request.args.get(name) or ""
    if not raw:
        return default
    value = raw.lower() if all(c == c.lower() for c in choices) else raw.upper()
    if value not in choices:
        rule = f"must be one of {', '.join(choices)}"
        raise APIError(400, f"query parameter {name} {rule}, but got {brief(raw)}",
                       [{"path": name, "message": rule}])
    return value


def text_arg(name: str, max_length: int) -> str:
    """The query parameter ``name`` as given (empty when absent), at most ``max_length``
    characters."""
    raw = request.args.get(name) or ""
    if len(raw) > max_length:
        rule = f"must be at most {max_length} characters"
        raise APIError(400, f"query parameter {name} {rule}, but got {len(raw)}",
                       [{"path": name, "message": rule}])
    return raw


def sort_arg() -> str | None:
    """The ``sort`` query parameter: a known key or a dotted ``config.``/``result.`` path."""
    sort = request.args.get("sort") or None
    if sort is None:
        return None
    allowed = sorted(SORT_KEYS)
    rule = (
        f"must be one of {', '.join(allowed)}, or a dotted path starting with 'config.' "
        "or 'result.'"
    )
    if sort not in SORT_KEYS and not re.fullmatch(SORT_PATH, sort):
        raise APIError(
            400, f"unknown sort key {brief(sort)}: {rule}", [{"path": "sort", "message": rule}]
        )
    try:
        resolve_sort_path(sort)
    except ValueError as exc:
        raise APIError(400, str(exc), [{"path": "sort", "message": rule}]) from None
    return sort


@dataclass(frozen=True)
class TrialsQuery:
    """The trials listing's arguments (``GET /experiments/<id>/trials``)."""

    states: list[TrialState]
    sort: str | None
    descending: bool
    since: int | None
    limit: int
    offset: int
    history: bool


def trials_query() -> TrialsQuery:
    """The trials listing's arguments from the request; a 400 names the first bad one."""
    # state=A&state=B or state=A,B; spaces around a name and empty items are ignored
    states = [
        s.strip(" ").upper() for v in request.args.getlist("state") for s in v.split(",")
        if s.strip(" ")
    ]
    bad = [s for s in states if s not in TRIAL_STATES]
    if bad:
        raise APIError(
            400,
            f"unknown state {brief(bad[0])}; known: {', '.join(TRIAL_STATES)}",
            [{"path": "state", "message": f"must be one of {', '.join(TRIAL_STATES)}"}],
        )
    sort = sort_arg()
    since = int_arg("since", None, 0)
    order = choice_arg("order", ("asc", "desc"), "desc" if sort else "asc")
    fault = since_order_fault(sort, order == "desc") if since is not None else None
    if fault == "sort_by":
        raise APIError(
            400,
            since_order_message(f"sort={brief(sort)}") + "; drop since to sort, or drop sort "
            "to follow changes",
            [{"path": "sort", "message": "must be empty or 'seq' when since is given"}],
        )
    if fault == "descending":
        raise APIError(
            400,
            since_order_message("order=desc") + "; drop order=desc",
            [{"path": "order", "message": "must be asc when since is given"}],
        )
    limit = int_arg("limit", 100 if sort else MAX_PAGE, 1, MAX_PAGE)
    offset = int_arg("offset", 0, 0)
    history = HISTORY_CHOICES[choice_arg("history", tuple(HISTORY_CHOICES), "0")]
    return TrialsQuery([TrialState(s) for s in states], sort, order == "desc", since, limit,
                       offset, history)
