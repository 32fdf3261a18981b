"""User CSV datasets: where uploads live, and the one parser and validator of CSV bytes.

The dashboard's upload endpoint and the training workers both go through
:func:`validate_csv_bytes` / :func:`parse_csv`, so a file accepted at upload is a file a
worker can train on, and every refusal names the row and column that is wrong.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import settings
from ..exceptions import DatasetError, brief
from .dataset import Task

UPLOAD_ID = re.compile(r"^[a-f0-9]{8,64}$")
MAX_CSV_BYTES = 50 * 1024 * 1024


def data_dir() -> Path:
    """Where uploaded CSVs live (``DNNFRAME_DATA_DIR``, default ``./dnnframe-data``)."""
    return Path(settings.get().data_dir)


def upload_path(upload_id: str) -> Path:
    """The file of an uploaded CSV, from its id (a hash of its content)."""
    if not UPLOAD_ID.match(upload_id):
        raise DatasetError(
            f"upload id must be 8-64 lowercase hex characters, but got {brief(upload_id)}"
        )
    return data_dir() / "uploads" / f"{upload_id}.csv"


@dataclass(frozen=True)
class CsvSummary:
    """What :func:`validate_csv_bytes` learnt about a valid CSV."""

    header: list[str]
    rows: int
    label_candidates: list[str]


def _rows(data: bytes, max_bytes: int) -> tuple[list[str], list[list[str]]]:
    """Header and non-blank data rows of CSV bytes; DatasetError(field="file") when unreadable."""
    if len(data) > max_bytes:
        raise DatasetError(
            f"CSV is {len(data)} bytes, more than the limit of {max_bytes}", field="file"
        )
    if not data.strip():
        raise DatasetError("CSV file is empty", field="file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise DatasetError("CSV must be UTF-8 text", field="file") from None
    try:
        rows = [r for r in csv.reader(io.StringIO(text)) if any(cell.strip() for cell in r)]
    except csv.Error as exc:  # e.g. a cell longer than the csv module's field limit
        raise DatasetError(
            f"CSV cannot be parsed: {exc} (cells are limited to "
            f"{csv.field_size_limit()} characters)",
            field="file",
        ) from None
    if len(rows) < 2:
        raise DatasetError("CSV needs a header row and at least one data row", field="file")
    header = [h.strip() for h in rows[0]]
    if len(set(header)) != len(header):
        raise DatasetError(f"CSV header has duplicate column names: {header}", field="file")
    if len(header) < 2:
        raise DatasetError("CSV needs at least one feature column besides the label", field="file")
    for r, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise DatasetError(
                f"CSV row {r} has {len(row)} fields, the header has {len(header)}", field="file"
            )
    return header, rows[1:]


def _number(cell: str) -> float | None:
    try:
        value = float(cell)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def validate_csv_bytes(
    data: bytes,
    label_column: str | None = None,
    task: Task = "classification",
    max_bytes: int = MAX_CSV_BYTES,
) -> CsvSummary:
    """Check CSV bytes the way training will read them, without keeping the arrays.

    With ``label_column`` the file must parse exactly as :func:`parse_csv` parses it.
    Without it, at most one column may be non-numeric (it can only be the label), and
    ``label_candidates`` lists the columns that could be chosen as the label.

    Raises:
        DatasetError: naming the row and column; ``field`` is ``"label_column"`` when the
            label choice is at fault, ``"file"`` otherwise.
    """
    if label_column:
        _, _, header = parse_csv(data, label_column, task, max_bytes)
        return CsvSummary(header, _count_rows(data), [label_column])
    header, rows = _rows(data, max_bytes)
    non_numeric: list[str] = []
    for row in rows:
        for name, cell in zip(header, row):
            if name not in non_numeric and _number(cell) is None:
                non_numeric.append(name)
    if len(non_numeric) > 1:
        raise DatasetError(
            f"feature columns must be numeric, but {', '.join(map(repr, non_numeric))} "
            "are not (only the label column may hold text)",
            field="file",
        )
    return CsvSummary(header, len(rows), non_numeric or list(header))


def _count_rows(data: bytes) -> int:
    return len(_rows(data, max(len(data), 1))[1])


def parse_csv(
    data: bytes, label_column: str, task: Task = "classification", max_bytes: int = MAX_CSV_BYTES
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Parse CSV bytes: numeric feature columns plus a label column.

    Returns (X, y, header). Raises DatasetError naming the row/column that is wrong.
    """
    header, rows = _rows(data, max_bytes)
    if label_column not in header:
        raise DatasetError(
            f"label column {brief(label_column)} is not in the CSV header {brief(header)}",
            field="label_column",
        )
    li = header.index(label_column)
    X = np.empty((len(rows), len(header) - 1))
    labels = []
    for r, row in enumerate(rows, start=2):
        feats = row[:li] + row[li + 1 :]
        for c, cell in enumerate(feats):
            value = _number(cell)
            if value is None:
                col = header[c if c < li else c + 1]
                rule = "numeric" if _is_text(cell) else "finite"
                raise DatasetError(
                    f"CSV row {r}, column {brief(col)}: feature values must be {rule}, but got {brief(cell)}",
                    field="file",
                )
            X[r - 2, c] = value
        labels.append(row[li].strip())
    if task == "regression":
        numbers = [_number(v) for v in labels]
        if any(v is None for v in numbers):
            raise DatasetError(
                f"label column {brief(label_column)} must be numeric for a regression loss",
                field="label_column",
            )
        y = np.array(numbers, dtype=np.float64)
    else:
        # numeric labels in numeric order, then text labels alphabetically
        classes = sorted(set(labels), key=lambda v: (_number(v) is None, _number(v) or 0, v))
        index = {c: i for i, c in enumerate(classes)}
        y = np.array([index[v] for v in labels])
    return X, y, header


def _is_text(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return True
    return False
