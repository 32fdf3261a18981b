"""What the API and the pages share: submitting, JSON views of store records (the checks of
a web submission's spec are in :mod:`.web_specs`). Views stay thin; everything here raises :class:`APIError` or dnnframe errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import yaml
from flask import current_app

from dnnframe.exceptions import (
    DnnframeError,
    ExperimentActiveError,
    brief,
)
from dnnframe.metrics import FINAL_METRICS
from dnnframe.pruning.asha import rungs
from dnnframe.search.service import store_driven
from dnnframe.spec.models import SearchConfig, is_driven
from dnnframe.states import (
    ANALYSED_STATES,
    OUTCOME_STATES,
    ExperimentStatus,
    TrialState,
    count_done,
)
from dnnframe.store.sorting import SORT_ALIASES, SORT_COLUMNS
from dnnframe.submit import submit_experiment

from .context import services
from .errors import APIError
from .graphs import graphs_progress
from .params import RESULT_VALUES, TIMING_VALUES, trial_params, trial_values
from .ranking import best_configuration_json, rank_configurations

if TYPE_CHECKING:
    from .experiment_responses import Experiment, ExperimentSearch, Trial, TrialList

# --------------------------------------------------------------------------- submitting


def submit_spec(spec: Any) -> tuple[Any, bool]:
    """Submit through the configured executor; True when the experiment is new.

    A tpe/cmaes spec is only stored: a driver service (``dnnframe drive``, which ``dnnframe
    serve`` starts) asks for its trials as results arrive, outside the web tier. Nothing
    here puts back trials whose worker stopped: their owner does, outside any request
    (:mod:`dnnframe.recovery`)."""
    svc = services()
    store = svc.store
    if is_driven(spec):
        result = store_driven(spec, store)
        return result, result.created
    try:
        executor = svc.executor
    except DnnframeError as exc:
        raise APIError(503, f"cannot reach the executor: {exc}") from None
    result = submit_experiment(spec, store, executor)
    return result, result.created


def delete_experiment(experiment_id: str, confirm: str) -> int:
    """Delete an experiment that is over once the caller confirmed it by repeating its id or
    its name (the API and the page take either); returns how many trials went with it. 409
    while its own trials wait or run."""
    store = services().store
    exp = store.get_experiment(experiment_id)
    if confirm.strip() not in (exp.id, exp.name):
        raise APIError(
            400,
            f"to delete experiment {exp.name!r} ({exp.id}), confirm must repeat its name or "
            f"its id, but got {brief(confirm) if confirm.strip() else 'nothing'}",
            [{"path": "confirm", "message": "must repeat the experiment's name or id"}],
        )
    try:
        return store.delete_experiment(exp.id)
    except ExperimentActiveError as exc:
        raise APIError(409, str(exc)) from None


# --------------------------------------------------------------------------- JSON views

# what trial_values measures besides the final metrics (the JSON has them as their own fields)
NOT_METRICS = frozenset((*TIMING_VALUES, *RESULT_VALUES))
TRIAL_STATES = tuple(state.value for state in TrialState)
# short sort keys: store columns, timing aliases and the final metrics every trial records
SORT_KEYS = frozenset((*SORT_COLUMNS, *SORT_ALIASES, *FINAL_METRICS))


def spec_yaml(spec: dict[str, Any]) -> str:
    """A stored spec as YAML in the spec's own key order, ready for ``dnnframe run``."""
    return yaml.safe_dump(spec, sort_keys=False, allow_unicode=True)


def cancel_experiment(experiment_id: str) -> int:
    """Cancel an experiment that still has work (queued trials become CANCELLED, running
    ones stop after their epoch); returns how many queued trials were cancelled.

    Raises:
        NotFoundError: unknown experiment.  APIError 409: every trial had finished before
        any cancel (a cancel would change nothing but the experiment's label).
    """
    svc = services()
    exp = svc.store.get_experiment(experiment_id)
    if exp.is_finished and not exp.cancel_requested:  # cancelling again is a harmless retry
        raise APIError(
            409,
            f"experiment {experiment_id} has finished ({exp.status}): "
            "there is nothing left to cancel",
        )
    n = svc.store.cancel_experiment(experiment_id)
    if svc.has_executor:
        svc.executor.cancel(experiment_id)
    return n


def _state(value: Any) -> str:
    return getattr(value, "value", value)


def find_experiments(
    store: Any, query: str = "", status: str = "", limit: int = 50, offset: int = 0
) -> tuple[list[Any], bool]:
    """A page of experiments, newest first, whose name or id contains ``query`` (any case)
    and whose status is ``status`` (when given); True when another page follows.

    The store pages experiments but does not search them, so a filtered page reads the
    experiments a page of 500 at a time and keeps the matching ones.
    """
    if not query and not status:
        rows = store.list_experiments(limit=limit + 1, offset=offset)
        return rows[:limit], len(rows) > limit
    needle = query.casefold()
    matched: list[Any] = []
    start = 0
    while len(matched) <= offset + limit:
        page = store.list_experiments(limit=500, offset=start)
        matched.extend(
            e
            for e in page
            if (needle in e.name.casefold() or needle in e.id.casefold())
            and (not status or e.status == status)
        )
        if len(page) < 500:
            break
        start += len(page)
    return matched[offset : offset + limit], len(matched) > offset + limit


def experiment_json(exp: Any, store: Any | None = None, best: bool = False) -> Experiment:
    """An experiment with its progress (trials by state) and, on request, its best trial."""
    counts = {(_state(k)): int(v) for k, v in (exp.counts or {}).items()}
    finished = count_done(counts)  # trials that ran to an end, as the CLI's progress counts
    out: Experiment = {
        "id": exp.id,
        "name": exp.name,
        "n_trials": exp.n_trials,
        "created_at": exp.created_at,
        "cancel_requested": bool(exp.cancel_requested),
        "counts": counts,
        "finished": finished,
        "progress": (finished / exp.n_trials) if exp.n_trials else 1.0,
        "status": exp.status,
        "can_cancel": not exp.is_finished,  # finished or cancelled: nothing left to stop
        # trials trained again after their worker was lost (claimed more than once)
        "reruns": exp.reruns,
        "status_text": status_text(exp.status, counts, exp.n_trials, exp.reruns),
    }
    if best and store is not None:
        out["spec"] = exp.spec
        metric, mode = exp.objective
        try:
            trial = store.best_trial(exp.id, metric, mode)
        except Exception:  # noqa: BLE001 - a missing metric means "no best yet", not an error
            current_app.logger.debug("best_trial failed", exc_info=True)
            trial = None
        out["objective"] = {"metric": metric, "mode": mode}
        out["search"] = search_json(exp.spec)
        out["best_trial"] = trial_json(trial) if trial is not None else None
        counted = store.list_trials(
            exp.id, state=list(ANALYSED_STATES), fields=["config", "result"]
        )
        out["best_configuration"] = best_configuration_json(
            rank_configurations(counted, metric, mode)
        )
    return out


def search_json(spec: dict[str, Any]) -> ExperimentSearch:
    """How the experiment searches, for its charts: the method and, when ASHA prunes, the
    per-epoch metric it compares and the rung epochs (below a trial's ``max_epochs``)."""
    try:
        search = SearchConfig.model_validate(spec.get("search") or {})
    except ValueError:  # a spec stored by another version: draw it as a plain sweep
        return {"method": None, "prunes": False, "rung_metric": None, "rungs": []}
    max_epochs = search.max_epochs or (spec.get("training") or {}).get("max_epochs")
    return {
        "method": search.method,
        "prunes": search.prunes,
        "rung_metric": search.rung_metric if search.prunes else None,
        "rungs": rungs(search.min_epochs, max_epochs, search.eta)
        if search.prunes and isinstance(max_epochs, int)
        else [],
    }


_FAILED, _COMPLETE = TrialState.FAILED.value, TrialState.COMPLETE.value


def status_text(status: str, counts: dict[str, int], n_trials: int, reruns: int = 0) -> str:
    """The experiment's status in words; once trials are over it says how many of them
    failed, diverged, were pruned or cancelled, so a full bar never hides an outcome; and at
    any time how many trials ran again because their worker was lost (``reruns``)."""
    text = _outcome_text(status, counts, n_trials)
    if reruns:
        text += (
            f"; {reruns} trials re-run (their worker was lost)"
            if reruns != 1
            else "; 1 trial re-run (its worker was lost)"
        )
    return text


def _outcome_text(status: str, counts: dict[str, int], n_trials: int) -> str:
    failed = counts.get(_FAILED, 0)
    others = [f"{counts[s.value]} {s.value.lower()}" for s in OUTCOME_STATES if counts.get(s.value)]
    if status == ExperimentStatus.FAILED.value:
        return f"failed: all {failed} trials failed" if failed != 1 else "failed: the trial failed"
    if (
        status in (ExperimentStatus.COMPLETE.value, ExperimentStatus.COMPLETE_WITH_FAILURES.value)
        and others
    ):
        return f"finished, {others[0].replace(' ', f' of {n_trials} ', 1)}" + "".join(
            ", " + o for o in others[1:]
        )
    if status == ExperimentStatus.CANCELLED.value:
        complete = counts.get(_COMPLETE, 0)
        return f"cancelled: {complete} of {n_trials} complete" + "".join(", " + o for o in others)
    return {ExperimentStatus.COMPLETE.value: "finished"}.get(status, status.lower())


def trial_json(trial: Any, history: bool = False, full: bool = False) -> Trial:
    """A trial as JSON for tables and charts: every configured value (``params``) and every
    number it recorded (``metrics``: final metrics, timings, epochs run, parameter count)."""
    result = trial.result or {}
    values = trial_values(result)
    last = trial.metrics[-1] if trial.metrics else {}
    out: Trial = {
        "id": trial.id,
        "state": _state(trial.state),
        "seq": trial.seq,
        "params": trial_params(trial.config),
        "metrics": {k: v for k, v in values.items() if k not in NOT_METRICS},
        "epoch": last.get("epoch") if last else None,
        "epochs_run": result.get("epochs_run", len(trial.metrics)),
        "train_seconds": values.get("train_seconds"),
        "compile_seconds": values.get("compile_seconds"),
        "total_seconds": values.get("total_seconds"),
        "n_params": result.get("n_params"),
        "worker": trial.worker,
        "attempts": trial.attempts,
        "started_at": trial.started_at,
        "finished_at": trial.finished_at,
    }
    if not result.get("metrics") and last:
        # a running trial shows its latest epoch so the table moves before it finishes
        out["metrics"] = {
            k: last[k]
            for k in ("val_accuracy", "val_loss", "train_accuracy", "train_loss")
            if k in last and last[k] is not None
        }
    if history or full:
        out["history"] = list(trial.metrics)
    if full:
        out.update(
            {
                "config": trial.config or {},
                "result": trial.result,
                "error": trial.error,
                "experiment_ids": list(trial.experiment_ids),
                "created_at": trial.created_at,
                "heartbeat_at": trial.heartbeat_at,
                "timings": result.get("timings") or {},
                # the pack it trained in: its timings are its share of the pack's
                "pack": result.get("pack") or None,
                "environment": result.get("environment"),
            }
        )
    if trial.error and not full:
        out["error"] = trial.error.strip().splitlines()[-1][:300]
    return out


def trials_page(
    store: Any, exp: Any, rows: list[Any], limit: int, offset: int, since: int | None, history: bool
) -> TrialList:
    """A page of an experiment's trials with its progress, as ``GET …/trials`` answers:
    ``rows`` is what the store gave for ``limit + 1``, the one more saying whether another
    page exists."""
    trials = rows[:limit]
    cursor = max([t.seq for t in trials], default=since or 0)
    exp_json = experiment_json(exp)
    return {
        "experiment_id": exp.id,
        "trials": [trial_json(t, history=history) for t in trials],
        "cursor": cursor,
        "limit": limit,
        "offset": offset,
        "more": len(rows) > limit,
        "counts": exp_json["counts"],
        "n_trials": exp.n_trials,
        "status": exp_json["status"],
        "status_text": exp_json["status_text"],
        "reruns": exp_json["reruns"],
        "can_cancel": exp_json["can_cancel"],
        "graphs": graphs_progress(exp, exp_json["counts"], store),
    }


def update_json(store: Any, experiment_id: str, trials: list[Any]) -> dict[str, Any]:
    """A live update of an experiment page: the trials that changed (with their curves) and
    the experiment's progress, as a ``trials?since=`` page gives them."""
    record = store.get_experiment(experiment_id)
    exp = experiment_json(record)
    return {
        "experiment_id": experiment_id,
        "cursor": max(t.seq for t in trials),
        "trials": [trial_json(t, history=True) for t in trials],
        **{
            k: exp[k]
            for k in ("counts", "n_trials", "status", "status_text", "reruns", "can_cancel")
        },
        "graphs": graphs_progress(record, exp["counts"], store),
        "over": record.is_finished,  # the page's stream ends with this update
    }
