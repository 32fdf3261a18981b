"""A trial's data as the engine trains on it: splits in the engine's dtype, targets in the
form the loss needs, and the graph-shape fields that follow from the data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pytensor

from .backend import require
from .pytensor_wall import configure

if TYPE_CHECKING:
    from ..spec import TrialConfig


def targets(
    y: np.ndarray, loss: str, classification: bool, n_outputs: int, dtype: str
) -> np.ndarray:
    """Labels for the softmax loss, one-hot codes (squared error on classes) or columns."""
    if loss == "softmax_crossentropy":
        return y.astype(np.int64)
    if classification:  # squared error on class labels: regress one-hot codes
        return np.eye(n_outputs, dtype=dtype)[y]
    return y.reshape(-1, 1).astype(dtype)


def prepare_data(
    config: TrialConfig,
) -> tuple[Any, dict[str, Any], dict[str, tuple[np.ndarray, np.ndarray]]]:
    """Load ``config``'s dataset: (dataset, the graph-shape fields that follow from the data
    and the config, ``{"train"|"val"|"test": (X, y)}`` in the engine's dtype)."""
    from ..datasets import load_dataset

    require()  # a GPU that was asked for and cannot be used fails here, before any work
    model_cfg = config.model
    data = load_dataset(config.dataset, model_cfg.loss)
    dtype = str(pytensor.config.floatX)
    classification = data.task == "classification"
    shape_args = dict(
        n_features=data.n_features,
        n_outputs=data.n_outputs,
        activation=model_cfg.activation,
        dropout=model_cfg.dropout > 0,
        grad_clip=config.training.grad_clip is not None,
        loss=model_cfg.loss,
        classification=classification,
        optimizer=config.training.optimizer,
        dtype=dtype,
        mode=configure().mode,
    )
    splits = {}
    for split in ("train", "val", "test"):
        X, y = getattr(data, f"X_{split}"), getattr(data, f"y_{split}")
        splits[split] = (
            np.ascontiguousarray(X, dtype=dtype),
            targets(y, model_cfg.loss, classification, data.n_outputs, dtype),
        )
    return data, shape_args, splits
