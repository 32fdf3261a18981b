"""Trial ids: a hash of everything that determines a trial's result."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

from ..datasets import dataset_fingerprint
from ..engine.constants import ENGINE_VERSION
from .expand import expand, expand_checked
from .models import ExperimentSpec, TrialConfig, canonical_json, first_format


def trial_id(
    config: TrialConfig, dataset_fingerprint: str, engine_version: str | None = None
) -> str:
    """Stable id of a trial: a hash of everything that determines its result.

    The resolved config (which includes the seed), the dataset's content fingerprint and
    the engine version. Same inputs → same id in every process and on every platform.
    """
    return _hashed(config.canonical_json(), dataset_fingerprint, engine_version)


def _hashed(config_text: str, fingerprint: str, engine_version: str | None = None) -> str:
    # canonical_json({"config": ..., "dataset": ..., "engine": ...}), composed from the
    # config's canonical text instead of parsing and re-encoding it (keys in sorted order)
    payload = (
        f'{{"config":{config_text},'
        f'"dataset":{canonical_json(fingerprint)},'
        f'"engine":{canonical_json(engine_version or ENGINE_VERSION)}}}'
    )
    return "t-" + hashlib.sha256(payload.encode()).hexdigest()[:24]


class _SeededText:
    """A configuration's canonical text for any seed, its other sections encoded once. The
    text is a key-sorted compact object: the sections' own canonical texts in key order
    with the seed's decimal digits in its place, byte for byte what
    ``TrialConfig.canonical_json`` writes for that seed."""

    def __init__(self, doc: dict[str, Any]):
        formatted = {**first_format(doc), "seed": 0}
        parts = [
            f"{json.dumps(k)}:" + ("" if k == "seed" else canonical_json(formatted[k]))
            for k in sorted(formatted)
        ]
        at = sorted(formatted).index("seed")
        self.prefix = "{" + ",".join(parts[: at + 1])
        self.suffix = "".join("," + p for p in parts[at + 1 :]) + "}"

    def text(self, seed: int) -> str:
        return f"{self.prefix}{seed}{self.suffix}"


def expand_documents(spec: ExperimentSpec) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every trial of ``spec`` as ``(trial id, config as JSON)``, in :func:`expand`'s order.

    A configuration's seeds differ in the seed alone, which the spec bounds as a trial's
    config does: each configuration is validated, dumped and encoded once, not once per
    seed (a 10,000-trial sweep of 40 configurations validates 40). The documents of one
    configuration share their sections; callers must not mutate them.
    """
    seeds = spec.search.seed_list
    fingerprints: dict[str, str] = {}
    for config in expand_checked(spec, seeds=seeds[:1]):
        key = canonical_json(config.dataset.model_dump(mode="json"))
        if key not in fingerprints:
            fingerprints[key] = dataset_fingerprint(config.dataset)
        doc = config.model_dump(mode="json")
        text = _SeededText(doc)
        for seed in seeds:
            yield _hashed(text.text(seed), fingerprints[key]), {**doc, "seed": seed}


def expand_with_ids(spec: ExperimentSpec) -> Iterator[tuple[str, TrialConfig]]:
    """``expand`` plus each trial's id; each distinct dataset is fingerprinted once."""
    fingerprints: dict[str, str] = {}
    for config in expand(spec):
        key = canonical_json(config.dataset.model_dump(mode="json"))
        if key not in fingerprints:
            fingerprints[key] = dataset_fingerprint(config.dataset)
        yield trial_id(config, fingerprints[key]), config
