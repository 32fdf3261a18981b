"""The ``dnnframe`` command line: validate, run, status, ls, export, report, serve, worker.

Every command reads its store URL from ``--store`` or ``$DNNFRAME_STORE_URL`` (default
``sqlite:///dnnframe.db``). Errors a user can fix (a bad spec, an unreachable store, an
unknown experiment) are printed as one clear message — never a traceback — and give a
non-zero exit code: 2 for an invalid spec or usage, 1 for everything else.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .exceptions import DnnframeError, SpecError

EXIT_SPEC_ERROR = 2


def _print_spec_error(exc: SpecError, source: str | None = None) -> None:
    """Print every problem of a spec, one line each, naming the file and the key path."""
    where = exc.source or source
    for err in exc.errors:
        prefix = f"{where}: " if where else ""
        click.echo(f"{prefix}{err['path'] or '<root>'}: {err['message']}", err=True)


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


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the CLI, turning dnnframe errors into clean exits."""
    try:
        cli.main(args=argv, prog_name="dnnframe", standalone_mode=True)
    except SpecError as exc:
        _print_spec_error(exc)
        sys.exit(EXIT_SPEC_ERROR)
    except DnnframeError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
