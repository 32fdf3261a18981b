"""The first code a local worker process runs, outside every package with a heavy
``__init__``: a spawned child imports its target's module before it runs anything, and
``dnnframe.executors`` alone takes a third of a second to import. Ctrl-C reaches the whole
process group; a worker that got it while still importing died with a KeyboardInterrupt
traceback. This module ignores SIGINT first (the parent coordinates a clean stop), then
imports the worker."""

from __future__ import annotations

import signal
from typing import Any


def local_worker(*args: Any) -> None:
    """:func:`dnnframe.executors.local_worker.worker_main`, with SIGINT ignored before the
    worker's imports."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from .executors.local_worker import worker_main

    worker_main(*args)
