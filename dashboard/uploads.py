"""CSV uploads: checked when they arrive, stored by content hash for specs to name."""

from __future__ import annotations

import csv
import hashlib
import io
import math
import os
import tempfile
from typing import Any

from flask import current_app, jsonify, request

from dnnframe.datasets import parse_csv, upload_path
from dnnframe.exceptions import DatasetError

from .errors import APIError


def upload_response() -> Any:
    """Answer a CSV upload (multipart field ``file``, optional ``label_column``) with its id."""
    file = request.files.get("file")
    if file is None:
        raise APIError(
            400,
            "send the CSV as multipart/form-data field 'file'",
            [{"path": "file", "message": "missing"}],
        )
    info = store_upload(
        file.read(), file.filename, (request.form.get("label_column") or "").strip() or None
    )
    return jsonify(info), 201


def store_upload(data: bytes, filename: str | None, label_column: str | None) -> dict[str, Any]:
    """Validate CSV bytes and keep them under ``$DNNFRAME_DATA_DIR/uploads/<id>.csv``.

    The id is a hash of the content, so uploading the same file twice gives the same id.
    Without ``label_column`` at most one column may be non-numeric (it must be the label).
    """
    cap = int(
        current_app.config.get("MAX_UPLOAD_BYTES") or current_app.config["MAX_CONTENT_LENGTH"]
    )
    if len(data) > cap:
        raise APIError(413, f"the CSV is {len(data)} bytes, more than the limit of {cap} bytes")
    if not data.strip():
        raise APIError(400, "the CSV file is empty", [{"path": "file", "message": "empty file"}])
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise APIError(
            400, "the CSV must be UTF-8 text", [{"path": "file", "message": "not UTF-8 text"}]
        ) from None
    try:
        rows = [r for r in csv.reader(io.StringIO(text)) if any(c.strip() for c in r)]
    except csv.Error as exc:
        raise _csv_error(exc) from None
    if len(rows) < 2:
        raise APIError(
            400,
            "the CSV needs a header row and at least one data row",
            [{"path": "file", "message": "needs a header row and at least one data row"}],
        )
    header = [h.strip() for h in rows[0]]
    if label_column:
        try:
            parse_csv(data, label_column, "classification")
        except csv.Error as exc:
            raise _csv_error(exc) from None
        except DatasetError as exc:
            field = "label_column" if "label column" in str(exc) else "file"
            raise APIError(400, str(exc), [{"path": field, "message": str(exc)}]) from None
        candidates = [label_column]
    else:
        candidates = _label_candidates(rows, header)
    upload_id = hashlib.sha256(data).hexdigest()[:32]
    path = upload_path(upload_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        # write-then-rename: a worker never reads a half-written upload
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".part")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    return {
        "id": upload_id,
        "filename": filename,
        "header": header,
        "rows": len(rows) - 1,
        "label_candidates": candidates,
        "bytes": len(data),
    }


def _csv_error(exc: csv.Error) -> APIError:
    """A 400 for what Python's csv module refuses (a cell over its field size limit, ...)."""
    text = str(exc)
    if "field larger than field limit" in text:
        text = f"a cell is longer than the limit of {csv.field_size_limit()} characters ({text})"
    msg = "the CSV is malformed: " + text
    return APIError(400, msg, [{"path": "file", "message": text}])


def _label_candidates(rows: list[list[str]], header: list[str]) -> list[str]:
    if len(header) < 2:
        raise APIError(
            400,
            "the CSV needs at least two columns (features and a label)",
            [{"path": "file", "message": "needs at least two columns"}],
        )
    if len(set(header)) != len(header):
        raise APIError(
            400,
            f"the CSV header has duplicate column names: {header}",
            [{"path": "file", "message": "duplicate column names"}],
        )
    non_numeric: list[str] = []
    for r, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            msg = f"row {r} has {len(row)} fields, the header has {len(header)}"
            raise APIError(400, "the CSV is malformed: " + msg, [{"path": "file", "message": msg}])
        for name, cell in zip(header, row):
            if name in non_numeric:
                continue
            try:
                ok = math.isfinite(float(cell))
            except ValueError:
                ok = False
            if not ok:
                non_numeric.append(name)
    if len(non_numeric) > 1:
        msg = (
            f"feature columns must be numeric, but {', '.join(map(repr, non_numeric))} are not "
            "(only the label column may hold text)"
        )
        raise APIError(400, msg, [{"path": "file", "message": msg}])
    return non_numeric or list(header)
