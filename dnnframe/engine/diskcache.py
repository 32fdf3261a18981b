"""Optimised compiled models kept on disk, per host, so a fresh process skips the rewrite.

A model is pickled right after it is built (PyTensor pickles a function's already
optimised graph; unpickling links it against the C modules in PyTensor's compiledir,
without re-running the rewrites). Files live in ``$DNNFRAME_CACHE_DIR``, else in
``<pytensor compiledir>/dnnframe``; their name hashes the model's shape together with
the engine version, the engine's graph-building source, the PyTensor, NumPy and Python
versions and the flags that steer the rewrites, so any change simply misses.
Writers write a temporary file in the same directory and rename it into place (atomic
on POSIX): concurrent writers of one key leave one complete file, and readers never see
a partial one. An unreadable file is ignored and rewritten.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pickle
import platform
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import settings
from .constants import ENGINE_VERSION

FORMAT = "1"
_SOURCES = (
    "packgraph.py",
    "segments.py",
    "argmax.py",
    "layers.py",
    "blocks.py",
    "rewrites.py",
    "loops.py",
    "vecmath.py",
    "updates.py",
    "diskcache.py",
    "pytensor_wall/internals.py",
)


@functools.lru_cache(maxsize=1)
def _source_digest() -> str:
    # the graph-building code itself: an edited engine never loads a stale graph
    h = hashlib.sha256()
    for name in _SOURCES:
        h.update((Path(__file__).parent / name).read_bytes())
    return h.hexdigest()


def cache_dir() -> Path:
    """``$DNNFRAME_CACHE_DIR`` or ``<pytensor.config.compiledir>/dnnframe``."""
    env = (settings.get().cache_dir or "").strip()
    if env:
        return Path(env)
    import pytensor

    return Path(str(pytensor.config.compiledir)) / "dnnframe"


def cache_path(kind: str, key: Any) -> Path:
    """The file for ``key`` (any object with a stable ``repr``) of model family ``kind``."""
    import numpy
    import pytensor

    cfg = pytensor.config  # flags that change which rewrites and ops the graph got
    text = "|".join(
        [
            FORMAT,
            kind,
            repr(key),
            ENGINE_VERSION,
            _source_digest(),
            pytensor.__version__,
            numpy.__version__,
            platform.python_version(),
            platform.machine(),
            str(cfg.blas__ldflags),
            str(cfg.optimizer),
            str(cfg.cxx),
            str(cfg.floatX),
        ]
    )
    return cache_dir() / f"{kind}-{hashlib.sha256(text.encode()).hexdigest()[:32]}.pkl"


def _with_recursion(fn: Callable[[], Any]) -> Any:
    # optimised graphs are deep linked structures; pickle recurses through them
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 50_000))
    try:
        return fn()
    finally:
        sys.setrecursionlimit(limit)


def load(kind: str, key: Any) -> Any | None:
    """The cached model, or None when there is none or it cannot be read."""
    path = cache_path(kind, key)
    try:
        with open(path, "rb") as f:
            return _with_recursion(lambda: pickle.load(f))
    except FileNotFoundError:
        return None
    except Exception as exc:  # truncated by a crash, or an incompatible pickle: rebuild
        warnings.warn(
            f"ignoring unreadable compiled-model cache file {path}: {exc!r}", stacklevel=2
        )
        return None


def store(kind: str, key: Any, model: Any) -> Path | None:
    """Write ``model`` atomically; returns the path, or None when it could not be written
    (a read-only or full disk only costs the next process a compile)."""
    path = cache_path(kind, key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = _with_recursion(lambda: pickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL))
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except Exception as exc:
        warnings.warn(
            f"could not write the compiled-model cache file {path}: {exc!r}", stacklevel=2
        )
        return None
    return path


# Facts PyTensor works out by running the compiler once in every process, kept per host
# beside its C modules (not with the compiled models: a worker given an empty model cache
# still finds them): the CPU's -march flags (several compiler runs, about a second; part
# of every C module's key) and whether the BLAS's gemv reads y when beta is 0 (a test
# program compiled and run the first time a process builds or loads a graph with a
# matrix-vector product: about 0.14 s of a fresh worker's first build).
def _host_path(fact: str) -> Path:
    import pytensor

    try:
        cpu = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        cpu = ""
    flags = next((line for line in cpu.splitlines() if line.startswith("flags")), "")
    cfg = pytensor.config
    text = "|".join(
        [
            platform.node(),
            platform.machine(),
            str(cfg.cxx),
            str(cfg.gcc__cxxflags),
            str(cfg.blas__ldflags),
            pytensor.__version__,
            flags,
        ]
    )
    # beside the compiled models: a process given a cache of its own works its facts out anew
    return cache_dir() / f"{fact}-{hashlib.sha256(text.encode()).hexdigest()[:32]}.json"


def _read_host_fact(fact: str) -> Any:
    try:
        return json.loads(_host_path(fact).read_text())
    except (OSError, ValueError):
        return None


def _reuse_host_facts() -> None:
    from .pytensor_wall import internals

    internals.set_host_facts(_read_host_fact)


def _remember_host_facts() -> None:
    from .pytensor_wall import internals

    for fact, value in internals.host_facts().items():
        path = _host_path(fact)
        if value is None or path.exists():
            continue
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
            with os.fdopen(fd, "w") as f:
                json.dump(value, f)
            os.replace(tmp, path)
        except OSError:
            pass


def preload() -> None:
    """Pay now what the first load in a fresh process pays: importing the C linker's lazily
    imported modules (setuptools among them) and reading PyTensor's compiledir index.
    A worker calls this at start, so its first trial of a known shape starts sooner."""
    from .pytensor_wall import internals

    internals.use_stdlib_ext_suffix()
    _reuse_host_facts()
    internals.warm_c_linker()


def load_or_build(kind: str, key: Any, build: Callable[[], Any]) -> tuple[Any, bool]:
    """(model, loaded_from_disk): the cached model, else ``build()`` stored for next time."""
    from .pytensor_wall import internals

    internals.use_stdlib_ext_suffix()
    _reuse_host_facts()
    model = load(kind, key)
    if model is not None:
        _remember_host_facts()
        return model, True
    model = build()
    store(kind, key, model)
    _remember_host_facts()
    return model, False
