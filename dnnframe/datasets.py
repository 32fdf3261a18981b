"""Datasets: which data a trial trains on, how it is split, and the per-process cache.

:class:`DatasetConfig` says which data (a built-in of :data:`REGISTRY` or a user CSV) and
how to split it. Splits are deterministic: the same config and the same content give
bit-identical arrays in every process.

>>> data = load_dataset(DatasetConfig(name="iris", split_seed=1))
>>> data.n_features, data.n_classes, len(data.X_train) + len(data.X_val) + len(data.X_test)
(4, 3, 150)
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.metadata
import json
import logging
import os
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from . import settings
from .csv_data import (
    MAX_CSV_BYTES,
    UPLOAD_ID,
    CsvSummary,
    Task,
    data_dir,
    parse_csv,
    upload_path,
    validate_csv_bytes,
)
from .dataset_registry import REGISTRY, DatasetInfo, list_datasets
from .exceptions import DatasetError, brief
from .jsonsafe import canonical_json

__all__ = [
    "MAX_CSV_BYTES",
    "REGISTRY",
    "CsvSummary",
    "Dataset",
    "DatasetConfig",
    "DatasetInfo",
    "Task",
    "data_dir",
    "dataset_fingerprint",
    "dataset_task",
    "list_datasets",
    "load_dataset",
    "parse_csv",
    "upload_path",
    "validate_csv_bytes",
    "validate_dataset_config",
]

log = logging.getLogger(__name__)

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
    label_column: str | None = Field(None, max_length=500,
                                     description="the CSV column holding the label (name=csv)")
    test_fraction: Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)] = Field(
        0.2, description="share of the rows held out for the test metrics")
    validation_fraction: Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)] = Field(
        0.1, description="share held out for validation (early stopping, ASHA)")
    standardize: bool = Field(True, description="scale features to zero mean, unit variance "
                                                "(fitted on the training split)")
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


def _did_you_mean(word: str, known: list[str]) -> str:
    close = difflib.get_close_matches(word, known, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


# --------------------------------------------------------------------------- validation
def dataset_task(cfg: DatasetConfig, loss: str = "softmax_crossentropy") -> Task:
    """Classification or regression: fixed by a built-in dataset, chosen by the loss for a CSV."""
    if cfg.name == "csv":
        return "regression" if loss == "squared_error" else "classification"
    return REGISTRY[cfg.name].task


def validate_dataset_config(cfg: DatasetConfig) -> None:
    """Check a dataset config without loading data; raises ValueError naming the rule."""
    if cfg.name == "csv":
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
        where = ".".join(brief(p) if isinstance(p, str) and len(p) > 40 else str(p)
                         for p in first["loc"])
        message = first["msg"]
        if first["type"] == "extra_forbidden":
            key = str(first["loc"][-1])
            message = "unknown parameter" + _did_you_mean(key, list(params_model.model_fields))
        raise ValueError(f"params.{where}: {message}" if where else message) from None


# --------------------------------------------------------------------------- content
def _csv_file(cfg: DatasetConfig) -> Path:
    path = upload_path(cfg.upload) if cfg.upload else Path(cfg.path or "")
    if not path.is_file():
        what = f"uploaded dataset {brief(cfg.upload)}" if cfg.upload else f"CSV file {str(path)!r}"
        raise DatasetError(f"{what} not found")
    return path


def _csv_fingerprint(data: bytes) -> str:
    return "csv-" + hashlib.sha256(data).hexdigest()[:24]


def _raw(
    cfg: DatasetConfig, task: Task, csv_bytes: bytes | None = None
) -> tuple[np.ndarray, np.ndarray]:
    if cfg.name == "csv":
        data = csv_bytes if csv_bytes is not None else _csv_file(cfg).read_bytes()
        X, y, _ = parse_csv(data, cfg.label_column or "", task)
        return X, y
    info = REGISTRY.get(cfg.name)
    if info is None:
        raise DatasetError(f"unknown dataset {brief(cfg.name)}")
    try:
        params = info.params.model_validate(cfg.params)
        X, y = info.load(params)
    except DatasetError:
        raise  # already says which dataset and why
    except (ValidationError, ValueError) as exc:
        raise DatasetError(f"dataset {cfg.name!r}: {exc}") from None
    return np.asarray(X, dtype=np.float64), np.asarray(y)


def _hash_arrays(*arrays: np.ndarray) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str((a.dtype.str, a.shape)).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:24]


def dataset_fingerprint(cfg: DatasetConfig, loss: str = "softmax_crossentropy") -> str:
    """Hash of the data's content (not of its name): a changed CSV gives a new fingerprint."""
    if cfg.name == "csv":
        return _csv_fingerprint(_csv_file(cfg).read_bytes())
    return _fingerprint_builtin(cfg.name, _params_key(cfg.params))


def _params_key(params: dict[str, Any]) -> str:
    return canonical_json(params)


_builtin_fingerprints: dict[tuple[str, str], str] = {}


def _fingerprint_builtin(name: str, params_key: str) -> str:
    # generated and shipped data never change within a process: hash each once, and keep
    # the hash on disk too, so a process that only submits never loads the data
    key = (name, params_key)
    if key not in _builtin_fingerprints:
        path = _disk_path("fingerprint", [name, params_key], ".json")
        found = _read_disk(path, lambda f: json.load(f)["fingerprint"])
        if not isinstance(found, str):
            cfg = DatasetConfig(name=name, params=json.loads(params_key))
            X, y = _raw(cfg, REGISTRY[name].task)
            found = f"{name}-" + _hash_arrays(X, y)
            _write_disk(path, lambda f: f.write(json.dumps({"fingerprint": found}).encode()))
        _builtin_fingerprints[key] = found
    return _builtin_fingerprints[key]


# --------------------------------------------------------------------------- disk cache
# Built-in data come from scikit-learn, whose import costs a fresh process about a second
# (SciPy parses docstrings as it loads), more than a small sweep's training. Fingerprints
# and split, standardised arrays are kept per host, keyed by what determines them (the
# dataset config, its content fingerprint, the scikit-learn and NumPy versions), so a
# submitting process or a fresh worker does not import scikit-learn for data seen before.
DISK_FORMAT = "1"
_DISK_PACKAGES = ("scikit-learn", "numpy")
_ARRAYS = ("X_train", "y_train", "X_val", "y_val", "X_test", "y_test")


def disk_cache_dir() -> Path:
    """``$DNNFRAME_CACHE_DIR/datasets``, else ``$XDG_CACHE_HOME/dnnframe/datasets`` (by
    default ``~/.cache/dnnframe/datasets``)."""
    base = (settings.get().cache_dir or "").strip()
    if base:
        return Path(base) / "datasets"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "dnnframe" / "datasets"


def _versions() -> list[str]:
    out = []
    for name in _DISK_PACKAGES:
        try:
            out.append(importlib.metadata.version(name))
        except importlib.metadata.PackageNotFoundError:
            out.append("-")
    return out


def _disk_path(kind: str, key: list[str], suffix: str) -> Path:
    text = "|".join([DISK_FORMAT, kind, *key, *_versions()])
    return disk_cache_dir() / f"{kind}-{hashlib.sha256(text.encode()).hexdigest()[:32]}{suffix}"


def _read_disk(path: Path, read: Any) -> Any:
    """``read(file)`` of the cached file, or None when it is missing or unreadable (a
    damaged file is simply rebuilt and replaced)."""
    try:
        with path.open("rb") as f:
            return read(f)
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - any damage is a miss
        log.debug("dataset cache file %s unreadable; rebuilding it", path, exc_info=True)
        return None


def _write_disk(path: Path, write: Any) -> None:
    """Write through a temporary file renamed into place (readers never see a part); a
    cache that cannot be written is only slower."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                write(f)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        log.debug("dataset cache %s not writable", path, exc_info=True)


def _load_built(path: Path, cfg: DatasetConfig, task: Task, fingerprint: str) -> Dataset | None:
    def read(f: Any) -> Dataset | None:
        with np.load(f, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            if meta != {"name": cfg.name, "task": task, "fingerprint": fingerprint,
                        "n_classes": meta.get("n_classes")}:
                return None
            arrays = [np.ascontiguousarray(z[name]) for name in _ARRAYS]
        return _frozen(cfg.name, task, arrays, meta["n_classes"], fingerprint)

    return _read_disk(path, read)


def _save_built(path: Path, data: Dataset) -> None:
    meta = {"name": data.name, "task": data.task, "fingerprint": data.fingerprint,
            "n_classes": data.n_classes}
    _write_disk(path, lambda f: np.savez(f, meta=np.array(json.dumps(meta)),
                                         **{name: getattr(data, name) for name in _ARRAYS}))


# --------------------------------------------------------------------------- splitting
def _split(X: np.ndarray, y: np.ndarray, cfg: DatasetConfig, task: Task):
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


def _build(cfg: DatasetConfig, task: Task, fingerprint: str, csv_bytes: bytes | None) -> Dataset:
    X, y = _raw(cfg, task, csv_bytes)
    if X.ndim != 2 or len(X) != len(y):
        raise DatasetError(
            f"dataset {cfg.name!r}: features must be a 2-D array with one label per row"
        )
    if task == "classification":
        classes, y = np.unique(y, return_inverse=True)
        y = y.astype(np.int64)
        n_classes = max(2, len(classes))
    else:
        y = y.astype(np.float64)
        n_classes = None
    train, val, test = _split(X, y, cfg, task)
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
    return _frozen(cfg.name, task, arrays, n_classes, fingerprint)


def _frozen(name: str, task: Task, arrays: list[np.ndarray], n_classes: int | None,
            fingerprint: str) -> Dataset:
    """A Dataset of ``arrays`` (in :data:`_ARRAYS` order), made read-only: it is shared by
    every trial in this process, so nobody may mutate it."""
    for a in arrays:
        a.setflags(write=False)
    X_train, y_train, X_val, y_val, X_test, y_test = arrays
    return Dataset(name, task, X_train, y_train, X_val, y_val, X_test, y_test,
                   n_classes=n_classes, fingerprint=fingerprint)


# --------------------------------------------------------------------------- cache
# Keyed by the data's content fingerprint (as trial ids are), so a CSV edited in place is
# read again by a long-lived worker instead of being served from the cache.
_CACHE_SIZE = 16
_cache: OrderedDict[tuple[str, str, str], Dataset] = OrderedDict()
_cache_lock = threading.Lock()


def load_dataset(cfg: DatasetConfig, loss: str = "softmax_crossentropy") -> Dataset:
    """Load, split and (optionally) standardise a dataset; cached per process and on disk
    (:func:`disk_cache_dir`) by content."""
    task = dataset_task(cfg, loss)
    csv_bytes = None
    if cfg.name == "csv":
        # read once: the fingerprint and the arrays come from the same bytes
        csv_bytes = _csv_file(cfg).read_bytes()
        fingerprint = _csv_fingerprint(csv_bytes)
    else:
        fingerprint = _fingerprint_builtin(cfg.name, _params_key(cfg.params))
    key = (cfg.model_dump_json(), task, fingerprint)
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    path = _disk_path("dataset", list(key), ".npz")
    data = _load_built(path, cfg, task, fingerprint)
    if data is None:
        data = _build(cfg, task, fingerprint, csv_bytes)
        _save_built(path, data)
    with _cache_lock:
        _cache[key] = data
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return data
