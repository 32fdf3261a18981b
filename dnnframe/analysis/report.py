"""Paper figures and tables from stored results: depth vs accuracy and vs training time.

The building blocks are plain functions over "rows" (one flat dict per trial, see
:func:`trial_rows`) so the paper-reproduction scripts, the dashboard and ``dnnframe
report`` share them: :func:`aggregate` / :func:`aggregate_by_depth` (mean and spread over
seeds), :func:`linear_fit` (slope, intercept, R²), :func:`markdown_table`, and
:func:`render_html` — one self-contained HTML page with plotly.js inlined (no network).

>>> rows = [{"hidden_layers": 1, "test_accuracy": 0.9}, {"hidden_layers": 1, "test_accuracy": 0.8},
...         {"hidden_layers": 2, "test_accuracy": 0.95}]
>>> [(a["hidden_layers"], a["n"], round(a["mean"], 2)) for a in aggregate_by_depth(rows)]
[(1, 2, 0.85), (2, 1, 0.95)]
>>> fit = linear_fit([1, 2, 3], [2.0, 4.0, 6.0]); (round(fit.slope, 6), round(fit.r2, 6))
(2.0, 1.0)
"""

from __future__ import annotations

import html
import statistics
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..metrics import (
    DEFAULT_OBJECTIVE_METRIC,
    METRICS,
    configuration_order,
    counted_values,
    direction,
    is_number,
    rank,
)
from ..states import ANALYSED_STATES, SCORED_STATE, TrialState
from ..store.base import ResultStore, TrialRecord
from ..store.rows import CONFIG_COLUMNS, trial_row

# the state value report rows are scored in (only such trials have final metrics)
_SCORED = SCORED_STATE.value
_ANALYSED = frozenset(s.value for s in ANALYSED_STATES)
_DIVERGED = TrialState.DIVERGED.value
_PRUNED = TrialState.PRUNED.value


# --------------------------------------------------------------------------- rows
def trial_rows(store: ResultStore, experiment_id: str) -> list[dict[str, Any]]:
    """One :func:`trial_row` per trial of the experiment (raises NotFoundError if unknown)."""
    store.get_experiment(experiment_id)
    return [trial_row(t) for t in store.list_trials(experiment_id)]


def varied_columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Config columns that take more than one value across ``rows`` (what the sweep swept)."""

    def varies(column: str) -> bool:
        # all of one type and equal to the first, as repr would tell (1, 1.0 and True
        # differ), counted by C loops instead of writing every value out
        values = [r.get(column) for r in rows]
        return len(set(map(type, values))) > 1 or values.count(values[0]) != len(values)

    return [c for c in CONFIG_COLUMNS if rows and varies(c)]


# --------------------------------------------------------------------------- statistics
_finite = is_number


def counted_rows(rows: Iterable[dict[str, Any]], metric: str, mode: str) -> list[dict[str, Any]]:
    """The rows an analysis of ``metric`` counts, by the rule every chart and ranking counts
    by (:func:`dnnframe.metrics.counted_values`): complete and pruned trials with their
    value, a diverged one with the worst value of ``metric`` (``mode``: its direction)."""
    rows = [r for r in rows if r.get("state", _SCORED) in _ANALYSED]
    values = counted_values(
        [(r.get("state") == _DIVERGED, r.get(metric)) for r in rows], metric, mode
    )
    return [{**r, metric: v} for r, v in zip(rows, values)]


def aggregate(
    rows: Iterable[dict[str, Any]],
    by: str | Sequence[str],
    metric: str,
    states: Sequence[str] | None = (_SCORED,),
) -> list[dict[str, Any]]:
    """Group rows by ``by`` and summarise ``metric``: n, mean, std (sample; 0 for n=1), min,
    max, and of the n how many ``diverged`` and were ``pruned``.

    Rows whose metric is missing/non-finite or whose state is not in ``states`` (None: any)
    are left out (pass :func:`counted_rows` and None to count diverged trials as the worst).
    Groups come sorted by their key.
    """
    keys = [by] if isinstance(by, str) else list(by)
    groups: dict[tuple, list[tuple[float, str]]] = defaultdict(list)
    for r in rows:
        state = r.get("state", _SCORED)
        if states is not None and state not in states:
            continue
        v = r.get(metric)
        if _finite(v):
            groups[tuple(r.get(k) for k in keys)].append((float(v), state))
    out = []
    for key in sorted(
        groups,
        key=lambda k: tuple((x is None, x if not isinstance(x, str) else 0, str(x)) for x in k),
    ):
        vals = [v for v, _ in groups[key]]
        out.append(
            {
                **dict(zip(keys, key)),
                "metric": metric,
                "n": len(vals),
                "mean": statistics.fmean(vals),
                "std": statistics.stdev(vals) if len(vals) > 1 else 0.0,
                "min": min(vals),
                "max": max(vals),
                "diverged": sum(state == _DIVERGED for _, state in groups[key]),
                "pruned": sum(state == _PRUNED for _, state in groups[key]),
            }
        )
    return out


def best_aggregates(aggregates: Sequence[dict[str, Any]], mode: str) -> list[dict[str, Any]]:
    """``aggregates`` best first as the dashboard ranks configurations: a better mean, then
    more seeds, then a smaller spread."""
    return sorted(aggregates, key=lambda a: configuration_order(a["mean"], a["n"], a["std"], mode))


def aggregate_by_depth(
    rows: Iterable[dict[str, Any]],
    metric: str = DEFAULT_OBJECTIVE_METRIC,
    states: Sequence[str] | None = (_SCORED,),
) -> list[dict[str, Any]]:
    """:func:`aggregate` by ``hidden_layers``: mean and spread of ``metric`` at each depth."""
    return aggregate(rows, "hidden_layers", metric, states)


@dataclass(frozen=True)
class LinearFit:
    """Least-squares line ``y = slope * x + intercept`` with its coefficient of determination."""

    slope: float
    intercept: float
    r2: float
    n: int

    def predict(self, x: float) -> float:
        """The fitted y at ``x``."""
        return self.slope * x + self.intercept


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> LinearFit:
    """Ordinary least squares of ``ys`` on ``xs``; R² is 1 - SS_res/SS_tot (1.0 if ys are constant
    and fitted exactly). Needs at least two distinct x values."""
    pts = [(float(x), float(y)) for x, y in zip(xs, ys) if _finite(x) and _finite(y)]
    if len({x for x, _ in pts}) < 2:
        raise ValueError(
            f"a linear fit needs at least two distinct x values, but got {sorted({x for x, _ in pts})}"
        )
    n = len(pts)
    mx = sum(x for x, _ in pts) / n
    my = sum(y for _, y in pts) / n
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    sxy = sum((x - mx) * (y - my) for x, y in pts)
    slope = sxy / sxx
    intercept = my - slope * mx
    ss_tot = sum((y - my) ** 2 for _, y in pts)
    ss_res = sum((y - (slope * x + intercept)) ** 2 for x, y in pts)
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res < 1e-12 else 0.0)
    return LinearFit(slope, intercept, r2, n)


def time_vs_depth_fit(rows: Iterable[dict[str, Any]], metric: str = "train_seconds") -> LinearFit:
    """Linear fit of a timing (``train_seconds`` or ``compile_seconds``) against hidden layers
    over every COMPLETE trial."""
    pts = [
        (r["hidden_layers"], r[metric])
        for r in rows
        if r.get("state") == _SCORED and _finite(r.get(metric)) and _finite(r.get("hidden_layers"))
    ]
    return linear_fit([p[0] for p in pts], [p[1] for p in pts])


def markdown_table(
    rows: Sequence[dict[str, Any]],
    columns: Sequence[str],
    headers: Sequence[str] | None = None,
    floatfmt: str = ".4f",
) -> str:
    """A GitHub-flavoured markdown table of ``columns`` (floats formatted with ``floatfmt``)."""

    def fmt(v: Any) -> str:
        if v is None:
            return ""
        if isinstance(v, float):
            return format(v, floatfmt)
        return str(v).replace("|", "\\|")

    heads = list(headers) if headers else list(columns)
    lines = ["| " + " | ".join(heads) + " |", "|" + "|".join("---" for _ in heads) + "|"]
    lines += ["| " + " | ".join(fmt(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


# --------------------------------------------------------------------------- compile reuse
# Row key: True when the trial's graph came from the compile cache (compiled earlier by
# another trial), False when it was built, None when the trial does not say.
COMPILE_REUSED = "compile_cache_hit"


def compile_reused(trial: TrialRecord) -> bool | None:
    """Whether ``trial`` reused a compiled graph (``environment.compile_cache_hit``)."""
    hit = ((trial.result or {}).get("environment") or {}).get("compile_cache_hit")
    return hit if isinstance(hit, bool) else None


def first_builds(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows whose compile time is a real build: a cache hit's ~0 s says nothing about
    how compile time grows with depth, so mixing them in drags the fit and the spread."""
    return [r for r in rows if r.get(COMPILE_REUSED) is not True]


# --------------------------------------------------------------------------- figures
# a diverged trial as the dashboard's charts draw it (outcomes.js): a red ✕
_DIVERGED_MARKER = {"symbol": "x-thin-open", "color": "#c0392b", "size": 10, "line": {"width": 2}}


def figures(
    rows: Sequence[dict[str, Any]], metric: str = DEFAULT_OBJECTIVE_METRIC, mode: str | None = None
) -> dict[str, Any]:
    """The report's plotly figures keyed by name: ``depth_metric``, ``depth_time``,
    ``depth_compile`` and ``learning_curves`` (those with no data are left out).

    ``depth_metric`` counts trials as every analysis does (:func:`counted_rows`, ``mode``
    the objective's direction): a diverged trial as the worst value, drawn apart as a red
    ✕ and counted in the title.

    ``depth_compile`` shows first builds only (mean, spread and fit); trials whose graph
    came from the compile cache (row key :data:`COMPILE_REUSED` True) are a separate,
    faint series left out of both.
    """
    import plotly.graph_objects as go

    figs: dict[str, Any] = {}
    done = [r for r in rows if r.get("state") == _SCORED]
    counted = counted_rows(rows, metric, mode or direction(metric))

    def depth_figure(
        pts_rows: list[dict[str, Any]], column: str, title: str, ytitle: str, fit: bool
    ) -> Any | None:
        agg = aggregate_by_depth(pts_rows, column, states=None)  # the rows are those counted
        if not agg:
            return None
        fig = go.Figure()
        pts = [r for r in pts_rows if _finite(r.get(column))]
        lost = [r for r in pts if r.get("state") == _DIVERGED]
        for name, marked, marker in (
            ("trials", [r for r in pts if r.get("state") != _DIVERGED], {}),
            ("diverged (counted as the worst)", lost, _DIVERGED_MARKER),
        ):
            if marked:
                fig.add_trace(
                    go.Scatter(
                        x=[r["hidden_layers"] for r in marked],
                        y=[r[column] for r in marked],
                        mode="markers",
                        name=name,
                        opacity=0.45 if not marker else 0.9,
                        marker=marker,
                        text=[f"{r['trial_id']} seed={r['seed']}" for r in marked],
                    )
                )
        if lost:
            title += f" ({len(lost)} diverged, counted as {lost[0][column]:.4g}, the worst)"
        fig.add_trace(
            go.Scatter(
                x=[a["hidden_layers"] for a in agg],
                y=[a["mean"] for a in agg],
                error_y={"type": "data", "array": [a["std"] for a in agg], "visible": True},
                mode="lines+markers",
                name="mean ± std over seeds",
            )
        )
        if fit and len(agg) >= 2:
            lf = time_vs_depth_fit(pts_rows, column)
            xs = [agg[0]["hidden_layers"], agg[-1]["hidden_layers"]]
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=[lf.predict(x) for x in xs],
                    mode="lines",
                    line={"dash": "dot"},
                    name=f"linear fit: {lf.slope:.3g}s/layer, R²={lf.r2:.3f}",
                )
            )
        fig.update_layout(
            title=title,
            xaxis_title="hidden layers",
            yaxis_title=ytitle,
            template="plotly_white",
            height=420,
        )
        return fig

    built = first_builds(done)
    reused = [
        r for r in done if r.get(COMPILE_REUSED) is True and _finite(r.get("compile_seconds"))
    ]
    compile_title = "Hidden layers vs compile time, first builds only" + (
        f" ({len(reused)} cache hits shown apart, not in mean or fit)" if reused else ""
    )
    for name, pts_rows, column, title, ytitle, fit in (
        ("depth_metric", counted, metric, f"Hidden layers vs {metric}", metric, False),
        (
            "depth_time",
            done,
            "train_seconds",
            "Hidden layers vs training time",
            "training time (s)",
            True,
        ),
        (
            "depth_compile",
            built,
            "compile_seconds",
            compile_title,
            "compile time of a first build (s)",
            True,
        ),
    ):
        fig = depth_figure(pts_rows, column, title, ytitle, fit)
        if fig is not None:
            figs[name] = fig
    if reused and "depth_compile" in figs:
        figs["depth_compile"].add_trace(
            go.Scatter(
                x=[r["hidden_layers"] for r in reused],
                y=[r["compile_seconds"] for r in reused],
                mode="markers",
                name="cache hits (graph reused)",
                opacity=0.3,
                marker={"symbol": "x", "color": "grey"},
                text=[f"{r['trial_id']} seed={r['seed']}" for r in reused],
            )
        )

    curves = [r for r in rows if r.get("history")]
    if curves:
        fig = go.Figure()
        key = (
            "val_accuracy"
            if any(h.get("val_accuracy") is not None for r in curves for h in r["history"])
            else "val_loss"
        )
        for r in curves[:200]:  # a readable chart, not every trial of a huge sweep
            hist = r["history"]
            fig.add_trace(
                go.Scatter(
                    x=[h.get("epoch") for h in hist],
                    y=[h.get(key) for h in hist],
                    mode="lines",
                    name=f"L={r['hidden_layers']} s={r['seed']} {r['trial_id'][:10]}",
                    opacity=0.7,
                )
            )
        fig.update_layout(
            title=f"Learning curves ({key} per epoch)",
            xaxis_title="epoch",
            yaxis_title=key,
            template="plotly_white",
            height=460,
        )
        figs["learning_curves"] = fig
    return figs


# --------------------------------------------------------------------------- HTML
def _html_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.4g}"
        return html.escape("" if v is None else str(v))

    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{cell(r.get(c))}</td>" for c in columns) + "</tr>" for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _diverged_note(counted: Sequence[dict[str, Any]], metric: str) -> str:
    """A sentence saying how many trials diverged and the worst value they count as ("" when
    none did)."""
    lost = [r for r in counted if r.get("state") == _DIVERGED]
    if not lost:
        return ""
    worst = lost[0].get(metric)
    value = f" ({worst:.4g})" if _finite(worst) else ""
    return (
        f"<p>{len(lost)} diverged trial{'s' if len(lost) != 1 else ''} count as the worst "
        f"{html.escape(metric)}{value} in the charts and tables by depth and configuration.</p>"
    )


def render_html(store: ResultStore, experiment_id: str) -> str:
    """One self-contained HTML report of an experiment: plotly.js inlined, no network needed."""
    import plotly.io as pio

    exp = store.get_experiment(experiment_id)
    rows = [
        {**trial_row(t), COMPILE_REUSED: compile_reused(t)}
        for t in store.list_trials(experiment_id)
    ]
    metric, mode = exp.objective
    if metric not in METRICS:
        metric = DEFAULT_OBJECTIVE_METRIC
    figs = figures(rows, metric, mode)
    parts = []
    for i, fig in enumerate(figs.values()):
        # plotly.js (from the installed plotly package) goes in once, inline, with the first chart
        parts.append(
            pio.to_html(
                fig, include_plotlyjs=(i == 0), full_html=False, config={"displaylogo": False}
            )
        )
    counts: dict[str, int] = defaultdict(int)
    for r in rows:
        counts[r["state"]] += 1
    varied = [c for c in varied_columns(rows) if c != "seed"]
    counted = counted_rows(rows, metric, mode)
    by_config = best_aggregates(aggregate(counted, varied, metric, None), mode) if varied else []
    by_depth = aggregate(counted, "hidden_layers", metric, None)
    done = rank(
        [r for r in rows if r["state"] == _SCORED], lambda r: r.get(metric), mode, scored_only=True
    )
    fit_lines = []
    for col, label, fit_rows in (
        ("train_seconds", "train_seconds", rows),
        ("compile_seconds", "compile_seconds of first builds", first_builds(rows)),
    ):
        try:
            lf = time_vs_depth_fit(fit_rows, col)
            fit_lines.append(
                f"<li>{label} ≈ {lf.slope:.4g} × hidden_layers + {lf.intercept:.4g} "
                f"(R² = {lf.r2:.3f}, n = {lf.n})</li>"
            )
        except (ValueError, KeyError):
            pass
    trial_cols = [
        "trial_id",
        "state",
        *varied,
        "seed",
        metric,
        "train_seconds",
        "compile_seconds",
        "epochs_run",
        "n_params",
        "error",
    ]
    summary_cols = [*varied, "n", "diverged", "pruned", "mean", "std", "min", "max"]
    depth_cols = ["hidden_layers", "n", "diverged", "pruned", "mean", "std", "min", "max"]
    counting = _diverged_note(counted, metric)
    esc = html.escape
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>dnnframe report: {esc(exp.name)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }}
table {{ border-collapse: collapse; font-size: 13px; margin: 1em 0; }}
td, th {{ border: 1px solid #ddd; padding: 3px 8px; text-align: right; }}
th {{ background: #f4f4f4; }} code {{ background: #f4f4f4; padding: 1px 4px; }}
</style></head><body>
<h1>{esc(exp.name)}</h1>
<p>Experiment <code>{esc(exp.id)}</code> · {len(rows)} trials ·
{", ".join(f"{esc(k)}: {v}" for k, v in sorted(counts.items()))} ·
objective: {esc(mode)} <code>{esc(metric)}</code> · generated {time.strftime("%Y-%m-%d %H:%M:%S %Z")}</p>
<p>{esc(str(exp.spec.get("description") or ""))}</p>
<h2>Charts</h2>
{"".join(parts) or "<p>No finished trials yet.</p>"}
<h2>Timing fits</h2><ul>{"".join(fit_lines) or "<li>not enough depths for a fit</li>"}</ul>
{counting}
<h2>By depth ({esc(metric)}, mean over trials)</h2>
{_html_table(by_depth, depth_cols) if by_depth else "<p>No counted trials yet.</p>"}
<h2>By configuration ({esc(metric)}, mean over seeds)</h2>
{_html_table(by_config, summary_cols) if by_config else "<p>Only one configuration.</p>"}
<h2>Best trials</h2>
{_html_table(done[:10], trial_cols)}
<h2>All trials</h2>
{_html_table(rows, trial_cols)}
</body></html>
"""


def write_report(store: ResultStore, experiment_id: str, path: str | Path) -> Path:
    """Write :func:`render_html` to ``path`` (atomically: a temp file renamed into place)."""
    path = Path(path)
    text = render_html(store, experiment_id)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:  # name the file the caller asked for, not the temp file
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc
    finally:
        tmp.unlink(missing_ok=True)  # a failed write leaves no half-written temp file
    return path
