"""Raw ``(X, y)`` to a :class:`~.dataset.Dataset`: labels encoded, rows split
deterministically into train, validation and test, features (and regression targets)
standardised with the training split's statistics."""

from __future__ import annotations

import numpy as np

from ..exceptions import DatasetError
from .config import DatasetConfig
from .dataset import Dataset, Task, frozen


def split_indices(
    X: np.ndarray, y: np.ndarray, cfg: DatasetConfig, task: Task
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted row indices of the train, validation and test splits; the same config gives
    the same split in every process (stratified by class where every class can be)."""
    from sklearn.model_selection import train_test_split

    def stratify(labels):
        if task != "classification":
            return None
        _, counts = np.unique(labels, return_counts=True)
        return labels if counts.min() >= 2 else None

    def split(idx, size, labels):
        try:
            return train_test_split(
                idx, test_size=size, random_state=cfg.split_seed, stratify=stratify(labels)
            )
        except ValueError:  # a class too small to stratify: split without it
            return train_test_split(idx, test_size=size, random_state=cfg.split_seed)

    idx = np.arange(len(X))
    rest, test = split(idx, max(1, int(round(cfg.test_fraction * len(X)))), y)
    if cfg.validation_fraction > 0:
        n_val = max(1, int(round(cfg.validation_fraction * len(X))))
        train, val = split(rest, n_val, y[rest])
    else:
        train, val = rest, rest[:0]
    if len(train) < 1:
        raise DatasetError(
            f"dataset {cfg.name!r} has {len(X)} rows: too few to split with these fractions"
        )
    return np.sort(train), np.sort(val), np.sort(test)


def build(
    X: np.ndarray, y: np.ndarray, cfg: DatasetConfig, task: Task, fingerprint: str
) -> Dataset:
    """The read-only Dataset of raw ``X`` and ``y`` under ``cfg``'s split and scaling."""
    if X.ndim != 2 or len(X) != len(y):
        raise DatasetError(
            f"dataset {cfg.name!r}: features must be a 2-D array with one label per row"
        )
    if task == "classification":
        classes, y = np.unique(y, return_inverse=True)
        y = y.astype(np.int64)
        n_classes: int | None = max(2, len(classes))
    else:
        y = y.astype(np.float64)
        n_classes = None
    train, val, test = split_indices(X, y, cfg, task)
    X_train, X_val, X_test = X[train], X[val], X[test]
    y_train, y_val, y_test = y[train], y[val], y[test]
    if task == "regression":
        # targets are standardised with the training statistics, so losses are comparable
        mu, sd = y_train.mean(), y_train.std() or 1.0
        y_train, y_val, y_test = (y_train - mu) / sd, (y_val - mu) / sd, (y_test - mu) / sd
    if cfg.standardize:
        mean = X_train.mean(axis=0)
        std = X_train.std(axis=0)
        std[std == 0] = 1.0
        X_train, X_val, X_test = (X_train - mean) / std, (X_val - mean) / std, (X_test - mean) / std
    arrays = [np.ascontiguousarray(a) for a in (X_train, y_train, X_val, y_val, X_test, y_test)]
    return frozen(cfg.name, task, arrays, n_classes, fingerprint)
