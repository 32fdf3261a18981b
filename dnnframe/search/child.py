"""The driver service as a supervised child process of a server (``dnnframe serve``,
gunicorn's master): started with the server, started again whenever it dies, stopped
with the server. The child also stops by itself when its parent is gone (even one killed
with SIGKILL), so a driver never outlives the server that started it."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading

log = logging.getLogger(__name__)


class DriverChild:
    """``dnnframe drive --store URL`` as a child of this process, restarted when it dies.

    Args:
        store_url: the store the server uses (None: ``$DNNFRAME_STORE_URL`` or the default).
        restart_delay_s: the wait before starting a child again after one died, so a child
            that cannot start does not spin.
    """

    def __init__(self, store_url: str | None = None, restart_delay_s: float = 1.0):
        self.store_url, self.restart_delay_s = store_url, restart_delay_s
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> DriverChild:
        """Start the child and the thread that restarts it."""
        self._thread = threading.Thread(target=self._supervise, daemon=True,
                                        name="dnnframe-driver-child")
        self._thread.start()
        return self

    def stop(self, timeout: float = 20.0) -> None:
        """Stop the child (SIGTERM, then SIGKILL after ``timeout``) and stop restarting it."""
        self._stop.set()
        with self._lock:
            proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def _spawn(self) -> subprocess.Popen:
        args = [sys.executable, "-m", "dnnframe.cli", "drive",
                f"--exit-with-parent={os.getpid()}"]
        if self.store_url:
            args.append(f"--store={self.store_url}")
        return subprocess.Popen(args)  # noqa: S603 - our own interpreter and module

    def _supervise(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                if self._stop.is_set():
                    return
                self.proc = self._spawn()
                self.starts += 1
            code = self.proc.wait()
            if self._stop.is_set():
                return
            log.error("the driver service (pid %d) exited with %s; starting it again",
                      self.proc.pid, code)
            self._stop.wait(self.restart_delay_s)
