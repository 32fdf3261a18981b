"""A pack's bookkeeping as arrays over its members: each epoch's metrics, divergence, early
stopping, cancellation and the end of training, and each member's history built once at the
end. A pack of thousands of tiny trials spent more time in per-member Python each epoch
(a dict per member, a divergence check per member, an early-stopping step per member) than
in its compiled calls; here each of those is a few array operations per epoch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..metrics import direction
from .result import CANCELLED, COMPLETE, DIVERGED, EPOCH_COLUMNS, EpochReport

if TYPE_CHECKING:
    from ..spec import TrialConfig

_STATUSES = (COMPLETE, DIVERGED, CANCELLED)
_COMPLETE, _DIVERGED, _CANCELLED = range(3)


class PackLedger:
    """What each member of a pack has done so far, as arrays of length K.

    Args:
        configs: the members' configs (their max_epochs, early stopping and divergence
            bound are read once).
        monitors: the metric each member's early stopping watches (None: no early
            stopping), as :func:`dnnframe.engine.stopping.monitor_for` chose it.
    """

    def __init__(self, configs: list[TrialConfig], monitors: list[str | None]) -> None:
        K = len(configs)
        self.K = K
        self.running = np.ones(K, dtype=bool)
        self.status = np.full(K, _COMPLETE, dtype=np.int8)
        self.diverged_epoch = np.zeros(K, dtype=np.int64)  # 0: never
        self.non_finite = np.zeros(K, dtype=bool)  # diverged on a NaN/inf step: no metrics
        self.stopped_early = np.zeros(K, dtype=bool)
        self.epochs_run = np.zeros(K, dtype=np.int64)
        self.train_seconds = np.zeros(K)
        self.initial_loss = np.full(K, np.nan)
        self.max_epochs = np.array([c.training.max_epochs for c in configs], dtype=np.int64)
        factors = [c.training.divergence_factor for c in configs]
        self.factor = np.array([np.nan if f is None else f for f in factors], dtype=np.float64)
        # early stopping: members grouped by the metric they watch
        self.monitors = monitors
        self.by_monitor = {
            m: np.array([k for k, x in enumerate(monitors) if x == m])
            for m in sorted({m for m in monitors if m})
        }
        es = [c.training.early_stopping for c in configs]
        self.patience = np.array([e.patience if e else 0 for e in es], dtype=np.int64)
        self.min_delta = np.array([e.min_delta if e else 0.0 for e in es], dtype=np.float64)
        self.best_value = np.full(K, np.nan)
        self.has_best = np.zeros(K, dtype=bool)
        self.best_epoch = np.zeros(K, dtype=np.int64)
        self.since_best = np.zeros(K, dtype=np.int64)
        self.epochs: list[EpochReport] = []  # every epoch, every member that trained in it

    def record(
        self,
        epoch: int,
        non_finite: np.ndarray,
        columns: dict[str, np.ndarray | None],
        share: float,
    ) -> EpochReport:
        """Record an epoch of the members still running: their metrics (``columns``: the
        epoch metrics of :data:`EPOCH_COLUMNS` but ``seconds``, arrays over all members, or
        None where the pack has no such metric), who met a non-finite loss in a step
        (``non_finite``), and each one's share of the epoch's seconds. A member diverges on a
        non-finite step (its entry has no metrics), on a non-finite validation loss, or when
        a loss exceeds its ``divergence_factor`` times the larger of its loss at
        initialisation and 1. Returns what the members that go on report."""
        ran = self.running.copy()
        self.train_seconds[ran] += share
        self.epochs_run[ran] = epoch
        val = columns.get("val_loss")
        with np.errstate(invalid="ignore"):
            bad = ran & non_finite
            exploded = np.zeros(self.K, dtype=bool)
            if val is not None:
                exploded |= ~np.isfinite(val)
            bound = self.factor * np.maximum(self.initial_loss, 1.0)
            bounded = np.isfinite(self.factor) & np.isfinite(self.initial_loss)
            over = columns["train_loss"] > bound
            if val is not None:
                over |= val > bound
            exploded |= bounded & over
        diverged = ran & (bad | exploded)
        self.non_finite |= bad
        self.status[diverged] = _DIVERGED
        self.diverged_epoch[diverged] = epoch
        self.running &= ~diverged
        lists: dict[str, list[float | None] | None] = {
            name: None if (column := columns.get(name)) is None else _plain_list(column)
            for name in EPOCH_COLUMNS
            if name != "seconds"
        }
        lists["seconds"] = [share] * self.K
        stored = EpochReport(epoch, lists, ran.tolist())  # one set of entries for both
        self.epochs.append(stored)
        return stored.reporting((ran & ~diverged).tolist())

    def advance(self, epoch: int, report: EpochReport, stop: list[bool] | None) -> np.ndarray:
        """Early stopping, cancellation (``stop``: one flag per member from ``on_epoch``)
        and max_epochs for the members that reported; returns who improved on their best."""
        reported = np.array(report.reported, dtype=bool)
        improved = np.zeros(self.K, dtype=bool)
        for metric, idx in self.by_monitor.items():
            values = report.columns[metric]
            if values is None:
                continue
            idx = idx[reported[idx]]
            value = np.asarray(values, dtype=np.float64)[idx]
            best, delta = self.best_value[idx], self.min_delta[idx]
            with np.errstate(invalid="ignore"):
                beats = value > best + delta if direction(metric) == "max" else value < best - delta
            better = ~self.has_best[idx] | beats
            won, lost = idx[better], idx[~better]
            self.best_value[won], self.best_epoch[won], self.since_best[won] = (
                value[better],
                epoch,
                0,
            )
            self.has_best[won] = improved[won] = True
            self.since_best[lost] += 1
        # a stop that comes with a member's last epoch (a cancel that lands as it finishes)
        # stops nothing: the member trained in full and ends as it would have
        last = epoch >= self.max_epochs
        stopped = reported & ~last & (np.array(stop, dtype=bool) if stop is not None else False)
        self.status[stopped] = _CANCELLED
        watching = np.array([m is not None for m in self.monitors], dtype=bool)
        early = reported & ~stopped & watching & (self.since_best >= self.patience)
        self.stopped_early |= early
        done = reported & ~stopped & ~early & (epoch >= self.max_epochs)
        self.running &= ~(stopped | early | done)
        return improved

    def status_of(self, k: int) -> str:
        return _STATUSES[self.status[k]]

    def restore(self) -> np.ndarray:
        """Who ends with the weights of their best epoch: members with a best that did not
        diverge."""
        return self.has_best & (self.status != _DIVERGED)

    def histories(self) -> list[list[dict[str, Any]]]:
        """Each member's curve, one entry per epoch it trained (a non-finite step's epoch
        with no metrics), built once."""
        out: list[list[dict[str, Any]]] = [[] for _ in range(self.K)]
        nan_epoch = np.where(self.non_finite, self.diverged_epoch, 0).tolist()
        for report in self.epochs:
            entries = report.entries()  # shared with what was written to the store
            for k in report.indices():
                row = entries[k]
                if nan_epoch[k] == report.epoch:
                    row = {**row, **dict.fromkeys(EPOCH_COLUMNS[:-1])}  # all but the seconds
                out[k].append(row)
        return out


def _plain_list(values: np.ndarray) -> list[float | None]:
    """``values`` as floats, None where not finite (what a stored curve holds: JSON has no
    NaN), checked in C."""
    out = values.tolist()
    finite = np.isfinite(values)
    if not finite.all():
        for k in np.flatnonzero(~finite).tolist():
            out[k] = None
    return out
