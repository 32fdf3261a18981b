"""Why deep stacks fail: the forward and backward signal of a freshly initialised network."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...datasets import DatasetConfig, load_dataset
from ...engine.constants import SELU_ALPHA, SELU_SCALE
from .. import report
from .rows import style_label


def _act_and_grad(name: str, z: Any) -> tuple[Any, Any]:
    if name == "sigmoid":
        a = 1.0 / (1.0 + np.exp(-z))
        return a, a * (1.0 - a)
    if name == "tanh":
        a = np.tanh(z)
        return a, 1.0 - a * a
    if name == "relu":
        return np.maximum(z, 0.0), (z > 0).astype(z.dtype)
    if name == "selu":
        e = np.exp(np.minimum(z, 0.0))
        return (
            SELU_SCALE * np.where(z > 0, z, SELU_ALPHA * (e - 1.0)),
            SELU_SCALE * np.where(z > 0, 1.0, SELU_ALPHA * e),
        )
    raise ValueError(
        f"signal_at_init supports sigmoid, tanh, relu, selu, but got activation={name!r}"
    )


def signal_at_init(
    dataset: str,
    activation: str,
    init: str,
    residual: bool,
    depths: Sequence[int],
    width: int = 16,
    seed: int = 0,
) -> list[dict[str, Any]]:
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
    # the engine's own initialisers (numpy code, in a module that also loads PyTensor, so
    # the process's flags go to PyTensor first)
    from ...engine.pytensor_wall import configure

    configure()
    from ...engine.layers import init_weights

    data = load_dataset(DatasetConfig(name=dataset))
    if data.n_classes is None:
        raise ValueError(
            f"the signal study needs a classification dataset; {dataset!r} is a regression one"
        )
    n_classes = data.n_classes
    X, y = data.X_train, data.y_train
    Y = np.eye(n_classes)[y]
    out = []
    for depth in depths:
        rng = np.random.default_rng(seed)
        sizes = [X.shape[1]] + [width] * depth
        Ws = [init_weights(rng, init, a, b) for a, b in zip(sizes[:-1], sizes[1:])]
        W_out = init_weights(rng, "glorot", width, n_classes)
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
        out.append(
            {
                "dataset": dataset,
                "style": style_label(
                    {
                        "model": {"activation": activation, "init": init, "residual": residual},
                        "training": {"optimizer": "-"},
                    }
                ),
                "depth": depth,
                "act_std": act_std if math.isfinite(act_std) else None,
                "act_rms": act_rms if math.isfinite(act_rms) else None,
                "grad_ratio": ratio if ratio is not None and math.isfinite(ratio) else None,
            }
        )
    return out


def signal_for_rows(rows: Sequence[dict[str, Any]], seed: int = 0) -> list[dict[str, Any]]:
    """:func:`signal_at_init` for every (dataset, activation, init, residual, width) in ``rows``
    at the depths those rows were trained at (styles it does not support are skipped: other
    activations, normalisation, scaled residual branches)."""
    keys: dict[tuple, set[int]] = defaultdict(set)
    for r in rows:
        if (
            r.get("activation") in ("sigmoid", "tanh", "relu", "selu")
            and isinstance(r.get("width"), int)
            and r.get("normalization", "none") == "none"
            and r.get("residual") in ("none", "identity", True, False, None)
        ):
            residual = r.get("residual") in ("identity", True)
            keys[(r["dataset"], r["activation"], r["init"], residual, r["width"])].add(r["depth"])
    out = []
    for (dataset, act, init, residual, width), depths in sorted(keys.items()):
        out += signal_at_init(dataset, act, init, residual, sorted(depths), width=width, seed=seed)
    return out


def signal_figure(signal: Sequence[dict[str, Any]]) -> Any:
    """Spread of the last hidden layer over inputs, and gradient ratio first/last, vs depth
    (log-log)."""
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
                fig.add_trace(
                    go.Scatter(
                        x=[r["depth"] for r in ok],
                        y=[r[key] for r in ok],
                        mode="lines+markers",
                        name=name,
                        legendgroup=name,
                        showlegend=(col == 1 and row == 1),
                        line={"color": colour[st]},
                    ),
                    row=row,
                    col=col,
                )
    fig.update_xaxes(type="log", title_text="hidden layers (log)")
    fig.update_yaxes(type="log", exponentformat="power")
    fig.update_yaxes(title_text="last-layer spread over inputs", row=1, col=1)
    fig.update_yaxes(title_text="‖∇W first‖ / ‖∇W last‖", row=2, col=1)
    fig.update_layout(
        title="Why deep plain stacks fail: signal of the freshly initialised network "
        "(spread → 0: every input looks the same; gradient ratio ≪ 1 vanishing, ≫ 1 exploding)",
        height=760,
        width=max(520, 430 * len(datasets)),
        template="plotly_white",
        legend={"orientation": "h", "y": -0.12},
    )
    return fig


def signal_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """A markdown table of :func:`signal_at_init` rows (style names without the optimiser)."""
    fmt_rows = [
        {
            **r,
            "style": r["style"].replace("/-", ""),
            "act_std": _sci(r["act_std"]),
            "act_rms": _sci(r["act_rms"]),
            "grad_ratio": _sci(r["grad_ratio"]),
        }
        for r in rows
    ]
    return (
        report.markdown_table(
            fmt_rows,
            ("dataset", "style", "depth", "act_std", "act_rms", "grad_ratio"),
            (
                "dataset",
                "style",
                "depth",
                "last-layer spread over inputs",
                "last-layer RMS",
                "‖∇W first‖ / ‖∇W last‖",
            ),
        )
        + "\n"
    )


def _sci(v: float | None) -> str:
    return "overflow/0" if v is None else f"{v:.2e}"
