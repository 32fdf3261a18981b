"""``dnnframe run`` with a tpe spec: the driver inside the command, as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from dnnframe.store import open_store

REPO = Path(__file__).resolve().parents[2]


def test_dnnframe_run_drives_a_tpe_search(tmp_path):
    spec = {"name": "cli-tpe", "dataset": {"name": "iris"}, "model": {"width": 8},
            "training": {"learning_rate": {"loguniform": [0.001, 0.1]}, "max_epochs": 2},
            "search": {"method": "tpe", "num_samples": 4, "random_seed": 1}}
    path = tmp_path / "tpe.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'tpe.db'}"
    env = {**os.environ, "PYTHONPATH": str(REPO),
           "DNNFRAME_TRAIN_FN": "dnnframe.testing.hooks:sleepy_train",
           "DNNFRAME_HOOK_EPOCHS": "2", "DNNFRAME_HOOK_EPOCH_SECONDS": "0"}
    env.pop("DNNFRAME_STORE_URL", None)
    proc = subprocess.run([sys.executable, "-m", "dnnframe.cli", "run", str(path), "--store", url,
                           "--workers", "1", "--json"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    store = open_store(url)
    trials = store.list_trials(summary["experiment_id"])
    assert len(trials) == 4
    assert all(t.state.value == "COMPLETE" for t in trials)
    assert len({t.config["training"]["learning_rate"] for t in trials}) == 4
