"""``dnnframe run`` stays quiet while its workers train: it follows a sweep from counts and
reads a few values per trial for its summary, never whole trial rows (each holds a
learning curve and a result with another copy of it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dnnframe.store import open_store

REPO = Path(__file__).resolve().parents[1]

# The real CLI in a process whose SQLite store records every trial listing it answers:
# which bulky fields it read and how many rows. Worker processes are spawned fresh and
# are not counted (they read what they train).
COUNTING_CLI = """
import json, sys
from dnnframe.store import sqlite as backend

reads = []
listing = backend.SQLiteStore._list_trials
getting = backend.SQLiteStore._get_trials


def list_counted(self, *args):
    rows = listing(self, *args)
    reads.append({"call": "list_trials", "fields": sorted(args[-1]), "rows": len(rows)})
    return rows


def get_counted(self, ids, fields):
    rows = getting(self, ids, fields)
    reads.append({"call": "get_trials", "fields": sorted(fields), "rows": len(rows)})
    return rows


backend.SQLiteStore._list_trials = list_counted
backend.SQLiteStore._get_trials = get_counted
from dnnframe.cli import cli

try:
    cli.main(sys.argv[2:], prog_name="dnnframe")
finally:
    with open(sys.argv[1], "w") as f:
        json.dump(reads, f)
"""

SPEC = {
    "name": "quiet-parent",
    "dataset": {"name": "iris"},
    "model": {
        "hidden_layers": {"grid": [1, 2]},
        "width": 4,
        "activation": {"grid": ["tanh", "relu"]},
    },
    "training": {
        "optimizer": "sgd",
        "learning_rate": {"grid": [0.01, 0.1]},
        "batch_size": 32,
        "max_epochs": 3,
        "early_stopping": None,
    },
    "search": {"seeds": 30},
}


def run_counted(tmp_path: Path, name: str, *args: str) -> tuple[subprocess.CompletedProcess, list]:
    out = tmp_path / f"{name}.json"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("DNNFRAME_STORE_URL", None)
    proc = subprocess.run(
        [sys.executable, "-c", COUNTING_CLI, str(out), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return proc, json.loads(out.read_text())


def whole_row_reads(reads: list) -> list:
    """Reads that returned more than one row with a config or a result in it (the best
    trial so far is one whole row: allowed)."""
    return [r for r in reads if r["rows"] > 1 and {"config", "result"} & set(r["fields"])]


@pytest.mark.slow
def test_run_follows_and_summarises_a_sweep_without_reading_whole_rows(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC), encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'results.db'}"
    proc, reads = run_counted(
        tmp_path, "first", "run", str(spec), "--store", url, "-w", "2", "--json"
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["counts"]["COMPLETE"] == 240 and summary["trials_run_now"] == 240
    assert len(summary["best_configs"]) == 5 and summary["best_configs"][0]["n"] == 30
    assert whole_row_reads(reads) == [], reads
    # the summary's values are those of the stored trials
    with open_store(url) as store:
        trials = store.list_trials(summary["experiment_id"])
    best = max(t.result["metrics"]["test_accuracy"] for t in trials)
    assert summary["best"]["test_accuracy"] == best

    # a rerun with nothing to train reads the same way (what it reuses, then the summary)
    proc, reads = run_counted(tmp_path, "again", "run", str(spec), "--store", url, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["trials_run_now"] == 0
    assert whole_row_reads(reads) == [], reads
    # and so does `dnnframe status`
    proc, reads = run_counted(tmp_path, "status", "status", "quiet-parent", "--store", url)
    assert proc.returncode == 0, proc.stderr
    assert "Best configurations" in proc.stdout
    assert whole_row_reads(reads) == [], reads
