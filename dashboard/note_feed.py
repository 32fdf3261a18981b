"""The notes an open page shows, followed for the live stream (:mod:`.events`).

A note moves no trial's change number (dnnframe/store/notes.py), so the change feed cannot
see a save in the trials it reads. Instead, while streams are open, the feed reads the
version of each note some stream follows (an experiment's, or a trial's that a trial page
shows) at every pass; a version new to it becomes one ``note`` event, serialised once for
every stream that follows that note. The version first read is the one the pages read with
themselves, so it is kept without an event.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterable
from typing import Any

from dnnframe.exceptions import DnnframeError

#: A note some stream follows: its kind ("experiment" or "trial") and the id it is kept on.
Target = tuple[str, str]
_READERS = {"experiment": "experiment_note", "trial": "trial_note"}


class NoteFeed:
    """The followed notes' versions and events, guarded by the change feed's condition
    (notified when a note changes)."""

    def __init__(self, cond: threading.Condition):
        self._cond = cond
        self._followed: Counter[Target] = Counter()  # target → the streams that follow it
        # target → (its version, the ``note`` event's JSON; None for the version first read)
        self._notes: dict[Target, tuple[int, str | None]] = {}

    def follow(self, targets: Iterable[Target]) -> None:
        """Count one more stream following each of ``targets`` (under the condition)."""
        self._followed.update(set(targets))

    def unfollow(self, targets: Iterable[Target]) -> None:
        """Count one stream fewer (under the condition); a target no stream follows is
        forgotten."""
        for target in set(targets):
            self._followed[target] -= 1
            if self._followed[target] <= 0:
                del self._followed[target]
                self._notes.pop(target, None)

    def versions(self, targets: Iterable[Target]) -> dict[Target, int]:
        """The version known of each target (-1: none read yet): where a new stream's
        ``note`` events start."""
        with self._cond:
            return {t: self._notes.get(t, (-1, None))[0] for t in targets}

    def newer(self, seen: dict[Target, int]) -> dict[Target, tuple[int, str]]:
        """The notes of ``seen`` saved since the version seen there, as (version, event
        JSON); call under the condition."""
        return {
            t: (version, body)
            for t, (version, body) in self._notes.items()
            if t in seen and body is not None and version != seen[t]
        }

    def read(self, store: Any, targets: Iterable[Target] | None = None) -> None:
        """Read the version of ``targets`` (None: every followed note) and keep each new
        one as its ``note`` event."""
        with self._cond:
            wanted = set(self._followed) if targets is None else set(targets)
        read = {}
        for kind, target_id in wanted:
            try:
                read[kind, target_id] = getattr(store, _READERS[kind])(target_id)
            except DnnframeError:  # deleted meanwhile: its streams end by themselves
                continue
        with self._cond:
            for target, note in read.items():
                known = self._notes.get(target)
                if target not in self._followed or (known and known[0] == note.version):
                    continue
                if known is None:  # the version the pages read with the page itself
                    self._notes[target] = (note.version, None)
                    continue
                body = {"kind": target[0], "id": target[1], "text": note.text}
                if target[0] == "experiment":  # what the browser's stream routes events by
                    body["experiment_id"] = target[1]
                body.update(version=note.version, updated_at=note.updated_at)
                self._notes[target] = (note.version, json.dumps(body))
                self._cond.notify_all()
