"""The names a spec may use for layer-design choices, defined once.

The spec's validation, the web form's choices and the engine's layer table all read these
tuples, so a new activation is added in one place. This module imports nothing, so even
the lightest caller (the dashboard's form) can use it without loading the engine.
"""

from __future__ import annotations

ACTIVATIONS: tuple[str, ...] = (
    "relu", "leaky_relu", "elu", "selu", "tanh", "sigmoid", "softplus", "linear",
)
INITS: tuple[str, ...] = ("glorot", "he", "lecun", "orthogonal")
LOSSES: tuple[str, ...] = ("softmax_crossentropy", "squared_error")
OPTIMIZERS: tuple[str, ...] = ("sgd", "momentum", "nesterov", "adam", "rmsprop")
NORMALIZATIONS: tuple[str, ...] = ("none", "batch", "layer")
RESIDUALS: tuple[str, ...] = ("none", "identity", "rezero", "scaled")
NORM_POSITIONS: tuple[str, ...] = ("post", "pre")
LR_SCHEDULES: tuple[str, ...] = ("none", "cosine", "step")
