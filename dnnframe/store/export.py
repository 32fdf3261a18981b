"""Write a store's trials out: JSON lines (everything) or CSV (one flat row per trial)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from .records import TrialRecord
from .rows import export_row


def write_jsonl(trials: Iterable[TrialRecord], out: str | Path | TextIO) -> int:
    """One JSON object per trial (``TrialRecord.to_dict()``) to ``out``; returns the rows."""
    with _open_out(out) as fh:
        n = 0
        for trial in trials:
            fh.write(json.dumps(trial.to_dict(), separators=(",", ":")) + "\n")
            n += 1
    return n


def write_csv(trials: Iterable[TrialRecord], out: str | Path | TextIO) -> int:
    """One :func:`~dnnframe.store.rows.export_row` per trial to ``out``; returns the rows.

    Columns come in first-seen order, which keeps related columns together.
    """
    rows = [{k: spreadsheet_safe(v) for k, v in export_row(t).items()} for t in trials]
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    with _open_out(out) as fh:
        # RFC 4180 line ends: the csv module then also quotes a cell holding a lone CR,
        # which a reader would otherwise take for the end of the row
        writer = csv.DictWriter(fh, fieldnames=list(columns) or ["id"], lineterminator="\r\n")
        writer.writerow({c: spreadsheet_safe(c) for c in columns})
        writer.writerows(rows)
    return len(rows)


# A spreadsheet reads a cell starting with one of these as a formula (OWASP, "CSV Injection").
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value: Any) -> Any:
    """A text cell that a spreadsheet would run as a formula, quoted with a leading ``'``
    so it shows as the text it is; numbers (a negative loss) are left as numbers."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


class _open_out:
    """Context manager: a path is opened (and closed) for writing, a file object is borrowed."""

    def __init__(self, out: str | Path | TextIO):
        self.out = out
        self.fh: TextIO | None = None

    def __enter__(self) -> TextIO:
        if isinstance(self.out, (str, Path)):
            self.fh = open(self.out, "w", newline="", encoding="utf-8")
            return self.fh
        if not isinstance(self.out, io.IOBase) and not hasattr(self.out, "write"):
            raise ValueError(f"export target must be a path or a text file, got {self.out!r}")
        return self.out

    def __exit__(self, *exc: Any) -> None:
        if self.fh is not None:
            self.fh.close()
