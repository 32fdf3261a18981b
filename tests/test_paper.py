"""The paper-reproduction specs and the analysis in dnnframe.analysis.paper, on a real SQLite store.

Nothing here trains a network: results are written into a store by hand with known
accuracies and timings, so means, spreads, fits and R² can be checked exactly.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest
from click.testing import CliRunner

from dnnframe.analysis import paper
from dnnframe.cli import cli
from dnnframe.spec import TrialConfig, count_trials, expand, load_spec
from dnnframe.store import open_store
from dnnframe.store.base import TrialState

PAPER_DIR = Path(__file__).resolve().parents[1] / "experiments" / "paper"
DEPTHS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 500, 550, 600, 650, 700, 1000]


@pytest.mark.parametrize(
    ("name", "n_trials"),
    [
        ("rq1_2015_plain.yaml", 405),
        ("rq1_modern_relu_he.yaml", 135),
        ("rq1_modern_relu_he_residual.yaml", 135),
        ("rq1_modern_tanh_residual.yaml", 135),
        ("rq1_modern_selu.yaml", 135),
        ("rq1_digits_2015_plain.yaml", 135),
        ("rq1_digits_modern_relu_he.yaml", 45),
        ("rq1_digits_modern_relu_he_residual.yaml", 45),
        ("rq1_digits_modern_tanh_residual.yaml", 45),
        ("rq1_digits_modern_selu.yaml", 45),
        ("rq2_long_2015_tanh.yaml", 20),
        ("rq2_long_modern_selu.yaml", 20),
        ("rq2_rezero.yaml", 72),
        ("rq2_preln_scaled.yaml", 72),
        ("rq2_rezero_valacc.yaml", 72),
        ("rq5_repro.yaml", 24),
        ("pilot.yaml", 12),
    ],
)
def test_paper_specs_validate_with_their_trial_counts(name: str, n_trials: int) -> None:
    spec = load_spec(PAPER_DIR / name)
    assert count_trials(spec) == n_trials
    assert len(list(expand(spec))) == n_trials


def test_depth_sweeps_cover_1_to_1000_on_four_datasets_with_dense_500_700_band() -> None:
    small = sorted(p for p in PAPER_DIR.glob("rq1_*.yaml") if "digits" not in p.name)
    digits = sorted(PAPER_DIR.glob("rq1_digits_*.yaml"))
    assert len(small) == len(digits) == 5
    for paths, datasets, n_seeds in (
        (small, {"iris", "wine", "breast_cancer"}, 3),
        (digits, {"digits"}, 3),
    ):
        for path in paths:
            trials = list(expand(load_spec(path)))
            assert sorted({t.model.hidden_layers for t in trials}) == DEPTHS, path.name
            assert {t.dataset.name for t in trials} == datasets, path.name
            assert len({t.seed for t in trials}) == n_seeds, path.name
            # every depth of every dataset has every seed: the mean over seeds is over the same
            # seeds
            assert len(trials) == len(DEPTHS) * len(datasets) * n_seeds * len(
                {t.model.activation for t in trials}
            )


def test_2015_and_modern_styles_differ_as_described() -> None:
    old = [
        t
        for name in ("rq1_2015_plain.yaml", "rq1_digits_2015_plain.yaml")
        for t in expand(load_spec(PAPER_DIR / name))
    ]
    assert {t.model.activation for t in old} == {"sigmoid", "tanh", "relu"}
    assert {(t.model.init, t.training.optimizer, t.model.residual) for t in old} == {
        ("glorot", "sgd", "none")
    }
    modern = {
        paper.style_label(t.model_dump(mode="json"))
        for p in [*PAPER_DIR.glob("rq1_modern_*.yaml"), *PAPER_DIR.glob("rq1_digits_modern_*.yaml")]
        for t in expand(load_spec(p))
    }
    assert modern == {
        "relu/he/adam",
        "relu/he/adam/residual",
        "tanh/glorot/adam/residual",
        "selu/lecun/adam",
    }


# --------------------------------------------------------------------------- synthetic store
def _config(dataset: str, depth: int, seed: int, activation: str = "tanh") -> dict:
    return TrialConfig.model_validate(
        {
            "dataset": {"name": dataset},
            "model": {"hidden_layers": depth, "width": 4, "activation": activation},
            "training": {"optimizer": "sgd"},
            "seed": seed,
        }
    ).model_dump(mode="json")


def _result(acc: float | None, train_s: float, compile_s: float, epochs: int) -> dict:
    return {
        "status": "COMPLETE",
        "metrics": {
            "test_accuracy": acc,
            "val_accuracy": acc,
            "train_accuracy": acc,
            "test_loss": 1.0,
            "val_loss": 1.0,
            "train_loss": 1.0,
        },
        "history": [
            {
                "epoch": e + 1,
                "train_loss": 1.0 / (e + 1),
                "train_accuracy": acc,
                "val_loss": 1.0,
                "val_accuracy": acc,
                "seconds": train_s / epochs,
            }
            for e in range(epochs)
        ],
        "timings": {
            "data": 0.0,
            "compile": compile_s,
            "train": train_s,
            "total": compile_s + train_s,
        },
        "n_params": 10,
        "environment": {"python": "3.11", "pytensor": "3.0.7", "host": "h"},
        "epochs_run": epochs,
    }


# (depth, seed) -> test accuracy on iris; deep stacks fall to 1/3 (iris' test split is balanced)
ACC = {
    (1, 0): 0.90,
    (1, 1): 0.80,
    (10, 0): 0.70,
    (10, 1): 0.60,
    (100, 0): 1 / 3,
    (100, 1): 1 / 3,
    (1000, 0): 1 / 3,
    (1000, 1): 0.40,
}


def _fill(
    store,
    experiment_id: str = "exp-paper-test",
    state: TrialState = TrialState.COMPLETE,
    jitter: float = 0.0,
) -> list[str]:
    store.create_experiment(experiment_id, "paper-test", {"name": "paper-test"}, len(ACC) + 1)
    trials = [(f"t-{d}-{s}", _config("iris", d, s)) for d, s in ACC]
    trials.append(("t-diverged", _config("iris", 1000, 2)))
    store.create_trials(experiment_id, trials)
    for (d, s), acc in ACC.items():
        tid = f"t-{d}-{s}"
        assert store.claim_trial(tid, "w") is not None
        # seconds per epoch exactly 0.01 + 0.002 * depth, 10 epochs; compile flat at 3 s
        store.finish_trial(
            tid, state, result=_result(acc + jitter, 10 * (0.01 + 0.002 * d), 3.0, 10), worker="w"
        )
    assert store.claim_trial("t-diverged", "w") is not None
    diverged = _result(None, 0.5, 3.0, 2)
    diverged["status"] = "DIVERGED"
    store.finish_trial(
        "t-diverged", TrialState.DIVERGED, result=diverged, error="diverged", worker="w"
    )
    return [t for t, _ in trials]


@pytest.fixture
def store(tmp_path: Path):
    s = open_store(f"sqlite:///{tmp_path / 'paper.db'}")
    _fill(s)
    yield s
    s.close()


def test_rows_and_means_over_seeds(store) -> None:
    rows = paper.collect_rows(store)
    assert len(rows) == len(ACC) + 1
    assert {r["style"] for r in rows} == {"tanh/glorot/sgd"}
    groups = {g["depth"]: g for g in paper.by_design_and_depth(rows)}
    assert sorted(groups) == [1, 10, 100, 1000]
    assert groups[1]["acc_mean"] == pytest.approx(0.85)
    assert groups[1]["acc_std"] == pytest.approx(statistics.stdev([0.9, 0.8]))
    assert (groups[1]["acc_min"], groups[1]["acc_max"]) == (0.8, 0.9)
    assert groups[10]["acc_mean"] == pytest.approx(0.65)
    # the diverged seed counts as a trial but has no accuracy to average
    assert (groups[1000]["n"], groups[1000]["n_diverged"]) == (3, 1)
    assert groups[1000]["acc_mean"] == pytest.approx((1 / 3 + 0.4) / 2)
    assert groups[1]["chance"] == pytest.approx(1 / 3)  # iris: balanced test split
    assert groups[100]["s_per_epoch_mean"] == pytest.approx(0.21)
    assert groups[1]["compile_s_mean"] == pytest.approx(3.0)


def test_time_fit_recovers_slope_intercept_and_r2(store) -> None:
    rows = paper.collect_rows(store)
    fit = paper.time_fits(rows)[("iris", "tanh/glorot/sgd")]
    # the diverged trial (2 epochs, 0.25 s/epoch at depth 1000) is off the line: R² < 1
    clean = paper.time_fits([r for r in rows if r["state"] == "COMPLETE"])[
        ("iris", "tanh/glorot/sgd")
    ]
    assert clean.slope == pytest.approx(0.002)
    assert clean.intercept == pytest.approx(0.01)
    assert clean.r2 == pytest.approx(1.0)
    assert clean.n == len(ACC)
    assert fit.n == len(ACC) + 1 and fit.r2 < 0.999
    ys = [r["seconds_per_epoch"] for r in rows]
    xs = [r["depth"] for r in rows]
    mean_y = statistics.fmean(ys)
    expected_r2 = 1 - sum((y - (fit.slope * x + fit.intercept)) ** 2 for x, y in zip(xs, ys)) / sum(
        (y - mean_y) ** 2 for y in ys
    )
    assert fit.r2 == pytest.approx(expected_r2)


def test_deep_design_sweeps_and_their_style_names() -> None:
    styles = set()
    for name in (
        "rq2_rezero.yaml",
        "rq2_preln_scaled.yaml",
        "rq2_rezero_valacc.yaml",
        "rq2_rezero_preln_dropout.yaml",
    ):
        trials = list(expand(load_spec(PAPER_DIR / name)))
        assert sorted({t.model.hidden_layers for t in trials}) == [1, 4, 16, 64, 256, 1000]
        assert {t.dataset.name for t in trials} == {"iris", "wine", "breast_cancer", "digits"}
        # the protocol of the RQ1 sweeps: width, batch, epochs, early stopping, lr, seeds
        assert {
            (
                t.model.width,
                t.training.batch_size,
                t.training.max_epochs,
                t.training.learning_rate,
                t.seed,
            )
            for t in trials
        } == {(16, 64, 40, 0.002, s) for s in range(3)}
        styles |= {paper.style_label(t.model_dump(mode="json")) for t in trials}
    assert styles == {
        "relu/he/adam/rezero [clip 1, warm-up 2, cosine]",
        "relu/he/adam/scaled/pre-layernorm [clip 1, warm-up 2, cosine]",
        "relu/he/adam/rezero [clip 1, warm-up 2, cosine, best val_accuracy]",
        "relu/he/adam/rezero/pre-layernorm [dropout 0.1, clip 1, warm-up 2, cosine]",
    }


def test_style_labels_read_the_first_format_too() -> None:
    def label(model: dict) -> str:
        return paper.style_label(
            {
                "model": {"activation": "relu", "init": "he", **model},
                "training": {"optimizer": "adam"},
            }
        )

    assert label({"residual": True}) == label({"residual": "identity"}) == "relu/he/adam/residual"
    assert label({"residual": False}) == label({}) == "relu/he/adam"
    assert label({"residual": "scaled", "residual_learnable": True}) == "relu/he/adam/skipinit"
    assert label({"normalization": "batch"}) == "relu/he/adam/batchnorm"
    # dropout is part of the design: with and without it are two styles, never merged
    assert label({"residual": "rezero", "dropout": 0.1}) == "relu/he/adam/rezero [dropout 0.1]"
    assert label({"residual": "rezero", "dropout": 0.0}) == "relu/he/adam/rezero"


def test_style_labels_name_a_selection_other_than_validation_loss() -> None:
    def label(training: dict) -> str:
        return paper.style_label(
            {
                "model": {"activation": "relu", "init": "he"},
                "training": {"optimizer": "adam", "max_epochs": 40, **training},
            }
        )

    assert label({"early_stopping": {"metric": "val_loss", "patience": 5}}) == "relu/he/adam"
    assert label({"early_stopping": {"metric": "val_accuracy", "patience": 5}}) == (
        "relu/he/adam [stop on val_accuracy]"
    )
    assert label({"early_stopping": {"metric": "val_accuracy", "patience": 40}}) == (
        "relu/he/adam [best val_accuracy]"
    )


def test_deepest_vs_best() -> None:
    groups = [
        {"dataset": "iris", "style": "s", "depth": d, "acc_mean": a, "acc_std": 0.01}
        for d, a in ((1, 0.90), (16, 0.95), (1000, 0.94))
    ]
    groups += [
        {"dataset": "wine", "style": "s", "depth": d, "acc_mean": a, "acc_std": 0.0}
        for d, a in ((1, 0.90), (1000, 0.40))
    ]
    iris, wine = paper.deepest_vs_best(groups)
    assert (iris["best_depth"], iris["deepest_depth"], iris["keeps_accuracy"]) == (16, 1000, True)
    assert iris["gap"] == pytest.approx(0.01)
    assert (wine["gap"], wine["keeps_accuracy"]) == (pytest.approx(0.5), False)


def test_collapse_and_plateau(store) -> None:
    groups = paper.by_design_and_depth(paper.collect_rows(store))
    assert paper.collapse_depth(groups) == {("iris", "tanh/glorot/sgd"): 100}
    (p,) = paper.plateau_summary(groups, band=(10, 100))
    assert (p["best_depth"], p["deepest_depth"]) == (1, 1000)
    assert p["best_acc"] == pytest.approx(0.85)
    assert p["band_acc_mean"] == pytest.approx((0.65 + 1 / 3) / 2)
    # 0.367 at 1000 vs 0.65 at 10: deeper than the band does not improve
    assert p["improves_past_band"] is False


def test_compare_stores_identical_and_different(tmp_path: Path, store) -> None:
    twin = open_store(f"sqlite:///{tmp_path / 'twin.db'}")
    _fill(twin)
    same = paper.compare_stores(store, twin, "exp-paper-test")
    assert same["identical_metrics"] is True and same["same_trial_ids"] is True
    assert same["with_environment"] == same["n_results"] == 2 * (len(ACC) + 1)
    assert same["with_worker_times_history"] == 2 * (len(ACC) + 1)
    other = open_store(f"sqlite:///{tmp_path / 'other.db'}")
    _fill(other, jitter=1e-12)  # a last-bit difference must be caught
    diff = paper.compare_stores(store, other, "exp-paper-test")
    assert diff["identical_metrics"] is False
    assert {m["field"] for m in diff["mismatches"]} == {"metrics", "history"}
    twin.close()
    other.close()


def test_write_paper_report_files_and_table(tmp_path: Path, store) -> None:
    out = tmp_path / "report"
    summary = paper.write_paper_report(store, out, png=False, command="dnnframe paper-report X")
    md = (out / "report.md").read_text()
    assert "dnnframe paper-report X" in md
    assert "| iris | tanh/glorot/sgd | 1 | 2 | 0 | 0.850 |" in md
    assert "| iris | tanh/glorot/sgd | 100 |" in md
    data = json.loads((out / "summary.json").read_text())
    assert data["n_trials"] == summary["n_trials"] == len(ACC) + 1
    assert data["collapse_depth"] == [{"dataset": "iris", "style": "tanh/glorot/sgd", "depth": 100}]
    html = (out / "figures.html").read_text()
    assert html.count("Plotly.newPlot") == 4  # accuracy, train time, compile time, signal at init
    assert [r["depth"] for r in data["signal_at_init"]] == [1, 10, 100, 1000]
    # works offline: plotly.js is inlined (megabytes), no script is fetched from anywhere
    assert "<script src=" not in html.replace('<script src="data:', "") and len(html) > 1_000_000


def test_empty_store_is_a_clear_error(tmp_path: Path) -> None:
    from dnnframe.exceptions import DnnframeError

    empty = open_store(f"sqlite:///{tmp_path / 'empty.db'}")
    with pytest.raises(DnnframeError, match="no COMPLETE or DIVERGED trials"):
        paper.write_paper_report(empty, tmp_path / "out", png=False)
    empty.close()


def test_cli_paper_report_with_repro(tmp_path: Path) -> None:
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    for path in (a, b):
        s = open_store(f"sqlite:///{path}")
        _fill(s)
        s.close()
    out = tmp_path / "docs"
    res = CliRunner().invoke(
        cli,
        [
            "paper-report",
            str(out),
            "--store",
            f"sqlite:///{a}",
            "--no-png",
            "--repro",
            f"sqlite:///{a}",
            f"sqlite:///{b}",
            "--repro-experiment",
            "paper-test",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "identical=True" in res.output
    repro = json.loads((out / "repro.json").read_text())
    assert repro["identical_metrics"] is True and not math.isnan(repro["n_results"])
    assert (out / "report.md").exists() and (out / "repro.md").exists()


def test_signal_at_init_shows_vanishing_and_exploding_signal() -> None:
    sig = {
        r["depth"]: r for r in paper.signal_at_init("iris", "sigmoid", "glorot", False, [1, 4, 32])
    }
    assert sig[1]["grad_ratio"] == pytest.approx(1.0)  # one hidden layer: first is last
    # sigmoid plain stack: every input ends at the same point, the first layer gets no gradient
    assert (
        sig[1]["act_std"] > 0.05
        and sig[4]["act_std"] < sig[1]["act_std"] / 10
        and sig[32]["act_std"] < 1e-10
    )
    assert sig[32]["grad_ratio"] < 1e-10
    res = {r["depth"]: r for r in paper.signal_at_init("iris", "relu", "he", True, [1, 64])}
    assert (
        res[64]["act_rms"] > 1e6 * res[1]["act_rms"]
    )  # identity + ReLU branch: grows ~2x per layer
    with pytest.raises(ValueError, match="activation='elu'"):
        paper.signal_at_init("iris", "elu", "he", False, [2])
