"""Commands that read and check: validate, status, ls, export, report, paper-report."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..exceptions import SpecError
from ..extras import require
from ..states import TrialState
from .common import (
    EXIT_SPEC_ERROR,
    _open_store,
    _print_spec_error,
    _print_summary,
    _resolve_experiment,
    _summary,
    cli,
    store_option,
)
from .output import make_console


@cli.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
def validate(specs: tuple[Path, ...]) -> None:
    """Check spec files; print each one's trial count, or every error with its key path."""
    from ..spec import count_trials, load_spec

    failed = False
    for path in specs:
        try:
            spec = load_spec(path)
        except SpecError as exc:
            _print_spec_error(exc, str(path))
            failed = True
            continue
        click.echo(
            f"{path}: ok, {count_trials(spec)} trials (experiment {spec.experiment_id}, "
            f"name {spec.name!r})"
        )
    if failed:
        sys.exit(EXIT_SPEC_ERROR)


# --------------------------------------------------------------------------- shared options


@cli.command()
@click.argument("experiment", required=False)
@store_option
@click.option(
    "--failed",
    "show_failed",
    is_flag=True,
    help="Print every FAILED trial's whole error (traceback or reason).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status(experiment: str | None, store_url: str | None, show_failed: bool, as_json: bool) -> None:
    """Show an experiment (id, id prefix or name; default the latest): counts, best trials,
    running and failed trials."""
    from rich.text import Text

    from ..store import default_store_url

    url = store_url or default_store_url()
    store = _open_store(url, create=False)
    exp = _resolve_experiment(store, experiment)
    summary = _summary(store, exp, url)
    running = [
        {
            "trial_id": t.id,
            "worker": t.worker,
            "epochs": len(t.metrics),
            "heartbeat_at": t.heartbeat_at,
        }
        for t in store.list_trials(exp.id, state=TrialState.RUNNING)
    ]
    summary["running"] = running
    errors = (
        {t.id: t.error or "" for t in store.list_trials(exp.id, state=TrialState.FAILED)}
        if show_failed
        else {}
    )
    store.close()
    if as_json:
        if show_failed:
            summary["failed"] = [
                {**f, "error_text": errors.get(f["trial_id"], "")} for f in summary["failed"]
            ]
        click.echo(json.dumps(summary, indent=2, default=str))
        return
    console = make_console()
    if show_failed:
        if not errors:
            console.print(f"no FAILED trials in {exp.name} ({exp.id})", markup=False)
        for trial_id, error in errors.items():
            console.print(Text.assemble((TrialState.FAILED.value, "red"), f" {trial_id}:"))
            console.print(Text(error.rstrip() or "(no error recorded)"), soft_wrap=True)
        return
    _print_summary(console, summary, url)
    for r in running:
        console.print(
            f"RUNNING {r['trial_id']} on {r['worker']} (epoch {r['epochs']})",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


@cli.command(name="ls")
@store_option
@click.option("--limit", default=50, show_default=True, type=click.IntRange(min=1))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def ls_cmd(store_url: str | None, limit: int, as_json: bool) -> None:
    """List experiments, newest first."""
    import time

    from rich import box
    from rich.table import Table
    from rich.text import Text

    store = _open_store(store_url, create=False)
    exps = store.list_experiments(limit=limit)
    store.close()
    rows = [
        {
            "id": e.id,
            "name": e.name,
            "created_at": e.created_at,
            "n_trials": e.n_trials,
            "status": e.status,
            "counts": e.counts,
        }
        for e in exps
    ]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    # Ids are what users copy into other commands: never cut, never wrapped; the other
    # columns wrap or fold to make room (no vertical rules, so 80 columns hold every id).
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    id_width = max((len(r["id"]) for r in rows), default=2)
    table.add_column("id", no_wrap=True, min_width=id_width, overflow="fold")
    table.add_column("name", overflow="fold")
    table.add_column("created")
    table.add_column("complete", justify="right")
    table.add_column("failed", justify="right")
    # adaptive search stops trials on purpose: a column of its own, only when it did
    complete, failed, pruned_ = (
        TrialState.COMPLETE.value,
        TrialState.FAILED.value,
        TrialState.PRUNED.value,
    )
    pruned = any(r["counts"].get(pruned_, 0) for r in rows)
    if pruned:
        table.add_column("pruned", justify="right")
    table.add_column("status", overflow="fold")
    for r in rows:
        created = time.strftime("%Y-%m-%d %H:%M", time.localtime(r["created_at"]))
        table.add_row(
            Text(r["id"]),
            Text(r["name"]),
            created,
            f"{r['counts'].get(complete, 0)}/{r['n_trials']}",
            str(r["counts"].get(failed, 0)),
            *([str(r["counts"].get(pruned_, 0))] if pruned else []),
            Text(r["status"]),
        )
    make_console().print(table if rows else "no experiments yet; start one with: dnnframe run SPEC")


# --------------------------------------------------------------------------- export / report
@cli.command()
@click.argument("experiment")
@store_option
@click.option(
    "--format", "fmt", type=click.Choice(["csv", "jsonl"]), default="csv", show_default=True
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="File to write (default: stdout).",
)
def export(experiment: str, store_url: str | None, fmt: str, output: Path | None) -> None:
    """Export every trial of an experiment as CSV (flat) or JSON lines (everything)."""
    store = _open_store(store_url, create=False)
    exp = _resolve_experiment(store, experiment)
    write = store.export_csv if fmt == "csv" else store.export_jsonl
    if output is None:
        n = write(sys.stdout, exp.id)
    else:
        tmp = output.with_name(output.name + ".tmp")  # never leave a half-written file behind
        try:
            n = write(tmp, exp.id)
            tmp.replace(output)
        except OSError as exc:  # name the file the user asked for, not the temp file
            raise OSError(exc.errno, exc.strerror or str(exc), str(output)) from exc
        finally:
            tmp.unlink(missing_ok=True)  # gone already after a successful replace
        click.echo(f"wrote {n} trials to {output}", err=True)
    store.close()


@cli.command()
@click.argument("experiment")
@store_option
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="HTML file (default: report-<experiment id>.html).",
)
def report(experiment: str, store_url: str | None, output: Path | None) -> None:
    """Write a self-contained HTML report (plotly charts, plotly.js inlined; works offline)."""
    from ..analysis.report import write_report

    require("plotly", "web", "dnnframe report")
    store = _open_store(store_url, create=False)
    exp = _resolve_experiment(store, experiment)
    path = write_report(store, exp.id, output or Path(f"report-{exp.id}.html"))
    store.close()
    click.echo(str(path))


@cli.command(name="paper-report")
@click.argument("outdir", type=click.Path(file_okay=False, path_type=Path))
@store_option
@click.option(
    "--experiment",
    "-e",
    "experiments",
    multiple=True,
    help="Experiment id, id prefix or name (repeatable; default: all in the store).",
)
@click.option(
    "--repro",
    nargs=2,
    metavar="STORE_A STORE_B",
    default=None,
    help="RQ5: compare the --repro-experiment run into two stores.",
)
@click.option("--repro-experiment", default="paper-rq5-repro", show_default=True)
@click.option("--no-png", is_flag=True, help="Skip the static PNGs (kaleido).")
@click.option(
    "--baseline",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="summary.json of an earlier report: its accuracy curves are "
    "drawn, dotted, for comparison.",
)
def paper_report(
    outdir: Path,
    store_url: str | None,
    experiments: tuple[str, ...],
    repro: tuple[str, str] | None,
    repro_experiment: str,
    no_png: bool,
    baseline: Path | None,
) -> None:
    """Write the paper reproduction report (markdown, JSON, figures) into OUTDIR."""
    from ..analysis.paper import write_paper_report, write_repro_report
    from ..store import open_store

    require("plotly", "paper", "dnnframe paper-report")
    command = "dnnframe " + " ".join(sys.argv[1:])
    store = _open_store(store_url, create=False)
    ids = [_resolve_experiment(store, e).id for e in experiments] or None
    summary = write_paper_report(
        store, outdir, ids, png=not no_png, command=command, baseline=baseline
    )
    store.close()
    click.echo(f"{outdir}/report.md: {summary['n_trials']} trials")
    if repro:
        a, b = open_store(repro[0]), open_store(repro[1])
        cmp = write_repro_report(a, b, _resolve_experiment(a, repro_experiment).id, outdir, command)
        click.echo(
            f"{outdir}/repro.md: identical={cmp['identical_metrics']}, "
            f"environment on {cmp['with_environment']}/{cmp['n_results']} results"
        )


# --------------------------------------------------------------------------- serve
