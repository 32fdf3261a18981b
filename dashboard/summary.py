"""What the experiment page says about an experiment besides its trials: the data it trains
on, and the commands that submit it again."""

from __future__ import annotations

import shlex
from typing import Any

from dnnframe.datasets import REGISTRY, DatasetConfig, load_dataset


def dataset_summary(trial_config: dict[str, Any] | None, spec: dict[str, Any]) -> dict[str, Any]:
    """The dataset of an experiment: name, description, task, rows per split, features,
    classes and fingerprint.

    The sizes come from loading the first trial's (resolved) dataset, cached per process as
    training caches it; when that is not possible here (a CSV path on another machine) the
    summary says why instead of failing the page.
    """
    data = dict((trial_config or {}).get("dataset") or spec.get("dataset") or {})
    name = str(data.get("name", ""))
    info = REGISTRY.get(name)
    out: dict[str, Any] = {
        "name": name,
        "description": info.description if info else "a CSV file",
        "config": {k: v for k, v in data.items() if v not in (None, {}, "")},
    }
    if trial_config is None:
        out["note"] = "the experiment has no trials"
        return out
    loss = (trial_config.get("model") or {}).get("loss", "softmax_crossentropy")
    try:
        ds = load_dataset(DatasetConfig.model_validate(data), loss)
    except Exception as exc:  # noqa: BLE001 - a missing extra or file must not fail the page
        out["note"] = f"cannot load it on this server: {type(exc).__name__}: {exc}"
        return out
    out.update(
        {
            "task": ds.task,
            "rows": {
                "train": len(ds.y_train),
                "validation": len(ds.y_val),
                "test": len(ds.y_test),
            },
            "features": ds.n_features,
            "classes": ds.n_classes,
            "fingerprint": ds.fingerprint,
        }
    )
    return out


def reproduce_commands(
    experiment_id: str, name: str, root_url: str, token_needed: bool
) -> dict[str, str]:
    """Shell commands that submit this experiment again: with ``dnnframe run`` from the YAML
    spec, and to this server's REST API with ``curl`` (the stored spec piped back in)."""
    api = root_url.rstrip("/") + f"/api/v1/experiments/{experiment_id}/spec"
    filename = "".join(c if c.isalnum() or c in "-_." else "-" for c in name) or experiment_id
    auth = ' -H "Authorization: Bearer $DNNFRAME_API_TOKEN"' if token_needed else ""
    return {
        "run": f"curl -s {shlex.quote(api + '?format=yaml')} -o {shlex.quote(filename + '.yaml')}\n"
        f"dnnframe run {shlex.quote(filename + '.yaml')}",
        "curl": f"curl -s {shlex.quote(api)} |\n  curl -s -X POST -H 'Content-Type: application/json'"
        f"{auth} --data-binary @- {shlex.quote(root_url.rstrip('/') + '/api/v1/experiments')}",
    }
