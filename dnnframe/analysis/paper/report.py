"""The depth study's generated report: report.md, summary.json, figures."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ...exceptions import DnnframeError
from ...store.base import ResultStore, TrialState
from .. import report
from .depth import (
    by_design_and_depth,
    collapse_depth,
    deepest_vs_best,
    plateau_summary,
    time_fits,
)
from .figures import build_figures, write_figures_html, write_pngs
from .rows import CHANCE_MARGIN, collect_rows
from .signal import signal_figure, signal_for_rows, signal_markdown


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:.{digits}f}" if isinstance(v, float) else str(v)


_TABLE_COLUMNS = (
    "dataset",
    "style",
    "depth",
    "n",
    "n_diverged",
    "acc_mean",
    "acc_std",
    "acc_min",
    "acc_max",
    "chance",
    "train_s_mean",
    "s_per_epoch_mean",
    "compile_s_mean",
)
_TABLE_HEADERS = (
    "dataset",
    "style",
    "depth",
    "seeds",
    "diverged",
    "test acc mean",
    "± std",
    "min",
    "max",
    "chance",
    "train s",
    "s/epoch",
    "compile s",
)


def markdown_table(groups: Sequence[dict[str, Any]]) -> str:
    """A markdown table: one row per (dataset, style, depth) with accuracy and time columns."""
    return report.markdown_table(groups, _TABLE_COLUMNS, _TABLE_HEADERS, floatfmt=".3f") + "\n"


def write_paper_report(
    store: ResultStore,
    outdir: str | Path,
    experiment_ids: Sequence[str] | None = None,
    png: bool = True,
    command: str | None = None,
    baseline: str | Path | None = None,
) -> dict[str, Any]:
    """Write report.md, summary.json, figures.html (and PNGs) for the RQ1/RQ2 sweeps in ``store``.

    Args:
        store: the store the paper specs were run into.
        outdir: created if missing; files in it are overwritten.
        experiment_ids: restrict to these experiments (default: every experiment in the store).
        png: also render PNGs with kaleido when it is installed.
        command: the command that regenerates the report (written into report.md).
        baseline: the summary.json of an earlier report; its accuracy curves are drawn,
            dotted, in the accuracy figure for comparison.
    Returns:
        The summary dict also written to summary.json.
    """
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    rows = collect_rows(store, experiment_ids)
    if not rows:
        raise DnnframeError(
            f"no COMPLETE or DIVERGED trials in {store.url or 'the store'}"
            + (f" for experiments {', '.join(experiment_ids)}" if experiment_ids else "")
        )
    groups = by_design_and_depth(rows)
    fits = time_fits(rows)
    total_fits = time_fits(rows, "train_seconds")
    collapse = collapse_depth(groups)
    plateau = plateau_summary(groups)
    experiments = experiment_ids or [e.id for e in store.list_experiments(limit=10_000)]
    summary = {
        "store": store.url,
        "experiments": list(experiments),
        "n_trials": len(rows),
        "n_diverged": sum(1 for r in rows if r["state"] == TrialState.DIVERGED.value),
        "fits_seconds_per_epoch": [
            {"dataset": k[0], "style": k[1], **asdict(v)} for k, v in fits.items()
        ],
        "fits_train_seconds": [
            {"dataset": k[0], "style": k[1], **asdict(v)} for k, v in total_fits.items()
        ],
        "collapse_depth": [
            {"dataset": k[0], "style": k[1], "depth": v} for k, v in collapse.items()
        ],
        "plateau": plateau,
        "deepest_vs_best": deepest_vs_best(groups),
        "compile_seconds": _compile_summary(rows),
        "groups": groups,
    }
    (out / "summary.json").write_text(
        json.dumps(summary, indent=1, default=str) + "\n", encoding="utf-8"
    )
    signal = signal_for_rows(rows)
    summary["signal_at_init"] = signal
    (out / "summary.json").write_text(
        json.dumps(summary, indent=1, default=str) + "\n", encoding="utf-8"
    )
    earlier = []
    if baseline is not None:
        earlier = json.loads(Path(baseline).read_text(encoding="utf-8"))["groups"]
        summary["baseline"] = str(baseline)
    figures = build_figures(rows, groups, fits, baseline=earlier)
    if signal:
        figures["signal"] = signal_figure(signal)
    write_figures_html(figures, out / "figures.html")
    pngs = write_pngs(figures, out) if png else []
    (out / "report.md").write_text(
        _report_markdown(summary, groups, pngs, command), encoding="utf-8"
    )
    summary["pngs"] = pngs
    return summary


def _compile_summary(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    # The first trial of a graph shape in a worker pays the compile; later ones hit the cache
    # (compile ≈ 0). Report the cold compiles (> 0.5 s) by depth band to show they are flat.
    cold = [r for r in rows if (r["compile_seconds"] or 0) > 0.5]
    bands = [(1, 9), (10, 99), (100, 499), (500, 1000), (1001, 10**6)]
    out = []
    for lo, hi in bands:
        vals = [r["compile_seconds"] for r in cold if lo <= r["depth"] <= hi]
        if vals:
            out.append(
                {
                    "depths": f"{lo}-{hi}",
                    "n_cold": len(vals),
                    "mean_s": statistics.fmean(vals),
                    "max_s": max(vals),
                }
            )
    return out


def _report_markdown(
    summary: dict[str, Any], groups: Sequence[dict[str, Any]], pngs: list[str], command: str | None
) -> str:
    """report.md: paragraphs (a heading, a sentence, a table) separated by blank lines."""
    paragraphs = _preamble(summary, pngs, command)
    for section in _SECTIONS:
        paragraphs += section(summary)
    paragraphs += ["## Every (dataset, style, depth)", markdown_table(groups)]
    return "\n\n".join(paragraphs) + "\n"


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A markdown table, each cell as ``format`` writes it."""
    return "\n".join([_row(header), "|" + "---|" * len(header), *(_row(r) for r in rows)])


def _row(cells: Sequence[Any]) -> str:
    return "| " + " | ".join(f"{c}" for c in cells) + " |"


def _preamble(summary: dict[str, Any], pngs: list[str], command: str | None) -> list[str]:
    """The title, how to regenerate the report, what it was computed from, the figures."""
    paragraphs = [
        "# Depth study: generated report",
        "Generated by `dnnframe.analysis.paper.write_paper_report` from the stored results; "
        "do not edit by hand.",
    ]
    if command:
        paragraphs += ["Regenerate with:", f"```\n{command}\n```"]
    paragraphs += [
        f"Store: `{summary['store']}` — {summary['n_trials']} analysed trials "
        f"({summary['n_diverged']} DIVERGED), experiments: "
        + ", ".join(f"`{e}`" for e in summary["experiments"]),
        # not a link: the file is not kept in git, so the documentation site has no target
        "Figures: `figures.html` beside this report (interactive, self-contained, works "
        "offline; written with this report by `docs/paper/reproduce.sh`, not kept in git)",
    ]
    return paragraphs + [f"![{p}]({p})" for p in pngs]


def _training_time(summary: dict[str, Any]) -> list[str]:
    """RQ1: the fitted lines of seconds per epoch and of total seconds against depth."""
    per_epoch = _table(
        ("dataset", "style", "slope (ms / layer / epoch)", "intercept s", "R²", "trials"),
        [
            (
                f["dataset"],
                f["style"],
                f"{f['slope'] * 1000:.3f}",
                f"{f['intercept']:.3f}",
                f"{f['r2']:.3f}",
                f["n"],
            )
            for f in summary["fits_seconds_per_epoch"]
        ],
    )
    total = _table(
        ("dataset", "style", "slope (ms / layer)", "R²"),
        [
            (f["dataset"], f["style"], f"{f['slope'] * 1000:.2f}", f"{f['r2']:.3f}")
            for f in summary["fits_train_seconds"]
        ],
    )
    return [
        "## Training time vs depth (RQ1)",
        "Least-squares line of seconds per epoch against hidden layers, over every trial.",
        per_epoch,
        "Same for total training seconds per trial (differs when epochs differ: early stopping, "
        "divergence):",
        total,
    ]


def _compile_time(summary: dict[str, Any]) -> list[str]:
    """The cold compiles by depth band."""
    return [
        "## Compile time vs depth",
        "Cold compiles only (the first trial of a graph shape in a worker process; later trials "
        "reuse it):",
        _table(
            ("depths", "cold compiles", "mean s", "max s"),
            [
                (c["depths"], c["n_cold"], f"{c['mean_s']:.2f}", f"{c['max_s']:.2f}")
                for c in summary["compile_seconds"]
            ],
        ),
    ]


def _collapse(summary: dict[str, Any]) -> list[str]:
    """RQ2: the depth where accuracy falls to the majority-class rate."""
    return [
        "## Where accuracy falls to the majority-class rate (RQ2)",
        f"Smallest depth whose mean test accuracy is within {CHANCE_MARGIN} of always predicting "
        "the majority class ('never' = stays above it up to the deepest tested).",
        _table(
            ("dataset", "style", "collapse depth"),
            [
                (c["dataset"], c["style"], c["depth"] if c["depth"] is not None else "never")
                for c in summary["collapse_depth"]
            ],
        ),
    ]


def _plateau(summary: dict[str, Any]) -> list[str]:
    """RQ2: whether accuracy still improves past the 500–700 layer band."""
    header = (
        "dataset",
        "style",
        "best depth",
        "best acc",
        "mean acc 500–700",
        "deepest",
        "acc there",
        "chance",
        "improves past 700",
    )
    rows = [
        (
            p["dataset"],
            p["style"],
            p["best_depth"],
            _fmt(p["best_acc"]),
            _fmt(p["band_acc_mean"]),
            p["deepest_depth"],
            _fmt(p["deepest_acc"]),
            _fmt(p["chance"]),
            p["improves_past_band"],
        )
        for p in summary["plateau"]
    ]
    return ["## Plateau past 500–700 layers? (RQ2)", _table(header, rows)]


def _deepest(summary: dict[str, Any]) -> list[str]:
    """Whether the deepest network keeps the accuracy of the best depth."""
    header = (
        "dataset",
        "style",
        "best depth",
        "best acc",
        "deepest",
        "acc there (± std)",
        "gap",
        "keeps",
    )
    rows = [
        (
            d["dataset"],
            d["style"],
            d["best_depth"],
            _fmt(d["best_acc"]),
            d["deepest_depth"],
            f"{_fmt(d['deepest_acc'])} ± {_fmt(d['deepest_std'])}",
            _fmt(d["gap"]),
            "yes" if d["keeps_accuracy"] else "no",
        )
        for d in summary["deepest_vs_best"]
    ]
    return [
        "## Does the deepest network keep its accuracy?",
        f"Best mean test accuracy at any depth against the mean at the deepest depth; 'keeps' "
        f"when the deepest is within {CHANCE_MARGIN} of the best.",
        _table(header, rows),
    ]


def _signal(summary: dict[str, Any]) -> list[str]:
    """Why deep stacks fail: the signal at initialisation (absent when it was not computed)."""
    if not summary.get("signal_at_init"):
        return []
    return [
        "## Why: the signal of the freshly initialised network",
        "Computed in NumPy for the same architecture and init as the engine (seed 0, the "
        "training split): the spread of the last hidden layer over the examples (→ 0: all "
        "inputs map to the same point, the output layer cannot tell classes apart) and the "
        "ratio of the first to the last hidden layer's weight-gradient norm (≪ 1 vanishing, "
        "≫ 1 exploding). 'overflow/0' = the float64 range was exceeded or the value is "
        "exactly 0.",
        signal_markdown(summary["signal_at_init"]),
    ]


# The report's sections in order, each a list of paragraphs read from the summary; the table
# of every group closes the report.
_SECTIONS: tuple[Callable[[dict[str, Any]], list[str]], ...] = (
    _training_time,
    _compile_time,
    _collapse,
    _plateau,
    _deepest,
    _signal,
)
