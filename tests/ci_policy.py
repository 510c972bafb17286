"""Tests that need something this machine may lack (a service, a browser, a Go build): outside CI
they skip; under ``CI=true`` (``.ci/run``) they fail, so nothing skips silently in CI."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(why: str, in_ci_hint: str = "") -> NoReturn:
    """Skip the test for ``why``; under CI fail instead (``in_ci_hint``: what should have
    provided it)."""
    if in_ci():
        pytest.fail(f"{why}{': ' + in_ci_hint if in_ci_hint else ''}")
    pytest.skip(why)
