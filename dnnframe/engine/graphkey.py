"""Which trials share a compiled function (the compile key) and which train together in
one call (the pack key).

The **compile key** holds what the compiled graph depends on: the dataset (its shape); the
runs of equal hidden widths as the graph builds them (split by the graph's own
:func:`~dnnframe.engine.segments.split_widths`): a run is its first layer plus a scanned
stack whose number of layers is a run-time shape, left out of the key (0 layers for a run of
one), except that under the C backend a pack of at least :data:`UNROLL_MIN_PACK` trials
unrolls a run of up to :data:`UNROLLED_RUN` layers, one entry per layer (shallow nets train
much faster unrolled than through a scan, which pays for a graph per depth only in a big
pack: the key depends on the pack's size); under JAX only, the runs' widths
(under every other backend a width is a run-time shape too: ``"w"`` stands for it, except
where a layer's design depends on its input and output widths being equal; see
:func:`~dnnframe.engine.packgraph.graph_segments`); the activation, the layer design
(residual kind and whether its scale is learned, normalisation and its position), dropout
and gradient clipping on/off, the loss, the optimiser and the process's floatX (from
``PYTENSOR_FLAGS``, else ``THEANO_FLAGS``, else float32 when ``device`` names a GPU and
float64 otherwise; read by :func:`~dnnframe.engine.flags.translate`, as the engine reads them).

The **pack key** adds what the members of one call must share: the hidden widths with their
depth (one tensor per layer, one stack length) and the batch size (members step through
minibatches together). Under the C backend trials of different widths, and of different
lengths of a scanned run, share a compiled function but not a pack; under JAX widths and the
depth of a stack are static in the compiled function.

Not in either key (run-time inputs of the pack, one value per member): seed, learning rate
and its schedule, momentum, L2, dropout rate, clipping threshold, init, max_epochs, early
stopping, divergence bound. Nor the backend (C or JAX) and the device: they are the training
process's, not the trial's, and a pack compiles on whichever worker takes it; like the
floatX, whether widths count is read from this process's flags (workers share them).

This module imports neither PyTensor nor NumPy.
"""

from __future__ import annotations

import functools
import hashlib
import os
from typing import TYPE_CHECKING, Any

import orjson

from ..jsonsafe import canonical_json
from .flags import translate
from .segments import STACK, split_widths

if TYPE_CHECKING:
    from ..spec import TrialConfig

KEY_VERSION = "6"  # bump when the meaning of a key changes (6: big packs unroll short runs)
WIDTH = "w"  # a hidden width in the compile key where it is a run-time shape
# Under the C backend, in a pack of at least UNROLL_MIN_PACK trials, a run of equal widths up
# to UNROLLED_RUN long is unrolled (dense layers); a longer one is its first layer plus a
# scanned stack of the rest. Unrolled, shallow packs train 1.2-1.7x faster than through a
# scan (iris, width 16, SGD, K=417, depths 1-4; 1.4x at width 128 with Adam; results
# bit-identical), at the price of a graph per depth up to UNROLLED_RUN: a sweep over many
# small structures (216 ASHA configurations over depths 1-32) built 24 graphs instead of 6
# and ran 2-4x longer. So only packs big enough to pay for a graph unroll; smaller ones
# scan every run (a run of one is a layer and a stack of 0 real layers), one graph for
# every depth of a structure.
UNROLLED_RUN = 4
UNROLL_MIN_PACK = 256
# Under JAX (static shapes: every depth compiles its own graph anyway) a run of one is
# unrolled and a longer run is a layer plus a stack; the stack's scan is what keeps XLA's
# compile time flat in depth. Unrolling more there has not been measured.
UNROLLED_RUN_STATIC = 1


def unrolled_run(static: bool, pack_size: int = 1) -> int:
    """The longest run of equal widths that is unrolled in a pack of ``pack_size`` trials:
    :data:`UNROLLED_RUN_STATIC` with static shapes (JAX); else :data:`UNROLLED_RUN` in a
    pack of at least :data:`UNROLL_MIN_PACK` trials and 0 in a smaller one (a run of one
    is a layer plus a stack of 0 real layers, whose one placeholder step passes its input
    through; see ``StackLayer``)."""
    if static:
        return UNROLLED_RUN_STATIC
    return UNROLLED_RUN if pack_size >= UNROLL_MIN_PACK else 0


def process_dtype() -> str:
    """The floatX this process trains with, read from the environment without PyTensor."""
    return _flags_for((os.environ.get("PYTENSOR_FLAGS"), os.environ.get("THEANO_FLAGS")))[0]


def process_static_widths() -> bool:
    """Whether this process compiles static shapes (JAX: ``mode=JAX`` or a GPU ``device``),
    so hidden widths are part of the compile key; read without PyTensor."""
    return _flags_for((os.environ.get("PYTENSOR_FLAGS"), os.environ.get("THEANO_FLAGS")))[1]


@functools.lru_cache(maxsize=16)
def _flags_for(flag_vars: tuple[str | None, str | None]) -> tuple[str, bool]:
    """``(floatX, whether shapes are static)`` as :func:`~dnnframe.engine.flags.translate`
    reads ``(PYTENSOR_FLAGS, THEANO_FLAGS)``, silently and without choosing a BLAS; cached
    by the variables' values (a submission asks once per trial)."""
    pytensor_flags, theano_flags = flag_vars
    settings = translate(theano_flags or "", pytensor_flags or "", warn=False, blas=False)
    # PyTensor's own default floatX is float64 (a GPU's, float32, translate sets)
    return settings.pytensor_flags.get("floatX", "float64"), settings.backend == "jax"


def as_config(config: dict | TrialConfig) -> TrialConfig:
    """``config`` as a :class:`~dnnframe.spec.TrialConfig` (a stored JSON dict is validated)."""
    from ..spec import TrialConfig

    return TrialConfig.model_validate(config) if isinstance(config, dict) else config


def _runs(widths: list[int], static: bool, entry_sensitive: bool, unrolled: int) -> list:
    """The hidden widths as the compiled graph sees them, from the graph's own split
    (:func:`~dnnframe.engine.segments.split_widths`, the input's width unknown): a dense
    layer is its width, a stack is ``"stack"`` whatever its length. Without ``static``
    shapes each width is :data:`WIDTH`, except where a layer's design depends on whether its
    input and output widths are equal (``entry_sensitive``: a shortcut or pre-norm): the
    first layer's, since the key cannot see the dataset's width (the graph keeps it for an
    input as wide), and an unrolled layer's after the first of its run (input and output
    equal; the graph keeps them). So two configs share a key exactly when their graphs are
    built from the same segments whatever the dataset's width."""
    segments, _ = split_widths(None, widths, unrolled)
    out: list = []
    for k, seg in enumerate(segments):
        if seg.is_stack:
            out.append(STACK)
        elif static or (entry_sensitive and (k == 0 or seg.n_in == seg.n_out)):
            out.append(seg.width)
        else:
            out.append(WIDTH)
    return out


def compile_key_fields(config: dict | TrialConfig, pack_size: int = 1) -> dict[str, Any]:
    """The fields of the compile key of ``config`` in a pack of ``pack_size`` trials, as a
    JSON-ready dict (see the module docstring)."""
    config = as_config(config)
    model, training = config.model, config.training
    static = process_static_widths()
    return {
        "v": KEY_VERSION,
        "dataset": config.dataset.model_dump(mode="json"),
        # a shortcut or pre-norm applies to the first layer only where its widths are equal
        "runs": _runs(
            list(model.widths),
            static,
            model.residual != "none" or model.norm_position == "pre",
            unrolled_run(static, pack_size),
        ),
        "activation": model.activation,
        "residual": model.residual,
        "residual_learnable": model.residual == "rezero" or model.residual_learnable,
        "normalization": model.normalization,
        "norm_position": model.norm_position,
        "dropout": model.dropout > 0,
        "grad_clip": training.grad_clip is not None,
        "loss": model.loss,
        "optimizer": training.optimizer,
        "dtype": process_dtype(),
    }


def pack_key_fields(config: dict | TrialConfig) -> dict[str, Any]:
    """The fields of the pack key: the compile key's (of a pack of one: trials are packed by
    this key, before any pack's size is known; the widths below say the rest) plus the
    widths with the depth, and the batch size."""
    config = as_config(config)
    return {
        **compile_key_fields(config),
        "widths": list(config.model.widths),
        "batch_size": int(config.training.batch_size),
    }


def _key(fields: dict[str, Any], widths: str) -> str:
    text = canonical_json(fields)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return (
        f"{fields['dataset']['name']}-{widths}-{fields['activation']}-{fields['optimizer']}"
        f"-{fields['dtype']}-{digest}"
    )


def compile_key(config: dict | TrialConfig, pack_size: int = 1) -> str:
    """A short stable string: equal for configs that one compiled function can train, in
    packs of ``pack_size`` trials (a big pack unrolls short runs: :func:`unrolled_run`)."""
    fields = compile_key_fields(config, pack_size)
    return _key(fields, "x".join(str(w) for w in fields["runs"]) or "0")


def pack_keys(configs: list[dict] | list[TrialConfig]) -> list[str]:
    """:func:`pack_key` of each config, made once per distinct value of the fields it reads:
    a sweep's trials differ mostly in values the key leaves out (seed, learning rate, ...),
    and a key is a validation, a canonical JSON and a hash (a tenth of submitting a
    10,000-trial sweep, and of a small pack's bookkeeping, when made per trial)."""
    by_fields: dict[bytes | str, str] = {}
    keys = []
    for config in configs:
        doc = config if isinstance(config, dict) else config.model_dump(mode="json")
        model, training = doc.get("model") or {}, doc.get("training") or {}
        # every field the key reads, as given (a default left out only misses the memo)
        fields = _memo_key(
            [
                doc.get("dataset"),
                {k: v for k, v in model.items() if k not in ("init", "dropout")},
                (model.get("dropout") or 0) > 0,
                training.get("optimizer"),
                training.get("batch_size"),
                training.get("grad_clip") is None,
            ]
        )
        if fields not in by_fields:
            by_fields[fields] = pack_key(config)
        keys.append(by_fields[fields])
    return keys


def _memo_key(value: list) -> bytes | str:
    """A process-local key of ``value`` (orjson, key-sorted: a tenth of canonical_json's
    cost; a value orjson refuses gets the canonical text)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return canonical_json(value)


def pack_key(config: dict | TrialConfig) -> str:
    """A short stable string: equal for configs that can train together in one pack."""
    fields = pack_key_fields(config)
    widths = fields["widths"]
    text = (
        f"{widths[0]}x{len(widths)}"
        if widths and len(set(widths)) == 1
        else "x".join(str(w) for w in widths) or "0"
    )
    return _key(fields, f"{text}-b{fields['batch_size']}")
