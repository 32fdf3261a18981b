"""Argument checks shared by every backend: a bad argument is a ValueError naming it."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from ..exceptions import ExperimentActiveError
from .lifecycle import REQUEUABLE_STATES
from .records import BULKY_FIELDS, TrialState


def check_trial_items(trials: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """Validate ``create_trials`` input: (non-empty id, config dict) pairs, else ValueError."""
    items = []
    for i, item in enumerate(trials):
        try:
            tid, config = item
        except (TypeError, ValueError):
            raise ValueError(
                f"trials[{i}] must be a (trial_id, config_dict) pair, got {item!r:.100}"
            ) from None
        if not tid or not isinstance(tid, str):
            raise ValueError(f"trials[{i}]: trial id must be a non-empty string, got {tid!r}")
        if not isinstance(config, dict):
            raise ValueError(
                f"trials[{i}] ({tid}): config must be a dict, got {type(config).__name__}"
            )
        items.append((tid, config))
    return items


def check_finish_state(state: TrialState | str) -> TrialState:
    """Coerce ``state`` to a terminal TrialState or raise ValueError naming it."""
    try:
        st = TrialState(state)
    except ValueError:
        raise ValueError(
            f"state={state!r} is not a trial state; use one of "
            f"{', '.join(s.value for s in TrialState)}"
        ) from None
    if not st.is_finished:
        raise ValueError(f"finish_trial needs a finished state, got {st.value}")
    return st


def requeue_state_list(
    states: list[TrialState] | tuple[TrialState, ...] | TrialState | str,
) -> list[str]:
    """Validate the ``states`` of ``requeue_trials``: finished, and never COMPLETE."""
    names = state_list(states) or []
    bad = [s for s in names if s not in REQUEUABLE_STATES]
    if bad:
        raise ValueError(
            f"requeue_trials cannot requeue {', '.join(bad)} trials; allowed: "
            f"{', '.join(REQUEUABLE_STATES)} (COMPLETE results are never discarded)"
        )
    return names


# A ``state=`` filter: one state or several, as TrialState members or their names.
StateFilter = TrialState | str | Sequence[TrialState | str] | None


def state_list(state: StateFilter) -> list[str] | None:
    """Normalise the ``state`` filter of ``list_trials`` to a list of state names (or None)."""
    if state is None:
        return None
    items = [state] if isinstance(state, (str, TrialState)) else list(state)
    out = []
    for s in items:
        try:
            out.append(TrialState(s).value)
        except ValueError:
            raise ValueError(
                f"state filter {s!r} is not a trial state; use one of "
                f"{', '.join(t.value for t in TrialState)}"
            ) from None
    return out


def check_page(limit: int | None, offset: int) -> None:
    """``limit`` is None or >= 0 and ``offset`` >= 0, else ValueError naming the argument."""
    if limit is not None and (not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be a non-negative integer or None, got {limit!r}")
    if not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be a non-negative integer, got {offset!r}")


def check_experiment_args(experiment_id: str, n_trials: int) -> None:
    """A non-empty experiment id and a non-negative trial count, else ValueError."""
    if not experiment_id or not isinstance(experiment_id, str):
        raise ValueError(f"experiment_id must be a non-empty string, got {experiment_id!r}")
    if not isinstance(n_trials, int) or n_trials < 0:
        raise ValueError(f"n_trials must be a non-negative integer, got {n_trials!r}")


def check_worker(worker: str, what: str = "worker") -> str:
    """A non-empty worker name, else ValueError."""
    if not worker or not isinstance(worker, str):
        raise ValueError(f"{what} must be a non-empty string, got {worker!r}")
    return worker


def check_held(items: list[tuple[str, str]]) -> None:
    """``(trial_id, queue)`` pairs of non-empty strings, else ValueError naming the pair."""
    for item in items:
        if (
            not isinstance(item, (tuple, list))
            or len(item) != 2
            or not all(isinstance(x, str) and x for x in item)
        ):
            raise ValueError(
                f"held items must be (trial_id, queue) pairs of non-empty strings, got {item!r}"
            )


def check_take_limit(limit: int) -> None:
    """An integer >= 1, else ValueError."""
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ValueError(f"limit must be an integer >= 1, got {limit!r}")


def check_timeout(timeout_s: float) -> None:
    """A number of seconds >= 0, else ValueError."""
    if timeout_s < 0:
        raise ValueError(f"timeout_s must be >= 0, got {timeout_s!r}")


def check_max_attempts(max_attempts: int | None) -> None:
    """None or an integer >= 1, else ValueError."""
    if max_attempts is not None and (not isinstance(max_attempts, int) or max_attempts < 1):
        raise ValueError(f"max_attempts must be an integer >= 1, got {max_attempts!r}")


def check_ids(trial_ids: list[str]) -> list[str]:
    """Distinct non-empty trial ids in their first-seen order, else ValueError."""
    if isinstance(trial_ids, str) or not isinstance(trial_ids, (list, tuple, set, frozenset)):
        raise ValueError(f"trial_ids must be a list of trial ids, got {trial_ids!r:.100}")
    for i, tid in enumerate(trial_ids):
        if not tid or not isinstance(tid, str):
            raise ValueError(f"trial_ids[{i}] must be a non-empty string, got {tid!r}")
    return list(dict.fromkeys(trial_ids))


# One epoch's metrics, or several epochs' in order: a batch may hold only lists, only
# dicts or both (a type variable, since a dict of lists is no dict of either).
Epochs = TypeVar("Epochs", bound="dict[str, Any] | list[dict[str, Any]]")
# trial id -> its epochs
MetricsBatch = dict[str, Epochs]


def check_metrics_many(
    metrics_by_id: Mapping[str, dict[str, Any] | list[dict[str, Any]]],
) -> dict[str, list[dict[str, Any]]]:
    """A dict of trial id -> one epoch's metrics dict or a list of them, as trial id -> list
    of epochs (empty lists dropped), else ValueError naming the bad entry."""
    if not isinstance(metrics_by_id, dict):
        raise ValueError(
            f"metrics_by_id must be a dict of trial id -> metrics dict, "
            f"got {type(metrics_by_id).__name__}"
        )
    out: dict[str, list[dict[str, Any]]] = {}
    for tid, metrics in metrics_by_id.items():
        if not tid or not isinstance(tid, str):
            raise ValueError(f"metrics_by_id: trial id must be a non-empty string, got {tid!r}")
        epochs = metrics if isinstance(metrics, list) else [metrics]
        if not all(type(m) is dict for m in epochs):  # type() first: quick, and the usual
            for m in epochs:
                if not isinstance(m, dict):
                    raise ValueError(
                        f"metrics must be a dict or a list of dicts, got "
                        f"{type(m).__name__} for trial {tid!r}"
                    )
        if epochs:
            out[tid] = epochs
    return out


def epochs_to_store(epochs: list[dict[str, Any]], last_epoch: Any) -> list[dict[str, Any]]:
    """The epochs of ``epochs`` that a curve whose last entry is numbered ``last_epoch``
    still lacks: when every epoch of the batch carries an integer ``epoch`` and so does the
    curve's last entry, those numbered no later than it are stored already (a write retried
    after it was applied, or resent together with the next epochs) and are left out; an
    unnumbered batch is appended whole."""
    if not _numbered(last_epoch):
        return epochs
    numbers = [m.get("epoch") for m in epochs]
    if not all(type(x) is int or _numbered(x) for x in numbers):  # type(): the common case, quickly
        return epochs
    return [m for m, x in zip(epochs, numbers) if x > last_epoch]


def _numbered(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


CheckedFinish = tuple[str, TrialState, "dict[str, Any] | None", "str | None"]


def check_finish_items(
    items: list[tuple[str, TrialState | str, dict[str, Any] | None, str | None]],
) -> list[CheckedFinish]:
    """Validate ``finish_trials`` input: (id, finished state, result, error) per trial."""
    out: list[CheckedFinish] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        try:
            tid, state, result, error = item
        except (TypeError, ValueError):
            raise ValueError(
                f"items[{i}] must be a (trial_id, state, result, error) tuple, got {item!r:.100}"
            ) from None
        if not tid or not isinstance(tid, str):
            raise ValueError(f"items[{i}]: trial id must be a non-empty string, got {tid!r}")
        if tid in seen:
            raise ValueError(f"items[{i}]: trial {tid!r} appears twice")
        if result is not None and not isinstance(result, dict):
            raise ValueError(
                f"items[{i}] ({tid}): result must be a dict or None, got {type(result).__name__}"
            )
        seen.add(tid)
        out.append((tid, check_finish_state(state), result, error))
    return out


_METRIC_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def check_rung_args(epoch: int, metric: str) -> None:
    """The arguments of ``rung_values``: an epoch >= 1 and a plain metric name (it becomes
    part of a JSON path or a field name)."""
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 1:
        raise ValueError(f"epoch must be an integer >= 1, got {epoch!r}")
    if not isinstance(metric, str) or not _METRIC_NAME.fullmatch(metric):
        raise ValueError(f"metric must be a plain name (letters, digits, _), got {metric!r}")


# a value path of ``trial_values``: a bulky JSON field, then plain names (they become part
# of a JSON path, never SQL text)
_VALUE_PATH = re.compile(r"(config|result)(\.[A-Za-z_][A-Za-z0-9_]*)+")


def check_value_paths(paths: Sequence[str]) -> tuple[str, ...]:
    """The paths of ``trial_values``: ``config.`` or ``result.`` then dotted plain names
    (``config.model.width``, ``result.metrics.test_accuracy``), else ValueError naming one."""
    if isinstance(paths, str):
        raise ValueError(f"paths must be a list of paths, not the string {paths!r}")
    out = tuple(paths)
    for path in out:
        if not isinstance(path, str) or not _VALUE_PATH.fullmatch(path):
            raise ValueError(
                "each path must be config.<name>[.<name>...] or "
                f"result.<name>[.<name>...] (letters, digits, _), got {path!r}"
            )
    return out


def check_experiment_id(experiment_id: str) -> None:
    """An experiment id must be a non-empty string, else ValueError naming it."""
    if not experiment_id or not isinstance(experiment_id, str):
        raise ValueError(f"experiment_id must be a non-empty string, got {experiment_id!r}")


def active_error(experiment_id: str, active: list[str]) -> ExperimentActiveError:
    """The refusal to delete an experiment whose own trials still wait or run."""
    return ExperimentActiveError(
        f"experiment {experiment_id!r} still has {len(active)} trial(s) queued or running "
        f"(first: {active[0]}); cancel it and let them stop before deleting it"
    )


def check_fields(fields: Any) -> frozenset[str]:
    """Which of the bulky trial fields (:data:`~.records.BULKY_FIELDS`) a read fills in:
    all of them for None, else the names given, else ValueError naming the bad one."""
    if fields is None:
        return frozenset(BULKY_FIELDS)
    if isinstance(fields, str) or not isinstance(fields, (list, tuple, set, frozenset)):
        raise ValueError(
            f"fields must be a list of field names (any of "
            f"{', '.join(BULKY_FIELDS)}) or None, got {fields!r:.100}"
        )
    for name in fields:
        if name not in BULKY_FIELDS:
            raise ValueError(
                f"fields: {name!r} is not a field a read may leave out; use any "
                f"of {', '.join(BULKY_FIELDS)}"
            )
    return frozenset(fields)


def check_experiment_ids(experiment_ids: Any) -> list[str]:
    """Distinct non-empty experiment ids in their first-seen order, else ValueError."""
    if isinstance(experiment_ids, str) or not isinstance(
        experiment_ids, (list, tuple, set, frozenset)
    ):
        raise ValueError(
            f"experiment_ids must be a list of experiment ids, got {experiment_ids!r:.100}"
        )
    for i, eid in enumerate(experiment_ids):
        if not eid or not isinstance(eid, str):
            raise ValueError(f"experiment_ids[{i}] must be a non-empty string, got {eid!r}")
    return list(dict.fromkeys(experiment_ids))
