"""RQ1/RQ2 statistics per (dataset, style, depth): spreads, time fits, collapse, plateau."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from ...store.base import TrialState
from .. import report
from ..report import LinearFit, linear_fit
from .rows import ANALYSED_STATES, CHANCE_MARGIN

_GROUP_KEYS = ("dataset", "style", "hidden_layers")


def by_design_and_depth(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean, standard deviation (over seeds), min and max per (dataset, style, depth).

    Built on :func:`dnnframe.analysis.report.aggregate`, one metric at a time. COMPLETE and DIVERGED
    trials count (a DIVERGED trial's accuracy only when the engine recorded a finite one);
    ``n_diverged`` says how many seeds diverged. Groups come sorted by dataset, style, depth.
    """
    rows = list(rows)
    states = ANALYSED_STATES

    def by_key(metric: str) -> dict[tuple, dict[str, Any]]:
        return {
            tuple(a[k] for k in _GROUP_KEYS): a
            for a in report.aggregate(rows, _GROUP_KEYS, metric, states)
        }

    acc, train, per_epoch = (
        by_key("test_accuracy"),
        by_key("train_seconds"),
        by_key("seconds_per_epoch"),
    )
    comp, epochs = by_key("compile_seconds"), by_key("epochs_run")
    members: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r.get("state") in states:
            members[tuple(r.get(k) for k in _GROUP_KEYS)].append(r)
    out = []
    for key in sorted(members, key=lambda k: (str(k[0]), str(k[1]), k[2])):
        ms = members[key]
        a = acc.get(key, {})
        out.append(
            {
                "dataset": key[0],
                "style": key[1],
                "depth": key[2],
                "n": len(ms),
                "n_diverged": sum(1 for r in ms if r["state"] == TrialState.DIVERGED.value),
                "acc_mean": a.get("mean"),
                "acc_std": a.get("std"),
                "acc_min": a.get("min"),
                "acc_max": a.get("max"),
                "train_s_mean": train.get(key, {}).get("mean"),
                "train_s_std": train.get(key, {}).get("std"),
                "s_per_epoch_mean": per_epoch.get(key, {}).get("mean"),
                "compile_s_mean": comp.get(key, {}).get("mean"),
                "compile_s_std": comp.get(key, {}).get("std"),
                "epochs_mean": epochs.get(key, {}).get("mean"),
                "chance": next((r["chance"] for r in ms if r.get("chance") is not None), None),
            }
        )
    return out


def time_fits(
    rows: Iterable[dict[str, Any]], field: str = "seconds_per_epoch", min_depth: int = 1
) -> dict[tuple[str, str], LinearFit]:
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


def collapse_depth(
    groups: Iterable[dict[str, Any]], margin: float = CHANCE_MARGIN
) -> dict[tuple[str, str], int | None]:
    """Per (dataset, style): the smallest depth whose mean accuracy is within ``margin`` of chance.

    None when the style never falls to chance on that dataset. Groups without a chance
    level (regression) or without an accuracy are ignored.
    """
    out: dict[tuple[str, str], int | None] = {}
    for g in sorted(groups, key=lambda g: g["depth"]):
        key = (g["dataset"], g["style"])
        out.setdefault(key, None)
        if (
            out[key] is None
            and g["chance"] is not None
            and g["acc_mean"] is not None
            and g["acc_mean"] <= g["chance"] + margin
        ):
            out[key] = g["depth"]
    return out


def _by_dataset_style(
    groups: Iterable[dict[str, Any]],
) -> list[tuple[tuple[str, str], list[dict[str, Any]]]]:
    """Groups with an accuracy, gathered per (dataset, style), in sorted order."""
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for g in groups:
        if g["acc_mean"] is not None:
            by_key[(g["dataset"], g["style"])].append(g)
    return sorted(by_key.items())


def plateau_summary(
    groups: Iterable[dict[str, Any]], band: tuple[int, int] = (500, 700)
) -> list[dict[str, Any]]:
    """RQ2 per (dataset, style): best depth and accuracy, accuracy in the 500–700 band, at the
    deepest depth, and whether anything deeper than the band beats the band's best.

    ``improves_past_band`` is True when the best mean accuracy at depths above ``band[1]``
    exceeds the best inside the band by more than the larger of the two spreads (std over
    seeds): a difference within seed noise is not an improvement.
    """
    out = []
    for (dataset, style), gs in _by_dataset_style(groups):
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
        out.append(
            {
                "dataset": dataset,
                "style": style,
                "best_depth": best["depth"],
                "best_acc": best["acc_mean"],
                "band_acc_mean": statistics.fmean(g["acc_mean"] for g in inside)
                if inside
                else None,
                "deepest_depth": gs[-1]["depth"],
                "deepest_acc": gs[-1]["acc_mean"],
                "chance": gs[0]["chance"],
                "improves_past_band": improves,
            }
        )
    return out


def deepest_vs_best(
    groups: Iterable[dict[str, Any]], margin: float = CHANCE_MARGIN
) -> list[dict[str, Any]]:
    """Per (dataset, style): the best mean accuracy at any depth, the mean accuracy at the
    deepest depth, and whether the deepest network keeps within ``margin`` of the best
    (``keeps_accuracy``): the question whether a design trains at depth at all."""
    out = []
    for (dataset, style), gs in _by_dataset_style(groups):
        best = max(gs, key=lambda g: g["acc_mean"])
        deepest = max(gs, key=lambda g: g["depth"])
        gap = best["acc_mean"] - deepest["acc_mean"]
        out.append(
            {
                "dataset": dataset,
                "style": style,
                "best_depth": best["depth"],
                "best_acc": best["acc_mean"],
                "deepest_depth": deepest["depth"],
                "deepest_acc": deepest["acc_mean"],
                "deepest_std": deepest["acc_std"],
                "gap": gap,
                "keeps_accuracy": gap <= margin,
            }
        )
    return out
