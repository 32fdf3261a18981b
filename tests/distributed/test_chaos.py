"""A short seeded chaos run in CI (python -m dnnframe.testing.chaos, docs/deploy.md): the
real deployment (workers on two network-namespace hosts, a dedicated RabbitMQ node and
PostgreSQL cluster, the driver service, the dashboard) for three minutes of a fixed seed's
fault schedule (faults start over its first 70 %), every kind at least once, some
overlapping; trials sleep instead of training and timeouts are short, so it takes about
four minutes. It fails on any violated
invariant, with the report and the schedule (the seed replays them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dnnframe.testing.chaos.__main__ import settings_for
from dnnframe.testing.chaos.deploy import deployment_missing
from dnnframe.testing.chaos.run import chaos_run
from dnnframe.testing.chaos.schedule import DEFAULT_KINDS, make_schedule, overlaps
from dnnframe.testing.netns import netns_problem

pytestmark = pytest.mark.slow

SEED = 4
SECONDS = 180.0


def test_the_fixed_schedule_has_every_kind_of_fault_and_some_overlap():
    # the run below is only as good as its schedule: this seed's covers every kind
    faults = make_schedule(SEED, SECONDS, gap=4.0)
    assert {f.kind for f in faults} == set(DEFAULT_KINDS)
    assert overlaps(faults) > 0


def test_a_seeded_chaos_run_keeps_every_invariant(tmp_path: Path):
    problem = deployment_missing() or netns_problem()
    if problem:
        pytest.skip(problem)
    report = chaos_run(
        tmp_path, SEED, SECONDS, settings_for("hook", 3.0, 3.0), settle_s=60.0, gap=4.0
    )
    print(report.text())  # shown with -s, and with the failure below
    assert report.netns
    assert sum(report.faults.values()) >= len(DEFAULT_KINDS) and report.overlapping > 0
    assert report.states["COMPLETE"] > 0
    assert not report.violations, report.text()
    assert (report.lost, report.duplicated) == (0, 0), report.text()
