"""``dnnframe run`` with a tpe spec: the driver inside the command, as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from dnnframe.search.lease import driver_lease_name
from dnnframe.spec import parse_spec
from dnnframe.store import open_store

REPO = Path(__file__).resolve().parents[2]


SPEC = {
    "name": "cli-tpe",
    "dataset": {"name": "iris"},
    "model": {"width": 8},
    "training": {"learning_rate": {"loguniform": [0.001, 0.1]}, "max_epochs": 2},
    "search": {"method": "tpe", "num_samples": 4, "random_seed": 1},
}


def _run(tmp_path: Path, url: str) -> subprocess.CompletedProcess:
    path = tmp_path / "tpe.yaml"
    path.write_text(yaml.safe_dump(SPEC), encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "DNNFRAME_TRAIN_FN": "dnnframe.testing.hooks:sleepy_train",
        "DNNFRAME_HOOK_EPOCHS": "2",
        "DNNFRAME_HOOK_EPOCH_SECONDS": "0",
    }
    env.pop("DNNFRAME_STORE_URL", None)
    return subprocess.run(
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
        timeout=300,
    )


def test_dnnframe_run_drives_a_tpe_search(tmp_path):
    url = f"sqlite:///{tmp_path / 'tpe.db'}"
    proc = _run(tmp_path, url)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    store = open_store(url)
    trials = store.list_trials(summary["experiment_id"])
    assert len(trials) == 4
    assert all(t.state.value == "COMPLETE" for t in trials)
    assert len({t.config["training"]["learning_rate"] for t in trials}) == 4
    # the run held the experiment's driver lease while it drove, and gave it up at the end
    assert store.get_lease(driver_lease_name(summary["experiment_id"])) is None


def test_dnnframe_run_refuses_a_search_another_process_drives(tmp_path):
    url = f"sqlite:///{tmp_path / 'held.db'}"
    store = open_store(url)
    eid = parse_spec(SPEC).experiment_id
    assert store.acquire_lease(driver_lease_name(eid), "server-host:4242", 300)
    proc = _run(tmp_path, url)
    assert proc.returncode == 1
    assert f"experiment {eid} is already being driven by server-host:4242" in proc.stderr
    assert store.list_trials(eid) == []  # it asked nothing
    assert store.get_lease(driver_lease_name(eid)).owner == "server-host:4242"
