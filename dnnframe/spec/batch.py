"""Many trial configs validated at once: a pack's members differ mostly in their seed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from .models import TrialConfig

_SEED_MAX = 2**32 - 1


def validate_many(docs: Sequence[dict[str, Any]]) -> list[TrialConfig | Exception]:
    """Each of ``docs`` as a :class:`TrialConfig`, or the exception its validation raised.

    Members of a sweep that differ only in the seed are validated once: the rest of the
    document is validated for the first of them and the others take it with their own
    seed, checked as the model checks it (an integer from 0 to 2**32 - 1). A pack of 417
    paper trials validates 5 documents instead of 417; the configs equal what validating
    each gives.
    """
    by_rest: dict[bytes, TrialConfig] = {}
    out: list[TrialConfig | Exception] = []
    for doc in docs:
        seed = doc.get("seed") if isinstance(doc, dict) else None
        key = None
        if type(seed) is int and 0 <= seed <= _SEED_MAX:
            try:
                key = orjson.dumps(
                    {k: v for k, v in doc.items() if k != "seed"}, option=orjson.OPT_SORT_KEYS
                )
            except TypeError:
                key = None  # not plain JSON: validated on its own below
        if key is not None and key in by_rest:
            out.append(by_rest[key].model_copy(update={"seed": seed}))
            continue
        try:
            config = TrialConfig.model_validate(doc)
        except Exception as exc:  # noqa: BLE001 - the caller fails that member only
            out.append(exc)
            continue
        if key is not None:
            by_rest[key] = config
        out.append(config)
    return out
