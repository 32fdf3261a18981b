"""The depth study's generated report: report.md, summary.json, figures."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ... import report
from ...exceptions import DnnframeError
from ...store.base import ResultStore, TrialState
from .depth import (
    aggregate_by_depth,
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
    groups = aggregate_by_depth(rows)
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
    lines = [
        "# Depth study: generated report",
        "",
        "Generated by `dnnframe.analysis.paper.write_paper_report` from the stored results; "
        "do not edit by hand.",
        "",
    ]
    if command:
        lines += ["Regenerate with:", "", "```", command, "```", ""]
    lines += [
        f"Store: `{summary['store']}` — {summary['n_trials']} analysed trials "
        f"({summary['n_diverged']} DIVERGED), experiments: "
        + ", ".join(f"`{e}`" for e in summary["experiments"]),
        "",
        # not a link: the file is not kept in git, so the documentation site has no target
        "Figures: `figures.html` beside this report (interactive, self-contained, works "
        "offline; written with this report by `docs/paper/reproduce.sh`, not kept in git)",
        "",
    ]
    for p in pngs:
        lines += [f"![{p}]({p})", ""]
    lines += [
        "## Training time vs depth (RQ1)",
        "",
        "Least-squares line of seconds per epoch against hidden layers, over every trial.",
        "",
        "| dataset | style | slope (ms / layer / epoch) | intercept s | R² | trials |",
        "|---|---|---|---|---|---|",
    ]
    for f in summary["fits_seconds_per_epoch"]:
        lines.append(
            f"| {f['dataset']} | {f['style']} | {f['slope'] * 1000:.3f} | {f['intercept']:.3f} "
            f"| {f['r2']:.3f} | {f['n']} |"
        )
    lines += [
        "",
        "Same for total training seconds per trial (differs when epochs differ: early stopping, "
        "divergence):",
        "",
        "| dataset | style | slope (ms / layer) | R² |",
        "|---|---|---|---|",
    ]
    for f in summary["fits_train_seconds"]:
        lines.append(f"| {f['dataset']} | {f['style']} | {f['slope'] * 1000:.2f} | {f['r2']:.3f} |")
    lines += [
        "",
        "## Compile time vs depth",
        "",
        "Cold compiles only (the first trial of a graph shape in a worker process; later trials "
        "reuse it):",
        "",
        "| depths | cold compiles | mean s | max s |",
        "|---|---|---|---|",
    ]
    for c in summary["compile_seconds"]:
        lines.append(f"| {c['depths']} | {c['n_cold']} | {c['mean_s']:.2f} | {c['max_s']:.2f} |")
    lines += [
        "",
        "## Where accuracy falls to the majority-class rate (RQ2)",
        "",
        f"Smallest depth whose mean test accuracy is within {CHANCE_MARGIN} of always predicting "
        "the majority class ('never' = stays above it up to the deepest tested).",
        "",
        "| dataset | style | collapse depth |",
        "|---|---|---|",
    ]
    for c in summary["collapse_depth"]:
        lines.append(
            f"| {c['dataset']} | {c['style']} "
            f"| {c['depth'] if c['depth'] is not None else 'never'} |"
        )
    lines += [
        "",
        "## Plateau past 500–700 layers? (RQ2)",
        "",
        "| dataset | style | best depth | best acc | mean acc 500–700 | deepest | acc there "
        "| chance | improves past 700 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in summary["plateau"]:
        lines.append(
            f"| {p['dataset']} | {p['style']} | {p['best_depth']} | {_fmt(p['best_acc'])} "
            f"| {_fmt(p['band_acc_mean'])} | {p['deepest_depth']} | {_fmt(p['deepest_acc'])} "
            f"| {_fmt(p['chance'])} | {p['improves_past_band']} |"
        )
    lines += [
        "",
        "## Does the deepest network keep its accuracy?",
        "",
        f"Best mean test accuracy at any depth against the mean at the deepest depth; 'keeps' "
        f"when the deepest is within {CHANCE_MARGIN} of the best.",
        "",
        "| dataset | style | best depth | best acc | deepest | acc there (± std) | gap | keeps |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for d in summary["deepest_vs_best"]:
        lines.append(
            f"| {d['dataset']} | {d['style']} | {d['best_depth']} | {_fmt(d['best_acc'])} "
            f"| {d['deepest_depth']} | {_fmt(d['deepest_acc'])} ± {_fmt(d['deepest_std'])} "
            f"| {_fmt(d['gap'])} | {'yes' if d['keeps_accuracy'] else 'no'} |"
        )
    if summary.get("signal_at_init"):
        lines += [
            "",
            "## Why: the signal of the freshly initialised network",
            "",
            "Computed in NumPy for the same architecture and init as the engine (seed 0, the "
            "training split): the spread of the last hidden layer over the examples (→ 0: all "
            "inputs map to the same point, the output layer cannot tell classes apart) and the "
            "ratio of the first to the last hidden layer's weight-gradient norm (≪ 1 vanishing, "
            "≫ 1 exploding). 'overflow/0' = the float64 range was exceeded or the value is "
            "exactly 0.",
            "",
            signal_markdown(summary["signal_at_init"]),
        ]
    lines += ["", "## Every (dataset, style, depth)", "", markdown_table(groups)]
    return "\n".join(lines) + "\n"
