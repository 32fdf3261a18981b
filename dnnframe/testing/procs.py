"""Celery worker processes for tests and the chaos run: ``celery -A tasks worker`` (or
``dnnframe worker``) started in a session of its own, optionally as another host (a UTS
namespace with its own hostname) in a network namespace, so its whole process group can be
killed, stopped or continued like a machine."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@dataclass
class WorkerProc:
    """One ``celery -A tasks worker`` (or ``dnnframe worker``) process group."""

    name: str
    proc: subprocess.Popen
    log: Path
    env: dict[str, str] = field(default_factory=dict)
    host: str | None = None  # the hostname of its own UTS namespace, if it has one

    @property
    def nodename(self) -> str:
        return f"{self.name}@{self.host or socket.gethostname()}"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def children(self) -> list[int]:
        """PIDs of the pool processes (direct children of the worker's main process)."""
        out = subprocess.run(
            ["ps", "-o", "pid=", "--ppid", str(self.proc.pid)], capture_output=True, text=True
        ).stdout
        return [int(p) for p in out.split()]

    def kill_group(self, sig: int = signal.SIGKILL) -> None:
        """Signal the whole process group (main process and pool), like a dying machine."""
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self) -> None:
        """Warm shutdown, then SIGKILL the group if it lingers; always reaps."""
        if self.alive():
            self.kill_group(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.kill_group(signal.SIGKILL)  # pool children that outlived their parent
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def spawn_worker(
    name: str,
    queue: str,
    log: Path,
    env: dict[str, str],
    concurrency: int = 1,
    cli: bool = False,
    host: str | None = None,
    netns: str | None = None,
) -> WorkerProc:
    """Start worker ``name`` on ``queue`` with the whole environment ``env``, its output in
    ``log``; ``cli`` starts it through ``dnnframe worker``, ``host`` in a UTS namespace with
    that hostname, ``netns`` in that network namespace. Does not wait (see wait_ready)."""
    if cli:
        cmd = [
            sys.executable,
            "-m",
            "dnnframe.cli",
            "worker",
            "-Q",
            queue,
            "-c",
            str(concurrency),
            "-n",
            f"{name}@%h",
            "--",
        ]
    else:
        cmd = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "tasks",
            "worker",
            "-Q",
            queue,
            "-c",
            str(concurrency),
            "-n",
            f"{name}@%h",
            "--prefetch-multiplier=1",
            "-O",
            "fair",
            "--loglevel=INFO",
        ]
    # mingle/gossip only slow the start-up of short-lived test workers down
    cmd += ["--without-mingle", "--without-gossip"]
    if host is not None:
        cmd = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', host, *cmd]
    if netns is not None:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            cmd, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )
    return WorkerProc(name, proc, log, host=host)


def wait_ready(w: WorkerProc, timeout: float) -> str | None:
    """Wait until ``w`` logs that it is ready; what went wrong (with its log) if it exits
    or is not ready after ``timeout`` seconds, else None."""
    deadline = time.monotonic() + timeout
    while " ready." not in w.log_text():
        if not w.alive():
            return f"worker {w.name} exited with {w.proc.returncode}:\n{w.log_text()[-4000:]}"
        if time.monotonic() > deadline:
            return f"worker {w.name} not ready after {timeout}s:\n{w.log_text()[-4000:]}"
        time.sleep(0.1)
    return None
