"""Which trials share a compiled graph."""

from __future__ import annotations

import json


def graph_key(config: dict) -> str:
    """What decides a trial's compiled graph (the engine caches one compiled function per
    graph per process): the dataset and model, the optimiser and whether L2 is on — not the
    seed, learning rate, batch size or epochs. Trials with the same key reuse a compile."""
    training = config.get("training", {})
    return json.dumps({"dataset": config.get("dataset"), "model": config.get("model"),
                       "optimizer": training.get("optimizer"), "l2": bool(training.get("l2"))},
                      sort_keys=True)
