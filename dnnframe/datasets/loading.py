"""Loading a dataset: its raw content (a built-in loader or CSV bytes), its content
fingerprint, and the split, standardised :class:`~.dataset.Dataset`, through the caches."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from ..exceptions import DatasetError, brief
from ..jsonsafe import canonical_json
from . import cache
from .config import DatasetConfig, dataset_task
from .csv_files import parse_csv, upload_path
from .dataset import Dataset, Task
from .registry import REGISTRY
from .splitting import build


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
        path = cache.disk_path("fingerprint", [name, params_key], ".json")
        found = cache.read_disk(path, lambda f: json.load(f)["fingerprint"])
        if not isinstance(found, str):
            cfg = DatasetConfig(name=name, params=json.loads(params_key))
            X, y = _raw(cfg, REGISTRY[name].task)
            found = f"{name}-" + _hash_arrays(X, y)
            cache.write_disk(path, lambda f: f.write(json.dumps({"fingerprint": found}).encode()))
        _builtin_fingerprints[key] = found
    return _builtin_fingerprints[key]


def load_dataset(cfg: DatasetConfig, loss: str = "softmax_crossentropy") -> Dataset:
    """Load, split and (optionally) standardise a dataset; cached per process and on disk
    (:func:`~.cache.disk_cache_dir`) by content."""
    task = dataset_task(cfg, loss)
    csv_bytes = None
    if cfg.name == "csv":
        # read once: the fingerprint and the arrays come from the same bytes
        csv_bytes = _csv_file(cfg).read_bytes()
        fingerprint = _csv_fingerprint(csv_bytes)
    else:
        fingerprint = _fingerprint_builtin(cfg.name, _params_key(cfg.params))
    key = (cfg.model_dump_json(), task, fingerprint)
    data = cache.recall(key)
    if data is not None:
        return data
    path = cache.disk_path("dataset", list(key), ".npz")
    data = cache.load_built(path, cfg.name, task, fingerprint)
    if data is None:
        X, y = _raw(cfg, task, csv_bytes)
        data = build(X, y, cfg, task, fingerprint)
        cache.save_built(path, data)
    cache.remember(key, data)
    return data
