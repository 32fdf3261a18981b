"""Trial ids: a hash of everything that determines a trial's result."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

from ..datasets import dataset_fingerprint
from ..engine.constants import ENGINE_VERSION
from .expand import expand
from .models import ExperimentSpec, TrialConfig, canonical_json


def trial_id(
    config: TrialConfig, dataset_fingerprint: str, engine_version: str | None = None
) -> str:
    """Stable id of a trial: a hash of everything that determines its result.

    The resolved config (which includes the seed), the dataset's content fingerprint and
    the engine version. Same inputs → same id in every process and on every platform.
    """
    # canonical_json({"config": ..., "dataset": ..., "engine": ...}), composed from the
    # config's canonical text instead of parsing and re-encoding it (keys in sorted order)
    payload = (f'{{"config":{config.canonical_json()},'
               f'"dataset":{canonical_json(dataset_fingerprint)},'
               f'"engine":{canonical_json(engine_version or ENGINE_VERSION)}}}')
    return "t-" + hashlib.sha256(payload.encode()).hexdigest()[:24]


def expand_with_ids(spec: ExperimentSpec) -> Iterator[tuple[str, TrialConfig]]:
    """``expand`` plus each trial's id; each distinct dataset is fingerprinted once."""
    fingerprints: dict[str, str] = {}
    for config in expand(spec):
        key = canonical_json(config.dataset.model_dump(mode="json"))
        if key not in fingerprints:
            fingerprints[key] = dataset_fingerprint(config.dataset)
        yield trial_id(config, fingerprints[key]), config
