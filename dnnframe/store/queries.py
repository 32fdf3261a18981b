"""Trial reads of the ResultStore contract (``ResultStore`` inherits
:class:`TrialQueries`): one trial, several, or a filtered, sorted page of them; the change
cursor (``since=``, :meth:`TrialQueries.latest_seq`) a reader follows; the per-experiment
values that ASHA's rungs and summaries read inside the store; and what is written once on
top of these (the best trial, paging through every trial, exports).

Each public method checks its arguments once, here, then calls the backend's ``_``-named
abstract method; the backends implement those in their main module (memory.py, sqlite.py,
postgresql.py, mongodb.py).
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from ..metrics import DEFAULT_OBJECTIVE_METRIC, DEFAULT_OBJECTIVE_MODE, check_mode
from ..states import SCORED_STATE
from .checks import (
    StateFilter,
    check_experiment_id,
    check_fields,
    check_ids,
    check_page,
    check_rung_args,
    check_value_paths,
    state_list,
)
from .export import write_csv, write_jsonl
from .records import TrialRecord, TrialState
from .sorting import check_since_order, resolve_sort_path

__all__ = ["TrialQueries"]


class TrialQueries(abc.ABC):
    """The trial reads of :class:`~dnnframe.store.base.ResultStore` (see the module
    docstring)."""

    def get_trial(self, trial_id: str) -> TrialRecord:
        """The trial with config, metrics and result. Raises NotFoundError if unknown."""
        return self._get_trial(trial_id)

    def get_trials(
        self, trial_ids: list[str], fields: Iterable[str] | None = None
    ) -> list[TrialRecord]:
        """Several trials in one read, in the order of ``trial_ids`` (a repeated id once).

        ``fields`` as for :meth:`list_trials`.

        Raises:
            NotFoundError: an unknown trial id (naming it).  ValueError: a malformed id list
            or ``fields``.
        """
        ids = check_ids(trial_ids)
        wanted = check_fields(fields)
        return self._get_trials(ids, wanted) if ids else []

    def list_trials(
        self,
        experiment_id: str | None = None,
        state: StateFilter = None,
        sort_by: str | None = None,
        descending: bool = False,
        limit: int | None = None,
        offset: int = 0,
        since: int | None = None,
        fields: Iterable[str] | None = None,
    ) -> list[TrialRecord]:
        """Trials, filtered, sorted and paginated.

        Args:
            experiment_id: only trials linked to this experiment.
            state: one state or a list of states.
            sort_by: a key of ``SORT_KEYS`` or a dotted path (see ``resolve_sort_path``);
                trials without a value sort last in both directions. Default: creation
                order, or change (``seq``) order when ``since`` is given.
            descending: reverse the order (nulls still last).
            limit, offset: pagination.
            since: only trials whose ``seq`` is greater, in ascending change order (see the
                docstring of base.py); any other order is refused, as it would lose rows.
            fields: which bulky fields to read (any of ``BULKY_FIELDS``: ``config``,
                ``result``, ``metrics``); None reads all. The others are not read from the
                store and keep their empty values (``{}``, None, ``[]``); every other field
                is always read. Filtering and sorting see the whole row either way.
        Raises:
            ValueError: bad ``sort_by``, ``state``, ``limit``, ``offset``, ``since`` or
            ``fields``, or ``since`` with an order other than ascending ``seq``.
        """
        check_page(limit, offset)
        check_since_order(since, sort_by, descending)
        wanted = check_fields(fields)
        if sort_by is not None:
            resolve_sort_path(sort_by)  # refused before any backend work
        return self._list_trials(
            experiment_id, state_list(state), sort_by, descending, limit, offset, since, wanted
        )

    def running_owners(self) -> list[TrialRecord]:
        """The RUNNING trials with who owns them and since when (``worker``,
        ``started_at``, ``heartbeat_at``), their bulky fields not read: what a reaper judges."""
        return self.list_trials(state=TrialState.RUNNING, fields=())

    def rung_values(self, experiment_id: str, epoch: int, metric: str) -> list[float]:
        """What the trials of an experiment reported for ``metric`` at ``epoch`` (ASHA's rungs).

        One value per trial of ``experiment_id`` (any state: running, finished, pruned)
        whose learning curve holds epoch ``epoch`` at position ``epoch - 1`` with a finite
        ``metric``; trials without one (and unknown experiments) give none. The caller's
        own epoch, written by :meth:`append_metrics_many` before it asks, is included.
        Order is unspecified.

        Raises:
            ValueError: ``epoch`` < 1 or ``metric`` not a plain name (letters, digits, _).
        """
        check_rung_args(epoch, metric)
        return self._rung_values(experiment_id, epoch, metric)

    def trial_values(self, experiment_id: str, paths: Sequence[str]) -> list[dict[str, Any]]:
        """A few values of every trial of an experiment, without reading the rest of its row.

        One dict per trial linked to ``experiment_id``, in creation order: ``id``, ``state``
        (a :class:`TrialState`), ``error``, and each of ``paths`` (a dotted path into the
        trial's ``config`` or ``result``, e.g. ``config.model.width`` or
        ``result.metrics.test_accuracy``) mapped to its JSON value there, None where the
        trial has none. What a summary of thousands of trials needs: the backends read
        these values inside the store, never the learning curves they sit beside.

        Raises:
            ValueError: a path that is not ``config.`` or ``result.`` followed by plain
                names (letters, digits, _).
        """
        check_experiment_id(experiment_id)
        return self._trial_values(experiment_id, check_value_paths(paths))

    def _trial_values(self, experiment_id: str, paths: tuple[str, ...]) -> list[dict[str, Any]]:
        """:meth:`trial_values`, its arguments checked; this reads whole rows, and backends
        that can project inside the store override it."""
        out = []
        for t in self.iter_trials(experiment_id):
            row: dict[str, Any] = {"id": t.id, "state": t.state, "error": t.error}
            for path in paths:
                column, *keys = path.split(".")
                value: Any = t.config if column == "config" else t.result
                for key in keys:
                    value = value.get(key) if isinstance(value, dict) else None
                row[path] = value
            out.append(row)
        return out

    @abc.abstractmethod
    def latest_seq(self) -> int:
        """The cursor for ``since``: every change up to it is visible (0 for an empty store)."""

    def changed_states(self, since: int) -> list[tuple[str, TrialState, int]]:
        """``(id, state, seq)`` of each trial that changed after the cursor ``since``, in
        ascending change order: the rows :meth:`list_trials` with ``since`` returns, and
        nothing else of them. What a follower counting ended trials reads several times a
        second (the Celery executor's wait).

        Raises:
            ValueError: ``since`` not a non-negative integer.
        """
        check_since_order(since, None, False)
        return self._changed_states(since)

    def _changed_states(self, since: int) -> list[tuple[str, TrialState, int]]:
        """:meth:`changed_states`, its argument checked; backends that read less than the
        lean row override it."""
        return [(t.id, t.state, t.seq) for t in self.list_trials(since=since, fields=())]

    # ---------------------------------------------------------------- conveniences
    def best_trial(
        self,
        experiment_id: str | None = None,
        metric: str = DEFAULT_OBJECTIVE_METRIC,
        mode: str = DEFAULT_OBJECTIVE_MODE,
    ) -> TrialRecord | None:
        """The COMPLETE trial with the best ``metric`` (any ``sort_by`` key), or None; the
        first created wins a tie (the order :func:`dnnframe.metrics.best_first` ranks in).

        Raises:
            ValueError: ``mode`` not "max"/"min" or a bad metric key.
        """
        check_mode(mode)
        rows = self.list_trials(
            experiment_id=experiment_id,
            state=SCORED_STATE,
            sort_by=metric,
            descending=(mode == "max"),
            limit=1,
        )
        if not rows or rows[0].value(metric) is None:
            return None
        return rows[0]

    def iter_trials(
        self, experiment_id: str | None = None, state: StateFilter = None, page_size: int = 500
    ) -> Iterator[TrialRecord]:
        """Every matching trial in creation order, fetched a page at a time."""
        if not isinstance(page_size, int) or page_size < 1:
            raise ValueError(f"page_size must be an integer >= 1, got {page_size!r}")
        offset = 0
        while True:
            page = self.list_trials(
                experiment_id=experiment_id, state=state, limit=page_size, offset=offset
            )
            yield from page
            if len(page) < page_size:
                return
            offset += len(page)

    def export_jsonl(
        self, out: str | Path | TextIO, experiment_id: str | None = None, state: StateFilter = None
    ) -> int:
        """Write one JSON object per trial (``TrialRecord.to_dict()``, everything). Returns rows."""
        return write_jsonl(self.iter_trials(experiment_id, state), out)

    def export_csv(
        self, out: str | Path | TextIO, experiment_id: str | None = None, state: StateFilter = None
    ) -> int:
        """Write one flat row per trial (:func:`dnnframe.store.rows.export_row`: ids, state,
        ISO 8601 UTC times, ``config.*`` and ``result.*``). Returns the number of rows."""
        return write_csv(self.iter_trials(experiment_id, state), out)

    # ---------------------------------------------------------------- what a backend implements
    @abc.abstractmethod
    def _get_trials(self, trial_ids: list[str], fields: frozenset[str]) -> list[TrialRecord]:
        """:meth:`get_trials`, its arguments checked (distinct ids, at least one)."""

    @abc.abstractmethod
    def _get_trial(self, trial_id: str) -> TrialRecord:
        """:meth:`get_trial`, its arguments checked."""

    @abc.abstractmethod
    def _list_trials(
        self,
        experiment_id: str | None,
        states: list[str] | None,
        sort_by: str | None,
        descending: bool,
        limit: int | None,
        offset: int,
        since: int | None,
        fields: frozenset[str],
    ) -> list[TrialRecord]:
        """:meth:`list_trials`, its arguments checked."""

    @abc.abstractmethod
    def _rung_values(self, experiment_id: str, epoch: int, metric: str) -> list[float]:
        """:meth:`rung_values`, its arguments checked."""
