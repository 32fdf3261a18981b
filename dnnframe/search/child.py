"""The driver service as a supervised child of a server (``dnnframe serve``, gunicorn's
master): started with the server, started again whenever it dies, stopped with the server.

The server starts one supervisor process (``dnnframe drive --supervise``), once, from its
main thread; the supervisor runs ``dnnframe drive`` and restarts it when it ends. The
restarts happen in the supervisor, never on a thread of the server: gunicorn's master forks
its workers at any moment, and a worker forked while a thread of the master was starting a
process would inherit that start's pipe and hang it. Every process of the chain stops by
itself when its parent is gone (even one killed with SIGKILL), so a driver never outlives
the server that started it.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading

from .. import settings

log = logging.getLogger(__name__)

DRIVE = [sys.executable, "-m", "dnnframe.cli", "drive"]


class DriverChild:
    """The supervisor process (``dnnframe drive --supervise``) of a server.

    Args:
        store_url: the store the server uses (None: ``$DNNFRAME_STORE_URL`` or the default).
    """

    def __init__(self, store_url: str | None = None):
        self.store_url = store_url
        self.proc: subprocess.Popen | None = None

    def start(self) -> DriverChild:
        """Start the supervisor (call it from the server's main thread)."""
        args = [*DRIVE, "--supervise", f"--exit-with-parent={os.getpid()}"]
        # the store URL goes in the child's environment: it may carry a password, which must
        # not show on a command line
        env = settings.child_environ(store_url=self.store_url)
        self.proc = subprocess.Popen(args, env=env)  # noqa: S603 - our own interpreter and module
        return self

    def stop(self, timeout: float = 20.0) -> None:
        """Stop the supervisor and its driver service (SIGTERM, then SIGKILL)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def supervise(
    args: list[str],
    stop: threading.Event,
    parent_pid: int | None = None,
    restart_delay_s: float = 1.0,
    check_every_s: float = 0.5,
    env: dict[str, str] | None = None,
) -> None:
    """Run ``args`` (a ``dnnframe drive`` command) as a child, started again whenever it
    ends, until ``stop`` is set or the process ``parent_pid`` is gone; then stop the child.

    The child is given ``--exit-with-parent`` with this process's pid and ``env`` (default:
    this process's environment). ``restart_delay_s`` keeps a child that cannot start from
    spinning.
    """
    child: subprocess.Popen | None = None
    try:
        while not stop.is_set() and not _orphaned(parent_pid):
            if child is None or child.poll() is not None:
                if child is not None:
                    log.error(
                        "the driver service (pid %d) exited with %s; starting it again",
                        child.pid,
                        child.returncode,
                    )
                    if stop.wait(restart_delay_s):
                        break
                child = subprocess.Popen(
                    [*args, f"--exit-with-parent={os.getpid()}"],  # noqa: S603
                    env=env,
                )
            stop.wait(check_every_s)
    finally:
        if child is not None and child.poll() is None:
            child.terminate()
            try:
                child.wait(30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def _orphaned(parent_pid: int | None) -> bool:
    return parent_pid is not None and os.getppid() != parent_pid
