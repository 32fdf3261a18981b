"""Which data a trial trains on and how it is split (:class:`DatasetConfig`), and the
checks of a config that need no data."""

from __future__ import annotations

import difflib
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..exceptions import brief
from .csv_files import UPLOAD_ID
from .dataset import Task
from .registry import REGISTRY

# Test and validation together may take at most this share of the rows, so training keeps
# at least a tenth of them.
MAX_HELD_OUT = 0.9


class DatasetConfig(BaseModel):
    """Which data to train on and how to split it (resolved: no search spaces)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=200)
    params: dict[str, Any] = Field(default_factory=dict)
    path: str | None = Field(None, max_length=4096, description="CSV file (name=csv)")
    upload: str | None = Field(None, max_length=64, description="uploaded CSV id (name=csv)")
    label_column: str | None = Field(
        None, max_length=500, description="the CSV column holding the label (name=csv)"
    )
    test_fraction: Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)] = Field(
        0.2, description="share of the rows held out for the test metrics"
    )
    validation_fraction: Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)] = Field(
        0.1, description="share held out for validation (early stopping, ASHA)"
    )
    standardize: bool = Field(
        True,
        description="scale features to zero mean, unit variance (fitted on the training split)",
    )
    split_seed: int = Field(0, ge=0, le=2**32 - 1, description="seed of the split")

    @model_validator(mode="after")
    def _check(self) -> DatasetConfig:
        if self.test_fraction + self.validation_fraction >= MAX_HELD_OUT:
            raise ValueError(
                f"test_fraction + validation_fraction must be < {MAX_HELD_OUT}, but got "
                f"{self.test_fraction} + {self.validation_fraction}"
            )
        validate_dataset_config(self)
        return self


def _did_you_mean(word: str, known: list[str]) -> str:
    close = difflib.get_close_matches(word, known, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def csv_task(loss: str) -> Task:
    """A CSV's task, which its loss chooses: regression under squared error, else classes."""
    return "regression" if loss == "squared_error" else "classification"


def dataset_task(cfg: DatasetConfig, loss: str = "softmax_crossentropy") -> Task:
    """Classification or regression: fixed by a built-in dataset, chosen by the loss for a CSV."""
    if cfg.name == "csv":
        return csv_task(loss)
    return REGISTRY[cfg.name].task


def validate_dataset_config(cfg: DatasetConfig) -> None:
    """Check a dataset config without loading data; raises ValueError naming the rule."""
    if cfg.name == "csv":
        _validate_csv_config(cfg)
        return
    if cfg.name not in REGISTRY:
        known = [*REGISTRY, "csv"]
        raise ValueError(
            f"unknown dataset {brief(cfg.name)}{_did_you_mean(cfg.name, known)}; "
            f"known: {', '.join(known)}"
        )
    if cfg.path or cfg.upload or cfg.label_column:
        raise ValueError(
            f"path, upload and label_column apply to name: csv only, not to {brief(cfg.name)}"
        )
    params_model = REGISTRY[cfg.name].params
    try:
        params_model.model_validate(cfg.params)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(
            brief(p) if isinstance(p, str) and len(p) > 40 else str(p) for p in first["loc"]
        )
        message = first["msg"]
        if first["type"] == "extra_forbidden":
            key = str(first["loc"][-1])
            message = "unknown parameter" + _did_you_mean(key, list(params_model.model_fields))
        raise ValueError(f"params.{where}: {message}" if where else message) from None


def _validate_csv_config(cfg: DatasetConfig) -> None:
    if bool(cfg.path) == bool(cfg.upload):
        raise ValueError("a csv dataset needs exactly one of path or upload")
    if not cfg.label_column:
        raise ValueError("a csv dataset needs label_column")
    if cfg.params:
        raise ValueError("a csv dataset takes no params")
    if cfg.upload and not UPLOAD_ID.match(cfg.upload):
        raise ValueError(
            f"upload must be an upload id (8-64 hex characters), but got {brief(cfg.upload)}"
        )
