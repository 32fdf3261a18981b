"""The claim-train-record loop of a pack of trials.

:func:`run_pack` is the single place where a training exception becomes a FAILED trial
(with its traceback); a trial alone is a pack of one. The local process pool and the
Celery task both call it, so a trial behaves the same wherever it runs. It only needs
trial ids and a store: configurations are re-read from the store, never shipped with the
message.
"""

from __future__ import annotations

import logging
import time
import traceback
import uuid
from typing import Any

from .. import settings
from ..exceptions import StoreError, TrialCancelled, failure_text
from ..jsonsafe import json_copy
from ..owners import default_worker_name
from ..retrying import FINAL_WRITE
from ..spec import TrialConfig
from ..spec.batch import validate_many
from ..states import TrialState
from ..store.base import ResultStore
from .epochs import PackEpochs, PackMember, PackObserver
from .heartbeat import Heartbeat
from .outcome import finish_all, member_outcome
from .train_fns import PackTrainFn

log = logging.getLogger(__name__)


def _default_pack_train_fn() -> PackTrainFn:
    from ..engine import train_pack  # importing the engine is cheap; train_pack loads PyTensor

    return train_pack


def _heartbeat_interval() -> float:
    return max(0.2, settings.get().heartbeat_timeout / 5)


def run_pack(
    trial_ids: list[str],
    store: ResultStore,
    worker: str | None = None,
    max_attempts: int | None = None,
    train_fn: PackTrainFn | None = None,
    heartbeat_interval_s: float | None = None,
    observer: PackObserver | None = None,
) -> dict[str, TrialState | None]:
    """Claim the trials of a pack, train the members won together, record each one's end.

    Args:
        trial_ids: the pack's trials; each must exist in ``store``.
        store: the result store (already open in this process).
        worker: name recorded on the trials; defaults to ``host:pid``.
        max_attempts: delivery cap passed to ``store.claim_trials`` (a trial claimed more
            often than this is marked FAILED instead of run again).
        train_fn: ``train(configs, on_epoch) -> one TrialResult per config``, where
            ``on_epoch(epoch, metrics)`` gets one metrics dict per member (None for a member
            the engine stopped) and returns one stop flag per member (cancelled, lost to
            another worker, or stopped by the pack's pruner: recorded PRUNED with its curve). A
            member's result with status FAILED (or an exception instance in its place) fails
            that member only. Default: :func:`dnnframe.engine.train_pack`.
        heartbeat_interval_s: how often the background thread beats for every member
            (default: a fifth of the heartbeat timeout).
        observer: told what was claimed, each recorded epoch and each recorded end.

    Returns:
        Each trial id's final :class:`TrialState`, or None when it was not claimable
        (finished, running elsewhere, cancelled or over its delivery cap before it started:
        a redelivered message is a no-op) or was lost to another worker while training.

    An exception from ``train_fn`` fails every member still held, with the traceback;
    cancellation seen after an epoch stops that member (CANCELLED); a KeyboardInterrupt
    makes every member held CANCELLED and is re-raised. All finishes go to the store in one
    call, after training, with the epochs not written yet (each trial's curve and end in
    one write); nothing else changes a finished row.
    """
    worker = worker or default_worker_name()
    ids = list(dict.fromkeys(trial_ids))
    states: dict[str, TrialState | None] = dict.fromkeys(ids)
    observer = observer or PackObserver()
    records = store.claim_trials(ids, worker, max_attempts=max_attempts)
    if not records:
        return states
    observer.claimed(records)
    members = [PackMember(r.id, r.config, experiment_ids=tuple(r.experiment_ids)) for r in records]
    configs: list[TrialConfig] = []
    for m, config in zip(members, validate_many([m.config for m in members])):
        if isinstance(config, Exception):  # one bad stored config fails that member only
            m.outcome = (TrialState.FAILED, None, "".join(traceback.format_exception(config)))
            continue
        configs.append(config)
        m.index = len(configs) - 1
    trained = [m for m in members if m.index >= 0]
    pack = {"id": uuid.uuid4().hex[:12], "size": len(trained)}
    run = None
    if trained:
        run = _train(
            store,
            worker,
            trained,
            configs,
            train_fn or _default_pack_train_fn(),
            heartbeat_interval_s or _heartbeat_interval(),
            observer,
        )
    items = []
    for m in members:
        if m.lost or m.outcome is None:
            continue
        state, result, error = m.outcome
        if result is not None and m.index >= 0:
            # the engine's pack (size, wall and compile seconds) with this run's id
            result["pack"] = {**(result.get("pack") or {}), **pack, "index": m.index}
        items.append((m.trial_id, state, result, error))
    finished = _finish(store, worker, items, members, run) if items else set()
    for tid, state, result, error in items:
        if tid in finished:
            states[tid] = state
            observer.finished(tid, state, result, error)
        else:
            log.warning(
                "trial %s: the store refused its final state (another worker owns it "
                "now); result dropped",
                tid,
            )
    return states


def _train(
    store: ResultStore,
    worker: str,
    members: list[PackMember],
    configs: list[TrialConfig],
    train: PackTrainFn,
    interval_s: float,
    observer: PackObserver,
) -> PackEpochs:
    """Train ``members`` together and set each one's ``outcome`` (left None when lost).
    Returns the pack's bookkeeping: the epochs it has not written yet go to the store with
    the members' ends (:func:`_finish`)."""
    started = time.perf_counter()
    heartbeat = Heartbeat.shared(store, worker, interval_s)
    heartbeat.track(m.trial_id for m in members)
    run = PackEpochs(store, worker, members, heartbeat, observer)
    try:
        results = train(configs, run.on_epoch)
        if len(results) != len(members):
            raise RuntimeError(
                f"the train function returned {len(results)} results for a pack of {len(members)}"
            )
    except KeyboardInterrupt:
        _end_all(members, TrialState.CANCELLED, "interrupted (KeyboardInterrupt)")
        # (ignored: mypy cannot see that _end_all gave every member an outcome)
        outcomes = [(m.trial_id, *m.outcome) for m in members if not m.lost]  # type: ignore[misc]
        _finish(store, worker, outcomes, members, run)
        for m in members:
            m.lost = True  # recorded already
        raise
    except TrialCancelled as exc:
        _end_all(members, TrialState.CANCELLED, f"cancelled: {exc}")
        return run
    except Exception as exc:
        tb = failure_text(exc)
        # one line: the trials (their configs are in the store) and the error's first line;
        # the traceback is recorded on every member
        first = (str(exc).strip().splitlines() or [""])[0]
        log.error(
            "pack of %d (%s) failed after %.1fs: %s: %s",
            len(members),
            ", ".join(m.trial_id for m in members),
            time.perf_counter() - started,
            type(exc).__name__,
            first,
        )
        _end_all(members, TrialState.FAILED, tb)
        return run
    finally:
        heartbeat.untrack(m.trial_id for m in members)
        run.lose(heartbeat.lost)
    unwritten = run.unwritten()
    for m, result in zip(members, results):
        if not m.lost:
            # the result keeps the history the store's curve will not hold in full
            m.trained = result
            curve = run.stored.get(m.trial_id, 0) + len(unwritten.get(m.trial_id, ()))
            m.outcome = member_outcome(
                result, m.index, m.pruned, history=curve != len(getattr(result, "history", ()))
            )
    return run


def _finish(
    store: ResultStore,
    worker: str,
    items: list[tuple[str, TrialState, dict[str, Any] | None, str | None]],
    members: list[PackMember],
    run: PackEpochs | None,
) -> set[str]:
    """Record the members' ends (``items``) with the epochs the pack has not written yet,
    each trial's in one write; returns the ids the store finished. Where those epochs
    cannot be stored even so (retried), the ends are recorded without them, each result
    then carrying its whole history, and the error names what is missing from the curves."""
    ids = {tid for tid, *_ in items}
    tails = {tid: e for tid, e in (run.unwritten() if run else {}).items() if tid in ids}
    try:
        finished = finish_all(store, items, worker, tails)
    except StoreError as exc:
        if not tails:
            raise
        log.error(
            "pack of %d: %s could not be stored in the trials' curves with their ends after "
            "%d tries (%s); storing the ends without them, each result with its whole "
            "history",
            len(members),
            ", ".join(f"{len(e)} epochs of {tid}" for tid, e in tails.items()),
            FINAL_WRITE.attempts,
            " ".join(str(exc).split()),
        )
        trained = {m.trial_id: m.trained for m in members}
        return finish_all(store, [_with_history(i, trained.get(i[0])) for i in items], worker)
    if run is not None:
        run.recorded(finished, tails)
    return finished


def _with_history(
    item: tuple[str, TrialState, dict[str, Any] | None, str | None], trained: Any
) -> tuple[str, TrialState, dict[str, Any] | None, str | None]:
    """``item`` with its result carrying the whole history the engine returned."""
    tid, state, result, error = item
    if result is None or "history" in result or not hasattr(trained, "history"):
        return item
    return tid, state, {**result, "history": json_copy(trained.history)}, error


def _end_all(members: list[PackMember], state: TrialState, error: str) -> None:
    for m in members:
        m.outcome = (state, None, error)
