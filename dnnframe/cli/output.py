"""Where the ``dnnframe`` commands write: results on stdout, progress and messages on
stderr, both through rich consoles that do not wrap lines off a terminal and that survive
a reader going away (``dnnframe run … 2>&1 | head -3``)."""

from __future__ import annotations

import io
import os
import sys

from rich.console import Console

# a console that is not a terminal is this wide: a file or a pipe gets each line whole
_UNWRAPPED_WIDTH = 100_000


class ReaderSafeStream(io.TextIOBase):
    """``sys.stdout`` or ``sys.stderr`` as it is when made (a test's capture included; not
    looked up again, since rich's live display swaps them for proxies that write back to
    the console) for a rich console: once the reader went away (``dnnframe run 2>&1 |
    head -3``), what is written is dropped instead of raising BrokenPipeError in the middle
    of a run, and :attr:`reader_gone` says so, so the run can stop as cleanly as for Ctrl-C."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self._stream = getattr(sys, name)
        self.reader_gone = False

    def _guard(self, action):  # noqa: ANN001, ANN202
        if self.reader_gone:
            return None
        try:
            return action()
        except BrokenPipeError:
            self.reader_gone = True
            silence_closed_output()
            return None

    def write(self, text: str) -> int:
        self._guard(lambda: self._stream.write(text))
        return len(text)

    def flush(self) -> None:
        self._guard(self._stream.flush)

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()


def silence_closed_output() -> None:
    """Point stdout and stderr at /dev/null after a reader closed one of them, so nothing
    more (not even Python's final flush) fails writing to a closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError):  # not a real file (a test's capture)
            pass
    os.close(devnull)


def make_console(stderr: bool = False, quiet: bool = False) -> Console:
    """A rich console on stdout (results) or stderr (progress, messages); see
    :class:`ReaderSafeStream`. On a terminal it wraps at the terminal's width; into a file
    or a pipe lines are never wrapped, so a table row or a command stays one line for grep
    and for pasting."""
    stream = ReaderSafeStream("stderr" if stderr else "stdout")
    # rich annotates ``file`` as typing.IO, which typeshed's io.TextIOBase is not; it
    # calls only write, flush, isatty and fileno, which the stream has
    console = Console(file=stream, quiet=quiet)  # type: ignore[arg-type]
    if console.is_terminal:
        return console
    wide = Console(file=stream, quiet=quiet, width=_UNWRAPPED_WIDTH, soft_wrap=True)  # type: ignore[arg-type]
    return wide
