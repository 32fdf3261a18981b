"""The graph key: which trials can share one compiled (packed) training function.

Two trials with the same key are trained by the same compiled graph, so they can be
trained together in one pack (:func:`dnnframe.engine.train_pack`). The key holds exactly
what the packed graph depends on:

- ``dataset``: the full dataset config (the data and its shape are inputs of the pack;
  members must see the same rows);
- ``widths``: the hidden widths, *depth included*. In a pack every member shares one
  parameter tensor per layer (leading trial axis), and the packed graph unrolls its layers
  because a scan inside the per-minibatch step costs more than these small layers
  themselves; members of different depth would need padded, masked layers that waste the
  compute the pack exists to save. (The per-trial engine, :func:`train`, still scans a run
  of equal widths, so its own compiled-model cache ignores depth.)
- ``activation``, ``residual`` (its kind), ``normalization`` and ``norm_position``,
  ``dropout`` and ``grad_clip`` (on/off only), ``loss``, ``optimizer``;
- ``single_trial``: the config uses an option the packed graph does not implement
  (:func:`packed_unsupported`); such trials are sent to the per-trial engine one by one.
- ``batch_size``: members step through minibatches together, so they need the same number
  and size of minibatches per epoch;
- ``dtype``: the process's floatX (from ``PYTENSOR_FLAGS``, else ``THEANO_FLAGS``, else
  float32 when ``device`` names a GPU and float64 otherwise), because a float32 and a
  float64 graph are different functions.

Not in the key (run-time inputs of the pack, one value per member): seed, learning rate,
momentum, L2, dropout rate, init, max_epochs, early stopping.

Not in the key either: the backend (C or JAX) and the device. They are the training
process's, not the trial's: a pack compiles on whichever worker takes it.

This module imports neither PyTensor nor NumPy.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from typing import TYPE_CHECKING, Any

from .flags import gpu_index

if TYPE_CHECKING:
    from ..spec import TrialConfig

KEY_VERSION = "2"  # bump when the meaning of a key changes


def packed_unsupported(config: dict | TrialConfig) -> list[str]:
    """The options of ``config`` the packed graph does not implement (empty: it packs).

    The packed engine implements plain and identity-shortcut stacks with a constant
    learning rate; normalisation, scaled residual branches, gradient clipping and learning
    rate schedules train in the per-trial engine.
    """
    config = as_config(config)
    model, training = config.model, config.training
    out = []
    if model.normalization != "none":
        out.append(f"model.normalization={model.normalization}")
    if model.residual not in ("none", "identity"):
        out.append(f"model.residual={model.residual}")
    if training.grad_clip is not None:
        out.append("training.grad_clip")
    if training.lr_schedule.kind != "none" or training.lr_schedule.warmup_epochs:
        out.append("training.lr_schedule")
    return out


def _flag(name: str, flag_vars: tuple[str | None, ...]) -> str | None:
    # PYTENSOR_FLAGS wins over THEANO_FLAGS, as in flags.configure (parsed inline: no imports)
    for text in flag_vars:
        for item in (text or "").split(","):
            key, sep, value = item.partition("=")
            if sep and key.strip().replace(".", "__") == name:
                return value.strip()
    return None


def process_dtype() -> str:
    """The floatX this process trains with, read from the environment without PyTensor."""
    return _dtype_for((os.environ.get("PYTENSOR_FLAGS"), os.environ.get("THEANO_FLAGS")))


@functools.lru_cache(maxsize=16)
def _dtype_for(flag_vars: tuple[str | None, ...]) -> str:
    # cached by the flag variables' values: a submission asks once per trial
    device = gpu_index(_flag("device", flag_vars))
    return _flag("floatX", flag_vars) or ("float32" if device is not None else "float64")


def as_config(config: dict | TrialConfig) -> TrialConfig:
    """``config`` as a :class:`~dnnframe.spec.TrialConfig` (a stored JSON dict is validated)."""
    from ..spec import TrialConfig

    return TrialConfig.model_validate(config) if isinstance(config, dict) else config


def graph_key_fields(config: dict | TrialConfig) -> dict[str, Any]:
    """The fields of the graph key, as a JSON-ready dict (see the module docstring)."""
    config = as_config(config)
    model, training = config.model, config.training
    return {
        "v": KEY_VERSION,
        "dataset": config.dataset.model_dump(mode="json"),
        "widths": list(model.widths),
        "activation": model.activation,
        "residual": model.residual,
        "normalization": model.normalization,
        "norm_position": model.norm_position,
        "dropout": model.dropout > 0,
        "grad_clip": training.grad_clip is not None,
        "single_trial": bool(packed_unsupported(config)),
        "loss": model.loss,
        "optimizer": training.optimizer,
        "batch_size": int(training.batch_size),
        "dtype": process_dtype(),
    }


def graph_key(config: dict | TrialConfig) -> str:
    """A short stable string: equal for configs that one packed compiled function can train."""
    fields = graph_key_fields(config)
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    widths = "x".join(str(w) for w in fields["widths"]) or "0"
    return (f"{fields['dataset']['name']}-{widths}-{fields['activation']}-{fields['optimizer']}"
            f"-b{fields['batch_size']}-{fields['dtype']}-{digest}")
