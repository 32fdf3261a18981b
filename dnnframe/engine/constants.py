"""Engine constants that must be readable without loading PyTensor.

Trial ids include ``ENGINE_VERSION``, and analyses outside the engine reproduce its SELU,
so both live here rather than beside the symbolic code.
"""

from __future__ import annotations

# Bump when a change to the engine changes results: it is part of every trial id.
ENGINE_VERSION = "6"  # 6: a pre-norm's gain and shift folded into the product, branch factors
# as rows (both round differently), dropout draws in [units, rows] order; 5: a stack's
# gradient reuses what its forward scan saved

# Klambauer et al. 2017, "Self-Normalizing Neural Networks": the fixed point of mean 0 and
# variance 1 under LeCun-normal weights.
SELU_ALPHA = 1.6732632423543772
SELU_SCALE = 1.0507009873554805
