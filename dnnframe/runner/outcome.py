"""How a pack member's end is recorded: its final state, result and error from what the
engine returned, and the one store call that records every member's end (retried, since a
results database hiccup must not lose a finished run)."""

from __future__ import annotations

import logging
from typing import Any

from ..exceptions import failure_text
from ..retrying import FINAL_WRITE
from ..states import TrialState
from ..store.base import ResultStore

log = logging.getLogger(__name__)

# A results database hiccup must not kill a run (Sacred's lesson): per-epoch writes are
# best effort, the final write is retried before giving up (retrying.FINAL_WRITE).


def finish_all(
    store: ResultStore,
    items: list[tuple[str, TrialState, dict[str, Any] | None, str | None]],
    worker: str,
    epochs: dict[str, list[dict[str, Any]]] | None = None,
) -> set[str]:
    """Record every member's end in one ``finish_trials`` call, with the last ``epochs`` of
    their curves, retried by FINAL_WRITE; returns the ids the store accepted (see
    ``ResultStore.finish_trials``)."""
    return FINAL_WRITE.call(
        store.finish_trials,
        items,
        worker=worker,
        epochs=epochs,
        what=f"trials {', '.join(i[0] for i in items)}: storing the final states",
    )


def member_outcome(
    result: Any, index: int, pruned: dict[str, Any] | None = None, history: bool = True
) -> tuple[TrialState, dict[str, Any] | None, str | None]:
    """The final state, result dict and error of one member from what the engine returned
    (a member stopped by the pruner comes back CANCELLED and becomes PRUNED, its curve
    kept). Not ``history``: the result leaves its history out, for the store's curve holds
    it all (a trial record shows the curve as its result's history; written once)."""
    if isinstance(result, BaseException):
        return TrialState.FAILED, None, failure_text(result)
    state = TrialState(result.status)
    data = result.to_dict(history=history)
    error = None
    if pruned is not None and state in (TrialState.CANCELLED, TrialState.COMPLETE):
        data["status"], data["pruned"] = TrialState.PRUNED.value, pruned
        return TrialState.PRUNED, data, None
    if state is TrialState.FAILED:
        error = (
            getattr(result, "error", None)
            or "\n".join(result.notes)
            or f"the engine reported pack member {index} as FAILED"
        )
    elif state is TrialState.DIVERGED:
        error = (
            f"diverged at epoch {getattr(result, 'diverged_epoch', None)} (loss became non-finite)"
        )
    elif state is TrialState.CANCELLED:
        error = (
            f"cancelled after {getattr(result, 'epochs_run', '?')} epochs (experiment cancelled)"
        )
    return state, data, error
