"""What ``list_trials`` may sort by, and which orders a ``since=`` cursor can page safely."""

from __future__ import annotations

import re
from typing import Any

from ..jsonsafe import dumps
from ..metrics import FINAL_METRICS

# Columns ``list_trials(sort_by=...)`` accepts as they are.
SORT_COLUMNS = (
    "created_at",
    "started_at",
    "finished_at",
    "heartbeat_at",
    "state",
    "attempts",
    "seq",
    "worker",
    "id",
)
# Short names for values inside the stored result.
SORT_ALIASES = {
    **{m: f"result.metrics.{m}" for m in FINAL_METRICS},
    "train_seconds": "result.timings.train",
    "compile_seconds": "result.timings.compile",
    "data_seconds": "result.timings.data",
    "total_seconds": "result.timings.total",
    "n_params": "result.n_params",
    "epochs_run": "result.epochs_run",
}
SORT_KEYS = (*SORT_COLUMNS, *SORT_ALIASES)
_PATH_PART = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def resolve_sort_path(sort_by: str) -> str:
    """Validate a ``sort_by`` value and return a column name or a dotted JSON path.

    A column (``created_at``, ``state``, …) is returned as is; a short name
    (``test_accuracy``, ``train_seconds``, …) maps into ``result.metrics`` or
    ``result.timings``; any other value must be a dotted path of identifiers starting with
    ``result.`` or ``config.`` (so it can never smuggle SQL or a Mongo operator).

    Raises:
        ValueError: naming the bad value and the accepted keys.
    """
    if not isinstance(sort_by, str) or not sort_by:
        raise ValueError(f"sort_by must be a non-empty string, got {sort_by!r}")
    if sort_by in SORT_COLUMNS:
        return sort_by
    path = SORT_ALIASES.get(sort_by, sort_by)
    parts = path.split(".")
    if (
        parts[0] not in ("result", "config")
        or len(parts) < 2
        or not all(_PATH_PART.match(p) for p in parts)
    ):
        raise ValueError(
            f"sort_by={sort_by!r} is not a sort key: use one of {', '.join(SORT_KEYS)}, or a "
            "dotted path of identifiers starting with 'result.' or 'config.' "
            "(e.g. 'config.model.hidden_layers')"
        )
    return path


def since_order_fault(sort_by: str | None, descending: bool) -> str | None:
    """Which argument keeps a ``since=`` reader from paging in this order: ``"sort_by"``,
    ``"descending"``, or None when the order is ascending change order (``seq``).

    A ``since`` reader moves its cursor to the largest ``seq`` of each page; in any other
    order a page's largest ``seq`` can lie beyond rows the reader has not been given yet,
    and those rows would never be returned. The store and the REST API both apply this rule.
    """
    if sort_by not in (None, "seq"):
        return "sort_by"
    return "descending" if descending else None


def since_order_message(given: str) -> str:
    """The refusal of a ``since=`` query whose order was ``given`` (``"sort_by='x'"``)."""
    return (
        f"since= pages in ascending change order only (sort_by None or 'seq', descending "
        f"False), but got {given}: in any other order the cursor would skip rows"
    )


def check_since_order(since: int | None, sort_by: str | None, descending: bool) -> None:
    """Refuse a ``since=`` query in any order but ascending change order
    (:func:`since_order_fault`).

    Raises:
        ValueError: naming the rule and the values given.
    """
    if since is None:
        return
    if not isinstance(since, int) or isinstance(since, bool) or since < 0:
        raise ValueError(f"since must be a non-negative integer (a change cursor), got {since!r}")
    if since_order_fault(sort_by, descending):
        raise ValueError(since_order_message(f"sort_by={sort_by!r}, descending={descending!r}"))


def json_sort_key(value: Any) -> tuple[int, Any]:
    """Numbers before text before anything else, as SQLite orders JSON values (the
    in-memory backend sorts by it)."""
    if isinstance(value, (bool, int, float)):
        return 0, float(value)
    if isinstance(value, str):
        return 1, value
    return 2, dumps(value)
