"""How numbers read on the pages: a few significant digits, durations in ms or s."""

from __future__ import annotations

from typing import Any

from dnnframe.metrics import is_number


def significant(value: Any, digits: int = 4) -> Any:
    """A float rounded to ``digits`` significant digits (``0.8333333`` → ``0.8333``).

    Integers, booleans and non-numbers come back unchanged; so does an exact float such as
    ``0.5``, which reads best as written.
    """
    if not isinstance(value, float) or not is_number(value):
        return value
    if value == 0:
        return "0"
    text = f"{value:.{digits}g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        return f"{mantissa}e{int(exponent)}"
    return text


def duration(seconds: Any) -> Any:
    """Seconds as people read them: ``8.72e-05`` → ``0.087 ms``, ``3.2`` → ``3.2 s``."""
    if not is_number(seconds):
        return seconds
    if abs(seconds) < 1:
        return f"{significant(float(seconds) * 1000, 3)} ms"
    if abs(seconds) < 120:
        return f"{significant(float(seconds), 3)} s"
    minutes, rest = divmod(float(seconds), 60)
    return f"{int(minutes)} min {rest:.0f} s"
