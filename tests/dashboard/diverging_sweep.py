"""A real sweep where the learning rate decides divergence, trained once by ``dnnframe run``.

On iris with plain SGD every trial at a learning rate of 1000 blows up within its first
epochs (DIVERGED) and every one at 0.05 trains, whatever its depth or seed: the sweep whose
analysis must name the learning rate, and draw the trials that diverged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
DIVERGING_SWEEP: dict[str, Any] = {
    "name": "lr-decides",
    "dataset": {"name": "iris"},
    "model": {"hidden_layers": {"grid": [1, 2]}, "width": 16, "activation": "relu"},
    "training": {
        "optimizer": "sgd",
        "learning_rate": {"grid": [0.05, 1000]},
        "batch_size": 16,
        "max_epochs": 4,
        "early_stopping": None,
    },
    "search": {"seeds": 2, "objective": {"metric": "test_accuracy", "mode": "max"}},
}
DIVERGING_RATE = 1000
# Rates at the edge: at 4 one seed of width 16 blows up while its others train, and many
# trials tie at the same test accuracy (30 test rows: steps of 1/30), so ranking
# configurations by their mean over seeds must count a diverged seed and break ties.
EDGE_SWEEP: dict[str, Any] = {
    **DIVERGING_SWEEP,
    "name": "lr-edge",
    "model": {"hidden_layers": 2, "width": {"grid": [8, 16]}, "activation": "relu"},
    "training": {**DIVERGING_SWEEP["training"], "learning_rate": {"grid": [0.5, 1, 4]}},
    "search": {"seeds": 3, "objective": {"metric": "test_accuracy", "mode": "max"}},
}


def run_diverging_sweep(root: Path, sweep: dict[str, Any] = DIVERGING_SWEEP) -> tuple[str, str]:
    """Train ``sweep`` with ``dnnframe run`` into a SQLite file under ``root``: returns the
    store's URL and the experiment's id."""
    spec = root / f"{sweep['name']}.yaml"
    spec.write_text(yaml.safe_dump(sweep), encoding="utf-8")
    url = f"sqlite:///{root / 'sweep.db'}"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dnnframe.cli",
            "run",
            str(spec),
            "--store",
            url,
            "--workers",
            "2",
            "--json",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    return url, json.loads(proc.stdout)["experiment_id"]
