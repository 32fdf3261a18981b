"""Dataset registry: scikit-learn's shipped data, synthetic generators, MNIST-1D, user CSV.

Everything is generated or read offline. Splits are deterministic: the same
:class:`~dnnframe.spec.DatasetConfig` gives bit-identical arrays in every process.

>>> from dnnframe.spec import DatasetConfig
>>> data = load_dataset(DatasetConfig(name="iris", split_seed=1))
>>> data.n_features, data.n_classes, len(data.X_train) + len(data.X_val) + len(data.X_test)
(4, 3, 150)
"""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .exceptions import DatasetError

if TYPE_CHECKING:
    from .spec import DatasetConfig

Task = Literal["classification", "regression"]
UPLOAD_ID = re.compile(r"^[a-f0-9]{8,64}$")
MAX_CSV_BYTES = 50 * 1024 * 1024


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
        return self.n_classes if self.task == "classification" else 1


# --------------------------------------------------------------------------- generators
class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    random_state: int = Field(0, ge=0, le=2**32 - 1)


class _NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MoonsParams(_Params):
    n_samples: int = Field(1000, ge=10, le=1_000_000)
    noise: float = Field(0.2, ge=0, le=10, allow_inf_nan=False)


class CirclesParams(_Params):
    n_samples: int = Field(1000, ge=10, le=1_000_000)
    noise: float = Field(0.1, ge=0, le=10, allow_inf_nan=False)
    factor: float = Field(0.5, gt=0, lt=1, allow_inf_nan=False)


class SpiralsParams(_Params):
    n_samples: int = Field(1000, ge=10, le=1_000_000)
    n_classes: int = Field(2, ge=2, le=20)
    turns: float = Field(1.5, gt=0, le=10, allow_inf_nan=False)
    noise: float = Field(0.2, ge=0, le=10, allow_inf_nan=False)


class ClassificationParams(_Params):
    n_samples: int = Field(1000, ge=10, le=1_000_000)
    n_features: int = Field(20, ge=1, le=10_000)
    n_informative: int = Field(10, ge=1, le=10_000)
    n_redundant: int = Field(0, ge=0, le=10_000)
    n_classes: int = Field(2, ge=2, le=1000)
    class_sep: float = Field(1.0, gt=0, le=100, allow_inf_nan=False)


class RegressionParams(_Params):
    n_samples: int = Field(1000, ge=10, le=1_000_000)
    n_features: int = Field(10, ge=1, le=10_000)
    n_informative: int = Field(5, ge=1, le=10_000)
    noise: float = Field(0.1, ge=0, le=1000, allow_inf_nan=False)


class Mnist1dParams(_Params):
    num_samples: int = Field(5000, ge=100, le=200_000)
    random_state: int = Field(42, ge=0, le=2**32 - 1)


def _sk(loader: str, task: Task) -> Callable[[Any], tuple[np.ndarray, np.ndarray]]:
    def load(_params: Any) -> tuple[np.ndarray, np.ndarray]:
        import sklearn.datasets as skd

        bunch = getattr(skd, loader)()
        return bunch.data, bunch.target

    return load


def _moons(p: MoonsParams):
    from sklearn.datasets import make_moons

    return make_moons(n_samples=p.n_samples, noise=p.noise, random_state=p.random_state)


def _circles(p: CirclesParams):
    from sklearn.datasets import make_circles

    return make_circles(n_samples=p.n_samples, noise=p.noise, factor=p.factor, random_state=p.random_state)


def _spirals(p: SpiralsParams):
    rng = np.random.default_rng(p.random_state)
    per_class = [p.n_samples // p.n_classes + (1 if i < p.n_samples % p.n_classes else 0)
                 for i in range(p.n_classes)]
    xs, ys = [], []
    for k, n in enumerate(per_class):
        r = np.linspace(0.05, 1.0, n)
        theta = 2 * math.pi * p.turns * r + 2 * math.pi * k / p.n_classes
        pts = np.stack([r * np.cos(theta), r * np.sin(theta)], axis=1)
        xs.append(pts + rng.normal(scale=p.noise * 0.1, size=pts.shape))
        ys.append(np.full(n, k))
    return np.concatenate(xs), np.concatenate(ys)


def _classification(p: ClassificationParams):
    from sklearn.datasets import make_classification

    if p.n_informative + p.n_redundant > p.n_features:
        raise ValueError(
            f"n_informative + n_redundant <= n_features must hold, but got "
            f"{p.n_informative} + {p.n_redundant} > {p.n_features}")
    if p.n_classes > 2 ** p.n_informative:
        raise ValueError(f"n_classes <= 2**n_informative must hold, but got n_classes={p.n_classes}, n_informative={p.n_informative}")
    return make_classification(n_samples=p.n_samples, n_features=p.n_features, n_informative=p.n_informative,
                               n_redundant=p.n_redundant, n_classes=p.n_classes, class_sep=p.class_sep,
                               random_state=p.random_state)


def _regression(p: RegressionParams):
    from sklearn.datasets import make_regression

    if p.n_informative > p.n_features:
        raise ValueError(f"n_informative <= n_features must hold, but got {p.n_informative} > {p.n_features}")
    return make_regression(n_samples=p.n_samples, n_features=p.n_features, n_informative=p.n_informative,
                           noise=p.noise, random_state=p.random_state)


def _mnist1d(p: Mnist1dParams):
    try:
        from mnist1d.data import get_dataset_args, make_dataset
    except ImportError:
        raise DatasetError("dataset 'mnist1d' needs the optional extra: pip install 'dnnframe[mnist1d]'") from None
    args = get_dataset_args()
    args.num_samples, args.seed = p.num_samples, p.random_state
    data = make_dataset(args)  # generated offline from the package's templates
    X = np.concatenate([data["x"], data["x_test"]])
    y = np.concatenate([data["y"], data["y_test"]])
    return X, y


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    task: Task
    params: type[BaseModel]
    load: Callable[[Any], tuple[np.ndarray, np.ndarray]]
    description: str


REGISTRY: dict[str, DatasetInfo] = {
    info.name: info
    for info in [
        DatasetInfo("digits", "classification", _NoParams, _sk("load_digits", "classification"),
                    "8x8 handwritten digits, 1797 samples, 64 features, 10 classes (scikit-learn)"),
        DatasetInfo("iris", "classification", _NoParams, _sk("load_iris", "classification"),
                    "Iris flowers, 150 samples, 4 features, 3 classes (scikit-learn)"),
        DatasetInfo("wine", "classification", _NoParams, _sk("load_wine", "classification"),
                    "Wine cultivars, 178 samples, 13 features, 3 classes (scikit-learn)"),
        DatasetInfo("breast_cancer", "classification", _NoParams, _sk("load_breast_cancer", "classification"),
                    "Breast cancer Wisconsin, 569 samples, 30 features, 2 classes (scikit-learn)"),
        DatasetInfo("diabetes", "regression", _NoParams, _sk("load_diabetes", "regression"),
                    "Diabetes progression, 442 samples, 10 features, regression (scikit-learn)"),
        DatasetInfo("moons", "classification", MoonsParams, _moons, "two interleaving half circles (generated)"),
        DatasetInfo("circles", "classification", CirclesParams, _circles, "two concentric circles (generated)"),
        DatasetInfo("spirals", "classification", SpiralsParams, _spirals, "interleaved spiral arms (generated)"),
        DatasetInfo("classification", "classification", ClassificationParams, _classification,
                    "scikit-learn make_classification (generated)"),
        DatasetInfo("regression", "regression", RegressionParams, _regression,
                    "scikit-learn make_regression (generated)"),
        DatasetInfo("mnist1d", "classification", Mnist1dParams, _mnist1d,
                    "MNIST-1D, 40 features, 10 classes (generated offline; extra 'mnist1d')"),
    ]
}


def list_datasets() -> list[dict[str, Any]]:
    """Name, task, description and parameter schema of every built-in dataset, plus csv."""
    out = [{"name": i.name, "task": i.task, "description": i.description,
            "params": i.params.model_json_schema().get("properties", {})} for i in REGISTRY.values()]
    out.append({"name": "csv", "task": "classification or regression (by loss)",
                "description": "a user CSV: path (or upload id) and label_column", "params": {}})
    return out


# --------------------------------------------------------------------------- CSV
def data_dir() -> Path:
    """Where uploaded CSVs live (``DNNFRAME_DATA_DIR``, default ``./dnnframe-data``)."""
    return Path(os.environ.get("DNNFRAME_DATA_DIR", "dnnframe-data"))


def upload_path(upload_id: str) -> Path:
    if not UPLOAD_ID.match(upload_id):
        raise DatasetError(f"upload id must be 8-64 lowercase hex characters, but got {upload_id!r}")
    return data_dir() / "uploads" / f"{upload_id}.csv"


def _csv_file(cfg: DatasetConfig) -> Path:
    path = upload_path(cfg.upload) if cfg.upload else Path(cfg.path or "")
    if not path.is_file():
        what = f"uploaded dataset {cfg.upload!r}" if cfg.upload else f"CSV file {str(path)!r}"
        raise DatasetError(f"{what} not found")
    return path


def parse_csv(data: bytes, label_column: str, task: Task = "classification") -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Parse CSV bytes: numeric feature columns plus a label column.

    Returns (X, y, header). Raises DatasetError naming the row/column that is wrong.
    """
    if len(data) > MAX_CSV_BYTES:
        raise DatasetError(f"CSV is {len(data)} bytes, more than the limit of {MAX_CSV_BYTES}")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise DatasetError("CSV must be UTF-8 text") from None
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:  # e.g. a cell longer than the csv module's field limit
        raise DatasetError(f"CSV cannot be parsed: {exc}") from None
    rows = [r for r in rows if any(cell.strip() for cell in r)]
    if len(rows) < 2:
        raise DatasetError("CSV needs a header row and at least one data row")
    header = [h.strip() for h in rows[0]]
    if label_column not in header:
        raise DatasetError(f"label column {label_column!r} is not in the CSV header {header}")
    if len(set(header)) != len(header):
        raise DatasetError(f"CSV header has duplicate column names: {header}")
    if len(header) < 2:
        raise DatasetError("CSV needs at least one feature column besides the label")
    li = header.index(label_column)
    X = np.empty((len(rows) - 1, len(header) - 1))
    labels = []
    for r, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise DatasetError(f"CSV row {r} has {len(row)} fields, the header has {len(header)}")
        feats = row[:li] + row[li + 1:]
        for c, cell in enumerate(feats):
            try:
                value = float(cell)
            except ValueError:
                col = header[c if c < li else c + 1]
                raise DatasetError(f"CSV row {r}, column {col!r}: feature values must be numeric, but got {cell!r}") from None
            if not math.isfinite(value):
                col = header[c if c < li else c + 1]
                raise DatasetError(f"CSV row {r}, column {col!r}: feature values must be finite, but got {cell!r}")
            X[r - 2, c] = value
        labels.append(row[li].strip())
    if task == "regression":
        try:
            y = np.array([float(v) for v in labels])
        except ValueError:
            raise DatasetError(f"label column {label_column!r} must be numeric for a regression loss") from None
    else:
        classes = sorted(set(labels), key=lambda v: (_num_or_none(v) is None, _num_or_none(v) or 0, v))
        index = {c: i for i, c in enumerate(classes)}
        y = np.array([index[v] for v in labels])
    return X, y, header


def _num_or_none(v: str) -> float | None:
    try:
        return float(v)
    except ValueError:
        return None


# --------------------------------------------------------------------------- public API
def dataset_task(cfg: DatasetConfig, loss: str = "softmax_crossentropy") -> Task:
    if cfg.name == "csv":
        return "regression" if loss == "squared_error" else "classification"
    return REGISTRY[cfg.name].task


def validate_dataset_config(cfg: DatasetConfig) -> None:
    """Check a dataset config without loading data (called by spec validation)."""
    if cfg.name == "csv":
        if bool(cfg.path) == bool(cfg.upload):
            raise ValueError("a csv dataset needs exactly one of path or upload")
        if not cfg.label_column:
            raise ValueError("a csv dataset needs label_column")
        if cfg.params:
            raise ValueError("a csv dataset takes no params")
        if cfg.upload and not UPLOAD_ID.match(cfg.upload):
            raise ValueError(f"upload must be an upload id (8-64 hex characters), but got {cfg.upload!r}")
        return
    if cfg.name not in REGISTRY:
        raise ValueError(f"unknown dataset {cfg.name!r}; known: {', '.join([*REGISTRY, 'csv'])}")
    if cfg.path or cfg.upload or cfg.label_column:
        raise ValueError(f"path, upload and label_column apply to name: csv only, not to {cfg.name!r}")
    try:
        REGISTRY[cfg.name].params.model_validate(cfg.params)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"params.{where}: {first['msg']}" if where else first["msg"]) from None


def _raw(cfg: DatasetConfig, task: Task) -> tuple[np.ndarray, np.ndarray]:
    if cfg.name == "csv":
        X, y, _ = parse_csv(_csv_file(cfg).read_bytes(), cfg.label_column or "", task)
        return X, y
    info = REGISTRY.get(cfg.name)
    if info is None:
        raise DatasetError(f"unknown dataset {cfg.name!r}")
    try:
        params = info.params.model_validate(cfg.params)
        X, y = info.load(params)
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
        return "csv-" + hashlib.sha256(_csv_file(cfg).read_bytes()).hexdigest()[:24]
    return _fingerprint_builtin(cfg.name, _params_key(cfg.params))


def _params_key(params: dict[str, Any]) -> str:
    import json

    return json.dumps(params, sort_keys=True)


@functools.lru_cache(maxsize=64)
def _fingerprint_builtin(name: str, params_key: str) -> str:
    import json

    from .spec import DatasetConfig

    X, y = _raw(DatasetConfig(name=name, params=json.loads(params_key)), REGISTRY[name].task)
    return f"{name}-" + _hash_arrays(X, y)


def _split(X: np.ndarray, y: np.ndarray, cfg: DatasetConfig, task: Task):
    from sklearn.model_selection import train_test_split

    def stratify(labels):
        if task != "classification":
            return None
        _, counts = np.unique(labels, return_counts=True)
        return labels if counts.min() >= 2 else None

    idx = np.arange(len(X))
    n_test = max(1, int(round(cfg.test_fraction * len(X))))
    try:
        rest, test = train_test_split(idx, test_size=n_test, random_state=cfg.split_seed, stratify=stratify(y))
    except ValueError:
        rest, test = train_test_split(idx, test_size=n_test, random_state=cfg.split_seed)
    if cfg.validation_fraction > 0:
        n_val = max(1, int(round(cfg.validation_fraction * len(X))))
        try:
            train, val = train_test_split(rest, test_size=n_val, random_state=cfg.split_seed, stratify=stratify(y[rest]))
        except ValueError:
            train, val = train_test_split(rest, test_size=n_val, random_state=cfg.split_seed)
    else:
        train, val = rest, rest[:0]
    if len(train) < 1:
        raise DatasetError(f"dataset {cfg.name!r} has {len(X)} rows: too few to split with these fractions")
    return np.sort(train), np.sort(val), np.sort(test)


def load_dataset(cfg: DatasetConfig, loss: str = "softmax_crossentropy") -> Dataset:
    """Load, split and (optionally) standardise a dataset; cached per process."""
    from .spec import canonical_json

    return _load_cached(canonical_json(cfg.model_dump(mode="json")), loss)


@functools.lru_cache(maxsize=16)
def _load_cached(cfg_json: str, loss: str) -> Dataset:
    import json

    from .spec import DatasetConfig

    cfg = DatasetConfig.model_validate(json.loads(cfg_json))
    task = dataset_task(cfg, loss)
    X, y = _raw(cfg, task)
    if X.ndim != 2 or len(X) != len(y):
        raise DatasetError(f"dataset {cfg.name!r}: features must be a 2-D array with one label per row")
    fingerprint = dataset_fingerprint(cfg, loss)
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
    for a in arrays:
        a.setflags(write=False)  # shared by every trial in this process: nobody may mutate it
    return Dataset(cfg.name, task, *arrays, n_classes=n_classes, fingerprint=fingerprint)
