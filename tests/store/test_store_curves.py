"""Learning curves: any number of epochs per write is stored, each epoch exactly once.

The contract part runs on every backend (see conftest.py); the last test trains a real sweep
of fast epochs with ``dnnframe run`` and compares what the store holds with what training
returned.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest
import yaml

from dnnframe.store import TrialState, open_store


def _running(store, n: int) -> list[str]:
    store.create_experiment("e", "e", {}, n)
    ids = [f"t{i}" for i in range(n)]
    store.create_trials("e", [(tid, {"seed": i}) for i, tid in enumerate(ids)])
    assert len(store.claim_trials(ids, "w")) == n
    return ids


def _epochs(first: int, last: int, tag: str = "") -> list[dict]:
    return [{"epoch": e, "val_loss": 1.0 / e, "tag": tag} for e in range(first, last + 1)]


@pytest.mark.parametrize("counts", [(400,), (1, 49, 50, 51, 127, 1000)])
def test_any_number_of_epochs_in_one_write_is_stored_in_order(store, counts):
    ids = _running(store, len(counts))
    batch = {tid: _epochs(1, n) for tid, n in zip(ids, counts)}
    assert store.append_metrics_many(batch, worker="w") == set(ids)
    # and as many again in a second write, after what is there
    more = {tid: _epochs(n + 1, 2 * n) for tid, n in zip(ids, counts)}
    assert store.append_metrics_many(more, worker="w") == set(ids)
    for tid, n in zip(ids, counts):
        assert store.get_trial(tid).metrics == _epochs(1, 2 * n)
    assert store.rung_values("e", 50, "val_loss") == [1.0 / 50 for n in counts if 2 * n >= 50]


def test_an_epoch_already_stored_is_not_stored_again(store):
    a, b = _running(store, 2)
    assert store.append_metrics_many({a: _epochs(1, 3, "first try")}, worker="w") == {a}
    # the same write again (its answer was lost), then resent with the next epochs
    assert store.append_metrics_many({a: _epochs(1, 3, "again")}, worker="w") == {a}
    assert store.append_metrics_many(
        {a: _epochs(1, 5, "resent"), b: _epochs(1, 2)}, worker="w"
    ) == {a, b}
    assert store.get_trial(a).metrics == _epochs(1, 3, "first try") + _epochs(4, 5, "resent")
    assert store.get_trial(b).metrics == _epochs(1, 2)


def test_unnumbered_epochs_are_appended_as_given(store):
    (a,) = _running(store, 1)
    store.append_metrics(a, {"loss": 1.0}, worker="w")
    store.append_metrics(a, {"loss": 1.0}, worker="w")
    assert store.get_trial(a).metrics == [{"loss": 1.0}, {"loss": 1.0}]


@pytest.mark.parametrize(
    "stored",
    [
        '[ {"epoch": 1, "val_loss": 1.0, "tag": ""} ]',  # spaced, as another program writes
        '[{"epoch":1,"val_loss":1.0,"tag":""}]\n',  # a trailing newline
        "[\n]",  # an empty curve that is not spelled []
        '[{"epoch":1,"val_loss":1.0,"tag":""}]',  # the store's own spelling
    ],
)
def test_sqlite_appends_to_a_curve_however_its_text_is_spelled(tmp_path, stored):
    """SQLite joins the store's own compact curve text as it is and parses any other first:
    what is read back is the whole curve, whatever the stored text looked like."""
    path = tmp_path / "curves.db"
    store = open_store(f"sqlite:///{path}")
    try:
        (a,) = _running(store, 1)
        con = sqlite3.connect(path)
        with con:
            con.execute("UPDATE trials SET metrics = ? WHERE id = ?", (stored, a))
        con.close()
        before = json.loads(stored)
        assert store.append_metrics_many({a: _epochs(2, 4)}, worker="w") == {a}
        assert store.get_trial(a).metrics == before + _epochs(2, 4)
        # stored already: nothing is added
        assert store.append_metrics_many({a: _epochs(3, 4, "again")}, worker="w") == {a}
        assert store.get_trial(a).metrics == before + _epochs(2, 4)
    finally:
        store.close()


FAST_SPEC = {
    "name": "fast-epochs",
    "dataset": {"name": "iris"},
    "model": {"hidden_layers": 1, "width": 8, "activation": "relu"},
    "training": {
        "optimizer": "adam",
        "learning_rate": 0.01,
        "batch_size": 256,
        "max_epochs": 400,
        "early_stopping": None,
    },
    "search": {"seeds": 4},
}


def test_a_sweep_of_fast_epochs_stores_every_epoch(tmp_path):
    """Hundreds of epochs a second are written in large batches; every one is stored."""
    spec = tmp_path / "fast.yaml"
    spec.write_text(yaml.safe_dump(FAST_SPEC))
    url = f"sqlite:///{tmp_path / 'fast.db'}"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "dnnframe.cli",
            "run",
            str(spec),
            "-w",
            "1",
            "--store",
            url,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "could not record" not in done.stderr
    assert json.loads(done.stdout)["counts"]["COMPLETE"] == 4
    with open_store(url) as store:
        trials = store.list_trials()
        assert len(trials) == 4
        for t in trials:
            assert t.state is TrialState.COMPLETE
            history = t.result["history"]
            assert len(history) == t.result["epochs_run"] == 400
            assert t.metrics == history
