"""The depth study's plotly figures and how they are written (HTML, PNG)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...report import LinearFit


def build_figures(
    rows: Sequence[dict[str, Any]],
    groups: Sequence[dict[str, Any]],
    fits: dict[tuple[str, str], LinearFit],
    baseline: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """The three paper figures as plotly Figures: ``accuracy``, ``train_time``, ``compile_time``.

    One subplot per dataset, one colour per style; accuracy has seed spread as error bars
    and the majority-class rate as a dashed line; training time has each style's fitted
    line with its R² in the legend. ``baseline`` groups (of an earlier report, for the
    datasets shown) are drawn in the accuracy figure as thin dotted lines to compare with.
    """
    import plotly.graph_objects as go
    from plotly.colors import qualitative
    from plotly.subplots import make_subplots

    datasets = sorted({g["dataset"] for g in groups})
    styles = sorted({g["style"] for g in groups})
    colour = {s: qualitative.Plotly[i % len(qualitative.Plotly)] for i, s in enumerate(styles)}

    def frame(title: str, ytitle: str, xlog: bool) -> Any:
        fig = make_subplots(
            rows=1,
            cols=max(1, len(datasets)),
            subplot_titles=datasets,
            shared_yaxes=False,
            horizontal_spacing=0.06,
        )
        fig.update_layout(
            title=title,
            height=460,
            width=max(520, 430 * len(datasets)),
            legend={"orientation": "h", "y": -0.22},
            template="plotly_white",
        )
        fig.update_xaxes(
            title_text="hidden layers" + (" (log scale)" if xlog else ""),
            type="log" if xlog else "linear",
        )
        fig.update_yaxes(title_text=ytitle, col=1)
        return fig

    acc = frame("Test accuracy vs depth (mean ± std over seeds)", "test accuracy", True)
    acc.update_yaxes(range=[0, 1.02])
    _add_baseline(acc, baseline, datasets)
    for col, ds in enumerate(datasets, start=1):
        chance = next(
            (g["chance"] for g in groups if g["dataset"] == ds and g["chance"] is not None), None
        )
        for st in styles:
            gs = [
                g
                for g in groups
                if g["dataset"] == ds and g["style"] == st and g["acc_mean"] is not None
            ]
            if not gs:
                continue
            acc.add_trace(
                go.Scatter(
                    x=[g["depth"] for g in gs],
                    y=[g["acc_mean"] for g in gs],
                    mode="lines+markers",
                    name=st,
                    legendgroup=st,
                    showlegend=col == 1,
                    line={"color": colour[st]},
                    error_y={"type": "data", "array": [g["acc_std"] for g in gs], "visible": True},
                ),
                row=1,
                col=col,
            )
        if chance is not None:
            acc.add_hline(
                y=chance,
                line_dash="dash",
                line_color="grey",
                row=1,
                col=col,
                annotation_text="majority class",
                annotation_position="bottom right",
            )

    tt = frame(
        "Training time per epoch vs depth (each trial; line = least-squares fit)",
        "seconds per epoch",
        False,
    )
    for col, ds in enumerate(datasets, start=1):
        for st in styles:
            pts = [
                r
                for r in rows
                if r["dataset"] == ds and r["style"] == st and r["seconds_per_epoch"] is not None
            ]
            if not pts:
                continue
            fit = fits.get((ds, st))
            tt.add_trace(
                go.Scatter(
                    x=[r["depth"] for r in pts],
                    y=[r["seconds_per_epoch"] for r in pts],
                    mode="markers",
                    marker={"color": colour[st], "size": 5},
                    name=st,
                    legendgroup=st,
                    showlegend=col == 1,
                ),
                row=1,
                col=col,
            )
            if fit:
                xs = [min(r["depth"] for r in pts), max(r["depth"] for r in pts)]
                tt.add_trace(
                    go.Scatter(
                        x=xs,
                        y=[fit.slope * x + fit.intercept for x in xs],
                        mode="lines",
                        line={"color": colour[st], "dash": "dot"},
                        name=f"{ds} {st}: R²={fit.r2:.3f}",
                        legendgroup=st,
                        showlegend=False,
                    ),
                    row=1,
                    col=col,
                )
        # R² of each style's line, listed in the corner of the dataset's panel
        text = "<br>".join(f"{st}: R²={fits[(ds, st)].r2:.3f}" for st in styles if (ds, st) in fits)
        if text:
            axis = "" if col == 1 else str(col)
            tt.add_annotation(
                text=text,
                xref=f"x{axis} domain",
                yref=f"y{axis} domain",
                x=0.02,
                y=0.98,
                showarrow=False,
                align="left",
                xanchor="left",
                yanchor="top",
                font={"size": 10},
                bgcolor="rgba(255,255,255,0.8)",
            )

    ct = frame(
        "Compile time vs depth (each trial; 0 = graph already compiled in that worker)",
        "compile seconds",
        False,
    )
    for col, ds in enumerate(datasets, start=1):
        for st in styles:
            pts = [
                r
                for r in rows
                if r["dataset"] == ds and r["style"] == st and r["compile_seconds"] is not None
            ]
            if pts:
                ct.add_trace(
                    go.Scatter(
                        x=[r["depth"] for r in pts],
                        y=[r["compile_seconds"] for r in pts],
                        mode="markers",
                        marker={"color": colour[st], "size": 5},
                        name=st,
                        legendgroup=st,
                        showlegend=col == 1,
                    ),
                    row=1,
                    col=col,
                )
    return {"accuracy": acc, "train_time": tt, "compile_time": ct}


def _add_baseline(fig: Any, baseline: Sequence[dict[str, Any]], datasets: list[str]) -> None:
    import plotly.graph_objects as go
    from plotly.colors import qualitative

    styles = sorted({g["style"] for g in baseline})
    for i, st in enumerate(styles):
        colour = qualitative.Pastel[i % len(qualitative.Pastel)]
        for col, ds in enumerate(datasets, start=1):
            gs = sorted((g for g in baseline if g["dataset"] == ds and g["style"] == st
                         and g["acc_mean"] is not None), key=lambda g: g["depth"])
            if gs:
                fig.add_trace(
                    go.Scatter(x=[g["depth"] for g in gs], y=[g["acc_mean"] for g in gs],
                               mode="lines", name=f"earlier: {st}", legendgroup=f"b-{st}",
                               showlegend=col == 1, line={"color": colour, "dash": "dot",
                                                          "width": 1.5}),
                    row=1, col=col)


def write_figures_html(
    figures: dict[str, Any], path: Path, title: str = "dnnframe paper figures"
) -> None:
    """All figures in one HTML file that works offline: plotly.js is inlined once."""
    parts = []
    for i, fig in enumerate(figures.values()):
        parts.append(fig.to_html(full_html=False, include_plotlyjs=(i == 0)))
    path.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
        f"<body><h1>{title}</h1>\n" + "\n".join(parts) + "\n</body></html>\n",
        encoding="utf-8",
    )


def write_pngs(figures: dict[str, Any], outdir: Path) -> list[str]:
    """Static PNGs through kaleido; returns the file names written ([] when kaleido cannot run)."""
    written: list[str] = []
    for name, fig in figures.items():
        try:
            fig.write_image(str(outdir / f"{name}.png"), scale=1)
        except Exception as exc:  # kaleido missing or no browser: the HTML still has everything
            print(f"note: no PNG for {name} ({type(exc).__name__}: {exc}); the HTML has the figure")
            return written
        written.append(f"{name}.png")
    return written
