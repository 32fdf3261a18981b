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


def run_diverging_sweep(root: Path) -> tuple[str, str]:
    """Train the sweep with ``dnnframe run`` into a SQLite file under ``root``: returns the
    store's URL and the experiment's id."""
    spec = root / "lr-decides.yaml"
    spec.write_text(yaml.safe_dump(DIVERGING_SWEEP), encoding="utf-8")
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
