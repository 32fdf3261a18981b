"""CSV exports open safely in a spreadsheet: no cell the user typed runs as a formula."""

from __future__ import annotations

import csv
import io

from dnnframe.store import TrialState

EVIL = [
    '=HYPERLINK("http://evil.example","x")',
    "+1+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(A1)",
    "\tcell",
    "\rcell",
]


def test_csv_cells_that_spreadsheets_would_run_are_quoted(store):
    store.create_experiment("e", "e", {}, len(EVIL))
    ids = [f"t{i}" for i in range(len(EVIL))]
    store.create_trials(
        "e",
        [
            (tid, {"dataset": {"name": "csv", "label_column": text}, "=key": text, "seed": -1})
            for tid, text in zip(ids, EVIL)
        ],
    )
    store.claim_trials(ids, "w")
    store.finish_trials(
        [(tid, TrialState.COMPLETE, {"metrics": {"test_loss": -0.25}}, None) for tid in ids],
        worker="w",
    )
    buf = io.StringIO()
    assert store.export_csv(buf, experiment_id="e") == len(EVIL)
    table = list(csv.reader(io.StringIO(buf.getvalue(), newline="")))
    header, rows = table[0], table[1:]
    assert "config.=key" in header  # not at the start of a cell: harmless
    label = header.index("config.dataset.label_column")
    assert [r[label] for r in rows] == ["'" + text for text in EVIL]
    assert [r[header.index("config.=key")] for r in rows] == ["'" + text for text in EVIL]
    # numbers stay numbers, negative or not
    assert {r[header.index("config.seed")] for r in rows} == {"-1"}
    assert {r[header.index("result.metrics.test_loss")] for r in rows} == {"-0.25"}
    for row in rows:
        assert not any(cell.startswith(("=", "+", "@", "\t", "\r")) for cell in row)
