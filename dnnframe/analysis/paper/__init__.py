"""The paper's research questions, answered from stored results (McLeod 2015 reproduction).

One study, not the platform: nothing in the core imports it. Modules: ``rows`` (stored
trials as flat rows), ``depth`` (RQ1/RQ2 statistics), ``signal`` (why deep stacks fail),
``repro`` (RQ5), ``figures`` and ``report`` (the generated files).

Everything here reads a :class:`~dnnframe.store.base.ResultStore` and never trains:

* :func:`collect_rows` flattens finished trials into plain rows (dataset, style, depth,
  seed, accuracy, timings, state);
* :func:`by_design_and_depth` gives mean and spread over seeds per (dataset, style, depth);
* :func:`linear_fit` fits ``y = slope * x + intercept`` and its R² (training time vs depth);
* :func:`collapse_depth` / :func:`plateau_summary` / :func:`deepest_vs_best` answer RQ2
  (where accuracy falls to the majority-class rate, whether it stops improving past 500–700
  layers, whether the deepest network keeps the accuracy of the best depth);
* :func:`compare_stores` answers RQ5 (same spec twice → identical stored metrics, every
  result carrying its environment);
* :func:`write_paper_report` writes ``report.md``, ``summary.json``, one self-contained
  ``figures.html`` (plotly.js inlined, works offline) and PNGs when kaleido can render.

>>> rows = [{"dataset": "iris", "style": "s", "hidden_layers": d, "depth": d, "seed": s,
...          "state": "COMPLETE",
...          "test_accuracy": a, "train_seconds": 1.0 + d, "compile_seconds": 2.0,
...          "seconds_per_epoch": 0.1 + d / 10, "epochs_run": 10, "chance": 0.33}
...         for d, s, a in [(1, 0, 0.9), (1, 1, 0.8), (10, 0, 0.5), (10, 1, 0.5)]]
>>> [(g["depth"], round(g["acc_mean"], 3), g["n"]) for g in by_design_and_depth(rows)]
[(1, 0.85, 2), (10, 0.5, 2)]
>>> fit = linear_fit([1, 2, 3], [3, 5, 7])
>>> round(fit.slope, 6), round(fit.intercept, 6), round(fit.r2, 6)
(2.0, 1.0, 1.0)
"""

from __future__ import annotations

from ..report import LinearFit, linear_fit
from .depth import (
    by_design_and_depth,
    collapse_depth,
    deepest_vs_best,
    plateau_summary,
    time_fits,
)
from .figures import build_figures, write_figures_html, write_pngs
from .report import markdown_table, write_paper_report
from .repro import compare_stores, write_repro_report
from .rows import (
    ANALYSED_STATES,
    CHANCE_MARGIN,
    collect_rows,
    majority_rate,
    style_label,
    trial_row,
)
from .signal import signal_at_init, signal_figure, signal_for_rows, signal_markdown

__all__ = [
    "ANALYSED_STATES",
    "CHANCE_MARGIN",
    "LinearFit",
    "by_design_and_depth",
    "build_figures",
    "collapse_depth",
    "collect_rows",
    "deepest_vs_best",
    "compare_stores",
    "linear_fit",
    "majority_rate",
    "markdown_table",
    "plateau_summary",
    "signal_at_init",
    "signal_figure",
    "signal_for_rows",
    "signal_markdown",
    "style_label",
    "time_fits",
    "trial_row",
    "write_figures_html",
    "write_paper_report",
    "write_pngs",
    "write_repro_report",
]
