"""Applies a fault schedule to a deployment, in a thread of its own, on the schedule's clock:
each fault is done at its start and undone at its end (a killed process is started again,
a stopped one continued, a cable plugged back in, a stopped server started). Records when
each fault was really done and undone, which the checker and the report use.

A restarted worker is ready only once it reaches the broker, which another fault may hold
down until its own undo, later in this same schedule: so the worker is waited for beside
the schedule, never in it."""

from __future__ import annotations

import signal
import threading
import time
import traceback
from dataclasses import dataclass

from ..procs import WorkerProc, wait_ready
from .deploy import Deployment
from .schedule import Fault

#: How long a restarted worker may take to be ready (it may wait for the broker's return).
READY_S = 300.0


@dataclass
class Applied:
    fault: Fault
    began: float = 0.0  # monotonic time it was done
    ended: float = 0.0  # monotonic time it was undone (the part answering again)
    error: str | None = None


def _do(dep: Deployment, f: Fault) -> None:
    host = dep.hosts[f.target]
    if f.kind == "worker_kill" and host.worker is not None:
        host.worker.kill_group(signal.SIGKILL)
        host.worker.proc.wait(30)
    elif f.kind == "worker_stop" and host.worker is not None:
        host.worker.kill_group(signal.SIGSTOP)
    elif f.kind == "link_cut" and host.ns is not None:
        host.ns.set_link(False)
    elif f.kind == "broker_restart":
        dep.node.stop_app()
    elif f.kind == "store_restart":
        dep.stop_store()
    elif f.kind == "driver_kill":
        dep.driver.kill()
    elif f.kind == "dashboard_kill":
        dep.dashboard.kill()
    elif f.kind == "disk_full":
        dep.fill_disk()


def _undo(dep: Deployment, f: Fault) -> WorkerProc | None:
    """Undo ``f``; a worker started again is returned, not waited for."""
    host = dep.hosts[f.target]
    if f.kind == "worker_kill":
        return dep.start_worker(host, wait=False)
    if f.kind == "worker_stop" and host.worker is not None:
        host.worker.kill_group(signal.SIGCONT)
    elif f.kind == "link_cut" and host.ns is not None:
        host.ns.set_link(True)
    elif f.kind == "broker_restart":
        dep.node.start_app()
    elif f.kind == "store_restart":
        dep.start_store()
    elif f.kind == "driver_kill":
        dep.driver.start()
    elif f.kind == "dashboard_kill":
        dep.start_dashboard()
    elif f.kind == "disk_full":
        dep.free_disk()
    return None


class FaultRunner:
    """Runs ``faults`` against ``dep`` from ``t0`` (monotonic) on; :meth:`join` waits until
    every fault is undone. A fault that cannot be done or undone is recorded with its error
    (the checker reports it) rather than ending the run."""

    def __init__(self, dep: Deployment, faults: list[Fault], t0: float):
        self.dep, self.t0 = dep, t0
        self.applied = [Applied(f) for f in faults]
        self.cancel = threading.Event()
        self._lock = threading.Lock()  # one action on the deployment at a time
        self._thread = threading.Thread(target=self._run, name="chaos-faults", daemon=True)
        self._waiters: list[threading.Thread] = []  # restarted workers, until ready

    def start(self) -> FaultRunner:
        self._thread.start()
        return self

    def join(self, timeout: float | None = None) -> None:
        """Wait until the schedule is over and every restarted worker is ready."""
        deadline = None if timeout is None else time.monotonic() + timeout

        def left() -> float | None:
            return None if deadline is None else max(0.0, deadline - time.monotonic())

        self._thread.join(left())
        for th in list(self._waiters):  # complete once the schedule's thread has ended
            th.join(left())

    def active_at(self, t: float, kind: str | None = None) -> bool:
        """Whether a fault (of ``kind``) was in effect at monotonic time ``t``."""
        return any(
            a.began
            and a.began <= t <= (a.ended or float("inf"))
            and (kind is None or a.fault.kind == kind)
            for a in self.applied
        )

    @property
    def last_end(self) -> float:
        return max((a.ended for a in self.applied), default=self.t0)

    def _events(self) -> list[tuple[float, int, Applied]]:
        # undo (1) sorts after do (0) at the same time, so a zero-length fault is done first
        events = [(a.fault.start, 0, a) for a in self.applied]
        events += [(a.fault.end, 1, a) for a in self.applied]
        return sorted(events, key=lambda e: (e[0], e[1]))

    def _run(self) -> None:
        for at, undo, a in self._events():
            # the schedule's clock, not a test's: a cancel (the run ending) wakes it at once
            if self.cancel.wait(max(0.0, self.t0 + at - time.monotonic())):
                undo = 1
            self._act(a, undo == 1)

    def _act(self, a: Applied, undo: bool) -> None:
        with self._lock:
            if undo and not a.began:
                return  # never done (the run was cancelled first)
            if not undo:
                # before the action: a request it breaks must fall inside the fault's window
                a.began = time.monotonic()
            started = None
            try:
                if undo:
                    started = _undo(self.dep, a.fault)
                else:
                    _do(self.dep, a.fault)
            except Exception as exc:  # recorded and reported: the run goes on
                a.error = f"{'undo' if undo else 'do'}: {exc}\n{traceback.format_exc(limit=3)}"
            now = time.monotonic()
            if started is not None:
                self._await_ready(a, started)
            elif undo:
                a.ended = now  # after it: the part is back (a restarted one answers)
            print(
                f"[{now - self.t0:7.1f}s] {'undone' if undo else 'done  '} "
                f"{a.fault.describe().strip()}",
                flush=True,
            )

    def _await_ready(self, a: Applied, worker: WorkerProc) -> None:
        """Mark ``a`` undone once ``worker`` is ready, in a thread of its own."""

        def wait() -> None:
            problem = wait_ready(worker, READY_S)
            if problem and worker.proc.returncode == -signal.SIGKILL:
                problem = None  # a later fault killed it before it was ready: its own fault
            if problem:
                a.error = f"undo: {problem}"
            a.ended = time.monotonic()
            print(
                f"[{a.ended - self.t0:7.1f}s] ready  {worker.name}"
                f"{' (killed before)' if worker.proc.returncode is not None else ''}",
                flush=True,
            )

        th = threading.Thread(target=wait, name=f"chaos-ready-{worker.name}", daemon=True)
        th.start()
        self._waiters.append(th)

    def undo_all(self) -> None:
        """Cancel what is still to come, undoing every fault in effect."""
        self.cancel.set()
        self.join(300)
