"""What the engine's equivalence tests share: a trial trained one way must give the same
result as trained another (in a pack or alone, in a shared graph or its own), within
:data:`REL` relative in float64, and accuracies exactly."""

from __future__ import annotations

import math

REL = 1e-9


def close(a, b) -> bool:
    if a is None or b is None:
        return a is b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or abs(a - b) <= REL * max(abs(a), abs(b))


def assert_same(packed, alone) -> None:
    assert packed.status == alone.status
    assert packed.epochs_run == alone.epochs_run
    assert packed.best_epoch == alone.best_epoch
    assert packed.stopped_early == alone.stopped_early
    assert packed.diverged_epoch == alone.diverged_epoch
    assert packed.n_params == alone.n_params
    assert packed.notes == alone.notes
    for name, value in alone.metrics.items():
        if name.endswith("accuracy"):
            assert packed.metrics[name] == value, name
        else:
            assert close(packed.metrics[name], value), (name, packed.metrics[name], value)
    assert len(packed.history) == len(alone.history)
    for hp, ha in zip(packed.history, alone.history):
        for name in ("epoch", "train_accuracy", "val_accuracy"):
            assert hp[name] == ha[name], (name, hp, ha)
        for name in ("train_loss", "val_loss"):
            assert close(hp[name], ha[name]), (name, hp, ha)
