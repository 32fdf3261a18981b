"""The depth study's plotly figures and how they are written (HTML, PNG)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..report import LinearFit


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
    panels = _Panels.of(groups)
    return {
        "accuracy": _accuracy_figure(panels, groups, baseline),
        "train_time": _train_time_figure(panels, rows, fits),
        "compile_time": _compile_time_figure(panels, rows),
    }


@dataclass(frozen=True)
class _Panels:
    """What the figures share: one subplot per dataset (in name order), one colour per style."""

    datasets: list[str]
    styles: list[str]
    colour: dict[str, str]

    @classmethod
    def of(cls, groups: Sequence[dict[str, Any]]) -> _Panels:
        from plotly.colors import qualitative

        styles = sorted({g["style"] for g in groups})
        palette = qualitative.Plotly
        return cls(
            datasets=sorted({g["dataset"] for g in groups}),
            styles=styles,
            colour={s: palette[i % len(palette)] for i, s in enumerate(styles)},
        )

    def columns(self) -> Iterator[tuple[int, str]]:
        """``(subplot column, dataset)``, from column 1."""
        return enumerate(self.datasets, start=1)

    def frame(self, title: str, ytitle: str, xlog: bool) -> Any:
        """An empty figure of one row of subplots, depth on the x axes."""
        from plotly.subplots import make_subplots

        fig = make_subplots(
            rows=1,
            cols=max(1, len(self.datasets)),
            subplot_titles=self.datasets,
            shared_yaxes=False,
            horizontal_spacing=0.06,
        )
        fig.update_layout(
            title=title,
            height=460,
            width=max(520, 430 * len(self.datasets)),
            legend={"orientation": "h", "y": -0.22},
            template="plotly_white",
        )
        fig.update_xaxes(
            title_text="hidden layers" + (" (log scale)" if xlog else ""),
            type="log" if xlog else "linear",
        )
        fig.update_yaxes(title_text=ytitle, col=1)
        return fig

    def trials(self, rows: Sequence[dict[str, Any]], key: str, st: str, col: int) -> Any:
        """One marker per trial of style ``st`` in column ``col``: its ``key`` against depth."""
        import plotly.graph_objects as go

        return go.Scatter(
            x=[r["depth"] for r in rows],
            y=[r[key] for r in rows],
            mode="markers",
            marker={"color": self.colour[st], "size": 5},
            name=st,
            legendgroup=st,
            showlegend=col == 1,
        )


def _select(
    items: Sequence[dict[str, Any]], dataset: str, style: str, key: str
) -> list[dict[str, Any]]:
    """The rows or groups of ``dataset`` and ``style`` that have a ``key``."""
    return [
        i for i in items if i["dataset"] == dataset and i["style"] == style and i[key] is not None
    ]


def _accuracy_figure(
    panels: _Panels, groups: Sequence[dict[str, Any]], baseline: Sequence[dict[str, Any]]
) -> Any:
    """Mean test accuracy against depth, seed spread as error bars, the majority-class rate
    dashed, an earlier report's curves (``baseline``) dotted."""
    import plotly.graph_objects as go

    fig = panels.frame("Test accuracy vs depth (mean ± std over seeds)", "test accuracy", True)
    fig.update_yaxes(range=[0, 1.02])
    _add_baseline(fig, baseline, panels.datasets)
    for col, ds in panels.columns():
        for st in panels.styles:
            gs = _select(groups, ds, st, "acc_mean")
            if not gs:
                continue
            fig.add_trace(
                go.Scatter(
                    x=[g["depth"] for g in gs],
                    y=[g["acc_mean"] for g in gs],
                    mode="lines+markers",
                    name=st,
                    legendgroup=st,
                    showlegend=col == 1,
                    line={"color": panels.colour[st]},
                    error_y={"type": "data", "array": [g["acc_std"] for g in gs], "visible": True},
                ),
                row=1,
                col=col,
            )
        chance = next(
            (g["chance"] for g in groups if g["dataset"] == ds and g["chance"] is not None), None
        )
        if chance is not None:
            fig.add_hline(
                y=chance,
                line_dash="dash",
                line_color="grey",
                row=1,
                col=col,
                annotation_text="majority class",
                annotation_position="bottom right",
            )
    return fig


def _train_time_figure(
    panels: _Panels, rows: Sequence[dict[str, Any]], fits: dict[tuple[str, str], LinearFit]
) -> Any:
    """Seconds per epoch of each trial against depth, each style's fitted line dotted and
    its R² in the corner of the panel."""
    import plotly.graph_objects as go

    fig = panels.frame(
        "Training time per epoch vs depth (each trial; line = least-squares fit)",
        "seconds per epoch",
        False,
    )
    for col, ds in panels.columns():
        for st in panels.styles:
            pts = _select(rows, ds, st, "seconds_per_epoch")
            if not pts:
                continue
            fig.add_trace(panels.trials(pts, "seconds_per_epoch", st, col), row=1, col=col)
            fit = fits.get((ds, st))
            if fit:
                xs = [min(r["depth"] for r in pts), max(r["depth"] for r in pts)]
                fig.add_trace(
                    go.Scatter(
                        x=xs,
                        y=[fit.slope * x + fit.intercept for x in xs],
                        mode="lines",
                        line={"color": panels.colour[st], "dash": "dot"},
                        name=f"{ds} {st}: R²={fit.r2:.3f}",
                        legendgroup=st,
                        showlegend=False,
                    ),
                    row=1,
                    col=col,
                )
        _add_r2_note(fig, fits, ds, panels.styles, col)
    return fig


def _add_r2_note(
    fig: Any, fits: dict[tuple[str, str], LinearFit], ds: str, styles: list[str], col: int
) -> None:
    """The R² of each style's line, listed in the corner of dataset ``ds``'s panel."""
    text = "<br>".join(f"{st}: R²={fits[(ds, st)].r2:.3f}" for st in styles if (ds, st) in fits)
    if not text:
        return
    axis = "" if col == 1 else str(col)
    fig.add_annotation(
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


def _compile_time_figure(panels: _Panels, rows: Sequence[dict[str, Any]]) -> Any:
    """Compile seconds of each trial against depth (0: a worker had the graph compiled)."""
    fig = panels.frame(
        "Compile time vs depth (each trial; 0 = graph already compiled in that worker)",
        "compile seconds",
        False,
    )
    for col, ds in panels.columns():
        for st in panels.styles:
            pts = _select(rows, ds, st, "compile_seconds")
            if pts:
                fig.add_trace(panels.trials(pts, "compile_seconds", st, col), row=1, col=col)
    return fig


def _add_baseline(fig: Any, baseline: Sequence[dict[str, Any]], datasets: list[str]) -> None:
    import plotly.graph_objects as go
    from plotly.colors import qualitative

    styles = sorted({g["style"] for g in baseline})
    for i, st in enumerate(styles):
        colour = qualitative.Pastel[i % len(qualitative.Pastel)]
        for col, ds in enumerate(datasets, start=1):
            gs = sorted(
                (
                    g
                    for g in baseline
                    if g["dataset"] == ds and g["style"] == st and g["acc_mean"] is not None
                ),
                key=lambda g: g["depth"],
            )
            if gs:
                fig.add_trace(
                    go.Scatter(
                        x=[g["depth"] for g in gs],
                        y=[g["acc_mean"] for g in gs],
                        mode="lines",
                        name=f"earlier: {st}",
                        legendgroup=f"b-{st}",
                        showlegend=col == 1,
                        line={"color": colour, "dash": "dot", "width": 1.5},
                    ),
                    row=1,
                    col=col,
                )


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
