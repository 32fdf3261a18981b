"""Who owns a RUNNING trial, and whether that owner still lives.

A worker is named ``host:pid``: the claim records that name on the trial, so a process on
the same host can tell whether the owner's process is gone and release its trial at once
instead of waiting for the stale-heartbeat timeout.
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

from .store.base import TrialState

log = logging.getLogger(__name__)


def default_worker_name() -> str:
    """``host:pid`` — unique per live process, readable in the dashboard."""
    return f"{socket.gethostname()}:{os.getpid()}"


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


def release_if_owner_died(store: Any, trial_id: str, node: str) -> bool:
    """Put ``trial_id`` back to QUEUED if its owner was a now-dead process of ``node``.

    A process killed mid-trial (SIGKILL, OOM, a killed ``dnnframe run``) leaves its trial
    RUNNING under ``"<node>:<pid>"``: a Celery pool process's message is redelivered within
    seconds and a rerun of ``dnnframe run`` starts at once, but the claim refuses a RUNNING
    trial, so without this the trial would wait for the stale-heartbeat timeout. Only owners
    on *this* node are checked: same node name means same host (and pid namespace), the only
    place where a pid says anything. An owner whose pid
    still exists (or was reused) is left alone, and so is every other node's (the reaper
    handles those). Returns True if this call released the trial.
    """
    trial = store.get_trial(trial_id)
    if trial.state is not TrialState.RUNNING or not trial.worker:
        return False
    owner_node, _, owner_pid = trial.worker.rpartition(":")
    if (owner_node != node or not owner_pid.isdigit() or int(owner_pid) == os.getpid()
            or not pid_is_dead(int(owner_pid))):
        log.info("trial %s: redelivered while RUNNING under %s (alive, or not on this node); "
                 "left to its owner or the reaper", trial_id, trial.worker)
        return False
    if not store.release_trial(trial_id, trial.worker):
        return False  # the reaper or another redelivery got there first
    log.warning("trial %s: its owner %s died (no such process on this node); released it to "
                "run again now (attempt %d so far)", trial_id, trial.worker, trial.attempts)
    return True
