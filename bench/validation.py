"""Spec validation cost: linear in the spec's size, and bounded.

Measures ``parse_spec`` (what ``dnnframe validate``, ``dnnframe run`` and
``POST /api/v1/experiments`` run) on width grids of N values:

* a valid 16,000-value grid, validated in full (target: under 1 s);
* a 600,000-value grid, about the size of the largest request body, refused by the trial
  cap before any value is checked (target: under 1 s);
* the worst cases under a raised cap: 600,000 values (refused: more listed values than
  validation spends time on) and 20,000 distinct invalid values (each one reported);
* grids of 2,000 and 8,000 values: the ratio of their times is 4 when validation is linear
  (16 when quadratic). It comes out lower: the 2,000-trial sweep is also expanded trial by
  trial (under FULL_CHECK_TRIALS), the 8,000-trial one is checked value by value only.

Usage::

    python bench/validation.py            # best of 3 per size, a few seconds
    python bench/validation.py --repeat 5
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dnnframe.exceptions import SpecError  # noqa: E402
from dnnframe.spec import parse_spec  # noqa: E402


def width_grid(n: int, max_trials: int = 100_000) -> dict:
    """A spec whose only space is a grid of ``n`` valid widths."""
    return {
        "dataset": "iris",
        "model": {"width": {"grid": [1 + i % 16384 for i in range(n)]}},
        "search": {"max_trials": max_trials},
    }


def best_seconds(doc: dict, repeat: int) -> tuple[float, str]:
    """Fastest of ``repeat`` validations, and what the validation said."""
    best, outcome = float("inf"), ""
    for _ in range(repeat):
        started = time.perf_counter()
        try:
            parse_spec(doc)
            outcome = "accepted"
        except SpecError as exc:
            outcome = f"refused ({exc.errors[0]['message'][:60]}…)"
        best = min(best, time.perf_counter() - started)
    return best, outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    invalid = {
        "dataset": "iris",
        "model": {"width": {"grid": list(range(-20_000, 0))}},
        "search": {"max_trials": 10_000_000},
    }
    rows = [
        ("16k valid grid", width_grid(16_000)),
        ("600k grid over the cap", width_grid(600_000)),
        ("600k grid, cap raised", width_grid(600_000, 10_000_000)),
        ("20k invalid values", invalid),
        ("2k valid grid", width_grid(2_000)),
        ("8k valid grid", width_grid(8_000)),
    ]
    times = {}
    for label, doc in rows:
        seconds, outcome = best_seconds(doc, args.repeat)
        times[label] = seconds
        target = "  (target < 1 s)" if label[:3] in ("16k", "600", "20k") else ""
        print(f"{label:24s} {seconds * 1000:9.1f} ms  {outcome}{target}")
    ratio = times["8k valid grid"] / times["2k valid grid"]
    print(f"growth 2k -> 8k values:  {ratio:.2f}x  (4x = linear, 16x = quadratic)")


if __name__ == "__main__":
    main()
