"""Who owns a RUNNING trial, and whether that owner still lives.

A worker is named ``<node>:<pid>`` (``host:pid`` for ``dnnframe run``, ``celery@host:pid`` for
a Celery pool process): the claim records that name on the trial, so a process on the same
node can tell whether the owner's process is gone and release its trial at once instead of
waiting for the stale-heartbeat timeout. Names are built and split here only.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass

# The pid is the ASCII digits after the last colon (a node name may hold colons: an IPv6
# address); str.isdigit() would also take digits int() refuses, such as "²".
_NAME = re.compile(r"(?P<node>.+):(?P<pid>[0-9]+)", re.DOTALL)


@dataclass(frozen=True)
class WorkerName:
    """A worker's name split: its node and, for a process, its pid (None for a node's own
    name or a name given by hand, which say nothing about a process)."""

    node: str
    pid: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.node, str) or not self.node:
            raise ValueError(f"a worker name needs a non-empty node, but got {self.node!r}")
        if self.pid is not None and (
            isinstance(self.pid, bool) or not isinstance(self.pid, int) or self.pid < 0
        ):
            raise ValueError(f"a worker's pid must be an integer >= 0, but got {self.pid!r}")

    def __str__(self) -> str:
        return self.node if self.pid is None else f"{self.node}:{self.pid}"

    @classmethod
    def parse(cls, name: str | None) -> WorkerName:
        """``"<node>:<pid>"`` split; any other non-empty name is a node without pid.

        Raises:
            ValueError: ``name`` is empty or None (a trial's owner is always named).
        """
        if not name:
            raise ValueError(f"a worker name must be a non-empty string, but got {name!r}")
        match = _NAME.fullmatch(name)
        return cls(match["node"], int(match["pid"])) if match else cls(name)


def worker_name(node: str | None = None, pid: int | None = None) -> str:
    """``<node>:<pid>`` of a process: this host and this process unless given."""
    return str(WorkerName(node or socket.gethostname(), os.getpid() if pid is None else pid))


def default_worker_name() -> str:
    """``host:pid`` of this process — unique per live process, readable in the dashboard."""
    return worker_name()


def split_owner(worker: str | None) -> tuple[str, int | None]:
    """A trial's owner ``"<node>:<pid>"`` → (node, pid); ("", None) when it has none, pid
    None when the name has no pid."""
    if not worker:
        return "", None
    name = WorkerName.parse(worker)
    return name.node, name.pid


def celery_node(hostname: str | None = None) -> str:
    """A Celery node's name: ``hostname`` as Celery gave it, else Celery's default
    ``celery@<host>``."""
    return hostname or f"celery@{socket.gethostname()}"


def pid_is_dead(pid: int) -> bool:
    """True only when no process ``pid`` exists here (a process we may not signal exists)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # EPERM: someone's process has that pid; assume it may be the owner
        return False
    # A killed process whose parent died too stays a zombie until init reaps it (a second or
    # more on some systems); it runs no trial any more.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return False
