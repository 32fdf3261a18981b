"""Training engine: Theano-style symbolic networks on PyTensor.

``train(config, on_epoch=None) -> TrialResult`` trains one trial; ``train_pack(configs,
on_epoch=None)`` trains trials of one :func:`graph_key` together (trials with options the
packed graph lacks, :func:`packed_unsupported`, go to ``train`` one by one). Importing this package
is cheap; PyTensor is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .constants import ENGINE_VERSION
from .graphkey import graph_key, packed_unsupported
from .result import TrialResult

if TYPE_CHECKING:
    from .packed import train_pack
    from .training import train

__all__ = ["ENGINE_VERSION", "TrialResult", "graph_key", "packed_unsupported", "train", "train_pack"]


def __getattr__(name: str):
    # PyTensor (and the THEANO_FLAGS mapping) load only when training is actually asked for
    if name == "train":
        from .training import train

        return train
    if name == "train_pack":
        from .packed import train_pack

        return train_pack
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
