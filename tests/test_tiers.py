"""The test tiers plugin (tests/tiers.py), run on small suites of its own through pytester:
service markers from fixtures and parameters, a missing service's skip, and CI's refusal of
every skip but the documented ones."""

from __future__ import annotations

import pytest
import tiers

SUITE = """
import pytest
from tiers import skip_optional

@pytest.fixture
def broker_url():
    return "amqp://nowhere//"

@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request):
    return request.param

def test_plain():
    pass

def test_uses_the_broker(broker_url):
    pass

def test_store(backend):
    pass

def test_service_missing():
    pytest.skip("RabbitMQ is not reachable at amqp://nowhere//")

@pytest.mark.skipif(True, reason="a condition of this machine")
def test_skipped_by_a_marker():
    pass

def test_without_a_mongodb_server():
    skip_optional("no MongoDB server: DNNFRAME_TEST_MONGODB_URL is unset")

@pytest.mark.gpu
def test_needs_a_gpu():
    pass

@pytest.mark.xfail(reason="a known bug", strict=True)
def test_known_bug():
    assert False

@pytest.mark.browser
def test_in_chromium():
    pass
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makepyfile(test_suite=SUITE)
    monkeypatch.delenv(tiers.CI_VARIABLE, raising=False)
    # the machine's Chromium and GPU are not what is tested: both are made absent
    monkeypatch.setattr(tiers, "chromium_missing", lambda: "/usr/bin/chromium is missing")
    monkeypatch.setattr(tiers, "gpu_missing", lambda: "device=cuda but no NVIDIA driver")
    return pytester


def _selected(suite: pytest.Pytester, expression: str) -> list[str]:
    result = suite.runpytest("-p", "tiers", "-q", "--collect-only", "-m", expression)
    return sorted(line.split("::", 1)[1] for line in result.outlines if "::" in line)


def test_a_fixture_and_a_parameter_put_the_service_markers_on(suite):
    assert _selected(suite, "broker") == ["test_uses_the_broker"]
    assert _selected(suite, "postgres") == ["test_store[postgresql]"]
    assert "test_store[sqlite]" in _selected(suite, "not (broker or postgres or browser)")
    assert "test_uses_the_broker" not in _selected(suite, "not (broker or postgres)")


def test_a_missing_service_skips_naming_it(suite):
    result = suite.runpytest("-p", "tiers", "-rs")
    result.assert_outcomes(passed=4, skipped=5, xfailed=1)
    skipped = sorted(
        line.split(": ", 1)[1] for line in result.outlines if line.startswith("SKIPPED")
    )
    assert skipped == [
        "/usr/bin/chromium is missing",
        "RabbitMQ is not reachable at amqp://nowhere//",
        "a condition of this machine",
        "no MongoDB server: DNNFRAME_TEST_MONGODB_URL is unset",
        "no usable GPU: device=cuda but no NVIDIA driver",
    ]
    assert result.ret == pytest.ExitCode.OK


def test_under_ci_only_the_documented_skips_remain_skips(suite, monkeypatch):
    monkeypatch.setenv(tiers.CI_VARIABLE, "1")
    result = suite.runpytest("-p", "tiers", "-rfEs")
    # a skip in setup (Chromium, the skipif) is an error, one in the call a failure; MongoDB
    # and the GPU stay skipped
    result.assert_outcomes(passed=4, skipped=2, failed=1, errors=2, xfailed=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of test_skipped_by_a_marker*",
            "skipped under CI (DNNFRAME_TEST_CI=1)*: a condition of this machine",
            "*ERROR at setup of test_in_chromium*",
            "skipped under CI (DNNFRAME_TEST_CI=1)*: /usr/bin/chromium is missing",
            "*test_service_missing*",
            "skipped under CI (DNNFRAME_TEST_CI=1)*: RabbitMQ is not reachable at amqp://nowhere//",
        ],
        consecutive=False,
    )
    skipped = sorted(
        line.split(": ", 1)[1] for line in result.outlines if line.startswith("SKIPPED")
    )
    assert skipped == [
        "no MongoDB server: DNNFRAME_TEST_MONGODB_URL is unset",
        "no usable GPU: device=cuda but no NVIDIA driver",
    ]
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_under_ci_a_module_skipped_at_import_fails_the_run(pytester, monkeypatch):
    pytester.makepyfile(test_gone="import pytest\npytest.importorskip('no_such_module_here')\n")
    monkeypatch.setenv(tiers.CI_VARIABLE, "1")
    result = pytester.runpytest("-p", "tiers")
    result.stdout.fnmatch_lines(["*skipped under CI*no_such_module_here*"])
    assert result.ret != pytest.ExitCode.OK
    monkeypatch.setenv(tiers.CI_VARIABLE, "0")
    assert pytester.runpytest("-p", "tiers").ret == pytest.ExitCode.NO_TESTS_COLLECTED
