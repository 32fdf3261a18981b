"""Progress of ``dnnframe run``: a live two-line bar on a terminal, plain lines in a log.

On a terminal the first line is the bar (name, bar, finished/total, elapsed, ETA) and the
second the counts and the best result so far, so the bar keeps its width at 80 columns
however long the best result's text is. While the run's graphs are still being built (a
first run on a host compiles them, for tens of seconds) both say how many are ready. When the output is a pipe or a file there is no
live display: a plain line is printed whenever another tenth of the trials finished, and at
least every :data:`PLAIN_INTERVAL_S` seconds, so a CI log shows the run is alive.

Only trials that ran to an end count as done (:data:`dnnframe.states.DONE_STATES`):
CANCELLED trials do not, so an interrupted run shows how far it actually got.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from typing import Any

from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Column
from rich.text import Text

from ..states import OUTCOME_STATES, TrialState, count_done

# a plain progress line at least this often when output is not a terminal
PLAIN_INTERVAL_S = 30.0
# the experiment name's share of the bar line; longer names end in "…"
NAME_WIDTH = 24


def trials_finished(counts: Mapping[str, int]) -> int:
    """Trials that ran to an end, from counts by state (:func:`dnnframe.states.count_done`)."""
    return count_done(counts)


_RUNNING, _FAILED, _CANCELLED = (
    TrialState.RUNNING.value,
    TrialState.FAILED.value,
    TrialState.CANCELLED.value,
)


def _clock(seconds: float | None) -> str:
    """``h:mm:ss``, or ``-:--:--`` when unknown."""
    if seconds is None:
        return "-:--:--"
    return str(timedelta(seconds=max(0, round(seconds))))


class _EtaColumn(ProgressColumn):
    """``ETA h:mm:ss`` from ``task.fields['eta']`` (the rate since the run started, so a
    pause between packs longer than rich's speed window does not make it unknown);
    unknown before the first trial finished and once the run was interrupted."""

    def render(self, task: Task) -> Text:
        return Text(f"ETA {_clock(task.fields.get('eta'))}", style="progress.remaining")


def describe_running(running: int, packs: int | None) -> str:
    """``running 6 trials in 2 packs`` (``6 running`` when the packs are not known): the
    trials of a pack train together, so with ``-w 2`` six can run at once."""
    if not running or packs is None:
        return f"{running} running"
    return f"running {running} trial{'s' * (running != 1)} in {packs} pack{'s' * (packs != 1)}"


class _TwoLineProgress(Progress):
    """A rich Progress whose tasks each get a second line with ``task.fields['detail']``."""

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self.make_tasks_table(self.tasks)
        for task in self.tasks:
            yield Text("  " + task.fields.get("detail", ""), no_wrap=True, overflow="ellipsis")


class RunProgress:
    """Shows the progress of one experiment's run on ``console``.

    Use as a context manager and call :meth:`update` with the experiment's counts by state
    (and the best result so far, as text) after every poll.

    Args:
        console: where to draw; a live bar when it is a terminal, plain lines otherwise.
        name: the experiment's name.
        total: the number of trials in the experiment.
        counts: counts by state when the run starts (trials finished earlier count as done).
        enabled: False shows nothing (``--quiet``).
        clock: seconds, monotonic (a parameter so tests can drive the plain lines).
    """

    def __init__(
        self,
        console: Console,
        name: str,
        total: int,
        counts: Mapping[str, int] | None = None,
        enabled: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console = console
        self.name = name
        self.total = max(total, 0)
        self.enabled = enabled and not console.quiet
        self.live = self.enabled and console.is_terminal
        self.interrupted = False
        self._clock = clock
        self._started = clock()
        self._counts: dict[str, int] = dict(counts or {})
        self._packs: int | None = None
        self._graphs: tuple[int, int] | None = None  # (ready, total) while graphs build
        self._last_graphs: tuple[int, int] | None = None
        self._best = ""
        self._first_finished = trials_finished(self._counts)
        self._last_line: str | None = None
        self._last_line_at = self._started
        self._last_tenth = self._tenth(self._first_finished)
        self._progress = _TwoLineProgress(
            SpinnerColumn(),
            TextColumn(
                "{task.description}",
                style="bold",
                markup=False,
                table_column=Column(max_width=NAME_WIDTH, no_wrap=True, overflow="ellipsis"),
            ),
            BarColumn(bar_width=None),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            _EtaColumn(),
            console=console,
            disable=not self.live,
            expand=True,
            transient=False,
        )
        self._task = self._progress.add_task(
            name,
            total=self.total or None,
            completed=self._first_finished,
            detail=self._detail(),
            eta=None,
        )

    # ------------------------------------------------------------------ context manager
    def __enter__(self) -> RunProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()
        if self.enabled and not self.live:
            self._print_plain(force=True)  # the final state, unless just printed

    # ------------------------------------------------------------------ updates
    def update(
        self,
        counts: Mapping[str, int],
        best: str = "",
        running_packs: int | None = None,
        graphs: tuple[int, int] | None = None,
    ) -> None:
        """Show the experiment's current ``counts`` by state, ``best`` (text, may be ""),
        how many packs the RUNNING trials form (None: not known) and, while the run's
        graphs are being built, how many of them are ready (``(ready, total)``)."""
        self._counts = dict(counts)
        self._best = best
        self._packs = running_packs
        self._graphs = graphs if graphs and graphs[0] < graphs[1] else None
        finished = trials_finished(self._counts)
        eta = self._eta(finished, self._clock() - self._started)
        self._progress.update(self._task, completed=finished, detail=self._detail(), eta=eta)
        if self.enabled and not self.live:
            self._print_plain(force=False)

    def mark_interrupted(self) -> None:
        """The run was interrupted: no ETA any more (the rest will not run now)."""
        self.interrupted = True
        self._progress.update(self._task, eta=None)

    @property
    def renderable(self) -> RenderableType:
        """The live display as it is now (what the terminal shows)."""
        return self._progress.get_renderable()

    # ------------------------------------------------------------------ text
    def _building(self) -> str:
        """``building graphs 1/3`` while some of the run's graphs are not ready, else ""."""
        if self._graphs is None:
            return ""
        return f"building graphs {self._graphs[0]}/{self._graphs[1]}"

    def _detail(self) -> str:
        c = self._counts
        parts = [self._building()] if self._graphs else []
        parts += [describe_running(c.get(_RUNNING, 0), self._packs), f"failed {c.get(_FAILED, 0)}"]
        for state in OUTCOME_STATES:
            if state is not TrialState.FAILED and c.get(state.value):
                parts.append(f"{state.value.lower()} {c[state.value]}")
        if self._best:
            parts.append(self._best)
        return " · ".join(parts)

    def _tenth(self, finished: int) -> int:
        return finished * 10 // self.total if self.total else 0

    def _eta(self, finished: int, elapsed: float) -> float | None:
        """Remaining time at the rate trials finished since this run started."""
        done_now = finished - self._first_finished
        if self.interrupted or done_now <= 0 or elapsed <= 0:
            return None
        return (self.total - finished) * elapsed / done_now

    def plain_line(self) -> str:
        """The progress as one line of plain text (what a log gets)."""
        finished = trials_finished(self._counts)
        elapsed = self._clock() - self._started
        c = self._counts
        cancelled = f"{c[_CANCELLED]} cancelled, " if c.get(_CANCELLED) else ""
        building = f"{self._building()}, " if self._graphs else ""
        line = (
            f"{self.name}: {finished}/{self.total} trials finished, {building}"
            f"{describe_running(c.get(_RUNNING, 0), self._packs)}, "
            f"{c.get(_FAILED, 0)} failed, {cancelled}"
            f"elapsed {_clock(elapsed)}, ETA {_clock(self._eta(finished, elapsed))}"
        )
        return line + (f", {self._best}" if self._best else "")

    def _print_plain(self, force: bool) -> None:
        """Print a plain line when another tenth finished, another graph is ready, the
        interval passed, or ``force``; never the same counts twice in a row within the
        interval."""
        finished = trials_finished(self._counts)
        now = self._clock()
        tenth = self._tenth(finished)
        due = (
            force
            or tenth != self._last_tenth
            or finished == self.total
            or self._graphs != self._last_graphs
            or now - self._last_line_at >= PLAIN_INTERVAL_S
        )
        line = self.plain_line()
        key = line.split(", elapsed")[0]
        if not due or (key == self._last_line and now - self._last_line_at < PLAIN_INTERVAL_S):
            return
        self.console.print(line, markup=False, highlight=False, soft_wrap=True)
        self._last_line, self._last_line_at, self._last_tenth = key, now, tenth
        self._last_graphs = self._graphs


def describe_best(metric: str, value: Any) -> str:
    """``best val_loss 0.0733`` (empty when there is no value yet)."""
    if value is None:
        return ""
    return f"best {metric} {value:.4f}" if isinstance(value, float) else f"best {metric} {value}"
