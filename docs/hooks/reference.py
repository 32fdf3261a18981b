"""MkDocs hook: writes the reference pages (spec, CLI, REST API, settings) from the code at
build time, so they are never committed and cannot drift from it."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cli_reference import cli_page  # noqa: E402
from mkdocs.structure.files import File, Files  # noqa: E402
from rest_reference import rest_page  # noqa: E402
from settings_reference import settings_page  # noqa: E402
from spec_reference import spec_page  # noqa: E402

PAGES = {
    "reference/spec.md": spec_page,
    "reference/cli.md": cli_page,
    "reference/rest-api.md": rest_page,
    "reference/settings.md": settings_page,
}


def on_files(files: Files, config) -> Files:
    for uri, write in PAGES.items():
        files.append(File.generated(config, uri, content=write()))
    return files
