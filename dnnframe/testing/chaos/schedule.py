"""The seeded fault schedule: which fault starts when, for how long, on what target.

Pure (no processes), so a failing seed's schedule can be printed and replayed exactly: the
same seed, length and kinds give the same list.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

#: Every kind of fault, with (shortest, longest) seconds it lasts before it is undone.
KINDS: dict[str, tuple[float, float]] = {
    "worker_kill": (0.0, 0.0),  # SIGKILL of a host's worker group, then a new worker
    "worker_stop": (2.0, 8.0),  # SIGSTOP of a host's worker group, then SIGCONT
    "link_cut": (3.0, 10.0),  # a host's cable pulled out, then plugged back in
    "broker_restart": (1.0, 5.0),  # the RabbitMQ application stopped, then started
    "store_restart": (1.0, 5.0),  # PostgreSQL stopped (fast), then started
    "driver_kill": (0.0, 3.0),  # SIGKILL of the driver service, then a new one
    "dashboard_kill": (0.0, 3.0),  # SIGKILL of `dnnframe serve`, then a new one
    "disk_full": (2.0, 6.0),  # the store's filesystem filled, then freed
}
#: Kinds a run has unless asked for others (a full disk needs a filesystem of its own).
DEFAULT_KINDS = tuple(k for k in KINDS if k != "disk_full")
#: Faults aimed at one host (their target is its index).
HOST_KINDS = ("worker_kill", "worker_stop", "link_cut")


@dataclass(frozen=True)
class Fault:
    kind: str
    start: float  # seconds after the workload starts
    duration: float  # seconds until it is undone
    target: int = 0  # the host, for HOST_KINDS

    @property
    def end(self) -> float:
        return self.start + self.duration

    def describe(self) -> str:
        where = f" host {self.target}" if self.kind in HOST_KINDS else ""
        return f"{self.start:7.1f}s  {self.kind:<15}{where:<8} for {self.duration:.1f}s"


#: The share of a run over which faults start; the rest lets everything finish.
FAULT_SHARE = 0.7


def make_schedule(
    seed: int,
    seconds: float,
    kinds: tuple[str, ...] = DEFAULT_KINDS,
    hosts: int = 2,
    gap: float = 6.0,
) -> list[Fault]:
    """Faults over the first :data:`FAULT_SHARE` of ``seconds`` (the rest lets everything finish): one
    every ``gap`` seconds on average, each kind at least once when there is room, and about
    a third started while the previous one still lasts (overlapping faults)."""
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise ValueError(f"kinds: unknown fault kinds {unknown}; known: {sorted(KINDS)}")
    if seconds <= 0 or hosts < 1:
        raise ValueError(f"seconds and hosts must be positive, got {seconds} and {hosts}")
    rng = random.Random(seed)
    window = FAULT_SHARE * seconds
    count = max(1, int(window / gap))
    order = list(kinds) * (count // len(kinds) + 1)
    picked = order[: len(kinds)]
    rng.shuffle(picked)
    picked += [rng.choice(kinds) for _ in range(count - len(picked))]
    faults: list[Fault] = []
    t = rng.uniform(2.0, gap)
    for kind in picked:
        low, high = KINDS[kind]
        duration = round(rng.uniform(low, high), 1)
        target = rng.randrange(hosts) if kind in HOST_KINDS else 0
        # the same fault on the same target twice at once cannot be undone twice: after it
        same = [f.end for f in faults if (f.kind, f.target) == (kind, target) and f.end >= t]
        start = round(max([t, *(end + 0.5 for end in same)]), 1)
        if start > window:
            break
        faults.append(Fault(kind, start, duration, target))
        # overlap: about a third start before this one is undone
        if rng.random() < 0.35 and duration > 0:
            t = start + rng.uniform(0.3, 0.9) * duration
        else:
            t = start + duration + rng.uniform(0.5, 1.0) * gap
    return sorted(faults, key=lambda f: f.start)


def format_schedule(seed: int, faults: list[Fault]) -> str:
    lines = [f"fault schedule (seed {seed}, {len(faults)} faults):"]
    return "\n".join(lines + [f"  {f.describe()}" for f in faults])


def overlaps(faults: list[Fault]) -> int:
    """How many faults start while an earlier one still lasts."""
    return sum(1 for i, f in enumerate(faults) if any(g.end > f.start for g in faults[:i]))
