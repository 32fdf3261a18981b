"""CSV uploads: checked when they arrive, stored by content hash for specs to name."""

from __future__ import annotations

import hashlib
import os
import tempfile
from typing import TYPE_CHECKING, Any

from flask import current_app, jsonify, request

from dnnframe.datasets import upload_path, validate_csv_bytes
from dnnframe.exceptions import DatasetError

from .errors import APIError

if TYPE_CHECKING:
    from .responses import Upload

# the multipart body upload_response reads, as the API document shows it
UPLOAD_FORM = {
    "type": "object",
    "required": ["file"],
    "properties": {
        "file": {"type": "string", "format": "binary"},
        "label_column": {"type": "string"},
    },
}


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


def store_upload(data: bytes, filename: str | None, label_column: str | None) -> Upload:
    """Validate CSV bytes and keep them under ``$DNNFRAME_DATA_DIR/uploads/<id>.csv``.

    The id is a hash of the content, so uploading the same file twice gives the same id.
    Without ``label_column`` at most one column may be non-numeric (it must be the label).
    """
    cap = int(
        current_app.config.get("MAX_UPLOAD_BYTES") or current_app.config["MAX_CONTENT_LENGTH"]
    )
    if len(data) > cap:
        raise APIError(413, f"the CSV is {len(data)} bytes, more than the limit of {cap} bytes")
    try:
        summary = validate_csv_bytes(data, label_column, max_bytes=cap)
    except DatasetError as exc:
        field = exc.field or "file"
        raise APIError(400, str(exc), [{"path": field, "message": str(exc)}]) from None
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
        "header": summary.header,
        "rows": summary.rows,
        "label_candidates": summary.label_candidates,
        "bytes": len(data),
    }
