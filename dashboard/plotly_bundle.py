"""plotly.js as the pages load it: the installed bundle with only the trace types they draw.

plotly.min.js registers every trace type it has (47 in plotly.js 4: maps, 3-D, WebGL,
geography...) while the script first runs, and running those modules was most of the time
the browser spent on the script: 1.2-1.3 s before an experiment page could draw a chart,
against 0.4-0.6 s with only the types below registered (Chromium here, side by side). The
bytes sent are the package's own with a shorter ``register([...])`` list; the modules left
out stay in the file, unrun.

The bundle is minified, so each entry of that list is told by following its module to the
``moduleType:"trace",name:"..."`` object plotly.js gives every trace. An entry this cannot
name is kept, and a bundle whose list cannot be found is served whole: a new plotly.js can
only make the page slower, never break a chart.
"""

from __future__ import annotations

import bisect
import logging
import re
from dataclasses import dataclass

log = logging.getLogger(__name__)

# the trace types the dashboard's scripts draw (scatter is plotly.js's core, always there);
# a browser test fails when a page draws a type missing here
TRACES = frozenset({"scatter", "bar", "heatmap"})
# the optional components they use: none (plotly.js 4 has one, calendars, for non-Gregorian
# dates, which cost another 0.1-0.2 s to register)
COMPONENTS: frozenset[str] = frozenset()
_KEPT = {"trace": TRACES, "component": COMPONENTS}

_NAME = r"[\w$]+"
# the bundle's one call registering every module: Plotly.register([a(),b(),...])
_REGISTER = re.compile(rf"\.register\(\[((?:{_NAME}\(\),)*{_NAME}\(\))\]\)")
_KIND = re.compile(r'moduleType:"(\w+)",name:"(\w+)"')
_CALL = re.compile(rf"(?<![\w$.])({_NAME})\(\)")
# how deep a registered entry may re-export another module before it is taken as unnamed
_DEPTH = 4


@dataclass(frozen=True)
class Registered:
    """One entry of the bundle's register list: its call as written, and what it registers
    (None: not told, so kept)."""

    call: str
    kind: str | None
    name: str | None


def _modules(source: str, wrapper: str) -> tuple[dict[str, int], list[int]]:
    """Where each module's body starts, by the name it is bound to (esbuild binds every
    CommonJS module as ``name=wrapper((module, exports) => {...})``)."""
    pattern = re.compile(
        rf"(?<![\w$.])({_NAME})={re.escape(wrapper)}\((?:\([\w$,]*\)|{_NAME})=>\{{"
    )
    starts = {m.group(1): m.end() for m in pattern.finditer(source)}
    return starts, sorted(starts.values())


def _tell(
    source: str, starts: dict[str, int], ends: list[int], name: str
) -> tuple[str, str] | None:
    """The (moduleType, name) the module bound to ``name`` exports, following re-exports
    (``exports=other()``, ``var x=other(); x.plot=...; exports=x``) a few levels deep."""
    for _ in range(_DEPTH):
        start = starts.get(name)
        if start is None:
            return None
        after = bisect.bisect_right(ends, start)
        end = ends[after] if after < len(ends) else len(source)
        found = _KIND.search(source, start, end)
        if found:
            return found.group(1), found.group(2)
        call = _CALL.search(source, start, end)
        if call is None:
            return None
        name = call.group(1)
    return None


def registered(source: str) -> list[Registered] | None:
    """The bundle's register list, each entry told where it can be; None when the bundle
    has no such list."""
    found = _REGISTER.search(source)
    return None if found is None else _told(source, found)


def _told(source: str, found: re.Match[str]) -> list[Registered]:
    calls = found.group(1).split(",")
    first = re.search(rf"(?<![\w$.]){re.escape(calls[0][:-2])}=({_NAME})\(", source)
    if first is None:
        return [Registered(call, None, None) for call in calls]
    starts, ends = _modules(source, first.group(1))
    entries = []
    for call in calls:
        told = _tell(source, starts, ends, call[:-2])
        entries.append(Registered(call, *(told or (None, None))))
    return entries


def trim(data: bytes) -> bytes:
    """``data`` (plotly.min.js) with only :data:`TRACES` and :data:`COMPONENTS` (and any
    entry not told) registered; unchanged if its list cannot be found."""
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError:
        source = ""
    found = _REGISTER.search(source)
    if found is None:
        log.info("plotly.js has no register list this dashboard knows: served whole")
        return data
    entries = _told(source, found)
    keep = [e.call for e in entries if e.kind not in _KEPT or e.name in _KEPT[e.kind]]
    return (source[: found.start(1)] + ",".join(keep) + source[found.end(1) :]).encode("utf-8")
