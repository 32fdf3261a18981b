"""The paper's research questions, answered from stored results (McLeod 2015 reproduction).

Everything here reads a :class:`~dnnframe.store.base.ResultStore` and never trains:

* :func:`collect_rows` flattens finished trials into plain rows (dataset, style, depth,
  seed, accuracy, timings, state);
* :func:`aggregate_by_depth` gives mean and spread over seeds per (dataset, style, depth);
* :func:`linear_fit` fits ``y = slope * x + intercept`` and its R² (training time vs depth);
* :func:`collapse_depth` / :func:`plateau_summary` answer RQ2 (where accuracy falls to the
  majority-class rate, whether it stops improving past 500–700 layers);
* :func:`compare_stores` answers RQ5 (same spec twice → identical stored metrics, every
  result carrying its environment);
* :func:`write_paper_report` writes ``report.md``, ``summary.json``, one self-contained
  ``figures.html`` (plotly.js inlined, works offline) and PNGs when kaleido can render.

>>> rows = [{"dataset": "iris", "style": "s", "hidden_layers": d, "depth": d, "seed": s, "state": "COMPLETE",
...          "test_accuracy": a, "train_seconds": 1.0 + d, "compile_seconds": 2.0,
...          "seconds_per_epoch": 0.1 + d / 10, "epochs_run": 10, "chance": 0.33}
...         for d, s, a in [(1, 0, 0.9), (1, 1, 0.8), (10, 0, 0.5), (10, 1, 0.5)]]
>>> [(g["depth"], round(g["acc_mean"], 3), g["n"]) for g in aggregate_by_depth(rows)]
[(1, 0.85, 2), (10, 0.5, 2)]
>>> fit = linear_fit([1, 2, 3], [3, 5, 7])
>>> round(fit.slope, 6), round(fit.intercept, 6), round(fit.r2, 6)
(2.0, 1.0, 1.0)
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from . import report
from .report import LinearFit, linear_fit
from .store.base import ResultStore, TrialState

__all__ = ["ANALYSED_STATES", "CHANCE_MARGIN", "LinearFit", "aggregate_by_depth", "build_figures",
           "collapse_depth", "collect_rows", "compare_stores", "linear_fit", "majority_rate",
           "markdown_table", "plateau_summary", "style_label", "time_fits", "trial_row",
           "signal_at_init", "signal_markdown", "write_paper_report", "write_repro_report"]

# States whose result is worth analysing: a DIVERGED trial is a real outcome of a deep stack
# (its signal exploded), FAILED/CANCELLED/PRUNED are not measurements of the network.
ANALYSED_STATES = (TrialState.COMPLETE.value, TrialState.DIVERGED.value)

# A group is "at chance" when its mean test accuracy is within this margin of the
# majority-class rate of the test split (the best a constant predictor can do).
CHANCE_MARGIN = 0.02


def style_label(config: dict[str, Any]) -> str:
    """A short name for a trial's layer design: ``tanh/glorot/sgd`` or ``relu/he/adam/residual``."""
    model, training = config.get("model", {}), config.get("training", {})
    label = f"{model.get('activation')}/{model.get('init')}/{training.get('optimizer')}"
    return label + ("/residual" if model.get("residual") else "")


_chance_cache: dict[str, float] = {}


def majority_rate(dataset_config: dict[str, Any]) -> float | None:
    """Test accuracy of always predicting the most frequent training class (None: regression)."""
    from .datasets import load_dataset
    from .spec import DatasetConfig

    key = json.dumps(dataset_config, sort_keys=True)
    if key not in _chance_cache:
        data = load_dataset(DatasetConfig.model_validate(dataset_config))
        if data.task != "classification":
            return None
        values, counts = _unique_counts(data.y_train)
        majority = values[max(range(len(counts)), key=counts.__getitem__)]
        _chance_cache[key] = float(sum(1 for y in data.y_test if y == majority) / len(data.y_test))
    return _chance_cache[key]


def _unique_counts(labels: Iterable[Any]) -> tuple[list[Any], list[int]]:
    counts: dict[Any, int] = defaultdict(int)
    for y in labels:
        counts[int(y)] += 1
    keys = sorted(counts)
    return keys, [counts[k] for k in keys]


def trial_row(record: Any, chance: float | None = None) -> dict[str, Any]:
    """:func:`dnnframe.report.trial_row` plus what the depth study needs: ``style``, ``depth``
    (= hidden_layers), ``seconds_per_epoch`` and ``chance`` (the majority-class rate)."""
    row = report.trial_row(record)
    row.pop("history", None)  # per-epoch curves are not needed for the depth tables
    model, training = (record.config or {}).get("model", {}), (record.config or {}).get("training", {})
    row["style"] = style_label({"model": model, "training": training})
    row["depth"] = row["hidden_layers"]
    epochs, train_s = row.get("epochs_run") or 0, row.get("train_seconds")
    row["seconds_per_epoch"] = train_s / epochs if (train_s is not None and epochs) else None
    row["chance"] = chance
    return row


def collect_rows(store: ResultStore, experiment_ids: Sequence[str] | None = None,
                 with_chance: bool = True) -> list[dict[str, Any]]:
    """Rows for every COMPLETE or DIVERGED trial of ``experiment_ids`` (all experiments if None).

    A trial shared by two experiments appears once. ``chance`` is the majority-class test
    accuracy of the trial's dataset split (computed, not stored, so old stores work too).
    """
    ids = list(experiment_ids) if experiment_ids else [None]
    seen: set[str] = set()
    rows = []
    for exp in ids:
        for rec in store.iter_trials(exp, state=list(ANALYSED_STATES)):
            if rec.id in seen:
                continue
            seen.add(rec.id)
            chance = majority_rate(rec.config["dataset"]) if with_chance else None
            rows.append(trial_row(rec, chance))
    return rows


_GROUP_KEYS = ("dataset", "style", "hidden_layers")


def aggregate_by_depth(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean, standard deviation (over seeds), min and max per (dataset, style, depth).

    Built on :func:`dnnframe.report.aggregate`, one metric at a time. COMPLETE and DIVERGED
    trials count (a DIVERGED trial's accuracy only when the engine recorded a finite one);
    ``n_diverged`` says how many seeds diverged. Groups come sorted by dataset, style, depth.
    """
    rows = list(rows)
    states = ANALYSED_STATES

    def by_key(metric: str) -> dict[tuple, dict[str, Any]]:
        return {tuple(a[k] for k in _GROUP_KEYS): a for a in report.aggregate(rows, _GROUP_KEYS, metric, states)}

    acc, train, per_epoch = by_key("test_accuracy"), by_key("train_seconds"), by_key("seconds_per_epoch")
    comp, epochs = by_key("compile_seconds"), by_key("epochs_run")
    members: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r.get("state") in states:
            members[tuple(r.get(k) for k in _GROUP_KEYS)].append(r)
    out = []
    for key in sorted(members, key=lambda k: (str(k[0]), str(k[1]), k[2])):
        ms = members[key]
        a = acc.get(key, {})
        out.append({
            "dataset": key[0], "style": key[1], "depth": key[2], "n": len(ms),
            "n_diverged": sum(1 for r in ms if r["state"] == TrialState.DIVERGED.value),
            "acc_mean": a.get("mean"), "acc_std": a.get("std"), "acc_min": a.get("min"), "acc_max": a.get("max"),
            "train_s_mean": train.get(key, {}).get("mean"), "train_s_std": train.get(key, {}).get("std"),
            "s_per_epoch_mean": per_epoch.get(key, {}).get("mean"),
            "compile_s_mean": comp.get(key, {}).get("mean"), "compile_s_std": comp.get(key, {}).get("std"),
            "epochs_mean": epochs.get(key, {}).get("mean"),
            "chance": next((r["chance"] for r in ms if r.get("chance") is not None), None),
        })
    return out


def time_fits(rows: Iterable[dict[str, Any]], field: str = "seconds_per_epoch",
              min_depth: int = 1) -> dict[tuple[str, str], LinearFit]:
    """A :func:`linear_fit` of ``field`` against depth per (dataset, style), over every trial.

    ``seconds_per_epoch`` is the default because early stopping and divergence make the
    number of epochs differ between trials; per epoch, the work is proportional to depth.
    """
    pts: dict[tuple[str, str], tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for r in rows:
        if r.get(field) is not None and r["depth"] is not None and r["depth"] >= min_depth:
            xs, ys = pts[(r["dataset"], r["style"])]
            xs.append(float(r["depth"]))
            ys.append(float(r[field]))
    fits = {}
    for key, (xs, ys) in sorted(pts.items()):
        if len(set(xs)) >= 2:
            fits[key] = linear_fit(xs, ys)
    return fits


def collapse_depth(groups: Iterable[dict[str, Any]], margin: float = CHANCE_MARGIN) -> dict[tuple[str, str], int | None]:
    """Per (dataset, style): the smallest depth whose mean accuracy is within ``margin`` of chance.

    None when the style never falls to chance on that dataset. Groups without a chance
    level (regression) or without an accuracy are ignored.
    """
    out: dict[tuple[str, str], int | None] = {}
    for g in sorted(groups, key=lambda g: g["depth"]):
        key = (g["dataset"], g["style"])
        out.setdefault(key, None)
        if out[key] is None and g["chance"] is not None and g["acc_mean"] is not None \
                and g["acc_mean"] <= g["chance"] + margin:
            out[key] = g["depth"]
    return out


def plateau_summary(groups: Iterable[dict[str, Any]], band: tuple[int, int] = (500, 700)) -> list[dict[str, Any]]:
    """RQ2 per (dataset, style): best depth and accuracy, accuracy in the 500–700 band, at the
    deepest depth, and whether anything deeper than the band beats the band's best.

    ``improves_past_band`` is True when the best mean accuracy at depths above ``band[1]``
    exceeds the best inside the band by more than the larger of the two spreads (std over
    seeds): a difference within seed noise is not an improvement.
    """
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for g in groups:
        if g["acc_mean"] is not None:
            by_key[(g["dataset"], g["style"])].append(g)
    out = []
    for (dataset, style), gs in sorted(by_key.items()):
        gs.sort(key=lambda g: g["depth"])
        best = max(gs, key=lambda g: g["acc_mean"])
        inside = [g for g in gs if band[0] <= g["depth"] <= band[1]]
        above = [g for g in gs if g["depth"] > band[1]]
        in_best = max(inside, key=lambda g: g["acc_mean"]) if inside else None
        above_best = max(above, key=lambda g: g["acc_mean"]) if above else None
        improves = None
        if in_best and above_best:
            noise = max(in_best["acc_std"] or 0.0, above_best["acc_std"] or 0.0)
            improves = above_best["acc_mean"] - in_best["acc_mean"] > noise
        out.append({
            "dataset": dataset, "style": style,
            "best_depth": best["depth"], "best_acc": best["acc_mean"],
            "band_acc_mean": statistics.fmean(g["acc_mean"] for g in inside) if inside else None,
            "deepest_depth": gs[-1]["depth"], "deepest_acc": gs[-1]["acc_mean"],
            "chance": gs[0]["chance"], "improves_past_band": improves,
        })
    return out


# --------------------------------------------------------------------------- why: signal at init
def _act_and_grad(name: str, z: Any) -> tuple[Any, Any]:
    import numpy as np

    if name == "sigmoid":
        a = 1.0 / (1.0 + np.exp(-z))
        return a, a * (1.0 - a)
    if name == "tanh":
        a = np.tanh(z)
        return a, 1.0 - a * a
    if name == "relu":
        return np.maximum(z, 0.0), (z > 0).astype(z.dtype)
    if name == "selu":
        alpha, scale = 1.6732632423543772, 1.0507009873554805
        e = np.exp(np.minimum(z, 0.0))
        return scale * np.where(z > 0, z, alpha * (e - 1.0)), scale * np.where(z > 0, 1.0, alpha * e)
    raise ValueError(f"signal_at_init supports sigmoid, tanh, relu, selu, but got activation={name!r}")


def signal_at_init(dataset: str, activation: str, init: str, residual: bool, depths: Sequence[int],
                   width: int = 16, seed: int = 0) -> list[dict[str, Any]]:
    """Why deep stacks fail: forward and backward signal of freshly initialised networks.

    Builds the same network as the engine (a first dense layer, ``depth - 1`` equal-width
    layers with optional identity shortcuts, a Glorot output layer) in NumPy, runs the
    dataset's training split forward and the softmax cross-entropy gradient backward, and
    returns per depth: ``act_std`` (spread of the last hidden layer's units over the
    examples — 0 means every input maps to the same point, so nothing can be told apart),
    ``act_rms`` (its size; inf/huge means exploding), and ``grad_ratio`` (norm of the loss
    gradient for the first hidden layer's weights over that for the last one: ≪1 is a
    vanishing gradient, ≫1 an exploding one).
    """
    import numpy as np

    from .datasets import load_dataset
    from .engine.layers import init_weights
    from .spec import DatasetConfig

    data = load_dataset(DatasetConfig(name=dataset))
    X, y = data.X_train, data.y_train
    Y = np.eye(data.n_classes)[y]
    out = []
    for depth in depths:
        rng = np.random.default_rng(seed)
        sizes = [X.shape[1]] + [width] * depth
        Ws = [init_weights(rng, init, a, b) for a, b in zip(sizes[:-1], sizes[1:])]
        W_out = init_weights(rng, "glorot", width, data.n_classes)
        with np.errstate(all="ignore"):
            h, cache = X, []
            for i, W in enumerate(Ws):
                z = h @ W
                a, da = _act_and_grad(activation, z)
                skip = residual and i > 0
                cache.append((h, da, skip))
                h = h + a if skip else a
            logits = h @ W_out
            logits = logits - logits.max(axis=1, keepdims=True)
            p = np.exp(logits)
            p /= p.sum(axis=1, keepdims=True)
            g = ((p - Y) / len(X)) @ W_out.T
            grad_norms = []
            for (h_in, da, skip), W in zip(reversed(cache), reversed(Ws)):
                gz = g * da
                grad_norms.append(float(np.linalg.norm(h_in.T @ gz)))
                g = gz @ W.T + (g if skip else 0.0)
            act_std = float(np.mean(np.std(h, axis=0)))
            act_rms = float(np.sqrt(np.mean(h * h)))
            first, last = grad_norms[-1], grad_norms[0]
            ratio = first / last if last > 0 and math.isfinite(last) else None
        out.append({"dataset": dataset, "style": style_label({"model": {"activation": activation, "init": init,
                                                                          "residual": residual},
                                                                "training": {"optimizer": "-"}}),
                    "depth": depth, "act_std": act_std if math.isfinite(act_std) else None,
                    "act_rms": act_rms if math.isfinite(act_rms) else None,
                    "grad_ratio": ratio if ratio is not None and math.isfinite(ratio) else None})
    return out


def signal_for_rows(rows: Sequence[dict[str, Any]], seed: int = 0) -> list[dict[str, Any]]:
    """:func:`signal_at_init` for every (dataset, activation, init, residual, width) in ``rows``
    at the depths those rows were trained at (styles it does not support are skipped)."""
    keys: dict[tuple, set[int]] = defaultdict(set)
    for r in rows:
        if r.get("activation") in ("sigmoid", "tanh", "relu", "selu") and isinstance(r.get("width"), int):
            keys[(r["dataset"], r["activation"], r["init"], bool(r["residual"]), r["width"])].add(r["depth"])
    out = []
    for (dataset, act, init, residual, width), depths in sorted(keys.items()):
        out += signal_at_init(dataset, act, init, residual, sorted(depths), width=width, seed=seed)
    return out


def signal_figure(signal: Sequence[dict[str, Any]]) -> Any:
    """Spread of the last hidden layer over inputs, and gradient ratio first/last, vs depth (log-log)."""
    import plotly.graph_objects as go
    from plotly.colors import qualitative
    from plotly.subplots import make_subplots

    datasets = sorted({r["dataset"] for r in signal})
    styles = sorted({r["style"] for r in signal})
    colour = {s: qualitative.Plotly[i % len(qualitative.Plotly)] for i, s in enumerate(styles)}
    fig = make_subplots(rows=2, cols=len(datasets), subplot_titles=datasets, vertical_spacing=0.12)
    for col, ds in enumerate(datasets, start=1):
        for st in styles:
            pts = [r for r in signal if r["dataset"] == ds and r["style"] == st]
            name = st.replace("/-", "")
            for row, key in ((1, "act_std"), (2, "grad_ratio")):
                ok = [r for r in pts if r[key] is not None and r[key] > 0]
                fig.add_trace(go.Scatter(x=[r["depth"] for r in ok], y=[r[key] for r in ok], mode="lines+markers",
                                         name=name, legendgroup=name, showlegend=(col == 1 and row == 1),
                                         line={"color": colour[st]}), row=row, col=col)
    fig.update_xaxes(type="log", title_text="hidden layers (log)")
    fig.update_yaxes(type="log", exponentformat="power")
    fig.update_yaxes(title_text="last-layer spread over inputs", row=1, col=1)
    fig.update_yaxes(title_text="‖∇W first‖ / ‖∇W last‖", row=2, col=1)
    fig.update_layout(title="Why deep plain stacks fail: signal of the freshly initialised network "
                            "(spread → 0: every input looks the same; gradient ratio ≪ 1 vanishing, ≫ 1 exploding)",
                      height=760, width=max(520, 430 * len(datasets)), template="plotly_white",
                      legend={"orientation": "h", "y": -0.12})
    return fig


def signal_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """A markdown table of :func:`signal_at_init` rows (style names without the optimiser)."""
    fmt_rows = [{**r, "style": r["style"].replace("/-", ""),
                 "act_std": _sci(r["act_std"]), "act_rms": _sci(r["act_rms"]), "grad_ratio": _sci(r["grad_ratio"])}
                for r in rows]
    return report.markdown_table(fmt_rows, ("dataset", "style", "depth", "act_std", "act_rms", "grad_ratio"),
                                 ("dataset", "style", "depth", "last-layer spread over inputs",
                                  "last-layer RMS", "‖∇W first‖ / ‖∇W last‖")) + "\n"


def _sci(v: float | None) -> str:
    return "overflow/0" if v is None else f"{v:.2e}"


# --------------------------------------------------------------------------- RQ5
def compare_stores(store_a: ResultStore, store_b: ResultStore, experiment_id: str) -> dict[str, Any]:
    """Compare one experiment's stored results in two stores (the same spec run twice).

    Returns a dict: ``n_a``, ``n_b``, ``same_trial_ids``, ``identical_metrics`` (final metrics
    and every per-epoch loss/accuracy equal bit for bit), ``mismatches`` (trial ids and
    fields that differ), ``with_environment`` (how many results carry a non-empty
    ``environment``) and one example ``environment``.
    """
    a = {t.id: t for t in store_a.iter_trials(experiment_id)}
    b = {t.id: t for t in store_b.iter_trials(experiment_id)}
    mismatches = []
    epoch_keys = ("train_loss", "train_accuracy", "val_loss", "val_accuracy")
    for tid in sorted(set(a) & set(b)):
        ra, rb = a[tid], b[tid]
        if ra.state != rb.state:
            mismatches.append({"trial_id": tid, "field": "state", "a": ra.state.value, "b": rb.state.value})
            continue
        ma, mb = (ra.result or {}).get("metrics"), (rb.result or {}).get("metrics")
        if ma != mb:
            mismatches.append({"trial_id": tid, "field": "metrics", "a": ma, "b": mb})
        ha = [{k: e.get(k) for k in epoch_keys} for e in (ra.result or {}).get("history", [])]
        hb = [{k: e.get(k) for k in epoch_keys} for e in (rb.result or {}).get("history", [])]
        if ha != hb:
            mismatches.append({"trial_id": tid, "field": "history"})
    both = [*a.values(), *b.values()]
    envs = [t.result.get("environment") for t in both if t.result]
    with_env = sum(1 for e in envs if e)
    # observable: every finished trial says who ran it, when, and how each epoch went
    observable = sum(1 for t in both if t.worker and t.started_at and t.finished_at
                     and (t.result or {}).get("history") and (t.result or {}).get("timings"))
    return {
        "experiment_id": experiment_id, "n_a": len(a), "n_b": len(b),
        "same_trial_ids": set(a) == set(b),
        "identical_metrics": set(a) == set(b) and not mismatches and bool(a),
        "mismatches": mismatches,
        "n_results": len(envs), "with_environment": with_env, "with_worker_times_history": observable,
        "environment_example": next((e for e in envs if e), None),
    }


# --------------------------------------------------------------------------- output
def _fmt(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:.{digits}f}" if isinstance(v, float) else str(v)


_TABLE_COLUMNS = ("dataset", "style", "depth", "n", "n_diverged", "acc_mean", "acc_std", "acc_min",
                  "acc_max", "chance", "train_s_mean", "s_per_epoch_mean", "compile_s_mean")
_TABLE_HEADERS = ("dataset", "style", "depth", "seeds", "diverged", "test acc mean", "± std", "min", "max",
                  "chance", "train s", "s/epoch", "compile s")


def markdown_table(groups: Sequence[dict[str, Any]]) -> str:
    """A markdown table: one row per (dataset, style, depth) with accuracy and time columns."""
    return report.markdown_table(groups, _TABLE_COLUMNS, _TABLE_HEADERS, floatfmt=".3f") + "\n"


def build_figures(rows: Sequence[dict[str, Any]], groups: Sequence[dict[str, Any]],
                  fits: dict[tuple[str, str], LinearFit]) -> dict[str, Any]:
    """The three paper figures as plotly Figures: ``accuracy``, ``train_time``, ``compile_time``.

    One subplot per dataset, one colour per style; accuracy has seed spread as error bars
    and the majority-class rate as a dashed line; training time has each style's fitted
    line with its R² in the legend.
    """
    import plotly.graph_objects as go
    from plotly.colors import qualitative
    from plotly.subplots import make_subplots

    datasets = sorted({g["dataset"] for g in groups})
    styles = sorted({g["style"] for g in groups})
    colour = {s: qualitative.Plotly[i % len(qualitative.Plotly)] for i, s in enumerate(styles)}

    def frame(title: str, ytitle: str, xlog: bool) -> Any:
        fig = make_subplots(rows=1, cols=max(1, len(datasets)), subplot_titles=datasets,
                            shared_yaxes=False, horizontal_spacing=0.06)
        fig.update_layout(title=title, height=460, width=max(520, 430 * len(datasets)),
                          legend={"orientation": "h", "y": -0.22}, template="plotly_white")
        fig.update_xaxes(title_text="hidden layers" + (" (log scale)" if xlog else ""),
                         type="log" if xlog else "linear")
        fig.update_yaxes(title_text=ytitle, col=1)
        return fig

    acc = frame("Test accuracy vs depth (mean ± std over seeds)", "test accuracy", True)
    acc.update_yaxes(range=[0, 1.02])
    for col, ds in enumerate(datasets, start=1):
        chance = next((g["chance"] for g in groups if g["dataset"] == ds and g["chance"] is not None), None)
        for st in styles:
            gs = [g for g in groups if g["dataset"] == ds and g["style"] == st and g["acc_mean"] is not None]
            if not gs:
                continue
            acc.add_trace(go.Scatter(
                x=[g["depth"] for g in gs], y=[g["acc_mean"] for g in gs], mode="lines+markers",
                name=st, legendgroup=st, showlegend=col == 1, line={"color": colour[st]},
                error_y={"type": "data", "array": [g["acc_std"] for g in gs], "visible": True}),
                row=1, col=col)
        if chance is not None:
            acc.add_hline(y=chance, line_dash="dash", line_color="grey", row=1, col=col,
                          annotation_text="majority class", annotation_position="bottom right")

    tt = frame("Training time per epoch vs depth (each trial; line = least-squares fit)",
               "seconds per epoch", False)
    for col, ds in enumerate(datasets, start=1):
        for st in styles:
            pts = [r for r in rows if r["dataset"] == ds and r["style"] == st and r["seconds_per_epoch"] is not None]
            if not pts:
                continue
            fit = fits.get((ds, st))
            tt.add_trace(go.Scatter(x=[r["depth"] for r in pts], y=[r["seconds_per_epoch"] for r in pts],
                                    mode="markers", marker={"color": colour[st], "size": 5},
                                    name=st, legendgroup=st, showlegend=col == 1), row=1, col=col)
            if fit:
                xs = [min(r["depth"] for r in pts), max(r["depth"] for r in pts)]
                tt.add_trace(go.Scatter(x=xs, y=[fit.slope * x + fit.intercept for x in xs], mode="lines",
                                        line={"color": colour[st], "dash": "dot"},
                                        name=f"{ds} {st}: R²={fit.r2:.3f}", legendgroup=st, showlegend=False),
                             row=1, col=col)
        # R² of each style's line, listed in the corner of the dataset's panel
        text = "<br>".join(f"{st}: R²={fits[(ds, st)].r2:.3f}" for st in styles if (ds, st) in fits)
        if text:
            axis = "" if col == 1 else str(col)
            tt.add_annotation(text=text, xref=f"x{axis} domain", yref=f"y{axis} domain", x=0.02, y=0.98,
                              showarrow=False, align="left", xanchor="left", yanchor="top",
                              font={"size": 10}, bgcolor="rgba(255,255,255,0.8)")

    ct = frame("Compile time vs depth (each trial; 0 = graph already compiled in that worker)",
               "compile seconds", False)
    for col, ds in enumerate(datasets, start=1):
        for st in styles:
            pts = [r for r in rows if r["dataset"] == ds and r["style"] == st and r["compile_seconds"] is not None]
            if pts:
                ct.add_trace(go.Scatter(x=[r["depth"] for r in pts], y=[r["compile_seconds"] for r in pts],
                                        mode="markers", marker={"color": colour[st], "size": 5}, name=st,
                                        legendgroup=st, showlegend=col == 1), row=1, col=col)
    return {"accuracy": acc, "train_time": tt, "compile_time": ct}


def write_figures_html(figures: dict[str, Any], path: Path, title: str = "dnnframe paper figures") -> None:
    """All figures in one HTML file that works offline: plotly.js is inlined once."""
    parts = []
    for i, fig in enumerate(figures.values()):
        parts.append(fig.to_html(full_html=False, include_plotlyjs=(i == 0)))
    path.write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
                    f"<body><h1>{title}</h1>\n" + "\n".join(parts) + "\n</body></html>\n", encoding="utf-8")


def write_pngs(figures: dict[str, Any], outdir: Path) -> list[str]:
    """Static PNGs through kaleido; returns the file names written ([] when kaleido cannot run)."""
    written = []
    for name, fig in figures.items():
        try:
            fig.write_image(str(outdir / f"{name}.png"), scale=1)
        except Exception as exc:  # kaleido missing or no browser: the HTML still has everything
            print(f"note: no PNG for {name} ({type(exc).__name__}: {exc}); the HTML has the figure")
            return written
        written.append(f"{name}.png")
    return written


def write_paper_report(store: ResultStore, outdir: str | Path, experiment_ids: Sequence[str] | None = None,
                       png: bool = True, command: str | None = None) -> dict[str, Any]:
    """Write report.md, summary.json, figures.html (and PNGs) for the RQ1/RQ2 sweeps in ``store``.

    Args:
        store: the store the paper specs were run into.
        outdir: created if missing; files in it are overwritten.
        experiment_ids: restrict to these experiments (default: every experiment in the store).
        png: also render PNGs with kaleido when it is installed.
        command: the command that regenerates the report (written into report.md).
    Returns:
        The summary dict also written to summary.json.
    """
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    rows = collect_rows(store, experiment_ids)
    if not rows:
        from .exceptions import DnnframeError

        raise DnnframeError(f"no COMPLETE or DIVERGED trials in {store.url or 'the store'}"
                            + (f" for experiments {', '.join(experiment_ids)}" if experiment_ids else ""))
    groups = aggregate_by_depth(rows)
    fits = time_fits(rows)
    total_fits = time_fits(rows, "train_seconds")
    collapse = collapse_depth(groups)
    plateau = plateau_summary(groups)
    experiments = experiment_ids or [e.id for e in store.list_experiments(limit=10_000)]
    summary = {
        "store": store.url, "experiments": list(experiments), "n_trials": len(rows),
        "n_diverged": sum(1 for r in rows if r["state"] == TrialState.DIVERGED.value),
        "fits_seconds_per_epoch": [{"dataset": k[0], "style": k[1], **asdict(v)} for k, v in fits.items()],
        "fits_train_seconds": [{"dataset": k[0], "style": k[1], **asdict(v)} for k, v in total_fits.items()],
        "collapse_depth": [{"dataset": k[0], "style": k[1], "depth": v} for k, v in collapse.items()],
        "plateau": plateau,
        "compile_seconds": _compile_summary(rows),
        "groups": groups,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n", encoding="utf-8")
    signal = signal_for_rows(rows)
    summary["signal_at_init"] = signal
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n", encoding="utf-8")
    figures = build_figures(rows, groups, fits)
    if signal:
        figures["signal"] = signal_figure(signal)
    write_figures_html(figures, out / "figures.html")
    pngs = write_pngs(figures, out) if png else []
    (out / "report.md").write_text(_report_markdown(summary, groups, pngs, command), encoding="utf-8")
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
            out.append({"depths": f"{lo}-{hi}", "n_cold": len(vals), "mean_s": statistics.fmean(vals),
                        "max_s": max(vals)})
    return out


def _report_markdown(summary: dict[str, Any], groups: Sequence[dict[str, Any]], pngs: list[str],
                     command: str | None) -> str:
    lines = ["# Depth study: generated report", "",
             "Generated by `dnnframe.paper.write_paper_report` from the stored results; do not edit by hand.", ""]
    if command:
        lines += ["Regenerate with:", "", "```", command, "```", ""]
    lines += [f"Store: `{summary['store']}` — {summary['n_trials']} analysed trials "
              f"({summary['n_diverged']} DIVERGED), experiments: "
              + ", ".join(f"`{e}`" for e in summary["experiments"]), "",
              "Figures: [figures.html](figures.html) (interactive, self-contained, works offline)", ""]
    for p in pngs:
        lines += [f"![{p}]({p})", ""]
    lines += ["## Training time vs depth (RQ1)", "",
              "Least-squares line of seconds per epoch against hidden layers, over every trial.", "",
              "| dataset | style | slope (ms / layer / epoch) | intercept s | R² | trials |", "|---|---|---|---|---|---|"]
    for f in summary["fits_seconds_per_epoch"]:
        lines.append(f"| {f['dataset']} | {f['style']} | {f['slope'] * 1000:.3f} | {f['intercept']:.3f} "
                     f"| {f['r2']:.3f} | {f['n']} |")
    lines += ["", "Same for total training seconds per trial (differs when epochs differ: early stopping, divergence):", "",
              "| dataset | style | slope (ms / layer) | R² |", "|---|---|---|---|"]
    for f in summary["fits_train_seconds"]:
        lines.append(f"| {f['dataset']} | {f['style']} | {f['slope'] * 1000:.2f} | {f['r2']:.3f} |")
    lines += ["", "## Compile time vs depth", "",
              "Cold compiles only (the first trial of a graph shape in a worker process; later trials reuse it):", "",
              "| depths | cold compiles | mean s | max s |", "|---|---|---|---|"]
    for c in summary["compile_seconds"]:
        lines.append(f"| {c['depths']} | {c['n_cold']} | {c['mean_s']:.2f} | {c['max_s']:.2f} |")
    lines += ["", "## Where accuracy falls to the majority-class rate (RQ2)", "",
              f"Smallest depth whose mean test accuracy is within {CHANCE_MARGIN} of always predicting the "
              "majority class ('never' = stays above it up to the deepest tested).", "",
              "| dataset | style | collapse depth |", "|---|---|---|"]
    for c in summary["collapse_depth"]:
        lines.append(f"| {c['dataset']} | {c['style']} | {c['depth'] if c['depth'] is not None else 'never'} |")
    lines += ["", "## Plateau past 500–700 layers? (RQ2)", "",
              "| dataset | style | best depth | best acc | mean acc 500–700 | deepest | acc there | chance | improves past 700 |",
              "|---|---|---|---|---|---|---|---|---|"]
    for p in summary["plateau"]:
        lines.append(f"| {p['dataset']} | {p['style']} | {p['best_depth']} | {_fmt(p['best_acc'])} "
                     f"| {_fmt(p['band_acc_mean'])} | {p['deepest_depth']} | {_fmt(p['deepest_acc'])} "
                     f"| {_fmt(p['chance'])} | {p['improves_past_band']} |")
    if summary.get("signal_at_init"):
        lines += ["", "## Why: the signal of the freshly initialised network", "",
                  "Computed in NumPy for the same architecture and init as the engine (seed 0, the training "
                  "split): the spread of the last hidden layer over the examples (→ 0: all inputs map to the "
                  "same point, the output layer cannot tell classes apart) and the ratio of the first to the "
                  "last hidden layer's weight-gradient norm (≪ 1 vanishing, ≫ 1 exploding). 'overflow/0' = "
                  "the float64 range was exceeded or the value is exactly 0.", "",
                  signal_markdown(summary["signal_at_init"])]
    lines += ["", "## Every (dataset, style, depth)", "", markdown_table(groups)]
    return "\n".join(lines) + "\n"


def write_repro_report(store_a: ResultStore, store_b: ResultStore, experiment_id: str,
                       outdir: str | Path, command: str | None = None) -> dict[str, Any]:
    """RQ5: :func:`compare_stores` written to ``repro.json`` and ``repro.md`` in ``outdir``."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    cmp = compare_stores(store_a, store_b, experiment_id)
    cmp["store_a"], cmp["store_b"] = store_a.url, store_b.url
    (out / "repro.json").write_text(json.dumps(cmp, indent=1, default=str) + "\n", encoding="utf-8")
    env = cmp["environment_example"] or {}
    lines = ["# Reproducibility check (RQ5): generated", ""]
    if command:
        lines += ["Regenerate with:", "", "```", command, "```", ""]
    lines += [f"Experiment `{experiment_id}` run twice, into `{store_a.url}` and `{store_b.url}`.", "",
              f"- trials: {cmp['n_a']} and {cmp['n_b']}; same trial ids: {cmp['same_trial_ids']}",
              f"- final metrics and every per-epoch loss/accuracy identical: **{cmp['identical_metrics']}**"
              f" ({len(cmp['mismatches'])} mismatches)",
              f"- results carrying their environment: {cmp['with_environment']} of {cmp['n_results']}",
              f"- trials recording their worker, start/finish times, per-epoch history and timings: "
              f"{cmp['with_worker_times_history']} of {cmp['n_a'] + cmp['n_b']}", "",
              "Example environment stored with a result:", "", "```json",
              json.dumps(env, indent=1, default=str), "```", ""]
    (out / "repro.md").write_text("\n".join(lines), encoding="utf-8")
    return cmp
