"""Training engine: Theano-style symbolic networks on PyTensor.

One engine: ``train_pack(configs, on_epoch=None)`` trains trials of one :func:`pack_key`
together as one compiled graph, and ``train(config, on_epoch=None) -> TrialResult`` is a
pack of one. Trials of one :func:`compile_key` share the compiled function whatever their
depth. Importing this package is cheap; PyTensor is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .constants import ENGINE_VERSION
from .graphkey import compile_key, pack_key
from .result import TrialResult

if TYPE_CHECKING:
    from .packed import train, train_pack

__all__ = [
    "ENGINE_VERSION",
    "TrialResult",
    "compile_key",
    "pack_key",
    "train",
    "train_pack",
    "warm_up",
]


def warm_up() -> None:
    """Load now what every trial needs: PyTensor (THEANO_FLAGS applied first), the engine,
    the C linker's lazily imported modules and PyTensor's compiled-module index; about a
    second of CPU a process otherwise pays on its first trial. A worker calls it as it
    starts; a Celery worker's main process calls it before it forks its pool, so every
    pool process starts with it loaded."""
    from .pytensor_wall import configure

    configure()
    from . import diskcache, packed  # noqa: F401 - packed: the engine's graph code

    diskcache.preload()


def __getattr__(name: str):
    # PyTensor loads only when training is actually asked for, after THEANO_FLAGS are
    # mapped to its flags (which it reads once, when imported)
    if name in ("train", "train_pack"):
        from .pytensor_wall import configure

        configure()
        from . import packed

        return getattr(packed, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
