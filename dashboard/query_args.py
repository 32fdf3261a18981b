"""The REST API's query parameters, each declared once: a declaration reads its parameter
from the request (a 400 naming it when the value is bad) and writes its entry in the OpenAPI
document. An operation lists its declarations (:func:`.operations.operation`), which reads
every one of them before the view runs and hands the view their values, so the server reads
no parameter the document lacks, and the document lists none the server does not read."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dnnframe.exceptions import brief
from dnnframe.states import TrialState
from dnnframe.store.base import resolve_sort_path
from dnnframe.store.sorting import since_order_fault, since_order_message

from .errors import APIError
from .service import SORT_KEYS, TRIAL_STATES

if TYPE_CHECKING:
    from werkzeug.datastructures import MultiDict

    Args = MultiDict[str, str]

MAX_PAGE = 1000
# SQLite stores 64-bit signed integers; a larger offset or cursor cannot even be bound.
MAX_INT_ARG = 2**63 - 1
MAX_SEARCH_TEXT = 200
# What int() would also take ("+5", " 5", "5_000", other scripts' digits) is no JSON integer.
_INTEGER = re.compile(r"-?[0-9]+")
# A sort key beyond the short names: a dotted path of identifiers into the config or result.
SORT_PATH = r"(?:config|result)(?:\.[A-Za-z_][A-Za-z0-9_]*)+"
HISTORY_CHOICES = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


def _any_case(words: Iterable[str]) -> str:
    """A pattern matching one of ``words`` in any mix of cases."""
    return "|".join(
        "".join(
            f"[{c.upper()}{c.lower()}]" if c.upper() != c.lower() else re.escape(c) for c in word
        )
        for word in words
    )


def _normal_case(raw: str, choices: tuple[str, ...]) -> str:
    # choices are written in one case; a client may write them in any
    return raw.lower() if all(c == c.lower() for c in choices) else raw.upper()


@dataclass(frozen=True)
class QueryArg:
    """One query parameter: its name, what it means, how it is read and documented."""

    name: str
    description: str
    required: bool = field(default=False, kw_only=True)

    def read(self, args: Args) -> Any:
        """The parameter's value in ``args``; raises a 400 :class:`APIError` naming it."""
        raise NotImplementedError

    def schema(self) -> dict[str, Any]:
        raise NotImplementedError

    def parameter(self) -> dict[str, Any]:
        """The OpenAPI Parameter Object."""
        return {
            "name": self.name,
            "in": "query",
            "required": self.required,
            "schema": self.schema(),
            "description": self.description,
        }

    def refuse(self, message: str, rule: str) -> APIError:
        return APIError(400, message, [{"path": self.name, "message": rule}])


@dataclass(frozen=True)
class IntArg(QueryArg):
    """An integer within ``[low, high]``; ``default`` when absent."""

    low: int = 0
    high: int = MAX_INT_ARG
    default: int | None = None

    def read(self, args: Args) -> int | None:
        raw = args.get(self.name)
        if raw is None:
            return self.default
        # empty ("limit=") is no integer either: the document says integer, so it is refused
        if not _INTEGER.fullmatch(raw):
            raise self.refuse(
                f"query parameter {self.name} must be an integer, but got {brief(raw)}",
                "must be an integer",
            )
        # more digits than any bound has is out of range (and int() refuses very long numbers)
        value = int(raw) if len(raw) <= 20 else None
        if value is None or not self.low <= value <= self.high:
            bound = f"between {self.low} and {self.high}"
            raise self.refuse(
                f"query parameter {self.name} must be {bound}, but got {brief(raw)}",
                f"must be {bound}",
            )
        return value

    def schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "integer", "minimum": self.low, "maximum": self.high}
        return schema if self.default is None else {**schema, "default": self.default}


@dataclass(frozen=True)
class ChoiceArg(QueryArg):
    """One of ``choices`` (in any case unless ``exact``); ``default`` when absent or empty."""

    choices: tuple[str, ...] = ()
    default: str | None = None
    exact: bool = False

    def read(self, args: Args) -> str | None:
        raw = args.get(self.name) or ""
        if not raw:
            return self.default
        value = raw if self.exact else _normal_case(raw, self.choices)
        if value not in self.choices:
            rule = f"must be one of {', '.join(self.choices)}"
            raise self.refuse(f"query parameter {self.name} {rule}, but got {brief(raw)}", rule)
        return value

    def schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = (
            {"type": "string", "enum": list(self.choices)}
            if self.exact
            # empty is the same as absent
            else {
                "type": "string",
                "pattern": f"^(?:{_any_case(self.choices)})?$",
                "description": f"one of {', '.join(self.choices)} (any case)",
            }
        )
        return schema if self.default is None else {**schema, "default": self.default}


@dataclass(frozen=True)
class TextArg(QueryArg):
    """Text as given (empty when absent), at most ``max_length`` characters."""

    max_length: int | None = None

    def read(self, args: Args) -> str:
        raw = args.get(self.name) or ""
        if self.max_length is not None and len(raw) > self.max_length:
            rule = f"must be at most {self.max_length} characters"
            raise self.refuse(f"query parameter {self.name} {rule}, but got {len(raw)}", rule)
        return raw

    def schema(self) -> dict[str, Any]:
        if self.max_length is None:
            return {"type": "string"}
        return {"type": "string", "maxLength": self.max_length}


@dataclass(frozen=True)
class ChoicesArg(QueryArg):
    """Several of ``choices`` in any case, the parameter repeated or its values
    comma-separated; spaces around a value and empty items are ignored."""

    choices: tuple[str, ...] = ()

    def read(self, args: Args) -> list[str]:
        values = [
            _normal_case(s.strip(" "), self.choices)
            for v in args.getlist(self.name)
            for s in v.split(",")
            if s.strip(" ")
        ]
        bad = [v for v in values if v not in self.choices]
        if bad:
            known = ", ".join(self.choices)
            raise self.refuse(
                f"unknown {self.name} {brief(bad[0])}; known: {known}", f"must be one of {known}"
            )
        return values

    def schema(self) -> dict[str, Any]:
        one = f"(?:{_any_case(self.choices)})?"
        return {
            "type": "array",
            "items": {"type": "string", "pattern": f"^(?: *{one} *(?:, *{one} *)*)$"},
        }

    def parameter(self) -> dict[str, Any]:
        return {**super().parameter(), "style": "form", "explode": True}


@dataclass(frozen=True)
class RepeatedArg(QueryArg):
    """Between ``min_items`` (one, unless told) and ``max_items`` values, the parameter
    repeated, none of them empty; the first of each value kept."""

    max_items: int = 1
    min_items: int = 1

    def read(self, args: Args) -> list[str]:
        given = args.getlist(self.name)
        if not self.min_items <= len(given) <= self.max_items or not all(given):
            rule = (
                f"must name between {self.min_items} and {self.max_items} {self.name}s, "
                "none of them empty"
            )
            raise self.refuse(f"query parameter {self.name} {rule}", rule)
        return list(dict.fromkeys(given))

    def schema(self) -> dict[str, Any]:
        return {
            "type": "array",
            "minItems": self.min_items,
            "maxItems": self.max_items,
            "items": {"type": "string", "minLength": 1},
        }

    def parameter(self) -> dict[str, Any]:
        return {**super().parameter(), "style": "form", "explode": True}


@dataclass(frozen=True)
class SortArg(QueryArg):
    """A known sort key or a dotted ``config.``/``result.`` path; None when absent."""

    def read(self, args: Args) -> str | None:
        sort = args.get(self.name) or None
        if sort is None:
            return None
        rule = (
            f"must be one of {', '.join(sorted(SORT_KEYS))}, or a dotted path starting "
            "with 'config.' or 'result.'"
        )
        if sort not in SORT_KEYS and not re.fullmatch(SORT_PATH, sort):
            raise self.refuse(f"unknown sort key {brief(sort)}: {rule}", rule)
        try:
            resolve_sort_path(sort)
        except ValueError as exc:
            raise self.refuse(str(exc), rule) from None
        return sort

    def schema(self) -> dict[str, Any]:
        return {
            "type": "string",
            "anyOf": [{"enum": ["", *sorted(SORT_KEYS)]}, {"pattern": f"^{SORT_PATH}$"}],
        }


def read_args(declared: Iterable[QueryArg], args: Args) -> dict[str, Any]:
    """Every declared parameter's value, by name; a 400 names the first bad one."""
    return {arg.name: arg.read(args) for arg in declared}


LIMIT = IntArg("limit", "page size", low=1, high=MAX_PAGE, default=100)
OFFSET = IntArg("offset", "skip this many", default=0)
TRIALS_ARGS = (
    ChoicesArg(
        "state",
        f"only trials in these states: {', '.join(TRIAL_STATES)} (any case), "
        "repeated or comma-separated",
        choices=TRIAL_STATES,
    ),
    SortArg(
        "sort",
        "one of the listed keys or a dotted path (config.model.hidden_layers); "
        "with since only seq (400 otherwise: since pages in change order)",
    ),
    ChoiceArg(
        "order",
        "sort order (default desc with sort, else asc); with since only asc (400 otherwise)",
        choices=("asc", "desc"),
    ),
    IntArg("limit", f"page size (default 100 with sort, else {MAX_PAGE})", low=1, high=MAX_PAGE),
    OFFSET,
    IntArg("since", "change cursor from the previous answer (pages in change order: no sort)"),
    ChoiceArg(
        "history",
        "include per-epoch metrics (1, true, yes)",
        choices=tuple(HISTORY_CHOICES),
        default="0",
    ),
)


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


def trials_query(values: Mapping[str, Any]) -> TrialsQuery:
    """The trials listing's arguments from the values of :data:`TRIALS_ARGS`, with the rules
    over several of them (a cursor pages in change order) and the defaults that follow."""
    sort, since = values["sort"], values["since"]
    order = values["order"] or ("desc" if sort else "asc")
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
    limit = values["limit"] or (100 if sort else MAX_PAGE)
    return TrialsQuery(
        [TrialState(s) for s in values["state"]],
        sort,
        order == "desc",
        since,
        limit,
        values["offset"],
        HISTORY_CHOICES[values["history"]],
    )
