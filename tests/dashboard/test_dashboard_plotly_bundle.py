"""plotly.js with only the trace types the pages draw registered (dashboard/plotly_bundle.py):
on a bundle shaped as esbuild writes plotly.js, and on the installed plotly's own."""

from __future__ import annotations

import re

from dashboard import assets, plotly_bundle
from dashboard.plotly_bundle import Registered

# a bundle in the shape of plotly.min.js: CommonJS modules bound by a wrapper, trace index
# modules exporting {moduleType, name}, some through a re-export, then one register call
FAKE = (
    "var W=(e,t)=>()=>(t||e((t={exports:{}}).exports,t),t.exports);"
    'var aB=W((x,m)=>{"use strict";m.exports={moduleType:"trace",name:"bar",plot:1}});'
    'var bB=W((x,m)=>{"use strict";m.exports=aB()});'
    'var a$=W((x,m)=>{"use strict";m.exports={moduleType:"trace",name:"scattergl"}});'
    'var c$=W((x,m)=>{"use strict";var k=a$();k.plot=q();m.exports=k});'
    'var d$=W((x,m)=>{"use strict";m.exports=c$()});'
    'var eH=W(h=>{"use strict";h.moduleType="trace";h.name="heatmap"});'
    'var fH=W((x,m)=>{"use strict";m.exports=eH()});'
    'var gC=W((x,m)=>{"use strict";m.exports={moduleType:"component",name:"calendars"}});'
    'var hC=W((x,m)=>{"use strict";m.exports=gC()});'
    "var R=W((x,m)=>{var P=core();P.register([bB(),d$(),fH(),hC()]);m.exports=P});"
)


def _register_list(data: bytes) -> str:
    return re.search(r"\.register\(\[([^\]]*)\]\)", data.decode()).group(1)


def test_each_entry_is_told_through_re_exports():
    assert plotly_bundle.registered(FAKE) == [
        Registered("bB()", "trace", "bar"),
        Registered("d$()", "trace", "scattergl"),
        # written another way (properties set one by one): not told, so kept
        Registered("fH()", None, None),
        Registered("hC()", "component", "calendars"),
    ]


def test_only_the_drawn_traces_and_what_cannot_be_told_stay_registered():
    trimmed = plotly_bundle.trim(FAKE.encode())
    assert _register_list(trimmed) == "bB(),fH()"
    # nothing else of the bundle changes: the modules left out stay, unrun
    assert trimmed.decode().replace("bB(),fH()", "bB(),d$(),fH(),hC()") == FAKE


def test_a_bundle_without_a_register_list_is_served_whole():
    data = b"var Plotly={};Plotly.plot=function(){};"
    assert plotly_bundle.trim(data) is data


def test_the_installed_plotly_keeps_only_what_the_pages_draw():
    data = assets.plotly_path().read_bytes()
    entries = plotly_bundle.registered(data.decode())
    assert entries is not None, "the installed plotly.js has no register list to trim"
    untold = [e.call for e in entries if e.name is None]
    assert not untold, f"entries of the installed plotly.js not told: {untold}"
    names = [e.name for e in entries if e.kind == "trace"]
    assert len(set(names)) == len(names) > 40  # each trace told as itself, once
    kept = _register_list(plotly_bundle.trim(data)).split(",")
    assert {e.name for e in entries if e.call in kept} == plotly_bundle.TRACES - {"scatter"}
