"""Run one trial: claim it, train it, report each epoch, record how it ended.

:func:`run_trial` is the single place where a training exception becomes a FAILED trial
(with its traceback); the local process pool and the Celery task both call it, so a trial
behaves the same wherever it runs. It only needs a trial id and a store: the resolved
configuration is re-read from the store, never shipped with the message.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import traceback
from collections.abc import Callable
from typing import Any

from .exceptions import StoreError, TrialCancelled
from .store.base import ResultStore, TrialState

log = logging.getLogger(__name__)

TrainFn = Callable[..., Any]

# A results database hiccup must not kill a run (Sacred's lesson): per-epoch writes are
# best effort, the final write is retried before giving up.
_FINISH_RETRIES = 5
# Heartbeat and cancellation check at most this often (the learning curve is still written
# every epoch): tiny trials run many epochs a second, and each check is a store round trip.
CHECK_INTERVAL_S = 1.0


def default_worker_name() -> str:
    """``host:pid`` — unique per live process, readable in the dashboard."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _default_train_fn() -> TrainFn:
    from .engine import train  # lazy: importing the engine pulls in nothing heavy, train does

    return train


def _finish(store: ResultStore, trial_id: str, state: TrialState, result: dict[str, Any] | None,
            error: str | None, worker: str) -> bool:
    delay = 0.2
    for attempt in range(_FINISH_RETRIES):
        try:
            return store.finish_trial(trial_id, state, result=result, error=error, worker=worker)
        except StoreError:
            if attempt == _FINISH_RETRIES - 1:
                raise
            log.warning("trial %s: storing the final state failed, retrying in %.1fs", trial_id, delay,
                        exc_info=True)
            time.sleep(delay)
            delay *= 2
    return False  # unreachable; keeps type checkers happy


def _pid_is_dead(pid: int) -> bool:
    """True only when no process ``pid`` exists here (a process we may not signal exists)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # EPERM: someone's process has that pid; assume it may be the owner
        return False
    # A killed process whose parent died too stays a zombie until init reaps it (a second or
    # more on some systems); it runs no trial any more.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def release_if_owner_died(store: Any, trial_id: str, node: str) -> bool:
    """Put ``trial_id`` back to QUEUED if its owner was a now-dead process of ``node``.

    A process killed mid-trial (SIGKILL, OOM, a killed ``dnnframe run``) leaves its trial
    RUNNING under ``"<node>:<pid>"``: a Celery pool process's message is redelivered within
    seconds and a rerun of ``dnnframe run`` starts at once, but the claim refuses a RUNNING
    trial, so without this the trial would wait for the stale-heartbeat timeout. Only owners on *this* node are checked: same node name means same
    host (and pid namespace), the only place where a pid says anything. An owner whose pid
    still exists (or was reused) is left alone, and so is every other node's (the reaper
    handles those). Returns True if this call released the trial.
    """
    trial = store.get_trial(trial_id)
    if trial.state is not TrialState.RUNNING or not trial.worker:
        return False
    owner_node, _, owner_pid = trial.worker.rpartition(":")
    if (owner_node != node or not owner_pid.isdigit() or int(owner_pid) == os.getpid()
            or not _pid_is_dead(int(owner_pid))):
        log.info("trial %s: redelivered while RUNNING under %s (alive, or not on this node); "
                 "left to its owner or the reaper", trial_id, trial.worker)
        return False
    if not store.release_trial(trial_id, trial.worker):
        return False  # the reaper or another redelivery got there first
    log.warning("trial %s: its owner %s died (no such process on this node); released it to "
                "run again now (attempt %d so far)", trial_id, trial.worker, trial.attempts)
    return True


def run_trial(trial_id: str, store: ResultStore, worker: str | None = None,
              max_attempts: int | None = None, train_fn: TrainFn | None = None) -> TrialState | None:
    """Claim and train one trial, recording every epoch and the final state in ``store``.

    Args:
        trial_id: the trial to run; it must exist in ``store``.
        store: the result store (already open in this process).
        worker: name recorded on the trial; defaults to ``host:pid``.
        max_attempts: delivery cap passed to ``store.claim_trial`` (a trial claimed more
            often than this is marked FAILED instead of run again).
        train_fn: ``train(config, on_epoch=...) -> TrialResult``; defaults to
            :func:`dnnframe.engine.train` (benchmarks pass a cheap stand-in).

    Returns:
        The final :class:`TrialState`, or None when the trial was not claimable (already
        finished, running elsewhere, cancelled, or over its delivery cap) — a redelivered
        message is a no-op.

    A training exception makes the trial FAILED with its traceback; cancellation of the
    experiment (seen after an epoch) makes it CANCELLED; a KeyboardInterrupt in this process
    makes it CANCELLED and is re-raised. Nothing but the final write changes a finished row.
    """
    from .spec import TrialConfig

    worker = worker or default_worker_name()
    record = store.claim_trial(trial_id, worker, max_attempts=max_attempts)
    if record is None:
        return None
    train = train_fn or _default_train_fn()
    lost = False  # another worker owns the trial now (our heartbeat or metrics were refused)
    last_check = -float("inf")  # the first epoch always checks

    def on_epoch(epoch: int, metrics: dict[str, Any]) -> bool:
        nonlocal lost, last_check
        try:
            # Owner-checked every epoch (the heartbeat below is throttled): a worker whose trial
            # was requeued and claimed by another stops before writing into its curve.
            if not store.append_metrics(trial_id, dict(metrics), worker=worker):
                lost = True
                return True
            if time.monotonic() - last_check < CHECK_INTERVAL_S:
                return False
            last_check = time.monotonic()
            if not store.heartbeat(trial_id, worker):
                lost = True
                return True
            return bool(store.is_cancel_requested(trial_id))
        except StoreError:
            log.warning("trial %s: could not record epoch %s; training goes on", trial_id, epoch,
                        exc_info=True)
            return False

    started = time.perf_counter()
    try:
        config = TrialConfig.model_validate(record.config)
        result = train(config, on_epoch=on_epoch)
    except KeyboardInterrupt:
        _finish(store, trial_id, TrialState.CANCELLED, None, "interrupted (KeyboardInterrupt)", worker)
        raise
    except TrialCancelled as exc:
        _finish(store, trial_id, TrialState.CANCELLED, None, f"cancelled: {exc}", worker)
        return TrialState.CANCELLED
    except Exception as exc:
        tb = traceback.format_exc()
        log.error("trial %s failed after %.1fs (config %s): %s", trial_id,
                  time.perf_counter() - started, record.config, exc)
        _finish(store, trial_id, TrialState.FAILED, None, tb, worker)
        return TrialState.FAILED
    if lost:
        log.warning("trial %s: heartbeat or metrics refused, another worker owns it; result "
                    "dropped", trial_id)
        return None
    state = TrialState(result.status)
    error = None
    if state is TrialState.DIVERGED:
        error = f"diverged at epoch {getattr(result, 'diverged_epoch', None)} (loss became non-finite)"
    elif state is TrialState.CANCELLED:
        error = f"cancelled after {getattr(result, 'epochs_run', '?')} epochs (experiment cancelled)"
    _finish(store, trial_id, state, result.to_dict(), error, worker)
    return state


def run_pack(trial_ids: list[str], store: ResultStore, worker: str | None = None,
             max_attempts: int | None = None,
             train_fn: TrainFn | None = None) -> dict[str, TrialState | None]:
    """Run a pack of trials; returns each member's final state (None: not claimable).

    Placeholder body: runs the members one after another with :func:`run_trial`, so the
    claim, delivery cap, cancellation and exactly-once hold per member. The packed engine
    (batched claims, one compiled graph for all members) replaces it.
    """
    return {tid: run_trial(tid, store, worker=worker, max_attempts=max_attempts,
                           train_fn=train_fn)
            for tid in trial_ids}
