"""The depths a spec allows, through the default path a user takes (`dnnframe run`): plain
stacks of 1,000 and 2,000 layers train, and every depth of one width past the four that
are unrolled shares one compiled function (the depth is a run-time shape of the scanned
stack, not part of the graph)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dnnframe.store import TrialState, open_store

pytestmark = pytest.mark.timeout(900)
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_plain_stacks_at_the_spec_limits_train_through_dnnframe_run(tmp_path):
    spec = {
        "name": "deepest",
        "dataset": {"name": "iris"},
        "model": {"hidden_layers": {"grid": [5, 1000, 2000]}, "width": 16, "activation": "relu"},
        "training": {"optimizer": "sgd", "learning_rate": 0.01, "max_epochs": 1, "batch_size": 64},
        "search": {"seeds": 1},
    }
    path = tmp_path / "deep.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'deep.db'}"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        "DNNFRAME_CACHE_DIR": str(tmp_path / "graphs"),
    }  # no graph from an earlier run
    env.pop("DNNFRAME_STORE_URL", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dnnframe.cli",
            "run",
            str(path),
            "--store",
            url,
            "--workers",
            "1",
            "--json",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=800,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = json.loads(proc.stdout)["counts"]
    assert counts["COMPLETE"] == 3 and sum(counts.values()) == 3, counts
    store = open_store(url)
    try:
        trials = sorted(store.list_trials(), key=lambda t: t.config["model"]["hidden_layers"])
        assert [t.state for t in trials] == [TrialState.COMPLETE] * 3
        results = [t.result for t in trials]
        for t in trials:
            assert t.result["history"][0]["train_loss"] is not None, t.config["model"]
        # one compiled function: built (or read from disk) for the first depth, then reused
        assert len({r["environment"]["compile_key"] for r in results}) == 1
        assert len({r["environment"]["pack_key"] for r in results}) == 3
        assert sum(not r["environment"]["compile_cache_hit"] for r in results) == 1
        # 16*16 + 16 parameters per hidden layer past the first, whatever the depth
        assert results[2]["n_params"] - results[1]["n_params"] == 1000 * (16 * 16 + 16)
    finally:
        store.close()
