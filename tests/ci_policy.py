"""Tests that need something this machine may lack (a service, a browser, a Go build): outside CI
they skip; under ``CI=true`` (``.ci/run``) they fail, so nothing skips silently in CI."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

#: the test being set up or run (``tests/conftest.py`` keeps it), for the checks that a test
#: which reads a service is marked ``services``
CURRENT_TEST: pytest.Item | None = None


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(why: str, in_ci_hint: str = "") -> NoReturn:
    """Skip the test for ``why``; under CI fail instead (``in_ci_hint``: what should have
    provided it)."""
    if in_ci():
        pytest.fail(f"{why}{': ' + in_ci_hint if in_ci_hint else ''}")
    pytest.skip(why)


def require_services_marker(what: str) -> None:
    """Fail the current test if it reads ``what`` (a service) without the ``services`` marker:
    it took the service from the environment instead of a fixture of ``tests/conftest.py``,
    so ``pytest -m "not services"`` would run it."""
    item = CURRENT_TEST
    if item is not None and item.get_closest_marker("services") is None:
        pytest.fail(f"{item.nodeid} reads {what} but is not marked 'services': take the "
                    f"service's fixture from tests/conftest.py (SERVICE_FIXTURES)")
