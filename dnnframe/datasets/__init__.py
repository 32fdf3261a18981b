"""Datasets: which data a trial trains on, how it is split, and the caches that keep them.

:class:`DatasetConfig` says which data (a built-in of :data:`REGISTRY` or a user CSV) and
how to split it. Splits are deterministic: the same config and the same content give
bit-identical arrays in every process.

>>> data = load_dataset(DatasetConfig(name="iris", split_seed=1))
>>> data.n_features, data.n_classes, len(data.X_train) + len(data.X_val) + len(data.X_test)
(4, 3, 150)

Modules: :mod:`.config` the config and its checks, :mod:`.registry` the built-in datasets,
:mod:`.csv_files` user CSVs (uploads, the one parser and validator), :mod:`.splitting`
splitting and standardising, :mod:`.cache` the per-process and on-disk caches,
:mod:`.loading` fingerprints and :func:`load_dataset`, :mod:`.dataset` what a loaded
dataset is. Import from this package; the modules are its inside.
"""

from __future__ import annotations

from .cache import disk_cache_dir
from .config import MAX_HELD_OUT, DatasetConfig, csv_task, dataset_task, validate_dataset_config
from .csv_files import (
    MAX_CSV_BYTES,
    UPLOAD_ID,
    CsvSummary,
    data_dir,
    parse_csv,
    upload_path,
    validate_csv_bytes,
)
from .dataset import Dataset, Task
from .loading import dataset_fingerprint, load_dataset
from .registry import REGISTRY, DatasetInfo, list_datasets

__all__ = [
    "MAX_CSV_BYTES",
    "MAX_HELD_OUT",
    "REGISTRY",
    "UPLOAD_ID",
    "CsvSummary",
    "Dataset",
    "DatasetConfig",
    "DatasetInfo",
    "Task",
    "csv_task",
    "data_dir",
    "dataset_fingerprint",
    "dataset_task",
    "disk_cache_dir",
    "list_datasets",
    "load_dataset",
    "parse_csv",
    "upload_path",
    "validate_csv_bytes",
    "validate_dataset_config",
]
