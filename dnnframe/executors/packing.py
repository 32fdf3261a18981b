"""Packs: queued trials of one pack key, grouped into units of work.

A pack travels as a list of trial ids; a worker trains it with
:func:`dnnframe.runner.run_pack`. A pack of one is a plain trial.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from .. import settings
from ..engine import compile_key, pack_key
from ..engine.graphkey import pack_keys
from ..spec import ExperimentSpec

#: Memory one pack may take in a worker (parameters, gradients, optimiser state and
#: minibatch activations of all its members), so a worker stays well under 1 GB.
PACK_MEMORY_BUDGET = 256 * 2**20
#: Packs per worker the automatic size aims at when there are several workers.
PACKS_PER_WORKER = 2
# The dataset's width is not in the config (it needs loading); assume a wide input.
_ASSUMED_INPUT_WIDTH = 256
# Copies of the parameters a member holds: weights, gradients, two optimiser moments, and
# the best epoch's weights.
_PARAMETER_COPIES = 5
_BYTES_PER_VALUE = 8  # float64


def trial_bytes(config: dict) -> int:
    """A generous estimate of one pack member's working set in bytes."""
    model = config.get("model") or {}
    training = config.get("training") or {}
    width = model.get("width") or 1
    # per-layer widths: the widest layer bounds every layer's share
    width = max([*width, 1]) if isinstance(width, list) else max(int(width), 1)
    depth = max(int(model.get("hidden_layers") or 0), 0)
    batch = max(int(training.get("batch_size") or 1), 1)
    fan_in = max(width, _ASSUMED_INPUT_WIDTH)
    parameters = fan_in * width + depth * width * (width + 1) + width * fan_in
    activations = 2 * batch * (fan_in + depth * width)
    return (_PARAMETER_COPIES * parameters + activations) * _BYTES_PER_VALUE


def auto_pack_size(configs: Sequence[dict], workers: int, budget: int = PACK_MEMORY_BUDGET) -> int:
    """The pack size for ``configs`` (the queued trials) on ``workers`` parallel workers:
    as large as the memory budget allows for the largest member, but small enough that
    there are at least ``workers`` packs when there are that many trials, and with several
    workers about two packs each: packs of different graphs differ in cost, and one pack
    per worker left a worker idle while another trained the costliest (3 packs of a
    24-trial sweep on 2 workers: 1.5x one worker's speed; 6 packs: see bench/sweep.py)."""
    if not configs:
        return 1
    by_memory = max(1, budget // max(trial_bytes(c) for c in configs))
    workers = max(workers, 1)
    by_workers = (
        len(configs) if workers == 1 else math.ceil(len(configs) / (PACKS_PER_WORKER * workers))
    )
    return max(1, min(by_memory, by_workers))


def resolve_pack_size(spec: ExperimentSpec | None, pack_size: int | None = None) -> int | None:
    """The pack size a submission of ``spec`` uses: ``pack_size`` (the command line), else
    the spec's ``search.pack_size``, else ``$DNNFRAME_PACK_SIZE``; None means automatic.
    ``spec`` None (a stored spec that cannot be read) skips the spec's own size."""
    if pack_size is not None:
        return pack_size
    from_spec = spec.search.pack_size if spec is not None else None
    return from_spec if from_spec is not None else settings.get().pack_size


def make_packs(
    trial_ids: Sequence[str], configs_by_id: Mapping[str, dict], pack_size: int | None, workers: int
) -> list[list[str]]:
    """Group ``trial_ids`` into packs of trials with the same :func:`pack_key`.

    Args:
        trial_ids: the trials to run, in the order they should start.
        configs_by_id: each trial's resolved config (``TrialConfig`` as JSON).
        pack_size: most trials per pack; None picks :func:`auto_pack_size`.
        workers: packs that can run at once (the executor's parallelism).

    Returns:
        The packs, in the order of their first trial; a group larger than the pack size is
        split into packs of near-equal size, its trials of one seed kept together (members
        of one seed share their minibatch order and initial draws: a pack of 250 seeds drew
        three times the shuffles of the same trials split by seed). Every trial id appears
        in exactly one pack.
    """
    if pack_size is not None and pack_size < 1:
        raise ValueError(f"pack_size must be >= 1, but got {pack_size}")
    ids = list(dict.fromkeys(trial_ids))
    if pack_size is None:
        pack_size = auto_pack_size([configs_by_id[t] for t in ids], workers)
    groups: dict[str, list[str]] = {}
    for tid, key in zip(ids, pack_keys([configs_by_id[t] for t in ids])):
        groups.setdefault(key, []).append(tid)
    packs: list[list[str]] = []
    for members in groups.values():
        n_packs = math.ceil(len(members) / pack_size)
        if n_packs > 1:  # (a stable sort: a seed's trials keep their order)
            members.sort(key=lambda t: configs_by_id[t].get("seed", 0))
        base, extra = divmod(len(members), n_packs)
        start = 0
        for i in range(n_packs):
            size = base + (i < extra)
            packs.append(members[start : start + size])
            start += size
    first = {tid: i for i, tid in enumerate(ids)}
    packs.sort(key=lambda pack: first[pack[0]])
    return packs


__all__ = [
    "PACK_MEMORY_BUDGET",
    "auto_pack_size",
    "compile_key",
    "make_packs",
    "pack_key",
    "resolve_pack_size",
    "trial_bytes",
]
