"""``perfcast whatif`` on a store whose model row is hostile: one line naming the system and the
field, exit code 2, no traceback (:mod:`streams.predict.model_row`)."""

from __future__ import annotations

import json
import sqlite3

import pytest
from typer.testing import CliRunner

from streams.cli.commands import app
from streams.predict.model_row import model_from_row
from streams.sinks.store import MODEL_TABLE, SQLiteStore

#: a two-tier, two-class model as the store keeps it (SystemModel.to_dict)
GOOD = {"tiers": ["front", "db"], "classes": ["home", "buy"],
        "D_mc": [[0.01, 0.02], [0.03, 0.01]], "mix": [0.5, 0.5], "servers": [1.0, 1.0],
        "think_time": 1.0, "sla": [1.0, None], "processes": None, "map_limit": 10000,
        "flags": [], "visits": None, "scv_targets": {}, "per_job_max_cores": 64}
#: one bursty tier's MAP(2): a valid process
MAP2 = {"D0": [[-2.0, 0.5], [0.1, -0.3]], "D1": [[1.4, 0.1], [0.05, 0.15]]}


def store(tmp_path, model: str, system: str = "shop", time: object = 1.8e9,
          users: object = 20):
    """A store holding one model row, written as raw text (NaN and all)."""
    path = tmp_path / "perfcast.sqlite"
    path.unlink(missing_ok=True)
    SQLiteStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute(f'INSERT INTO "{MODEL_TABLE}" VALUES (?, ?, ?, ?, ?)',
                     (system, time, users, users, model))
    conn.close()
    return path


def whatif(path):
    return CliRunner().invoke(app, ["whatif", "--store", str(path), "--cores", "db=2"])


def test_a_valid_row_is_compared(tmp_path):
    result = whatif(store(tmp_path, json.dumps(GOOD)))
    assert result.exit_code == 0, result.output
    assert "db to 2 cores (from 1)" in result.output


HOSTILE = [
    ({**GOOD, "D_mc": [[float("nan"), 0.02], [0.03, 0.01]]},
     "model.D_mc[0][0]: must be a finite number within [0, 86400], got nan"),
    ({**GOOD, "D_mc": [[0.01, 0.02], [0.03, float("inf")]]}, "model.D_mc[1][1]: "),
    ({**GOOD, "D_mc": [[0.0, 0.0], [0.0, 0.0]]}, "model.D_mc: every demand is 0"),
    ({**GOOD, "servers": [0, 1]}, "model.servers[0]: must be a finite number within [1, 4096], "
                                  "got 0"),
    ({**GOOD, "servers": [-3, 1]}, "model.servers[0]: "),
    ({**GOOD, "servers": [1.5, 1]}, "model.servers[0]: must be a whole number of cores"),
    ({**GOOD, "D_mc": [[0.01, 0.02, 0.3]]}, "model.D_mc: must be a list of 2 entries"),
    ({**GOOD, "D_mc": [[0.01], [0.02]]}, "model.D_mc[0]: must be a list of 2 entries"),
    ({**GOOD, "mix": [0.9, 0.9]}, "model.mix: the class shares must sum to 1, got 1.8"),
    ({**GOOD, "sla": [0, None]}, "model.sla[0]: "),
    ({**GOOD, "think_time": -1}, "model.think_time: "),
    ({**GOOD, "tiers": "front"}, "model.tiers: must be a list"),
    ({**GOOD, "classes": ["home", "b\u001b[2Juy"]}, "model.classes[1]: not a valid name"),
    ({**GOOD, "processes": [MAP2, None]}, "model.processes[1]: must be an object of D0 and D1"),
    ({**GOOD, "processes": [MAP2, {"D0": [[-1.0]], "D1": [[2.0]]}]},
     "model: not a model (D0 + D1: rows must sum to 0"),
    ({**GOOD, "processes": [MAP2, {"D0": [[-1.0] * 100] * 100, "D1": [[1.0] * 100] * 100}]},
     "model.processes[1].D0: must be a square matrix of order 1 to 16"),
    ({**GOOD, "map_limit": 10 ** 30}, "model.map_limit: must be a whole number"),
    ({k: v for k, v in GOOD.items() if k != "mix"}, "model.mix: missing"),
    ([], "model: must be an object, got []"),
    ("s", "model: must be an object, got 's'"),
]


@pytest.mark.parametrize("model, message", HOSTILE, ids=range(len(HOSTILE)))
def test_a_hostile_model_row_is_one_line_naming_the_system_and_field(tmp_path, model, message):
    with pytest.raises(ValueError) as err:
        model_from_row("shop", model)
    assert str(err.value).startswith("system 'shop': ") and message in str(err.value)
    result = whatif(store(tmp_path, json.dumps(model)))
    assert result.exit_code == 2 and "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: whatif: store ") and message in lines[0]
    assert "\x1b" not in result.output


@pytest.mark.parametrize("text, column, message", [
    ("[" * 100_000 + "]" * 100_000, {}, "model: JSON nested too deeply"),
    ("{not json", {}, "model: not JSON"),
    (json.dumps(GOOD), {"users": -5}, "users: must be a whole number within [0, 1000000000]"),
    (json.dumps(GOOD), {"users": None}, "users: must be a whole number"),
    (json.dumps(GOOD), {"time": "yesterday"}, "time: must be epoch seconds"),
    (json.dumps(GOOD), {"time": 1e300}, "time: must be epoch seconds"),
    (json.dumps(GOOD), {"system": "sh\u001bop"}, "system: not a valid system name"),
])
def test_a_hostile_row_column_is_one_line(tmp_path, text, column, message):
    result = whatif(store(tmp_path, text, **column))
    assert result.exit_code == 2 and "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.output
    assert "\x1b" not in result.output


def test_a_bidirectional_override_in_a_class_name_is_escaped_on_the_terminal(tmp_path):
    model = {**GOOD, "classes": ["home", "buy\u202eyad"]}
    result = whatif(store(tmp_path, json.dumps(model), system="sh\u202eop"))
    assert result.exit_code == 0, result.output
    assert "\u202e" not in result.output
    assert "buy\\u202eyad" in result.output and "sh\\u202eop" in result.output


@pytest.mark.parametrize("key, value, message", [
    ("slo", [[0.3, None, None, None, None]], "model.slo: must be a list of 2 entries"),
    ("slo", [[0.3, None, None, None, None], [None] * 5], None),
    ("slo", [[0.3, None], [None, None]], "model.slo[0]: must be a list of 5 entries"),
    ("ps", [True, "yes"], "model.ps[1]: must be true or false"),
])
def test_the_percentile_and_processor_sharing_fields_are_checked_too(key, value, message):
    """The quantile SLOs and the processor-sharing tiers of a stored model are read back with
    the rest: a wrong shape or type names its field."""
    spec = {**GOOD, key: value}
    if message is None:                          # a valid table is read back as it was
        assert model_from_row("shop", spec).to_dict()[key] == value
        return
    with pytest.raises(ValueError) as err:
        model_from_row("shop", spec)
    assert message in str(err.value)
