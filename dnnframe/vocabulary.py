"""The names a spec may use for layer-design choices, defined once.

The spec's validation, the web form's choices and the engine's layer table all read these
tuples, so a new activation is added in one place. This module imports only typing, so
even the lightest caller (the dashboard's form) can use it without loading the engine.
"""

from __future__ import annotations

from typing import Literal, get_args

# Each choice is a Literal type (what mypy checks) and its names as a tuple (what the
# validation and the form read), the tuple taken from the type.
Activation = Literal["relu", "leaky_relu", "elu", "selu", "tanh", "sigmoid", "softplus", "linear"]
Init = Literal["glorot", "he", "lecun", "orthogonal"]
Loss = Literal["softmax_crossentropy", "squared_error"]
Optimizer = Literal["sgd", "momentum", "nesterov", "adam", "rmsprop"]
Normalization = Literal["none", "batch", "layer"]
Residual = Literal["none", "identity", "rezero", "scaled"]
NormPosition = Literal["post", "pre"]
LrScheduleKind = Literal["none", "cosine", "step"]

ACTIVATIONS: tuple[str, ...] = get_args(Activation)
INITS: tuple[str, ...] = get_args(Init)
LOSSES: tuple[str, ...] = get_args(Loss)
OPTIMIZERS: tuple[str, ...] = get_args(Optimizer)
NORMALIZATIONS: tuple[str, ...] = get_args(Normalization)
RESIDUALS: tuple[str, ...] = get_args(Residual)
NORM_POSITIONS: tuple[str, ...] = get_args(NormPosition)
LR_SCHEDULES: tuple[str, ...] = get_args(LrScheduleKind)
