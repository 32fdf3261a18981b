"""PackLedger's epochs: entries built once, shared by the store's write and the histories,
and JSON's values only (a non-finite metric is None)."""

from __future__ import annotations

import math

import numpy as np

from dnnframe.engine.ledger import PackLedger
from dnnframe.spec import TrialConfig


def _ledger(k: int) -> PackLedger:
    configs = [
        TrialConfig.model_validate(
            {"dataset": {"name": "iris"}, "seed": s, "training": {"max_epochs": 5}}
        )
        for s in range(k)
    ]
    ledger = PackLedger(configs, [None] * k)
    ledger.initial_loss = np.ones(k)
    return ledger


def test_one_set_of_entries_serves_the_report_and_the_histories():
    ledger = _ledger(3)
    report = ledger.record(
        1,
        np.zeros(3, dtype=bool),
        {
            "train_loss": np.array([0.5, 0.25, 0.125]),
            "train_accuracy": np.array([1.0, 0.5, 0.0]),
            "val_loss": np.array([0.5, 0.5, 0.5]),
            "val_accuracy": None,
        },
        share=0.25,
    )
    entries = report.entries()
    assert entries is ledger.epochs[0].entries()
    assert entries[1] == {
        "epoch": 1,
        "train_loss": 0.25,
        "train_accuracy": 0.5,
        "val_loss": 0.5,
        "val_accuracy": None,
        "seconds": 0.25,
    }
    assert [h[0] for h in ledger.histories()] == entries
    copy = report.entry(1)  # a caller's own dict
    copy["train_loss"] = 9.0
    assert entries[1]["train_loss"] == 0.25


def test_a_non_finite_value_is_none_and_its_member_diverges():
    ledger = _ledger(3)
    report = ledger.record(
        1,
        np.zeros(3, dtype=bool),
        {
            "train_loss": np.array([0.5, math.inf, 0.5]),
            "train_accuracy": np.array([1.0, 1.0, 1.0]),
            "val_loss": np.array([0.5, 0.5, math.nan]),
            "val_accuracy": None,
        },
        share=0.5,
    )
    assert report.reported == [True, False, False]
    entries = ledger.epochs[0].entries()
    assert entries[1]["train_loss"] is None and entries[2]["val_loss"] is None
    assert ledger.status_of(1) == ledger.status_of(2) == "DIVERGED"
    # diverged members keep the epoch they diverged in, its values JSON can hold
    histories = ledger.histories()
    assert histories[2] == [entries[2]] and histories[1][0]["epoch"] == 1


def test_a_stop_with_the_last_epoch_leaves_the_member_complete():
    ledger = _ledger(2)  # max_epochs 5
    columns = {
        "train_loss": np.array([0.5, 0.5]),
        "train_accuracy": np.array([1.0, 1.0]),
        "val_loss": np.array([0.5, 0.5]),
        "val_accuracy": None,
    }
    for epoch in range(1, 5):
        ledger.advance(
            epoch, ledger.record(epoch, np.zeros(2, dtype=bool), columns, 0.1), [False, False]
        )
    # both are asked to stop with their last epoch (a cancel that lands as they finish)
    report = ledger.record(5, np.zeros(2, dtype=bool), columns, 0.1)
    ledger.advance(5, report, [True, True])
    assert ledger.status_of(0) == ledger.status_of(1) == "COMPLETE"
    assert not ledger.running.any()


def test_a_stop_before_the_last_epoch_cancels():
    ledger = _ledger(1)
    columns = {
        "train_loss": np.array([0.5]),
        "train_accuracy": np.array([1.0]),
        "val_loss": np.array([0.5]),
        "val_accuracy": None,
    }
    ledger.advance(1, ledger.record(1, np.zeros(1, dtype=bool), columns, 0.1), [False])
    ledger.advance(2, ledger.record(2, np.zeros(1, dtype=bool), columns, 0.1), [True])
    assert ledger.status_of(0) == "CANCELLED" and not ledger.running.any()
