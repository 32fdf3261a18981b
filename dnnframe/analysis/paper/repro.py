"""RQ5: the same spec run twice gives identical stored results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...store.base import ResultStore


def compare_stores(
    store_a: ResultStore, store_b: ResultStore, experiment_id: str
) -> dict[str, Any]:
    """Compare one experiment's stored results in two stores (the same spec run twice).

    Returns a dict: ``n_a``, ``n_b``, ``same_trial_ids``, ``identical_metrics`` (final metrics
    and every per-epoch loss/accuracy equal bit for bit), ``mismatches`` (trial ids and
    fields that differ), ``with_environment`` (how many results carry a non-empty
    ``environment``) and one example ``environment``.
    """
    a = {t.id: t for t in store_a.iter_trials(experiment_id)}
    b = {t.id: t for t in store_b.iter_trials(experiment_id)}
    mismatches: list[dict[str, Any]] = []
    epoch_keys = ("train_loss", "train_accuracy", "val_loss", "val_accuracy")
    for tid in sorted(set(a) & set(b)):
        ra, rb = a[tid], b[tid]
        if ra.state != rb.state:
            mismatches.append(
                {"trial_id": tid, "field": "state", "a": ra.state.value, "b": rb.state.value}
            )
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
    observable = sum(
        1
        for t in both
        if t.worker
        and t.started_at
        and t.finished_at
        and (t.result or {}).get("history")
        and (t.result or {}).get("timings")
    )
    return {
        "experiment_id": experiment_id,
        "n_a": len(a),
        "n_b": len(b),
        "same_trial_ids": set(a) == set(b),
        "identical_metrics": set(a) == set(b) and not mismatches and bool(a),
        "mismatches": mismatches,
        "n_results": len(envs),
        "with_environment": with_env,
        "with_worker_times_history": observable,
        "environment_example": next((e for e in envs if e), None),
    }


def write_repro_report(
    store_a: ResultStore,
    store_b: ResultStore,
    experiment_id: str,
    outdir: str | Path,
    command: str | None = None,
) -> dict[str, Any]:
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
    lines += [
        f"Experiment `{experiment_id}` run twice, into `{store_a.url}` and `{store_b.url}`.",
        "",
        f"- trials: {cmp['n_a']} and {cmp['n_b']}; same trial ids: {cmp['same_trial_ids']}",
        "- final metrics and every per-epoch loss/accuracy identical: "
        f"**{cmp['identical_metrics']}**"
        f" ({len(cmp['mismatches'])} mismatches)",
        f"- results carrying their environment: {cmp['with_environment']} of {cmp['n_results']}",
        f"- trials recording their worker, start/finish times, per-epoch history and timings: "
        f"{cmp['with_worker_times_history']} of {cmp['n_a'] + cmp['n_b']}",
        "",
        "Example environment stored with a result:",
        "",
        "```json",
        json.dumps(env, indent=1, default=str),
        "```",
        "",
    ]
    (out / "repro.md").write_text("\n".join(lines), encoding="utf-8")
    return cmp
