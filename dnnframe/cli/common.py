"""What every ``dnnframe`` command shares: the click group, store and experiment lookup,
error printing, the run summary, and commands rebuilt for the user to paste.

Every command reads its store URL from ``--store`` or ``$DNNFRAME_STORE_URL`` (default
``sqlite:///dnnframe.db``). Errors a user can fix (a bad spec, an unreachable store, an
unknown experiment) are printed as one clear message — never a traceback — and give a
non-zero exit code: 2 for an invalid spec or usage, 1 for everything else (see
:mod:`dnnframe.cli` for the others).
"""

from __future__ import annotations

import os
import re
import shlex
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit

import click
from click.core import ParameterSource
from rich.text import Text

from ..engine.backend import DeviceUnavailableError, probe
from ..engine.flags import FlagSettings, translate
from ..exceptions import SpecError, StoreError
from ..metrics import rank
from ..states import SCORED_STATE, TrialState
from ..urls import redact

EXIT_SPEC_ERROR = 2
# failed trials listed one line each in a summary; the rest are counted
FAILED_LINES = 10

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


def absolute_store_url(url: str) -> str:
    """``url`` with a relative SQLite path made absolute (from the working directory), so a
    printed command names the same store wherever it is pasted; other URLs as they are."""
    prefix = "sqlite:///"
    if not url.startswith(prefix):
        return url
    path = url[len(prefix) :]
    if not path or path.startswith(("/", ":memory:", "file:")):
        return url
    return prefix + str(Path(path).resolve())


def refuse_process_local_store(url: str, doing: str) -> None:
    """Raise StoreError naming ``url`` when it is an in-memory store (``memory://``): it
    lives only in the process that opened it, so trials trained in worker processes would
    be written where nobody could read them."""
    from ..store import MEMORY_PREFIX

    if url.strip().startswith(MEMORY_PREFIX):
        raise StoreError(
            f"store URL {url!r} is an in-memory store, for tests and one-process use: it "
            f"lives only in the process that opened it, and {doing} trains in worker "
            "processes (a local pool or Celery workers) that cannot see it; use "
            "sqlite:///path/to/file.db, mongodb://... or postgresql://..."
        )


def asked_device(env: Mapping[str, str] | None = None) -> FlagSettings:
    """What THEANO_FLAGS/PYTENSOR_FLAGS (in ``env``, default this process's environment) ask
    of this machine (backend, device), read without applying them; the training processes
    warn about the flags themselves."""
    env = os.environ if env is None else env
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return translate(env.get("THEANO_FLAGS", ""), env.get("PYTENSOR_FLAGS", ""))


def refuse_unusable_device(doing: str, env: Mapping[str, str] | None = None) -> None:
    """Raise DeviceUnavailableError ("refusing to DOING: reason") when the flags (of
    ``env``, default this process's environment) ask for the JAX backend or a GPU that this
    machine cannot provide: every trial would fail on it. Checked once, in a child process
    (see :func:`dnnframe.engine.backend.probe`), and only when the flags ask for more than
    the C backend."""
    asked = asked_device(env)
    if asked.backend != "jax" and asked.device_error is None:
        return
    reason = probe(None if env is None else dict(env))
    if reason:
        raise DeviceUnavailableError(f"refusing to {doing}: {reason}")


def _has_password(url: str) -> bool:
    try:
        return urlsplit(url).password is not None
    except ValueError:
        return False


def _shown_url(url: str) -> str:
    """A store or broker URL as printed: any password replaced by ``***``."""
    return redact(url)


def _shell_word(value: str, envvar: str | None = None) -> str:
    """``value`` quoted for a POSIX shell; a URL with a password that came from ``envvar``
    is written as ``"$ENVVAR"`` so a printed command never shows the password."""
    if envvar and _has_password(value) and absolute_store_url(os.environ.get(envvar, "")) == value:
        return f'"${envvar}"'
    return shlex.quote(value)


def _store_words(store_url: str) -> list[str]:
    """``--store URL`` for a printed command (always given: the default store is relative
    to the working directory, so a command run elsewhere would read another one)."""
    return ["--store", _shell_word(absolute_store_url(store_url), "DNNFRAME_STORE_URL")]


def _command_line(ctx: click.Context, args: Sequence[str], skip: Sequence[str] = ()) -> str:
    """The ``dnnframe`` command that repeats ``ctx``'s command with the same context: its
    arguments ``args`` (quoted here), the store (always) and every other option the user
    set, on the command line or in the environment, except those named in ``skip``."""
    from ..store import default_store_url

    words = ["dnnframe", ctx.info_name or "", *(shlex.quote(a) for a in args)]
    for param in ctx.command.params:
        if not isinstance(param, click.Option) or param.name in skip:
            continue
        value = ctx.params.get(param.name)
        if param.name == "store_url":
            words += _store_words(value or default_store_url())
            continue
        source = ctx.get_parameter_source(param.name)
        if value in (None, False) or source not in (
            ParameterSource.COMMANDLINE,
            ParameterSource.ENVIRONMENT,
        ):
            continue
        flag = min(param.opts, key=len)
        envvar = param.envvar if isinstance(param.envvar, str) else None
        words += [flag] if param.is_flag else [flag, _shell_word(str(value), envvar)]
    return " ".join(words)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dnnframe", message="dnnframe %(version)s")
def cli() -> None:
    """Systematic, distributed experiments on neural-network layer design."""


def store_option(f):  # noqa: ANN001, ANN201 - a click decorator
    """``--store URL`` (env ``DNNFRAME_STORE_URL``)."""
    return click.option(
        "--store",
        "store_url",
        envvar="DNNFRAME_STORE_URL",
        default=None,
        metavar="URL",
        show_envvar=True,
        help="Result store: sqlite:///path.db (default sqlite:///dnnframe.db) "
        "or mongodb://host/db.",
    )(f)


def _open_store(url: str | None, create: bool = True):  # noqa: ANN202
    """Open the store; read-only commands pass ``create=False`` so a mistyped URL is an
    error ("no store at ...") rather than a new empty database."""
    from ..store import default_store_url, open_store

    return open_store(url or default_store_url(), create=create)


def _resolve_experiment(store, ref: str | None):  # noqa: ANN001, ANN202
    """An experiment by exact id, unique id prefix or name (latest with that name);
    None → the most recently created experiment."""
    from ..exceptions import NotFoundError

    if ref is None:
        latest = store.list_experiments(limit=1)
        if not latest:
            raise NotFoundError(
                f"the store {store.url} has no experiments yet; start one with: dnnframe run SPEC"
            )
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
        raise NotFoundError(
            f"{ref!r} matches {len(by_prefix)} experiments: "
            + ", ".join(e.id for e in by_prefix[:5])
        )
    raise NotFoundError(
        f"no experiment {ref!r} (id, id prefix or name) in {store.url}; see: dnnframe ls"
    )


def _summary(
    store,
    exp,
    store_url: str,
    wall: float | None = None,
    interrupted: bool = False,
    trained: int | None = None,
    top: int = 5,
) -> dict:  # noqa: ANN001
    """Machine-readable summary of an experiment (``--json`` output)."""
    from ..analysis.report import aggregate, best_aggregates, counted_rows, varied_columns
    from ..store.rows import summary_rows

    exp = store.get_experiment(exp.id)
    metric, mode = exp.objective
    rows = summary_rows(store, exp.id, metric)  # a few values per trial, never whole rows
    varied = [c for c in varied_columns(rows) if c != "seed"]
    best_trials = rank(
        [r for r in rows if r["state"] == SCORED_STATE.value],
        lambda r: r.get(metric),
        mode,
        scored_only=True,
    )
    # seeds count as every analysis counts them: a diverged one as the worst value
    counted = counted_rows(rows, metric, mode)
    best_configs = best_aggregates(aggregate(counted, varied, metric, None), mode) if varied else []
    counts = store.counts_by_state(exp.id)
    failed = [
        {"trial_id": r["trial_id"], "error": r["error"]}
        for r in rows
        if r["state"] == TrialState.FAILED.value
    ]
    out = {
        "experiment_id": exp.id,
        "name": exp.name,
        "status": exp.status,
        "store": _shown_url(absolute_store_url(store_url)),
        "n_trials": len(rows),
        "counts": counts,
        "objective": {"metric": metric, "mode": mode},
        "varied": varied,
        "interrupted": interrupted,
        "best": (
            {k: best_trials[0][k] for k in ("trial_id", metric, *varied, "seed")}
            if best_trials
            else None
        ),
        "best_configs": best_configs[:top],
        "failed": failed,
    }
    if wall is not None:
        out["wall_seconds"] = round(wall, 3)
    if trained is not None:
        out["trials_run_now"] = trained
    return out


def _print_summary(
    console,
    summary: dict,
    store_url: str,  # noqa: ANN001
    hints: Sequence[str] = (),
) -> None:
    """Print an experiment's summary: counts, best configurations and trial, one line per
    failed trial, and the commands (with absolute paths) that read it further; then
    ``hints``, each a line of plain text. ``store_url`` is the store's URL as given (the
    summary's is masked): a password from the environment is printed as its variable."""
    from rich.table import Table

    metric = summary["objective"]["metric"]
    counts = {k: v for k, v in summary["counts"].items() if v}
    by_state = ", ".join(f"{k} {v}" for k, v in counts.items())
    # names, ids and errors are the user's text: printed as they are, never read as markup
    plain = {"markup": False, "highlight": False, "soft_wrap": True}
    console.print(
        Text.assemble(
            (summary["name"], "bold"),
            f" ({summary['experiment_id']}): {summary['status']}, "
            f"{summary['n_trials']} trials — {by_state}",
        ),
        soft_wrap=True,
    )
    if summary["best_configs"]:
        table = Table(title=f"Best configurations by mean {metric} over seeds")
        cols = [*summary["varied"], "n", "diverged", "pruned", "mean", "std"]
        for c in cols:
            table.add_column(c, justify="right")
        for a in summary["best_configs"]:
            table.add_row(
                *[Text(f"{a[c]:.4f}" if isinstance(a[c], float) else str(a[c])) for c in cols]
            )
        console.print(table)
    if summary["best"]:
        b = summary["best"]
        console.print(f"best trial: {b['trial_id']}  {metric} = {b[metric]:.4f}", **plain)
    exp_id = shlex.quote(summary["experiment_id"])
    store = " ".join(_store_words(store_url))
    failed = summary["failed"]
    for f in failed[:FAILED_LINES]:
        console.print(
            Text.assemble((TrialState.FAILED.value, "red"), f" {f['trial_id']}: {f['error']}"),
            soft_wrap=True,
        )
    if failed:
        more = f"{len(failed) - FAILED_LINES} more failed; " if len(failed) > FAILED_LINES else ""
        console.print(
            f"  {more}every error in full: dnnframe status {exp_id} {store} --failed", **plain
        )
    if "wall_seconds" in summary:
        console.print(f"wall time {summary['wall_seconds']:.1f}s", **plain)
    console.print(f"results in {_shown_url(absolute_store_url(summary['store']))}:", **plain)
    console.print(f"  dnnframe status {exp_id} {store}", **plain)
    console.print(f"  dnnframe report {exp_id} {store}", **plain)
    for hint in hints:
        console.print(hint, **plain)
