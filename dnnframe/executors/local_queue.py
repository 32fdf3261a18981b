"""The packs waiting for a process of the local pool, and which one a process takes next."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass
class QueuedPack:
    """A pack waiting for a worker process, with the compile key of its members' graph
    (None when the submitter did not say)."""

    trial_ids: list[str]
    compile_key: str | None = None


class PackQueue:
    """Queued packs, oldest first. Not thread-safe: the executor holds its lock."""

    # How far into the queue to look for a better-suited pack: the scan runs under the
    # executor's lock each time a process is free.
    AFFINITY_SCAN = 2000

    def __init__(self) -> None:
        self._packs: collections.deque[QueuedPack] = collections.deque()

    def __len__(self) -> int:
        return len(self._packs)

    def __iter__(self) -> Iterator[QueuedPack]:
        return iter(self._packs)

    def append(self, pack: QueuedPack) -> None:
        self._packs.append(pack)

    def put_first(self, pack: QueuedPack) -> None:
        """Queue ``pack`` ahead of every other (a trial that must run again goes first)."""
        self._packs.appendleft(pack)

    def trial_count(self) -> int:
        """The trials in all queued packs."""
        return sum(len(p.trial_ids) for p in self._packs)

    def drop(self, trial_ids: set[str]) -> int:
        """Remove ``trial_ids`` from the queued packs (a pack left empty goes); returns how
        many trials were removed."""
        kept: collections.deque[QueuedPack] = collections.deque()
        dropped = 0
        for pack in self._packs:
            members = [t for t in pack.trial_ids if t not in trial_ids]
            dropped += len(pack.trial_ids) - len(members)
            if members:
                kept.append(QueuedPack(members, pack.compile_key))
        self._packs = kept
        return dropped

    def clear(self) -> int:
        """Drop every queued pack; returns how many trials they held."""
        n = self.trial_count()
        self._packs.clear()
        return n

    def take(self, compiled: set[str], compiled_elsewhere: set[str]) -> QueuedPack:
        """The next pack for a process that has compiled the graphs ``compiled``: one it has
        compiled, else one no other live process (``compiled_elsewhere``) has compiled, else
        the oldest. Keeps each process on its graphs instead of every process compiling every
        graph. The queue must not be empty."""
        chosen = None
        for i, pack in enumerate(self._packs):
            if i >= self.AFFINITY_SCAN or pack.compile_key is None:
                break
            if pack.compile_key in compiled:
                chosen = i
                break
            if chosen is None and pack.compile_key not in compiled_elsewhere:
                chosen = i
        pack = self._packs[chosen or 0]
        del self._packs[chosen or 0]
        return pack
