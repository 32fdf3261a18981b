"""Training engine: Theano-style symbolic networks on PyTensor.

``train(config, on_epoch=None) -> TrialResult`` is the one entry point. Importing this
package is cheap; PyTensor is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .constants import ENGINE_VERSION
from .result import TrialResult

if TYPE_CHECKING:
    from .training import train

__all__ = ["ENGINE_VERSION", "TrialResult", "train"]


def __getattr__(name: str):
    # PyTensor (and the THEANO_FLAGS mapping) load only when training is actually asked for
    if name == "train":
        from .training import train

        return train
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
