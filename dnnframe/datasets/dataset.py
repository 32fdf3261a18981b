"""What a loaded dataset is: its task and its split, standardised, read-only arrays."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

Task = Literal["classification", "regression"]

# The arrays of a Dataset, in the order :func:`frozen` takes them (and the disk cache keeps).
ARRAYS = ("X_train", "y_train", "X_val", "y_val", "X_test", "y_test")


@dataclass(frozen=True)
class Dataset:
    """Split, standardised arrays ready for training (float64; labels int64 or float64)."""

    name: str
    task: Task
    X_train: np.ndarray
    y_train: np.ndarray
    X_val: np.ndarray
    y_val: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    n_classes: int | None
    fingerprint: str

    @property
    def n_features(self) -> int:
        return int(self.X_train.shape[1])

    @property
    def n_outputs(self) -> int:
        if self.task != "classification":
            return 1
        assert self.n_classes is not None  # every classification dataset counts its classes
        return self.n_classes


def frozen(
    name: str, task: Task, arrays: list[np.ndarray], n_classes: int | None, fingerprint: str
) -> Dataset:
    """A Dataset of ``arrays`` (in :data:`ARRAYS` order), made read-only: it is shared by
    every trial in this process, so nobody may mutate it."""
    for a in arrays:
        a.setflags(write=False)
    X_train, y_train, X_val, y_val, X_test, y_test = arrays
    return Dataset(
        name,
        task,
        X_train,
        y_train,
        X_val,
        y_val,
        X_test,
        y_test,
        n_classes=n_classes,
        fingerprint=fingerprint,
    )
