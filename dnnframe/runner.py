"""Run trials: claim them, train them, report each epoch, record how each one ended.

:func:`run_pack` is the single place where a training exception becomes a FAILED trial
(with its traceback); :func:`run_trial` is a pack of one. The local process pool and the
Celery task both call them, so a trial behaves the same wherever it runs. They only need
trial ids and a store: configurations are re-read from the store, never shipped with the
message.
"""

from __future__ import annotations

import logging
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import settings
from .engine.result import TrialResult
from .exceptions import StoreError, TrialCancelled, failure_text
from .heartbeat import Heartbeat
from .owners import default_worker_name
from .retrying import FINAL_WRITE
from .search.pruner import PackTrial
from .search.pruner_factory import pruner_for_pack
from .spec import TrialConfig
from .store.base import ResultStore, TrialRecord, TrialState

log = logging.getLogger(__name__)

TrainFn = Callable[..., TrialResult]
# ``on_epoch(epoch, one metrics dict or None per member) -> one stop flag per member``
PackEpochFn = Callable[[int, list[dict[str, Any] | None]], list[bool]]
PackTrainFn = Callable[[list[TrialConfig], PackEpochFn], list[TrialResult]]

# A results database hiccup must not kill a run (Sacred's lesson): per-epoch writes are
# best effort, the final write is retried before giving up (retrying.FINAL_WRITE).
# Heartbeat and cancellation checks from epochs at most this often: tiny trials run many
# epochs a second, and each check is a store round trip. The heartbeat thread covers long
# epochs and compiles.
CHECK_INTERVAL_S = 1.0
# A pack's learning curves are written at most this often (every epoch once an epoch takes
# longer): rewriting each member's curve every epoch cost tiny trials more than training.
METRICS_INTERVAL_S = 1.0


def _default_train_fn() -> TrainFn:
    from .engine import train  # importing the engine is cheap; train loads PyTensor

    return train


def _default_pack_train_fn() -> PackTrainFn:
    from .engine import train_pack  # importing the engine is cheap; train_pack loads PyTensor

    return train_pack


def one_by_one(train: TrainFn) -> PackTrainFn:
    """Adapt a single-trial ``train(config, on_epoch=...)`` to the pack contract: members
    train one after another, each seeing only its own slot of the pack's epoch callback.

    An exception while training one member fails that member only (its result slot holds
    the exception); KeyboardInterrupt and cancellation still end the whole pack.
    """

    def train_each(configs: list[TrialConfig], on_epoch: PackEpochFn) -> list[TrialResult]:
        results: list[Any] = []
        for i, config in enumerate(configs):
            def member_epoch(epoch: int, metrics: dict[str, Any], i: int = i) -> bool:
                slots: list[dict[str, Any] | None] = [None] * len(configs)
                slots[i] = metrics
                return on_epoch(epoch, slots)[i]

            if len(configs) == 1:  # nothing to isolate: a pack of one fails as a pack
                return [train(config, on_epoch=member_epoch)]
            try:
                results.append(train(config, on_epoch=member_epoch))
            except (KeyboardInterrupt, TrialCancelled):
                raise
            except Exception as exc:  # recorded as this member's FAILED result
                results.append(exc)
        return results

    return train_each


def _heartbeat_interval() -> float:
    return max(0.2, settings.get().heartbeat_timeout / 5)


def _finish_all(store: ResultStore, items: list[tuple[str, TrialState, dict[str, Any] | None,
                                                      str | None]], worker: str) -> set[str]:
    return FINAL_WRITE.call(
        store.finish_trials, items, worker=worker,
        what=f"trials {', '.join(i[0] for i in items)}: storing the final states")


class PackObserver:
    """What a caller of :func:`run_pack` may watch while a pack runs (a Celery task shows it
    in Flower). Called in the training thread, so each method must be quick and must not
    raise; the defaults do nothing."""

    def claimed(self, records: list[TrialRecord]) -> None:
        """The members this call won, as the claim returned them (config, attempts)."""

    def epoch(self, epoch: int, metrics: dict[str, dict[str, Any]]) -> None:
        """Epoch ``epoch`` was recorded for these members (trial id -> that epoch's metrics).
        Epochs are written at most every :data:`METRICS_INTERVAL_S`, so several calls may
        come at once."""

    def finished(self, trial_id: str, state: TrialState, result: dict[str, Any] | None,
                 error: str | None) -> None:
        """The store accepted this member's final state (nothing is called for a member
        lost to another worker)."""


@dataclass
class _Member:
    """One claimed trial of a pack."""

    trial_id: str
    config: dict[str, Any]
    index: int = -1          # position in the trained pack (-1: not trained)
    stopped: bool = False    # asked to stop (cancelled) or frozen by the engine
    lost: bool = False       # another worker owns it now: nothing more is written
    experiment_ids: tuple[str, ...] = ()
    pruned: dict[str, Any] | None = None  # why the pruner stopped it
    outcome: tuple[TrialState, dict[str, Any] | None, str | None] | None = None


class _PackRun:
    """The per-epoch bookkeeping of one pack: throttled metrics writes and checks."""

    def __init__(self, store: ResultStore, worker: str, members: list[_Member],
                 heartbeat: Heartbeat, observer: PackObserver):
        self.store, self.worker, self.members, self.heartbeat = store, worker, members, heartbeat
        self.observer = observer
        self.last_check = -float("inf")  # the first epoch always checks
        self.last_write = -float("inf")  # and is written at once
        self.pending: list[tuple[int, dict[str, dict[str, Any]]]] = []  # epochs not written
        self.pruner = pruner_for_pack(store, {
            m.trial_id: PackTrial(m.experiment_ids,
                                  int(m.config.get("training", {}).get("max_epochs", 0)))
            for m in members})

    def live(self) -> list[_Member]:
        return [m for m in self.members if not m.lost]

    def lose(self, ids: set[str]) -> None:
        for m in self.members:
            if m.trial_id in ids and not m.lost:
                m.lost = True
                log.warning("trial %s: another worker owns it now; it is dropped from this "
                            "pack", m.trial_id)
        self.heartbeat.untrack(ids)

    def on_epoch(self, epoch: int, metrics: list[dict[str, Any] | None]) -> list[bool]:
        if len(metrics) != len(self.members):
            raise ValueError(f"on_epoch got {len(metrics)} metrics for a pack of "
                             f"{len(self.members)}")
        self.lose(self.heartbeat.lost)
        batch = {m.trial_id: dict(x) for m, x in zip(self.members, metrics)
                 if x is not None and not m.lost}
        if batch:
            self.pending.append((epoch, batch))
        try:
            # A pack that may be pruned writes every epoch: the pruner may read what was written.
            if self.pruner.active or time.monotonic() - self.last_write >= METRICS_INTERVAL_S:
                self.write()
            if self.pruner.active:
                written = {m.trial_id: batch[m.trial_id] for m in self.live()
                           if m.trial_id in batch and not m.stopped}
                for tid, decision in self.pruner.on_results(epoch, written).items():
                    if decision.stop:
                        member = self._member(tid)
                        member.pruned, member.stopped = dict(decision.reason), True
            if time.monotonic() - self.last_check >= CHECK_INTERVAL_S:
                self.last_check = time.monotonic()
                live = [m.trial_id for m in self.live() if not m.stopped]
                if live:
                    self.lose(self.heartbeat.beat())
                    for tid in self.store.cancel_requested(live):
                        self._member(tid).stopped = True
        except StoreError:
            log.warning("pack %s: could not record epoch %s; training goes on",
                        ", ".join(batch), epoch, exc_info=True)
        # None is a member with nothing this epoch (frozen by the engine, or not yet trained
        # by a one-by-one train function): it is neither stopped nor lost by that
        return [m.lost or m.stopped for m in self.members]

    def write(self) -> None:
        """Write the epochs not written yet in one store call, then tell the observer what
        was recorded. Owner-checked: a worker whose trial was requeued and claimed by
        another never writes into its curve, and drops the trial. A failed write (StoreError)
        keeps its epochs for the next write: the store skips epochs a curve already holds,
        so sending them again stores each once."""
        self.last_write = time.monotonic()
        lost = {m.trial_id for m in self.members if m.lost}
        by_trial: dict[str, list[dict[str, Any]]] = {}
        for _, batch in self.pending:
            for tid, x in batch.items():
                if tid not in lost:
                    by_trial.setdefault(tid, []).append(x)
        if not by_trial:
            self.pending = []
            return
        written = self.store.append_metrics_many(by_trial, self.worker)
        pending, self.pending = self.pending, []
        self.lose(set(by_trial) - written)
        for epoch, batch in pending:
            recorded = {tid: x for tid, x in batch.items() if tid in written}
            if recorded:
                self.observer.epoch(epoch, recorded)

    def write_rest(self) -> None:
        """:meth:`write` at the end of training, before any member's end is recorded; no
        later write would carry these epochs, so it is retried like the final states. Epochs
        still unstored after that are named in an error (each result keeps its whole
        history)."""
        try:
            FINAL_WRITE.call(self.write,
                             what=f"pack of {len(self.members)}: recording its last epochs")
            return
        except StoreError as exc:
            failure = " ".join(str(exc).split())
        counts: dict[str, int] = {}
        for _, batch in self.pending:
            for tid in batch:
                counts[tid] = counts.get(tid, 0) + 1
        log.error("pack of %d: %s could not be stored in the trials' curves after %d tries "
                  "(%s; their results keep the whole history)", len(self.members),
                  ", ".join(f"{n} epochs of {tid}" for tid, n in counts.items()),
                  FINAL_WRITE.attempts, failure)

    def _member(self, trial_id: str) -> _Member:
        return next(m for m in self.members if m.trial_id == trial_id)


def _outcome(result: Any, index: int, pruned: dict[str, Any] | None = None
             ) -> tuple[TrialState, dict[str, Any] | None, str | None]:
    """The final state, result dict and error of one member from what the engine returned
    (a member stopped by the pruner comes back CANCELLED and becomes PRUNED, its curve
    kept)."""
    if isinstance(result, BaseException):
        return TrialState.FAILED, None, failure_text(result)
    state = TrialState(result.status)
    data = result.to_dict()
    error = None
    if pruned is not None and state in (TrialState.CANCELLED, TrialState.COMPLETE):
        data["status"], data["pruned"] = TrialState.PRUNED.value, pruned
        return TrialState.PRUNED, data, None
    if state is TrialState.FAILED:
        error = getattr(result, "error", None) or "\n".join(result.notes) or \
            f"the engine reported pack member {index} as FAILED"
    elif state is TrialState.DIVERGED:
        error = f"diverged at epoch {getattr(result, 'diverged_epoch', None)} (loss became " \
                "non-finite)"
    elif state is TrialState.CANCELLED:
        error = f"cancelled after {getattr(result, 'epochs_run', '?')} epochs (experiment " \
                "cancelled)"
    return state, data, error


def run_pack(trial_ids: list[str], store: ResultStore, worker: str | None = None,
             max_attempts: int | None = None, train_fn: PackTrainFn | None = None,
             heartbeat_interval_s: float | None = None,
             observer: PackObserver | None = None) -> dict[str, TrialState | None]:
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
    call, after training; nothing else changes a finished row.
    """
    worker = worker or default_worker_name()
    ids = list(dict.fromkeys(trial_ids))
    states: dict[str, TrialState | None] = dict.fromkeys(ids)
    observer = observer or PackObserver()
    records = store.claim_trials(ids, worker, max_attempts=max_attempts)
    if not records:
        return states
    observer.claimed(records)
    members = [_Member(r.id, r.config, experiment_ids=tuple(r.experiment_ids)) for r in records]
    configs: list[TrialConfig] = []
    for m in members:
        try:
            configs.append(TrialConfig.model_validate(m.config))
        except Exception:  # noqa: BLE001 - one bad stored config fails that member only
            m.outcome = (TrialState.FAILED, None, traceback.format_exc())
            continue
        m.index = len(configs) - 1
    trained = [m for m in members if m.index >= 0]
    pack = {"id": uuid.uuid4().hex[:12], "size": len(trained)}
    if trained:
        _train(store, worker, trained, configs, train_fn or _default_pack_train_fn(),
               heartbeat_interval_s or _heartbeat_interval(), observer)
    items = []
    for m in members:
        if m.lost or m.outcome is None:
            continue
        state, result, error = m.outcome
        if result is not None and m.index >= 0:
            # the engine's pack (size, wall and compile seconds) with this run's id
            result["pack"] = {**(result.get("pack") or {}), **pack, "index": m.index}
        items.append((m.trial_id, state, result, error))
    finished = _finish_all(store, items, worker) if items else set()
    for tid, state, result, error in items:
        if tid in finished:
            states[tid] = state
            observer.finished(tid, state, result, error)
        else:
            log.warning("trial %s: the store refused its final state (another worker owns it "
                        "now); result dropped", tid)
    return states


def _train(store: ResultStore, worker: str, members: list[_Member], configs: list[TrialConfig],
           train: PackTrainFn, interval_s: float, observer: PackObserver) -> None:
    """Train ``members`` together and set each one's ``outcome`` (left None when lost)."""
    started = time.perf_counter()
    heartbeat = Heartbeat.shared(store, worker, interval_s)
    heartbeat.track(m.trial_id for m in members)
    run = _PackRun(store, worker, members, heartbeat, observer)
    try:
        try:
            results = train(configs, run.on_epoch)
        finally:
            run.write_rest()
        if len(results) != len(members):
            raise RuntimeError(f"the train function returned {len(results)} results for a "
                               f"pack of {len(members)}")
    except KeyboardInterrupt:
        _end_all(members, TrialState.CANCELLED, "interrupted (KeyboardInterrupt)")
        _finish_all(store, [(m.trial_id, *m.outcome) for m in members  # type: ignore[misc]
                            if not m.lost], worker)
        for m in members:
            m.lost = True  # recorded already
        raise
    except TrialCancelled as exc:
        _end_all(members, TrialState.CANCELLED, f"cancelled: {exc}")
        return
    except Exception as exc:
        tb = failure_text(exc)
        # one line: the trials (their configs are in the store) and the error's first line;
        # the traceback is recorded on every member
        first = (str(exc).strip().splitlines() or [""])[0]
        log.error("pack of %d (%s) failed after %.1fs: %s: %s", len(members),
                  ", ".join(m.trial_id for m in members), time.perf_counter() - started,
                  type(exc).__name__, first)
        _end_all(members, TrialState.FAILED, tb)
        return
    finally:
        heartbeat.untrack(m.trial_id for m in members)
        run.lose(heartbeat.lost)
    for m, result in zip(members, results):
        if not m.lost:
            m.outcome = _outcome(result, m.index, m.pruned)


def _end_all(members: list[_Member], state: TrialState, error: str) -> None:
    for m in members:
        m.outcome = (state, None, error)


def run_trial(trial_id: str, store: ResultStore, worker: str | None = None,
              max_attempts: int | None = None, train_fn: TrainFn | None = None) -> TrialState | None:
    """Claim and train one trial: :func:`run_pack` of one with a single-trial engine.

    ``train_fn`` is ``train(config, on_epoch=...) -> TrialResult`` (``on_epoch(epoch,
    metrics)`` returns True to stop); default :func:`dnnframe.engine.train`. Returns the
    final state, or None when the trial was not claimable or was lost (see run_pack).
    """
    train = one_by_one(train_fn or _default_train_fn())
    return run_pack([trial_id], store, worker=worker, max_attempts=max_attempts,
                    train_fn=train)[trial_id]
