"""Training engine: Theano-style symbolic networks on PyTensor.

``train(config, on_epoch=None) -> TrialResult`` is the one entry point. Importing this
package is cheap; PyTensor is imported on first use.
"""

from __future__ import annotations

# Bump when a change to the engine changes results: it is part of every trial id.
ENGINE_VERSION = "1"
