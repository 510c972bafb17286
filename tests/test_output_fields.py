"""docs/pipeline.md's output tables list exactly the fields of the output types
(:mod:`streams.core.outputs`), and its measurement table is the schema's
(:data:`streams.sinks.schema.MEASUREMENTS`), every tag and field of which the record type
holds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streams.core.outputs import (Alert, ClassDemand, ClassPrediction, DeadLetter,
                                  PoolPrediction, Prediction, TierEstimate, TierPrediction,
                                  record_fields)
from streams.sinks.schema import ADDED, MEASUREMENTS, RECORDS

DOC = Path(__file__).resolve().parents[1] / "docs" / "pipeline.md"

#: the heading of each output type's section
SECTIONS = {
    "## Output: `perfcast.estimates`": TierEstimate,
    "## Output: `perfcast.predictions`": Prediction,
    "### Per class: `classes.<c>`": ClassPrediction,
    "### Per tier: `tiers.<t>`": TierPrediction,
    "### Per pool: `pools.<p>`": PoolPrediction,
    "### Per tier and class: `tiers.<t>.demands.<c>`": ClassDemand,
    "## Output: `perfcast.alerts`": Alert,
    "## Output: `perfcast.deadletter`": DeadLetter,
}


def _section(heading: str) -> list[str]:
    """The lines of the section under ``heading``, up to the next heading."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(heading)]
    assert len(starts) == 1, f"docs/pipeline.md: {heading!r} found {len(starts)} times"
    body = []
    for line in lines[starts[0] + 1:]:
        if line.startswith("#"):
            break
        body.append(line)
    return body


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _tables(body: list[str], header: str) -> list[list[list[str]]]:
    """The rows (cells) of every table in ``body`` whose first header cell is ``header``."""
    tables, rows, inside = [], [], False
    for line in body + [""]:
        if line.startswith("|"):
            cells = _cells(line)
            if not inside:
                inside, rows = cells[0] == header, []
            elif not set(cells[0]) <= set("-: "):
                rows.append(cells)
        elif inside:
            tables.append(rows)
            inside = False
    return tables


def _documented(heading: str) -> list[str]:
    (rows,) = _tables(_section(heading), "field")
    return [name for row in rows for name in re.findall(r"`([^`]+)`", row[0])]


@pytest.mark.parametrize("heading, kind", SECTIONS.items(),
                         ids=[kind.__name__ for kind in SECTIONS.values()])
def test_the_documented_fields_are_the_types_fields(heading, kind):
    documented = _documented(heading)
    assert len(documented) == len(set(documented)), f"{heading}: a field listed twice"
    assert set(documented) == set(record_fields(kind)), (
        f"{heading}: undocumented {sorted(set(record_fields(kind)) - set(documented))}, "
        f"not fields {sorted(set(documented) - set(record_fields(kind)))}")


def test_the_documented_measurements_are_the_schemas():
    (rows,) = _tables(_section("## InfluxDB measurements"), "measurement")
    documented = {}
    for measurement, tags, fields in rows:
        name = re.fullmatch(r"`(\w+)`", measurement).group(1)
        tag_names = tuple(re.findall(r"`(\w+)`", re.sub(r"\([^)]*\)", "", tags)))
        field_types = dict(re.findall(r"`(\w+)` \((float|int|bool|str)\b", fields))
        documented[name] = (tag_names, field_types)
    assert documented == MEASUREMENTS


@pytest.mark.parametrize("measurement", sorted(MEASUREMENTS))
def test_every_tag_and_field_of_a_measurement_is_its_records(measurement):
    kind = RECORDS[measurement]
    if kind is None:             # the remediation's actions: plain records
        return
    tags, fields = MEASUREMENTS[measurement]
    missing = [n for n in (*tags, *fields) if n not in record_fields(kind)
               and n not in ADDED[measurement]]
    assert not missing, f"{measurement}: not fields of {kind.__name__}: {missing}"
