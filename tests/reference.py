"""Reference values a test compares with -- inputs fitted from a workload, answers of a solve
on them -- kept in ``tests/results/<test module>.json`` (one object per case) rather than as
float literals in the test's code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def reference(test_file: str) -> dict[str, Any]:
    """The reference values of the test module ``test_file`` (its ``__file__``)."""
    return json.loads((RESULTS / f"{Path(test_file).stem}.json").read_text())
