"""What a pack task tells monitors (Flower, or any reader of Celery events).

Its result names every member: trial id → final state, objective (the value of its
experiment's objective metric), attempt, and what this delivery did with it (``trained``;
``dropped``: trained, but another worker owns the trial now and this result was not
recorded; ``refused``: the claim ended it without training, cancelled or over the delivery
cap; ``no-op``: already finished or running elsewhere, as for a duplicate or redelivered
message, with ``by``: the worker, ``<node>:<pid>``, that finished or runs it). A
redelivered message keeps its task id, so in Flower its no-op result replaces the result
of the delivery that trained: ``by``, in each member and in the summary, keeps who did.
A pack with a member FAILED by this delivery ends
as a task failure (:class:`PackFailed`, one line; the tracebacks are in the store). While it
trains, ``task-progress`` events say which epoch each member reached.

Flower builds its task list from Celery events alone, so none of this needs a result
backend (dnnframe has none: results live in the store). A ``task-succeeded`` event carries
the ``repr`` of the return value, ``task-failed`` the ``repr`` of the exception, and a
custom event type becomes the task's state (``task-progress`` → ``PROGRESS``) with its
``result`` field shown in Flower until the task ends.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from typing import Any

from celery import Celery

from ..exceptions import DnnframeError, StoreError
from ..metrics import DEFAULT_OBJECTIVE_METRIC
from ..runner import PackObserver
from ..store.base import ResultStore, TrialRecord, TrialState
from ..store.records import value_at
from ..store.sorting import resolve_sort_path

log = logging.getLogger(__name__)

#: The event type of progress reports (Flower shows the task as PROGRESS).
PROGRESS_EVENT = "task-progress"
#: Progress events per task at most this often, so tiny fast epochs do not flood the broker.
PROGRESS_INTERVAL_S = 1.0
#: How much of a result's ``repr`` events carry (Celery's default, 1024, cuts a pack of ten).
RESULT_REPR_MAX = 64 * 1024
# A task waits this long at its end for a progress event being sent: one arriving after
# task-succeeded would replace the result Flower shows.
_FLUSH_TIMEOUT_S = 2.0
_ERROR_CHARS = 200
_LISTED_FAILURES = 3
_LISTED_WORKERS = 3


class PackFailed(DnnframeError):
    """A pack task in which this delivery left a member FAILED (raised after every member
    was recorded). Registered as an expected error of the task, so the worker logs one line
    instead of a traceback."""


def error_line(error: str | None) -> str | None:
    """One line from a stored error: the exception line of a traceback (``ValueError:
    ...``), else the first line; at most 200 characters."""
    if not error or not error.strip():
        return None
    lines = error.strip().splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (")]
    line = lines[0]
    if starts:  # after the last traceback's indented frames comes the exception line
        line = next((x for x in lines[starts[-1] + 1 :] if x and not x[0].isspace()), lines[-1])
    line = line.strip()
    return line if len(line) <= _ERROR_CHARS else line[: _ERROR_CHARS - 1] + "…"


class ProgressSender:
    """Sends the latest progress of this process's task from a thread of its own, so a slow
    or absent broker never holds up training; a report not yet sent is replaced by a newer
    one (only the latest matters)."""

    def __init__(self, app: Celery) -> None:
        self.app = app
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._pending: tuple[str, str, dict[str, Any]] | None = None
        self._sending: str | None = None
        self._thread: threading.Thread | None = None

    def post(self, task_id: str, hostname: str, fields: dict[str, Any]) -> None:
        """Queue ``fields`` as the next ``task-progress`` event of ``task_id``."""
        with self._lock:
            self._pending = (task_id, hostname, fields)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="dnnframe-progress", daemon=True
                )
                self._thread.start()
        self._wake.set()

    def flush(self, task_id: str) -> None:
        """Drop ``task_id``'s unsent report and wait (briefly) for one being sent."""
        with self._lock:
            if self._pending is not None and self._pending[0] == task_id:
                self._pending = None
            sending = self._sending == task_id
        if sending:
            self._idle.wait(_FLUSH_TIMEOUT_S)

    def _run(self) -> None:
        while True:
            self._wake.wait()
            with self._lock:
                self._wake.clear()
                item, self._pending = self._pending, None
                if item is None:
                    continue
                self._sending = item[0]
                self._idle.clear()
            task_id, hostname, fields = item
            try:
                with self.app.events.default_dispatcher(hostname=hostname) as dispatcher:
                    dispatcher.send(PROGRESS_EVENT, uuid=task_id, retry=False, **fields)
            except Exception as exc:  # monitoring must never disturb a trial
                log.debug("progress of task %s not sent: %s", task_id, exc)
            finally:
                with self._lock:
                    self._sending = None
                    self._idle.set()


class PackReport(PackObserver):
    """Watches one delivery of a pack (:func:`dnnframe.runner.run_pack`'s observer) and
    builds the task's result from what it saw, reading the store only for members it did
    not train."""

    def __init__(
        self, store: ResultStore, task_id: str | None, hostname: str, sender: ProgressSender | None
    ) -> None:
        self.store, self.task_id, self.hostname, self.sender = store, task_id, hostname, sender
        self.started = time.time()  # a trial the claim ended after this, this delivery ended
        self.won: dict[str, TrialRecord] = {}
        self.ended: dict[str, tuple[TrialState, dict[str, Any] | None, str | None]] = {}
        self.epochs: dict[str, int] = {}
        self._last_post = -float("inf")

    # ------------------------------------------------------------ PackObserver
    def claimed(self, records: list[TrialRecord]) -> None:
        self.won.update((r.id, r) for r in records)

    def epoch(self, epoch: int, metrics: dict[str, dict[str, Any]]) -> None:
        for tid in metrics:
            self.epochs[tid] = epoch
        now = time.monotonic()
        if (
            self.sender is None
            or self.task_id is None
            or now - self._last_post < PROGRESS_INTERVAL_S
        ):
            return
        self._last_post = now
        of = {tid: _max_epochs(self.won[tid]) for tid in metrics if tid in self.won}
        progress = {
            "progress": f"epoch {epoch} of {max(of.values(), default=0)}",
            "trials": {
                tid: f"{k}/{_max_epochs(self.won[tid])}"
                for tid, k in self.epochs.items()
                if tid in self.won and tid not in self.ended
            },
        }
        self.sender.post(
            self.task_id, self.hostname, {"result": repr(progress), "progress": progress}
        )

    def finished(
        self, trial_id: str, state: TrialState, result: dict[str, Any] | None, error: str | None
    ) -> None:
        self.ended[trial_id] = (state, result, error)

    # ------------------------------------------------------------ the task's result
    def close(self) -> None:
        """No progress event of this task may follow its end."""
        if self.sender is not None and self.task_id is not None:
            self.sender.flush(self.task_id)

    def result(self, trial_ids: list[str], redelivered: bool) -> dict[str, Any]:
        """The task's return value: a one-line ``summary``, whether the broker redelivered
        the message (an earlier delivery died), and each member's outcome."""
        trials = {tid: self._member(tid) for tid in dict.fromkeys(trial_ids)}
        return {"summary": _summary(trials), "redelivered": redelivered, "trials": trials}

    def _member(self, tid: str) -> dict[str, Any]:
        if tid in self.ended:
            state, result, error = self.ended[tid]
            out: dict[str, Any] = {
                "state": state.value,
                "delivery": "trained",
                "attempt": self.won[tid].attempts,
            }
            out.update(self._objective(self.won[tid].experiment_ids, result))
            if state in (TrialState.FAILED, TrialState.DIVERGED):
                out["error"] = error_line(error)
            return out
        try:
            record = self.store.get_trial(tid)
        except StoreError as exc:
            return {
                "state": None,
                "delivery": "dropped" if tid in self.won else "no-op",
                "reason": f"store unavailable: {error_line(str(exc))}",
            }
        out = {"state": record.state.value}
        if tid in self.won:
            out.update(
                delivery="dropped",
                attempt=self.won[tid].attempts,
                reason=f"trained, but {record.worker or 'the reaper'} owns it now: "
                "this delivery's result was not recorded",
            )
        elif (
            record.state in (TrialState.CANCELLED, TrialState.FAILED)
            and (record.finished_at or 0) >= self.started
        ):
            out.update(delivery="refused", reason=error_line(record.error))
        elif record.state.is_finished:
            out.update(delivery="no-op", reason=f"already {record.state.value}")
            out.update(self._objective(record.experiment_ids, record.result))
        else:
            out.update(
                delivery="no-op",
                reason=f"{record.state.value} under {record.worker or 'no worker'}",
            )
        if out["delivery"] == "no-op" and record.worker:
            out["by"] = record.worker
        return out

    def _objective(
        self, experiment_ids: list[str], result: dict[str, Any] | None
    ) -> dict[str, Any]:
        # The first experiment's (the one that created the trial). Flat keys: the repr in
        # events shows three levels of nesting only.
        if result is None or not experiment_ids:
            return {}
        metric = self._metric(experiment_ids[0])
        return {
            "metric": metric,
            "objective": value_at({"result": result}, resolve_sort_path(metric)),
        }

    def _metric(self, experiment_id: str) -> str:
        metric = _objective_metrics.get(experiment_id)
        if metric is None:
            try:
                metric = self.store.get_experiment(experiment_id).objective[0]
            except DnnframeError:  # unknown or unreadable: fall back to the default
                return DEFAULT_OBJECTIVE_METRIC
            _objective_metrics[experiment_id] = metric  # a spec never changes
        return metric

    def raise_if_failed(self, result: dict[str, Any]) -> None:
        """Raise :class:`PackFailed` when this delivery left a member FAILED."""
        trials = result["trials"]
        failed = [
            (tid, m)
            for tid, m in trials.items()
            if m["state"] == TrialState.FAILED.value and m["delivery"] in ("trained", "refused")
        ]
        if not failed:
            return
        listed = "; ".join(
            f"{tid}: {m.get('error') or m.get('reason') or TrialState.FAILED.value}"
            for tid, m in failed[:_LISTED_FAILURES]
        )
        more = (
            f"; and {len(failed) - _LISTED_FAILURES} more" if len(failed) > _LISTED_FAILURES else ""
        )
        raise PackFailed(
            f"{len(failed)} of {len(trials)} trials FAILED ({listed}{more}) [{result['summary']}]"
        )


# experiment id -> its objective metric, per process (a spec never changes)
_objective_metrics: dict[str, str] = {}


def _max_epochs(record: TrialRecord) -> int:
    return int((record.config.get("training") or {}).get("max_epochs") or 0)


def _summary(trials: dict[str, dict[str, Any]]) -> str:
    """``pack of 3: trained 2 (COMPLETE 1, FAILED 1), no-op 1 (COMPLETE 1; by w@h:7)``:
    a group names the workers that finished or run its members (``by``), if any."""
    by_delivery: dict[str, Counter[str]] = {}
    workers: dict[str, dict[str, None]] = {}
    for m in trials.values():
        by_delivery.setdefault(m["delivery"], Counter())[str(m["state"])] += 1
        if m.get("by"):
            workers.setdefault(m["delivery"], {})[m["by"]] = None
    parts = []
    for delivery, states in by_delivery.items():
        named = list(workers.get(delivery, ()))
        by = ""
        if named:
            more = (
                f" and {len(named) - _LISTED_WORKERS} more" if len(named) > _LISTED_WORKERS else ""
            )
            by = "; by " + ", ".join(named[:_LISTED_WORKERS]) + more
        parts.append(
            f"{delivery} {sum(states.values())} ("
            + ", ".join(f"{s} {n}" for s, n in sorted(states.items()))
            + by
            + ")"
        )
    return f"pack of {len(trials)}: " + ", ".join(parts)
