"""report.py: aggregation over seeds, linear fits, markdown tables and the HTML report.

Results are produced through the real runner and a real SQLite store with a training
function whose outputs are known (time grows linearly with depth), so the numbers the report
shows can be checked exactly.
"""

from __future__ import annotations

import math
import re

import pytest

from dnnframe.analysis import report
from dnnframe.engine.result import TrialResult
from dnnframe.spec import parse_spec
from dnnframe.store import open_store
from dnnframe.submit import submit_experiment
from dnnframe.testing.packs import run_one

SPEC = {
    "name": "report-test",
    "description": "depth 1-4 on iris",
    "dataset": {"name": "iris"},
    "model": {"hidden_layers": {"grid": [1, 2, 3, 4]}, "width": 8},
    "training": {"max_epochs": 3},
    "search": {"seeds": 3},
}


def known_train(config, on_epoch=None):
    """accuracy = 0.9 - 0.01*depth + 0.001*seed; train time = 0.5 + 0.25*depth seconds."""
    depth, seed = config.model.hidden_layers, config.seed
    history = []
    for e in range(1, 4):
        m = {
            "epoch": e,
            "train_loss": 1.0 / e,
            "val_loss": 1.1 / e,
            "val_accuracy": 0.3 * e,
            "train_accuracy": 0.3 * e,
            "seconds": 0.01,
        }
        history.append(m)
        on_epoch(e, m)
    return TrialResult(
        status="COMPLETE",
        metrics={"test_accuracy": 0.9 - 0.01 * depth + 0.001 * seed, "test_loss": 0.1},
        history=history,
        timings={"data": 0.0, "compile": 0.1 * depth, "train": 0.5 + 0.25 * depth, "total": 1.0},
        n_params=100 * depth,
        environment={},
        epochs_run=3,
    )


@pytest.fixture
def populated(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'report.db'}")
    result = submit_experiment(parse_spec(SPEC), store)
    for tid in result.trial_ids:
        run_one(tid, store, train=known_train)
    yield store, result.experiment.id
    store.close()


def test_aggregate_by_depth_gives_mean_and_spread_over_seeds(populated):
    store, exp_id = populated
    rows = report.trial_rows(store, exp_id)
    agg = report.aggregate_by_depth(rows, "test_accuracy")
    assert [a["hidden_layers"] for a in agg] == [1, 2, 3, 4]
    for a in agg:
        assert a["n"] == 3
        assert a["mean"] == pytest.approx(0.9 - 0.01 * a["hidden_layers"] + 0.001)
        assert a["std"] == pytest.approx(0.001)  # sample std of seeds 0, 1, 2 times 0.001
        assert a["max"] - a["min"] == pytest.approx(0.002)


def test_aggregate_leaves_out_unfinished_and_missing_values():
    rows = [
        {"state": "COMPLETE", "hidden_layers": 1, "m": 1.0},
        {"state": "FAILED", "hidden_layers": 1, "m": 5.0},
        {"state": "COMPLETE", "hidden_layers": 1, "m": None},
        {"state": "COMPLETE", "hidden_layers": 1, "m": math.nan},
    ]
    assert report.aggregate(rows, "hidden_layers", "m") == [
        {
            **{"hidden_layers": 1, "metric": "m", "n": 1, "mean": 1.0, "std": 0.0},
            **{"min": 1.0, "max": 1.0, "diverged": 0, "pruned": 0},
        }
    ]


def diverging_train(config, on_epoch=None):
    """:func:`known_train`, but depth 4 blows up on seed 2."""
    result = known_train(config, on_epoch)
    if (config.model.hidden_layers, config.seed) != (4, 2):
        return result
    lost = {"test_accuracy": math.nan, "test_loss": math.nan}
    return TrialResult(**{**result.__dict__, "status": "DIVERGED", "metrics": lost})


@pytest.fixture
def with_a_diverged_seed(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'diverged.db'}")
    result = submit_experiment(parse_spec(SPEC), store)
    for tid in result.trial_ids:
        run_one(tid, store, train=diverging_train)
    yield store, result.experiment
    store.close()


def test_the_report_counts_a_diverged_trial_as_the_worst_and_says_so(with_a_diverged_seed):
    store, exp = with_a_diverged_seed
    rows = report.trial_rows(store, exp.id)
    fig = report.figures(rows, "test_accuracy", "max")["depth_metric"]
    lost = [t for t in fig.data if t.name.startswith("diverged")]
    assert len(lost) == 1 and list(lost[0].x) == [4] and list(lost[0].y) == [0.0]
    assert "1 diverged, counted as 0, the worst" in fig.layout.title.text
    mean = next(t for t in fig.data if t.name.startswith("mean"))
    # depth 4: seeds 0 and 1 at 0.86 and 0.861, seed 2 counted as 0
    assert mean.y[-1] == pytest.approx((0.86 + 0.861) / 3)
    page = report.render_html(store, exp.id)
    assert "1 diverged trial count as the worst test_accuracy (0)" in page
    by_depth = page[page.index("By depth") : page.index("By configuration")]
    cells = re.findall(r"<tr><td>4</td><td>(\d+)</td><td>(\d+)</td>", by_depth)
    assert cells == [("3", "1")]  # n, diverged


def test_the_runs_summary_ranks_configurations_counting_a_diverged_seed(with_a_diverged_seed):
    from dnnframe.cli.common import _summary

    store, exp = with_a_diverged_seed
    summary = _summary(store, exp, "sqlite://")
    configs = summary["best_configs"]
    assert [c["hidden_layers"] for c in configs] == [1, 2, 3, 4]
    assert (configs[-1]["n"], configs[-1]["diverged"]) == (3, 1)
    assert configs[-1]["mean"] == pytest.approx((0.86 + 0.861) / 3)


def test_time_vs_depth_fit_recovers_the_line(populated):
    rows = report.trial_rows(populated[0], populated[1])
    fit = report.time_vs_depth_fit(rows)
    assert (fit.slope, fit.intercept, fit.r2, fit.n) == (
        pytest.approx(0.25),
        pytest.approx(0.5),
        pytest.approx(1.0),
        12,
    )
    assert report.time_vs_depth_fit(rows, "compile_seconds").slope == pytest.approx(0.1)


def test_linear_fit_r2_and_errors():
    fit = report.linear_fit([1, 2, 3, 4], [1.0, 3.0, 2.0, 4.0])
    assert fit.slope == pytest.approx(0.8) and fit.r2 == pytest.approx(0.64)
    with pytest.raises(ValueError, match="two distinct x values"):
        report.linear_fit([2, 2], [1.0, 3.0])


def test_markdown_table():
    text = report.markdown_table(
        [{"a": 1, "b": 0.123456, "c": None}, {"a": "x|y", "b": 2.0}],
        ["a", "b", "c"],
        ["A", "B", "C"],
        floatfmt=".2f",
    )
    assert text.splitlines() == [
        "| A | B | C |",
        "|---|---|---|",
        "| 1 | 0.12 |  |",
        "| x\\|y | 2.00 |  |",
    ]


def test_html_report_is_self_contained_with_all_charts(populated, tmp_path):
    store, exp_id = populated
    path = report.write_report(store, exp_id, tmp_path / "r.html")
    text = path.read_text()
    assert text.count("plotly.js v") == 1  # inlined exactly once
    assert not re.search(r"<script[^>]*\bsrc=", text)
    for title in (
        "Hidden layers vs test_accuracy",
        "Hidden layers vs training time",
        "Hidden layers vs compile time",
        "Learning curves (val_accuracy per epoch)",
    ):
        assert title in text
    assert "train_seconds ≈ 0.25 × hidden_layers + 0.5 (R² = 1.000, n = 12)" in text
    assert "depth 1-4 on iris" in text and "COMPLETE: 12" in text
    assert not list(tmp_path.glob("*.tmp")), "written atomically"


def test_report_of_an_unknown_experiment_is_not_found(populated):
    from dnnframe.exceptions import NotFoundError

    with pytest.raises(NotFoundError):
        report.render_html(populated[0], "exp-missing")


def cached_compile_train(config, on_epoch=None):
    """As :func:`known_train`, but seed 0 builds its graph (3 + 0.5*depth s) and seeds 1, 2
    find it in the compile cache (0.001 s), as trials sharing a worker do."""
    result = known_train(config, on_epoch)
    first = config.seed == 0
    result.timings["compile"] = 3.0 + 0.5 * config.model.hidden_layers if first else 0.001
    result.environment = {"compile_cache_hit": not first}
    return result


@pytest.fixture
def with_cache_hits(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'cache.db'}")
    result = submit_experiment(parse_spec(SPEC), store)
    for tid in result.trial_ids:
        run_one(tid, store, train=cached_compile_train)
    yield store, result.experiment.id
    store.close()


def test_compile_chart_fits_first_builds_and_shows_cache_hits_apart(with_cache_hits):
    store, exp_id = with_cache_hits
    trials = store.list_trials(exp_id)
    assert sorted(report.compile_reused(t) for t in trials) == [False] * 4 + [True] * 8
    rows = [
        {**report.trial_row(t), report.COMPILE_REUSED: report.compile_reused(t)} for t in trials
    ]
    fig = report.figures(rows)["depth_compile"]
    assert "first builds only" in fig.layout.title.text
    assert "8 cache hits shown apart" in fig.layout.title.text
    assert fig.layout.yaxis.title.text == "compile time of a first build (s)"
    points, mean, line, hits = fig.data
    assert sorted(points.y) == [3.5, 4.0, 4.5, 5.0]
    assert list(mean.y) == [3.5, 4.0, 4.5, 5.0] and list(mean.error_y.array) == [0, 0, 0, 0]
    assert line.name == "linear fit: 0.5s/layer, R²=1.000"
    assert list(hits.y) == [0.001] * 8 and hits.name == "cache hits (graph reused)"


def test_html_report_fits_compile_time_of_first_builds(with_cache_hits, tmp_path):
    store, exp_id = with_cache_hits
    text = report.write_report(store, exp_id, tmp_path / "r.html").read_text()
    assert "compile_seconds of first builds ≈ 0.5 × hidden_layers + 3 (R² = 1.000, n = 4)" in text
    assert "Hidden layers vs compile time, first builds only (8 cache hits shown apart" in text


def test_a_report_to_a_missing_directory_names_that_path(populated, tmp_path):
    target = tmp_path / "no-such-dir" / "r.html"
    with pytest.raises(FileNotFoundError) as exc:
        report.write_report(populated[0], populated[1], target)
    assert exc.value.filename == str(target)
    assert not (tmp_path / "no-such-dir").exists()
