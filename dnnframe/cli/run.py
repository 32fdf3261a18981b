"""``dnnframe run``: submit a sweep, follow it live, summarise it, say how to resume."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import click

from ..exceptions import DnnframeError
from ..executors.base import Executor
from ..extras import require
from ..spec.expand import count_trials
from ..spec.models import is_driven
from ..states import TrialState
from .common import (
    _command_line,
    _open_store,
    _print_summary,
    _shown_url,
    _summary,
    absolute_store_url,
    asked_device,
    cli,
    refuse_process_local_store,
    refuse_unusable_device,
    store_option,
)
from .follow import GraphsBuilt, follow
from .lazy_executor import StartOnSubmit, run_executor
from .output import make_console, silence_closed_output


@cli.command()
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False, path_type=Path))
@store_option
@click.option(
    "--workers",
    "-w",
    type=click.IntRange(min=1),
    envvar="DNNFRAME_WORKERS",
    show_envvar=True,
    default=None,
    help="Worker processes (default: one per core; never more than a new sweep has trials).",
)
@click.option(
    "--broker",
    "broker_url",
    envvar="DNNFRAME_BROKER_URL",
    show_envvar=True,
    default=None,
    metavar="URL",
    help="Send trials to Celery workers over this broker (amqp://...) instead of local processes.",
)
@click.option(
    "--distributed",
    is_flag=True,
    help="Require a broker (--broker or $DNNFRAME_BROKER_URL); fail if none is set.",
)
@click.option(
    "--local",
    "force_local",
    is_flag=True,
    help="Train on local processes even when $DNNFRAME_BROKER_URL is set.",
)
@click.option(
    "--queue",
    default="default",
    show_default=True,
    help="Celery queue the trials go to (e.g. gpu for workers started with -Q gpu).",
)
@click.option("--retry-failed", is_flag=True, help="Also re-run trials a previous run left FAILED.")
@click.option(
    "--pack-size",
    type=click.IntRange(min=1),
    default=None,
    help="Most trials per pack (trials sharing one compiled graph, trained as one "
    "unit of work); 1 sends each trial alone. Default: the spec's "
    "search.pack_size, else $DNNFRAME_PACK_SIZE, else automatic.",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar or summary.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary on stdout.")
@click.pass_context
def run(
    ctx: click.Context,
    spec_path: Path,
    store_url: str | None,
    workers: int | None,
    broker_url: str | None,
    distributed: bool,
    force_local: bool,
    queue: str,
    retry_failed: bool,
    pack_size: int | None,
    quiet: bool,
    as_json: bool,
) -> None:
    """Run every trial of a spec and show progress; rerunning resumes where it stopped.

    Trials already COMPLETE in the store are not trained again. Ctrl-C (or SIGTERM) stops
    cleanly: queued trials are cancelled, running ones stop after their epoch; press it
    again to stop at once. On a terminal progress is a live bar; otherwise a plain line each
    time another tenth of the trials finished. Progress and messages go to stderr, the
    summary to stdout (to stderr with --json, which prints only JSON on stdout).
    """
    from ..spec import load_spec
    from ..store import default_store_url

    console = make_console(stderr=True, quiet=quiet)
    results = console if as_json else make_console(quiet=quiet)
    spec = load_spec(spec_path)  # SpecError → exit 2 naming the file and key
    store_url = absolute_store_url(store_url or default_store_url())
    refuse_process_local_store(store_url, "dnnframe run")
    broker_url = _broker_for_run(broker_url, distributed, force_local)
    # a missing extra is said before anything is stored or trained
    if broker_url:
        require("celery", "celery", "dnnframe run with a broker (--broker, $DNNFRAME_BROKER_URL)")
    if is_driven(spec):
        require("optuna", "search", f"search.method: {spec.search.method}")
    if not broker_url:  # Celery workers check their own device when they start
        refuse_unusable_device("run")
    with _sigterm_as_interrupt() as terminated:
        store = _open_store(store_url)
        started = time.perf_counter()
        _recover_own_trials(console, store, spec)
        executor = run_executor(store, store_url, broker_url, workers, queue)
        interrupted, trained, stopped = _submit_and_follow(
            console, store, executor, spec, store_url, retry_failed, pack_size, quiet
        )
        wall = time.perf_counter() - started
        try:
            exp = _stored_experiment(store, spec.experiment_id, interrupted)
            summary = _summary(
                store, exp, store_url, wall=wall, interrupted=interrupted, trained=trained
            )
        finally:
            stopped()
        store.close()
    resume = _command_line(ctx, [str(spec_path.resolve())], skip=("quiet", "as_json"))
    # a run stopped by SIGTERM exits as a process killed by it would (128 + 15)
    _report_run(
        results,
        summary,
        store_url,
        resume,
        interrupted,
        quiet,
        as_json,
        interrupt_code=143 if terminated else 130,
    )


def _recover_own_trials(console, store, spec) -> None:  # noqa: ANN001
    """Before the submit: put back the trials of ``spec`` a killed earlier run left RUNNING
    (:func:`dnnframe.recovery.recover_for_run`), so this run trains them again, and say so."""
    from ..recovery import recover_for_run

    recovered = recover_for_run(store, spec)
    if recovered:
        console.print(
            f"re-queued {len(recovered)} trials whose worker stopped "
            "(killed process or no heartbeat)"
        )


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[list[int]]:
    """SIGTERM (``kill``, ``timeout``, a service manager) stops the run as Ctrl-C does:
    queued trials cancelled, running ones recorded, nothing left RUNNING. Yields the list
    of SIGTERMs received (empty when none came)."""
    received: list[int] = []

    def interrupt(signum: int, frame: object) -> None:
        received.append(signum)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


def _broker_for_run(broker_url: str | None, distributed: bool, force_local: bool) -> str | None:
    """The broker ``dnnframe run`` uses (None: the local process pool), from its flags."""
    if distributed and force_local:
        raise click.UsageError("--distributed and --local contradict each other")
    if force_local:
        return None
    if distributed and not broker_url:
        raise click.UsageError("--distributed needs --broker URL or $DNNFRAME_BROKER_URL")
    return broker_url


def _submit_and_follow(
    console,
    store,
    executor: StartOnSubmit,
    spec,  # noqa: ANN001
    store_url: str,
    retry_failed: bool,
    pack_size: int | None,
    quiet: bool,
) -> tuple[bool, int, Callable[[], None]]:
    """Submit the spec, show progress until it is done or interrupted, shut the executor
    down. Returns (interrupted, number of trials handed to the executor, the shutdown's
    join). A run that ended normally stops its executor in the background (worker
    processes take a tenth of a second to exit) while the caller reads the summary; an
    interrupted or failed one stops it before returning."""
    interrupted = False
    trained = 0
    done = False
    try:
        interrupted, trained = _submit_and_follow_inner(
            console, store, executor, spec, store_url, retry_failed, pack_size, quiet
        )
        done = not interrupted
    finally:
        if not done:
            executor.shutdown(wait=not interrupted)
    return interrupted, trained, _stop_in_background(executor) if done else lambda: None


def _stop_in_background(executor: Executor) -> Callable[[], None]:
    """Shut ``executor`` down (letting nothing new start: every trial has ended) on a
    thread; returns the join, which raises what the shutdown raised."""
    failed: list[BaseException] = []

    def stop() -> None:
        try:
            executor.shutdown(wait=True)
        except BaseException as exc:  # re-raised by the join, in the caller's thread
            failed.append(exc)

    thread = threading.Thread(target=stop, name="dnnframe-shutdown", daemon=True)
    thread.start()

    def join() -> None:
        thread.join()
        if failed:
            raise failed[0]

    return join


def _submit_and_follow_inner(
    console,
    store,
    executor: StartOnSubmit,
    spec,  # noqa: ANN001
    store_url: str,
    retry_failed: bool,
    pack_size: int | None,
    quiet: bool,
) -> tuple[bool, int]:
    """Submit and follow; (interrupted, number of trials handed to the executor)."""
    from ..submit import submit_experiment

    interrupted = False
    trained = 0
    try:
        if is_driven(spec):  # tpe/cmaes: a sampler proposes trials as results arrive
            from ..search.driver import SearchDriver  # Optuna: the search extra, checked above

            console.print(f"searching with {spec.search.method}: {spec.search.num_samples} trials")
            lease = _take_driver_lease(store, spec.experiment_id)
            try:
                driven = SearchDriver(
                    spec, store, executor, pack_size=pack_size, keep_going=lambda: lease.held
                ).run()
            finally:
                lease.release()
            if driven.stopped:
                raise DnnframeError(
                    f"experiment {spec.experiment_id}: another process took over its search "
                    f"driver (its lease was not renewed in time); follow it with `dnnframe "
                    f"status {spec.experiment_id}`"
                )
            return driven.cancelled, len(driven.asked)
        if not executor.remote and not _stored_before(store, spec.experiment_id):
            # a new sweep surely trains: its workers start meanwhile
            executor.start(count_trials(spec))
        result = submit_experiment(
            spec, store, executor, retry_failed=retry_failed, pack_size=pack_size
        )
        trained = len(result.submitted_trial_ids)
        if not quiet:
            _announce_run(console, store, executor, result, store_url)
        if trained:
            graphs = GraphsBuilt(executor.compile_key_of, executor.first_seq)
            interrupted = follow(console, store, executor, result.experiment, quiet, graphs)
    except KeyboardInterrupt:
        # Ctrl-C before the progress loop took over (while storing the trials)
        interrupted = True
        try:
            executor.cancel(spec.experiment_id)
        except DnnframeError:
            pass  # the experiment was not stored yet: nothing to cancel
    return interrupted, trained


def _stored_before(store, experiment_id: str) -> bool:  # noqa: ANN001
    """Whether the store holds the experiment already (a rerun may have nothing to train)."""
    from ..exceptions import NotFoundError

    try:
        store.get_experiment(experiment_id)
    except NotFoundError:
        return False
    return True


def _take_driver_lease(store, experiment_id: str):  # noqa: ANN001, ANN202
    """The lease of the experiment's search driver, for this process; a clear error when
    another process (a server's driver service, another run) drives it."""
    from ..search.lease import LeaseKeeper, driver_lease_name

    lease = LeaseKeeper(store, driver_lease_name(experiment_id))
    if lease.acquire():
        return lease
    holder = store.get_lease(lease.name)
    who = holder.owner if holder is not None else "another process"
    raise DnnframeError(
        f"experiment {experiment_id} is already being driven by {who} (a server's driver "
        f"service or another `dnnframe run`): one driver per experiment. Follow it with "
        f"`dnnframe status {experiment_id}`, or stop that process and run this again once "
        f"its lease has expired"
    )


def _announce_run(
    console,
    store,
    executor: StartOnSubmit,
    result,  # noqa: ANN001
    store_url: str,
) -> None:
    exp = result.experiment
    trained = len(result.submitted_trial_ids)
    plain = {"markup": False, "highlight": False, "soft_wrap": True}
    head = f"{exp.name} ({exp.id}): {len(result.trial_ids)} trials"
    plan = (
        f"{trained} to run in {len(result.packs)} packs on {executor.where}"
        if trained
        else "none left to run (all finished before)"
    )
    console.print(f"{head}, {plan}; store {_shown_url(store_url)}", **plain)
    before = len(result.trial_ids) - trained
    if before:
        for line in _finished_before(store, exp.id, executor.remote):
            console.print(line, **plain)
    if trained and executor.remote and not store.list_workers(seen_within_s=120):
        console.print(
            "[yellow]no worker has reported to this store in the last 2 minutes:[/] "
            "trials wait in the queue until one starts (dnnframe worker, with the "
            "same DNNFRAME_STORE_URL and DNNFRAME_BROKER_URL)"
        )


def _finished_before(store, experiment_id: str, remote: bool) -> list[str]:  # noqa: ANN001
    """What a rerun reuses, in lines: trials finished on another device than this run asks
    for (they are not trained again), and FAILED trials with how to retry them."""
    from collections import Counter

    lines = []
    failed = store.counts_by_state(experiment_id).get(TrialState.FAILED.value, 0)
    if not remote:  # Celery workers train on their own devices; this host's flags say nothing
        here = asked_device().device
        path = "result.environment.device"
        devices = Counter(
            v[path]
            for v in store.trial_values(experiment_id, [path])
            if v["state"] is TrialState.COMPLETE
        )
        for device, n in sorted(devices.items(), key=lambda kv: str(kv[0])):
            if device and device != here:
                lines.append(
                    f"reusing {n} trials already COMPLETE on {device} (this run trains "
                    f"on {here}); they are not trained again"
                )
    if failed:
        lines.append(
            f"{failed} trials FAILED before and are not run again: add --retry-failed "
            "to run them again"
        )
    return lines


def _stored_experiment(store, experiment_id: str, interrupted: bool):  # noqa: ANN001, ANN202
    """The experiment as stored; exit 130 when an interrupt came before it was stored."""
    from ..exceptions import NotFoundError

    try:
        return store.get_experiment(experiment_id)
    except NotFoundError:
        if not interrupted:
            raise
        click.echo("interrupted before the experiment was stored; nothing was run", err=True)
        sys.exit(130)


def _report_run(
    console,
    summary: dict,
    store_url: str,
    resume: str,  # noqa: ANN001
    interrupted: bool,
    quiet: bool,
    as_json: bool,
    interrupt_code: int = 130,
) -> None:
    """Print the summary; exit ``interrupt_code`` when interrupted, 1 when a trial FAILED."""
    hints = []
    if interrupted:
        hints.append(f"interrupted — resume with: {resume}")
    elif summary["counts"].get(TrialState.FAILED.value) and "--retry-failed" not in resume.split():
        hints.append(f"run the FAILED trials again with: {resume} --retry-failed")
    try:
        if as_json:
            click.echo(json.dumps(summary, indent=2, default=str))
        if not quiet:
            _print_summary(console, summary, store_url, hints)
    except BrokenPipeError:  # the reader went away (``| head``): the exit code still tells
        silence_closed_output()
    if interrupted:
        sys.exit(interrupt_code)
    if summary["counts"].get(TrialState.FAILED.value):
        sys.exit(1)
