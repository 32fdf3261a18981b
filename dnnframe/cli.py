"""The ``dnnframe`` command line: validate, run, status, ls, export, report, serve, worker.

Every command reads its store URL from ``--store`` or ``$DNNFRAME_STORE_URL`` (default
``sqlite:///dnnframe.db``). Errors a user can fix (a bad spec, an unreachable store, an
unknown experiment) are printed as one clear message — never a traceback — and give a
non-zero exit code: 2 for an invalid spec or usage, 1 for everything else.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from urllib.parse import urlsplit

import click
from click.core import ParameterSource

from . import settings
from .exceptions import DnnframeError, SpecError, StoreError
from .executors.base import Executor

EXIT_SPEC_ERROR = 2

# Where a driver's error message turns from what happened into its internal state
# (pymongo appends the timeouts it was configured with and its whole topology description).
_ERROR_DETAIL = re.compile(r" \(configured timeouts:|, Timeout: |, Topology Description: ")


def _print_spec_error(exc: SpecError, source: str | None = None) -> None:
    """Print every problem of a spec, one line each, naming the file and the key path."""
    for line in exc.lines(source):
        click.echo(line, err=True)


def _one_line(exc: BaseException) -> str:
    """An error's message as one line: its first line, without a driver's internal detail."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return _ERROR_DETAIL.split(first, maxsplit=1)[0]


def _has_password(url: str) -> bool:
    try:
        return urlsplit(url).password is not None
    except ValueError:
        return False


def _shown_url(url: str) -> str:
    """A store or broker URL as printed: any password replaced by ``***``."""
    if not _has_password(url):
        return url
    from .store.mongodb import redact  # only then: it imports the MongoDB driver

    return redact(url)


def _shell_word(value: str, envvar: str | None = None) -> str:
    """``value`` quoted for a POSIX shell; a URL with a password that came from ``envvar``
    is written as ``"$ENVVAR"`` so a printed command never shows the password."""
    if envvar and _has_password(value) and os.environ.get(envvar) == value:
        return f'"${envvar}"'
    return shlex.quote(value)


def _store_words(store_url: str) -> list[str]:
    """``--store URL`` for a printed command (always given: the default store is relative
    to the working directory, so a command run elsewhere would read another one)."""
    return ["--store", _shell_word(store_url, "DNNFRAME_STORE_URL")]


def _command_line(ctx: click.Context, args: Sequence[str], skip: Sequence[str] = ()) -> str:
    """The ``dnnframe`` command that repeats ``ctx``'s command with the same context: its
    arguments ``args`` (quoted here), the store (always) and every other option the user
    set, on the command line or in the environment, except those named in ``skip``."""
    from .store import default_store_url

    words = ["dnnframe", ctx.info_name or "", *(shlex.quote(a) for a in args)]
    for param in ctx.command.params:
        if not isinstance(param, click.Option) or param.name in skip:
            continue
        value = ctx.params.get(param.name)
        if param.name == "store_url":
            words += _store_words(value or default_store_url())
            continue
        source = ctx.get_parameter_source(param.name)
        if value in (None, False) or source not in (ParameterSource.COMMANDLINE,
                                                     ParameterSource.ENVIRONMENT):
            continue
        flag = min(param.opts, key=len)
        envvar = param.envvar if isinstance(param.envvar, str) else None
        words += [flag] if param.is_flag else [flag, _shell_word(str(value), envvar)]
    return " ".join(words)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dnnframe", message="dnnframe %(version)s")
def cli() -> None:
    """Systematic, distributed experiments on neural-network layer design."""


@cli.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
def validate(specs: tuple[Path, ...]) -> None:
    """Check spec files; print each one's trial count, or every error with its key path."""
    from .spec import count_trials, load_spec

    failed = False
    for path in specs:
        try:
            spec = load_spec(path)
        except SpecError as exc:
            _print_spec_error(exc, str(path))
            failed = True
            continue
        click.echo(f"{path}: ok, {count_trials(spec)} trials (experiment {spec.experiment_id}, "
                   f"name {spec.name!r})")
    if failed:
        sys.exit(EXIT_SPEC_ERROR)


# --------------------------------------------------------------------------- shared options
def store_option(f):  # noqa: ANN001, ANN201 - a click decorator
    """``--store URL`` (env ``DNNFRAME_STORE_URL``)."""
    return click.option("--store", "store_url", envvar="DNNFRAME_STORE_URL", default=None,
                        metavar="URL", show_envvar=True,
                        help="Result store: sqlite:///path.db (default sqlite:///dnnframe.db) "
                             "or mongodb://host/db.")(f)


def _open_store(url: str | None, create: bool = True):  # noqa: ANN202
    """Open the store; read-only commands pass ``create=False`` so a mistyped URL is an
    error ("no store at ...") rather than a new empty database."""
    from .store import default_store_url, open_store

    return open_store(url or default_store_url(), create=create)


def _resolve_experiment(store, ref: str | None):  # noqa: ANN001, ANN202
    """An experiment by exact id, unique id prefix or name (latest with that name);
    None → the most recently created experiment."""
    from .exceptions import NotFoundError

    if ref is None:
        latest = store.list_experiments(limit=1)
        if not latest:
            raise NotFoundError(f"the store {store.url} has no experiments yet; "
                                "start one with: dnnframe run SPEC")
        return latest[0]
    try:
        return store.get_experiment(ref)
    except NotFoundError:
        pass
    every = store.list_experiments(limit=None)
    by_prefix = [e for e in every if e.id.startswith(ref)]
    if len(by_prefix) == 1:
        return by_prefix[0]
    by_name = [e for e in every if e.name == ref]  # newest first
    if by_name:
        return by_name[0]
    if len(by_prefix) > 1:
        raise NotFoundError(f"{ref!r} matches {len(by_prefix)} experiments: "
                            + ", ".join(e.id for e in by_prefix[:5]))
    raise NotFoundError(f"no experiment {ref!r} (id, id prefix or name) in {store.url}; "
                        "see: dnnframe ls")


def _objective(exp) -> tuple[str, str]:  # noqa: ANN001
    obj = (exp.spec.get("search") or {}).get("objective") or {}
    return obj.get("metric", "test_accuracy"), obj.get("mode", "max")


def _summary(store, exp, store_url: str, wall: float | None = None, interrupted: bool = False,
             trained: int | None = None, top: int = 5) -> dict:  # noqa: ANN001
    """Machine-readable summary of an experiment (``--json`` output)."""
    from .report import aggregate, trial_rows, varied_columns

    exp = store.get_experiment(exp.id)
    metric, mode = _objective(exp)
    rows = trial_rows(store, exp.id)
    varied = [c for c in varied_columns(rows) if c != "seed"]
    scored = (r for r in rows if r["state"] == "COMPLETE" and r.get(metric) is not None)
    best_trials = sorted(scored, key=lambda r: r[metric], reverse=(mode == "max"))
    best_configs = aggregate(rows, varied, metric) if varied else []
    best_configs.sort(key=lambda a: a["mean"], reverse=(mode == "max"))
    counts = store.counts_by_state(exp.id)
    failed = [{"trial_id": r["trial_id"], "error": r["error"]}
              for r in rows if r["state"] == "FAILED"]
    out = {
        "experiment_id": exp.id, "name": exp.name, "status": exp.status, "store": store_url,
        "n_trials": len(rows), "counts": counts, "objective": {"metric": metric, "mode": mode},
        "varied": varied, "interrupted": interrupted,
        "best": ({k: best_trials[0][k] for k in ("trial_id", metric, *varied, "seed")}
                 if best_trials else None),
        "best_configs": best_configs[:top],
        "failed": failed,
    }
    if wall is not None:
        out["wall_seconds"] = round(wall, 3)
    if trained is not None:
        out["trials_run_now"] = trained
    return out


def _print_summary(console, summary: dict, resume_hint: str | None = None) -> None:  # noqa: ANN001
    from rich.table import Table

    metric = summary["objective"]["metric"]
    counts = {k: v for k, v in summary["counts"].items() if v}
    by_state = ", ".join(f"{k} {v}" for k, v in counts.items())
    console.print(f"[bold]{summary['name']}[/] ({summary['experiment_id']}): {summary['status']}, "
                  f"{summary['n_trials']} trials — {by_state}")
    if summary["best_configs"]:
        table = Table(title=f"Best configurations by mean {metric} over seeds")
        cols = [*summary["varied"], "n", "mean", "std"]
        for c in cols:
            table.add_column(c, justify="right")
        for a in summary["best_configs"]:
            table.add_row(*[f"{a[c]:.4f}" if isinstance(a[c], float) else str(a[c]) for c in cols])
        console.print(table)
    if summary["best"]:
        b = summary["best"]
        console.print(f"best trial: {b['trial_id']}  {metric} = {b[metric]:.4f}")
    for f in summary["failed"][:5]:
        console.print(f"[red]FAILED[/] {f['trial_id']}: {f['error']}")
    if "wall_seconds" in summary:
        console.print(f"wall time {summary['wall_seconds']:.1f}s")
    exp_id = shlex.quote(summary["experiment_id"])
    store = " ".join(_store_words(summary["store"]))
    # commands are printed unwrapped (soft_wrap) so a narrow terminal does not break them
    plain = {"markup": False, "highlight": False, "soft_wrap": True}
    console.print(f"results in {_shown_url(summary['store'])}:", **plain)
    console.print(f"  dnnframe status {exp_id} {store}", **plain)
    console.print(f"  dnnframe report {exp_id} {store}", **plain)
    if resume_hint:
        console.print(resume_hint, **plain)


# --------------------------------------------------------------------------- run
@cli.command()
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False, path_type=Path))
@store_option
@click.option("--workers", "-w", type=click.IntRange(min=1), envvar="DNNFRAME_WORKERS",
              show_envvar=True, default=None, help="Worker processes (default: one per core).")
@click.option("--broker", "broker_url", envvar="DNNFRAME_BROKER_URL", show_envvar=True,
              default=None, metavar="URL",
              help="Send trials to Celery workers over this broker (amqp://...) instead of "
                   "local processes.")
@click.option("--distributed", is_flag=True,
              help="Require a broker (--broker or $DNNFRAME_BROKER_URL); fail if none is set.")
@click.option("--local", "force_local", is_flag=True,
              help="Train on local processes even when $DNNFRAME_BROKER_URL is set.")
@click.option("--queue", default="default", show_default=True,
              help="Celery queue the trials go to (e.g. gpu for workers started with -Q gpu).")
@click.option("--retry-failed", is_flag=True, help="Also re-run trials a previous run left FAILED.")
@click.option("--pack-size", type=click.IntRange(min=1), default=None,
              help="Most trials per pack (trials sharing one compiled graph, trained as one "
                   "unit of work); 1 sends each trial alone. Default: the spec's "
                   "search.pack_size, else $DNNFRAME_PACK_SIZE, else automatic.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar or summary.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary on stdout.")
@click.pass_context
def run(ctx: click.Context, spec_path: Path, store_url: str | None, workers: int | None,
        broker_url: str | None, distributed: bool, force_local: bool, queue: str,
        retry_failed: bool, pack_size: int | None, quiet: bool, as_json: bool) -> None:
    """Run every trial of a spec and show progress; rerunning resumes where it stopped.

    Trials already COMPLETE in the store are not trained again. Ctrl-C stops cleanly:
    queued trials are cancelled, running ones stop after their epoch; press it again to
    stop at once. On a terminal progress is a live bar; otherwise a plain line each time
    another tenth of the trials finished.
    """
    import time

    from rich.console import Console

    from .spec import load_spec
    from .store import default_store_url

    console = Console(stderr=True, quiet=quiet)
    spec = load_spec(spec_path)  # SpecError → exit 2 naming the file and key
    store_url = store_url or default_store_url()
    store = _open_store(store_url)
    broker_url = _broker_for_run(broker_url, distributed, force_local)
    started = time.perf_counter()
    executor = _run_executor(store, store_url, broker_url, workers, queue)
    interrupted, trained = _submit_and_follow(console, store, executor, spec, store_url,
                                              retry_failed, pack_size, quiet)
    exp = _stored_experiment(store, spec.experiment_id, interrupted)
    summary = _summary(store, exp, store_url, wall=time.perf_counter() - started,
                       interrupted=interrupted, trained=trained)
    store.close()
    resume = _command_line(ctx, [str(spec_path)], skip=("quiet", "as_json"))
    _report_run(console, summary, resume, interrupted, quiet, as_json)


def _broker_for_run(broker_url: str | None, distributed: bool, force_local: bool) -> str | None:
    """The broker ``dnnframe run`` uses (None: the local process pool), from its flags."""
    if distributed and force_local:
        raise click.UsageError("--distributed and --local contradict each other")
    if force_local:
        return None
    if distributed and not broker_url:
        raise click.UsageError("--distributed needs --broker URL or $DNNFRAME_BROKER_URL")
    return broker_url


def _run_executor(store, store_url: str, broker_url: str | None,  # noqa: ANN001
                  workers: int | None, queue: str) -> _StartOnSubmit:
    """The executor of ``dnnframe run``: Celery over ``broker_url``, else a local pool; made
    only when there is something to train."""
    from .executors import LocalExecutor, make_executor

    if broker_url:
        return _StartOnSubmit(
            store, lambda: make_executor(store_url, broker_url=broker_url, queue=queue),
            settings.get().worker_count, _shown_url(broker_url), remote=True)
    n = workers if workers is not None else settings.get().worker_count
    return _StartOnSubmit(store, lambda: LocalExecutor(store_url, workers=n), n,
                          f"{n} local workers", remote=False)


class _StartOnSubmit(Executor):
    """An executor made on the first ``submit``: a run with nothing left to train starts
    no worker process and opens no broker connection."""

    def __init__(self, store, factory: Callable[[], Executor], parallelism: int,  # noqa: ANN001
                 where: str, remote: bool) -> None:
        self._store = store
        self._factory = factory
        self._parallelism = parallelism
        self.where = where  # "4 local workers" or the broker URL, for messages
        self.remote = remote  # trials run on workers elsewhere (Celery)
        self.started: Executor | None = None

    @property
    def parallelism(self) -> int:
        """The parallelism the executor will have, known before it exists."""
        return self._parallelism

    def submit(self, packs: Sequence[list[str]], graph_keys: Sequence[str] | None = None) -> None:
        """Make the executor (once) and hand it the packs."""
        if self.started is None:
            self.started = self._factory()
        self.started.submit(packs, graph_keys)

    def cancel(self, experiment_id: str) -> int:
        """Cancel in the store (and in the executor, once there is one)."""
        if self.started is None:
            return self._store.cancel_experiment(experiment_id)
        return self.started.cancel(experiment_id)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the executor; nothing to wait for before it exists."""
        return True if self.started is None else self.started.wait(timeout)

    def shutdown(self, wait: bool = True) -> None:
        """Shut the executor down if it was made."""
        if self.started is not None:
            self.started.shutdown(wait)


def _submit_and_follow(console, store, executor: _StartOnSubmit, spec,  # noqa: ANN001
                       store_url: str, retry_failed: bool, pack_size: int | None,
                       quiet: bool) -> tuple[bool, int]:
    """Submit the spec, show progress until it is done or interrupted, shut the executor
    down. Returns (interrupted, number of trials handed to the executor)."""
    from .search.driver import SearchDriver, is_driven
    from .submit import submit_experiment

    interrupted = False
    trained = 0
    try:
        if is_driven(spec):  # tpe/cmaes: a sampler proposes trials as results arrive
            console.print(f"searching with {spec.search.method}: {spec.search.num_samples} trials")
            driven = SearchDriver(spec, store, executor, pack_size=pack_size).run()
            return driven.cancelled, len(driven.asked)
        result = submit_experiment(spec, store, executor, retry_failed=retry_failed,
                                   pack_size=pack_size)
        trained = len(result.submitted_trial_ids)
        if not quiet:
            _announce_run(console, store, executor, result, store_url)
        if trained:
            interrupted = _follow(console, store, executor, result.experiment, quiet)
    except KeyboardInterrupt:
        # Ctrl-C before the progress loop took over (while storing the trials)
        interrupted = True
        try:
            executor.cancel(spec.experiment_id)
        except DnnframeError:
            pass  # the experiment was not stored yet: nothing to cancel
    finally:
        executor.shutdown(wait=not interrupted)
    return interrupted, trained


def _announce_run(console, store, executor: _StartOnSubmit, result,  # noqa: ANN001
                  store_url: str) -> None:
    exp = result.experiment
    trained = len(result.submitted_trial_ids)
    if result.recovered_trial_ids:
        console.print(f"re-queued {len(result.recovered_trial_ids)} trials whose worker stopped "
                      "(killed process or no heartbeat)")
    head = f"{exp.name} ({exp.id}): {len(result.trial_ids)} trials"
    plan = (f"{trained} to run in {len(result.packs)} packs on {executor.where}" if trained
            else "none left to run (all finished before)")
    console.print(f"{head}, {plan}; store {_shown_url(store_url)}",
                  markup=False, highlight=False, soft_wrap=True)
    if trained and executor.remote and not store.list_workers(seen_within_s=120):
        console.print("[yellow]no worker has reported to this store in the last 2 minutes:[/] "
                      "trials wait in the queue until one starts (dnnframe worker, with the "
                      "same DNNFRAME_STORE_URL and DNNFRAME_BROKER_URL)")


def _stored_experiment(store, experiment_id: str, interrupted: bool):  # noqa: ANN001, ANN202
    """The experiment as stored; exit 130 when an interrupt came before it was stored."""
    from .exceptions import NotFoundError

    try:
        return store.get_experiment(experiment_id)
    except NotFoundError:
        if not interrupted:
            raise
        click.echo("interrupted before the experiment was stored; nothing was run", err=True)
        sys.exit(130)


def _report_run(console, summary: dict, resume: str, interrupted: bool,  # noqa: ANN001
                quiet: bool, as_json: bool) -> None:
    """Print the summary; exit 130 when interrupted, 1 when a trial FAILED."""
    if as_json:
        click.echo(json.dumps(summary, indent=2, default=str))
    if not quiet:
        _print_summary(console, summary, f"interrupted — resume with: {resume}"
                       if interrupted else None)
    if interrupted:
        sys.exit(130)
    if summary["counts"].get("FAILED"):
        sys.exit(1)


def _follow(console, store, executor: Executor, exp, quiet: bool) -> bool:  # noqa: ANN001
    """Show progress until the experiment's trials are finished. Returns True if interrupted."""
    from .progress import RunProgress, describe_best, trials_finished

    metric, mode = _objective(exp)
    first = store.counts_by_state(exp.id)
    total = exp.n_trials or sum(first.values())
    last_finished = trials_finished(first)
    best_text = ""

    def poll() -> bool:
        """Show the current counts; True once no trial is queued or running."""
        nonlocal last_finished, best_text
        counts = store.counts_by_state(exp.id)
        finished = trials_finished(counts)
        if finished != last_finished or not best_text:
            best = store.best_trial(exp.id, metric, mode)
            best_text = describe_best(metric, best.value(metric) if best else None)
            last_finished = finished
        progress.update(counts, best_text)
        return counts.get("QUEUED", 0) + counts.get("RUNNING", 0) == 0

    with RunProgress(console, exp.name, total, first, enabled=not quiet) as progress:
        try:
            while True:
                if executor.wait(timeout=0.5):
                    poll()
                    return False
                poll()
        except KeyboardInterrupt:
            pass
        progress.mark_interrupted()
        console.print("[yellow]interrupted:[/] no new trials start; running trials stop after "
                      "their current epoch (Ctrl-C again to stop at once)")
        try:
            executor.cancel(exp.id)
            while True:
                finished = executor.wait(timeout=0.5)
                settled = poll()
                if finished or settled:
                    break
        except KeyboardInterrupt:
            console.print("[yellow]stopping now:[/] running trials are recorded CANCELLED")
        return True


# --------------------------------------------------------------------------- status / ls
@cli.command()
@click.argument("experiment", required=False)
@store_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status(experiment: str | None, store_url: str | None, as_json: bool) -> None:
    """Show an experiment (id, id prefix or name; default the latest): counts, best trials,
    running and failed trials."""
    from rich.console import Console

    from .store import default_store_url

    url = store_url or default_store_url()
    store = _open_store(url, create=False)
    exp = _resolve_experiment(store, experiment)
    summary = _summary(store, exp, url)
    running = [{"trial_id": t.id, "worker": t.worker, "epochs": len(t.metrics),
                "heartbeat_at": t.heartbeat_at}
               for t in store.list_trials(exp.id, state="RUNNING")]
    summary["running"] = running
    store.close()
    if as_json:
        click.echo(json.dumps(summary, indent=2, default=str))
        return
    console = Console()
    _print_summary(console, summary)
    for r in running:
        console.print(f"RUNNING {r['trial_id']} on {r['worker']} (epoch {r['epochs']})")


@cli.command(name="ls")
@store_option
@click.option("--limit", default=50, show_default=True, type=click.IntRange(min=1))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def ls_cmd(store_url: str | None, limit: int, as_json: bool) -> None:
    """List experiments, newest first."""
    import time

    from rich import box
    from rich.console import Console
    from rich.table import Table

    store = _open_store(store_url, create=False)
    exps = store.list_experiments(limit=limit)
    store.close()
    rows = [{"id": e.id, "name": e.name, "created_at": e.created_at, "n_trials": e.n_trials,
             "status": e.status, "counts": e.counts} for e in exps]
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
    table.add_column("status", overflow="fold")
    for r in rows:
        created = time.strftime("%Y-%m-%d %H:%M", time.localtime(r["created_at"]))
        table.add_row(r["id"], r["name"], created,
                      f"{r['counts'].get('COMPLETE', 0)}/{r['n_trials']}",
                      str(r["counts"].get("FAILED", 0)), r["status"])
    Console().print(table if rows else "no experiments yet; start one with: dnnframe run SPEC")


# --------------------------------------------------------------------------- export / report
@cli.command()
@click.argument("experiment")
@store_option
@click.option("--format", "fmt", type=click.Choice(["csv", "jsonl"]), default="csv",
              show_default=True)
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="File to write (default: stdout).")
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
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="HTML file (default: report-<experiment id>.html).")
def report(experiment: str, store_url: str | None, output: Path | None) -> None:
    """Write a self-contained HTML report (plotly charts, plotly.js inlined; works offline)."""
    from .report import write_report

    store = _open_store(store_url, create=False)
    exp = _resolve_experiment(store, experiment)
    path = write_report(store, exp.id, output or Path(f"report-{exp.id}.html"))
    store.close()
    click.echo(str(path))


@cli.command(name="paper-report")
@click.argument("outdir", type=click.Path(file_okay=False, path_type=Path))
@store_option
@click.option("--experiment", "-e", "experiments", multiple=True,
              help="Experiment id, id prefix or name (repeatable; default: all in the store).")
@click.option("--repro", nargs=2, metavar="STORE_A STORE_B", default=None,
              help="RQ5: compare the --repro-experiment run into two stores.")
@click.option("--repro-experiment", default="paper-rq5-repro", show_default=True)
@click.option("--no-png", is_flag=True, help="Skip the static PNGs (kaleido).")
def paper_report(outdir: Path, store_url: str | None, experiments: tuple[str, ...],
                 repro: tuple[str, str] | None, repro_experiment: str, no_png: bool) -> None:
    """Write the paper reproduction report (markdown, JSON, figures) into OUTDIR."""
    from .analysis.paper import write_paper_report, write_repro_report
    from .store import open_store

    command = "dnnframe " + " ".join(sys.argv[1:])
    store = _open_store(store_url, create=False)
    ids = [_resolve_experiment(store, e).id for e in experiments] or None
    summary = write_paper_report(store, outdir, ids, png=not no_png, command=command)
    store.close()
    click.echo(f"{outdir}/report.md: {summary['n_trials']} trials")
    if repro:
        a, b = open_store(repro[0]), open_store(repro[1])
        cmp = write_repro_report(a, b, _resolve_experiment(a, repro_experiment).id, outdir, command)
        click.echo(f"{outdir}/repro.md: identical={cmp['identical_metrics']}, "
                   f"environment on {cmp['with_environment']}/{cmp['n_results']} results")


# --------------------------------------------------------------------------- serve
@cli.command()
@store_option
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=5000, show_default=True, type=int)
@click.option("--debug", is_flag=True)
@click.option("--production", is_flag=True,
              help="Serve with gunicorn: several worker processes, graceful shutdown, access log.")
@click.option("--web-workers", type=click.IntRange(min=1), default=None,
              help="gunicorn worker processes (implies --production; default "
                   "$WEB_CONCURRENCY or 2).")
def serve(store_url: str | None, host: str, port: int, debug: bool, production: bool,
          web_workers: int | None) -> None:
    """Start the dashboard (REST API and live experiment pages).

    Without --production one process serves it (Werkzeug's server, for a laptop); with it,
    gunicorn runs dashboard.wsgi:app with the settings in dashboard/gunicorn_config.py.
    """
    import os

    if store_url:
        # the app reads its configuration from the environment
        os.environ["DNNFRAME_STORE_URL"] = store_url
    # requests must name the address it listens on (or a local name): see DNNFRAME_ALLOWED_HOSTS
    os.environ.setdefault("DNNFRAME_BIND_HOST", host)
    if production or web_workers:
        bind = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        args = [sys.executable, "-m", "gunicorn", "--config", "python:dashboard.gunicorn_config",
                "--bind", bind]
        if web_workers:
            args += ["--workers", str(web_workers)]
        os.execv(sys.executable, [*args, "dashboard.wsgi:app"])
    try:
        from dashboard import create_app
    except ImportError as exc:
        raise DnnframeError(f"the dashboard package cannot be imported: {exc}") from None
    create_app().run(host=host, port=port, debug=debug)


# --------------------------------------------------------------------------- worker
@cli.command(context_settings={"ignore_unknown_options": True})
@store_option
@click.option("--broker", "broker_url", envvar="DNNFRAME_BROKER_URL", default=None, metavar="URL",
              show_envvar=True, help="Broker (default amqp://guest:guest@127.0.0.1:5672//).")
@click.option("--queues", "-Q", default="default", show_default=True,
              help="Comma-separated queues to consume: default (CPU), gpu, or your own.")
@click.option("--concurrency", "-c", type=click.IntRange(min=1), envvar="DNNFRAME_WORKERS",
              default=None, help="Processes, each training one trial at a time (default: cores).")
@click.option("--hostname", "-n", default=None, help="Node name (default celery@<host>).")
@click.option("--loglevel", "-l", default="INFO", show_default=True)
@click.argument("celery_args", nargs=-1, type=click.UNPROCESSED)
def worker(store_url: str | None, broker_url: str | None, queues: str, concurrency: int | None,
           hostname: str | None, loglevel: str, celery_args: tuple[str, ...]) -> None:
    """Start a Celery worker (``celery -A tasks worker`` with dnnframe's defaults).

    Arguments after ``--`` go to ``celery worker`` as they are (``-- --without-mingle``).

    One trial per process at a time (prefetch 1, fair scheduling), messages acknowledged
    only when a trial finished. A worker consuming ``gpu`` gets THEANO_FLAGS=device=cuda
    unless THEANO_FLAGS is already set.
    """
    import os

    from .executors import THREAD_ENV

    # The Celery app reads its configuration from the environment when it is imported.
    if store_url:
        os.environ["DNNFRAME_STORE_URL"] = store_url
    if broker_url:
        os.environ["DNNFRAME_BROKER_URL"] = broker_url
    names = [q.strip() for q in queues.split(",") if q.strip()]
    if not names:
        raise click.UsageError("--queues needs at least one queue name")
    if "gpu" in names and not os.environ.get("THEANO_FLAGS"):
        os.environ["THEANO_FLAGS"] = "device=cuda,floatX=float32"
    for key, value in THREAD_ENV.items():
        os.environ.setdefault(key, value)
    from .executors.celery_worker import worker_app

    app = worker_app()
    argv = ["worker", f"--queues={','.join(names)}",
            f"--concurrency={concurrency or settings.get().worker_count}",
            "--prefetch-multiplier=1", "-O", "fair", f"--loglevel={loglevel}"]
    if hostname:
        argv.append(f"--hostname={hostname}")
    app.worker_main(argv + list(celery_args))


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the CLI, turning dnnframe errors into clean exits."""
    try:
        cli.main(args=argv, prog_name="dnnframe", standalone_mode=True)
    except SpecError as exc:
        _print_spec_error(exc)
        sys.exit(EXIT_SPEC_ERROR)
    except StoreError as exc:
        click.echo(f"error: {_one_line(exc)}", err=True)
        sys.exit(1)
    except DnnframeError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    except OSError as exc:
        # An output file that cannot be written (missing directory, no permission, disk
        # full) is the user's to fix: one line naming the path, not a traceback.
        where = f"{exc.filename}: " if exc.filename else ""
        click.echo(f"error: {where}{exc.strerror or exc}", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
