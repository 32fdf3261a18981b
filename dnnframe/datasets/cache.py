"""Where built datasets and fingerprints are kept: in this process (a small LRU shared by
its trials) and on this host's disk.

Built-in data come from scikit-learn, whose import costs a fresh process about a second
(SciPy parses docstrings as it loads), more than a small sweep's training. Fingerprints
and split, standardised arrays are kept per host, keyed by what determines them (the
dataset config, its content fingerprint, the scikit-learn and NumPy versions), so a
submitting process or a fresh worker does not import scikit-learn for data seen before.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np

from .. import settings
from .dataset import ARRAYS, Dataset, Task, frozen

log = logging.getLogger(__name__)

DISK_FORMAT = "1"
_DISK_PACKAGES = ("scikit-learn", "numpy")


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


def disk_path(kind: str, key: list[str], suffix: str) -> Path:
    """The cache file of ``kind`` for ``key`` (also keyed by the format and the versions)."""
    text = "|".join([DISK_FORMAT, kind, *key, *_versions()])
    return disk_cache_dir() / f"{kind}-{hashlib.sha256(text.encode()).hexdigest()[:32]}{suffix}"


def read_disk(path: Path, read: Callable[[IO[bytes]], Any]) -> Any:
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


def write_disk(path: Path, write: Callable[[IO[bytes]], Any]) -> None:
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


def load_built(path: Path, name: str, task: Task, fingerprint: str) -> Dataset | None:
    """The Dataset saved at ``path``, or None when it is missing, damaged or of other data."""

    def read(f: IO[bytes]) -> Dataset | None:
        with np.load(f, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            if meta != {
                "name": name,
                "task": task,
                "fingerprint": fingerprint,
                "n_classes": meta.get("n_classes"),
            }:
                return None
            arrays = [np.ascontiguousarray(z[array]) for array in ARRAYS]
        return frozen(name, task, arrays, meta["n_classes"], fingerprint)

    return read_disk(path, read)


def save_built(path: Path, data: Dataset) -> None:
    meta = {
        "name": data.name,
        "task": data.task,
        "fingerprint": data.fingerprint,
        "n_classes": data.n_classes,
    }
    write_disk(
        path,
        lambda f: np.savez(
            f, meta=np.array(json.dumps(meta)), **{name: getattr(data, name) for name in ARRAYS}
        ),
    )


# Keyed by the data's content fingerprint (as trial ids are), so a CSV edited in place is
# read again by a long-lived worker instead of being served from the cache.
_MEMORY_SIZE = 16
_memory: OrderedDict[tuple[str, str, str], Dataset] = OrderedDict()
_memory_lock = threading.Lock()


def recall(key: tuple[str, str, str]) -> Dataset | None:
    """The Dataset this process built or loaded under ``key``, if it still keeps it."""
    with _memory_lock:
        if key in _memory:
            _memory.move_to_end(key)
            return _memory[key]
    return None


def remember(key: tuple[str, str, str], data: Dataset) -> None:
    with _memory_lock:
        _memory[key] = data
        while len(_memory) > _MEMORY_SIZE:
            _memory.popitem(last=False)
