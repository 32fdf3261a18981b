"""Experiment specs: validation, search spaces, expansion into trials, trial ids.

A spec is plain JSON (or YAML) — the same document is a file for ``dnnframe run``, the
body of ``POST /api/v1/experiments`` and what the web form produces. Any leaf value may be
replaced by a search space (see :mod:`dnnframe.spec.spaces`). Nothing in a spec is ever
executed: there is no eval, and YAML is read with ``safe_load``.

Modules: ``models`` (the pydantic models), ``spaces`` (the search-space language),
``document`` (plain-JSON checks), ``schema`` (the spec's JSON Schema), ``errors`` (paths and messages), ``validate``
(``parse_spec``), ``expand`` (trials from a sweep), ``ids`` (trial ids), ``loading`` (files).

>>> spec = parse_spec({"dataset": {"name": "iris"},
...                    "model": {"hidden_layers": {"grid": [1, 2, 3]}, "width": 8},
...                    "search": {"seeds": 2}})
>>> count_trials(spec)
6
>>> [(t.model.hidden_layers, t.seed) for t in expand(spec)][:3]
[(1, 0), (1, 1), (2, 0)]
"""

from __future__ import annotations

from ..datasets import DatasetConfig
from .document import MAX_NESTING
from .expand import count_trials, expand
from .ids import expand_documents, expand_with_ids, trial_id
from .loading import load_spec, parse_spec_text
from .models import (
    DEFAULT_MAX_TRIALS,
    MAX_HIDDEN_LAYERS,
    MAX_HIDDEN_WEIGHTS,
    EarlyStopping,
    ExperimentSpec,
    LrSchedule,
    ModelConfig,
    Objective,
    SearchConfig,
    TrainingConfig,
    TrialConfig,
    canonical_json,
)
from .schema import spec_json_schema
from .spaces import MAX_SPACE_VALUES, SPACE_KINDS
from .validate import FULL_CHECK_TRIALS, parse_spec

__all__ = [
    "DEFAULT_MAX_TRIALS",
    "FULL_CHECK_TRIALS",
    "MAX_HIDDEN_LAYERS",
    "MAX_HIDDEN_WEIGHTS",
    "MAX_NESTING",
    "MAX_SPACE_VALUES",
    "SPACE_KINDS",
    "DatasetConfig",
    "EarlyStopping",
    "LrSchedule",
    "ExperimentSpec",
    "ModelConfig",
    "Objective",
    "SearchConfig",
    "TrainingConfig",
    "TrialConfig",
    "canonical_json",
    "count_trials",
    "expand",
    "expand_documents",
    "expand_with_ids",
    "load_spec",
    "parse_spec",
    "parse_spec_text",
    "spec_json_schema",
    "trial_id",
]
