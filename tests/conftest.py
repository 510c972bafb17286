"""Shared test setup.

``line_solver`` (the independent peer, a test dependency) inserts its own package directory into
``sys.path`` on import; its ``solvers``/``io``/``utils`` sub-packages would then shadow ours.
Importing our top-level packages first pins them in ``sys.modules``.

The services a test needs come from the fixtures here (:data:`SERVICE_FIXTURES`), never from the
environment directly: a test that takes one of them, itself or through another fixture, is
marked ``services`` at collection (so ``pytest -m "not services"`` leaves it out) and gets
:data:`SERVICE_TIMEOUT_S` unless it names its own timeout. A missing service skips the test,
and fails it under ``CI=true`` (``tests/ci_policy.py``). Property tests are derandomized
(the ``seeded`` Hypothesis profile below).
"""

from __future__ import annotations

import os
import urllib.request
from pathlib import Path

import pytest
from hypothesis import settings

import estimators  # noqa: F401
import solvers  # noqa: F401
import solvers.processes  # noqa: F401
import streams  # noqa: F401

import ci_policy
from ci_policy import unavailable
from pipeline_harness import service_env

#: every property test draws the same examples in every run (a test's own ``@settings`` keep
#: this unless they name ``derandomize``): a failure in CI is then one anyone can replay.
#: ``PERFCAST_HYPOTHESIS=explore`` draws fresh examples and keeps those that failed in
#: ``.hypothesis/``, to search for new failures on purpose.
settings.register_profile("seeded", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("PERFCAST_HYPOTHESIS", "seeded"))

#: the fixtures that stand for something this machine may lack: the services of
#: ``infra/services.sh`` (defined here), the report's browser (``tests/test_report.py``) and
#: the compose-go build (``tests/test_compose_spec.py``)
SERVICE_FIXTURES = frozenset({"kafka_bootstrap", "influx_url", "prometheus_url",
                              "prometheus_targets", "browser", "composecheck"})
#: a service test's timeout when it names none: its workers start, consume and write within
#: this on a loaded 2-core machine
SERVICE_TIMEOUT_S = 600


def pytest_configure(config: pytest.Config) -> None:
    """``PERFCAST_TEST_PROGRESS=1`` (``infra/test.sh``): each test file named as it starts
    (``tests/file_progress.py``)."""
    if os.environ.get("PERFCAST_TEST_PROGRESS") == "1":
        import file_progress

        file_progress.pytest_configure(config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if SERVICE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.services)
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(SERVICE_TIMEOUT_S))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    ci_policy.CURRENT_TEST = item       # before its fixtures: service_env checks the marker


def pytest_runtest_teardown(item: pytest.Item) -> None:
    ci_policy.CURRENT_TEST = None


@pytest.fixture(scope="session")
def kafka_bootstrap() -> str:
    """The Kafka broker of ``infra/services.sh`` (``host:port``)."""
    return service_env("PERFCAST_KAFKA_BOOTSTRAP")


@pytest.fixture(scope="session")
def influx_url() -> str:
    """The InfluxDB of ``infra/services.sh`` (its HTTP URL)."""
    return service_env("PERFCAST_INFLUX_URL")


@pytest.fixture(scope="session")
def prometheus_url() -> str:
    """The self-scraping Prometheus of ``infra/services.sh``, ready to answer queries."""
    url = service_env("PERFCAST_PROMETHEUS_URL")
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=10) as resp:
            resp.read()
    except OSError as exc:
        unavailable(f"Prometheus at {url} does not answer ({exc})",
                    "infra/services.sh did not start Prometheus in CI")
    return url


@pytest.fixture(scope="session")
def prometheus_targets(prometheus_url: str) -> Path:
    """The file of that Prometheus' ``perfcast`` scrape job's targets (file service discovery;
    beside its pid file)."""
    return Path(service_env("PERFCAST_PROMETHEUS_TARGETS"))
