"""The ``dnnframe`` command line: validate, run, status, ls, export, report, serve, worker.

Every command reads its store URL from ``--store`` or ``$DNNFRAME_STORE_URL`` (default
``sqlite:///dnnframe.db``). Errors a user can fix (a bad spec, an unreachable store, an
unknown experiment) are printed as one clear message — never a traceback — and give a
non-zero exit code: 2 for an invalid spec or usage, 1 for everything else; a run stopped
by Ctrl-C exits 130, by SIGTERM 143, and a command whose reader went away (``| head``) 141.
Results (summaries, ``ls``, ``status``) go to stdout; progress and messages to stderr.
"""

from __future__ import annotations

import importlib.util
import sys

import click

from ..exceptions import DnnframeError, SpecError, StoreError
from . import drive, results, run, services  # noqa: F401 - each module registers its commands
from .common import EXIT_SPEC_ERROR, _one_line, _print_spec_error, cli
from .output import silence_closed_output

__all__ = ["cli", "main"]


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the CLI, turning dnnframe errors into clean exits."""
    _run_as_a_package_main()
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
    except BrokenPipeError:
        # the reader went away (``dnnframe export … | head``): quietly, as a process killed
        # by SIGPIPE would end (128 + 13)
        silence_closed_output()
        sys.exit(141)
    except OSError as exc:
        # An output file that cannot be written (missing directory, no permission, disk
        # full) is the user's to fix: one line naming the path, not a traceback.
        where = f"{exc.filename}: " if exc.filename else ""
        click.echo(f"error: {where}{exc.strerror or exc}", err=True)
        sys.exit(1)


def _run_as_a_package_main() -> None:
    """Give the ``dnnframe`` console script's ``__main__`` the spec ``python -m dnnframe.cli``
    has. A process that multiprocessing spawns (the local pool's workers) first runs a
    script's main module again, which here imports the whole CLI for nothing (0.7 s of CPU
    per worker, before it can train); a package's ``__main__`` it skips."""
    main_module = sys.modules.get("__main__")
    if (
        main_module is None
        or getattr(main_module, "__spec__", None) is not None
        or getattr(main_module, "main", None) is not main  # a program that calls main()
    ):
        return
    main_module.__spec__ = importlib.util.find_spec("dnnframe.cli.__main__")
