"""What streams.kafka.worker changes in Faust's and aiokafka's defaults, and that it takes.

* ``faust_worker``: the worker's logging stays at the requested level. Faust's own worker, at
  WARN and above, sets the root logger to DEBUG for its terminal spinner, so every debug call
  of aiokafka builds a record for nothing (docs/benchmarks.md). Logging is process-wide, so
  each case runs mode's real logging setup in a fresh interpreter.
* ``tune_fetches``: the source consumer's fetch wait and least fetch size, set on aiokafka's
  fetcher (no Faust setting exists); both or neither. That the installed aiokafka has these
  attributes is tested in tests/test_faust_adapter.py.
"""

from __future__ import annotations

import json
import subprocess
import sys

from types import SimpleNamespace

import pytest

from pipeline_harness import ROOT
from streams.kafka.worker import tune_fetches

PROBE = """
import json, logging, sys
import faust
from streams.core.config import Config
from streams.kafka.worker import build_app, faust_worker
app = build_app(Config(), app_id="logging-probe", influx=False)
worker = (faust_worker(app, sys.argv[1]) if sys.argv[2] == "perfcast"
          else faust.Worker(app, loglevel=sys.argv[1]))
worker._setup_logging()                      # what Worker.execute_from_commandline runs first
# (it also redirects sys.stdout into the logger)
enabled = {"aiokafka_debug": logging.getLogger("aiokafka.conn").isEnabledFor(logging.DEBUG),
           "perfcast_info": logging.getLogger("perfcast.worker").isEnabledFor(logging.INFO)}
sys.__stdout__.write(json.dumps({"root": logging.getLevelName(logging.root.level), **enabled}))
sys.__stdout__.flush()
"""


def probe(level: str, which: str) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, level, which], cwd=ROOT, text=True,
                         capture_output=True, timeout=120, env={"PYTHONPATH": str(ROOT),
                                                               "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_faust_alone_turns_debug_records_on_at_warning_level():
    """The upstream behaviour this module works around (if Faust changes it, this says so)."""
    assert probe("warning", "faust") == {"root": "DEBUG", "aiokafka_debug": True,
                                         "perfcast_info": True}


@pytest.mark.slow
@pytest.mark.parametrize("level, root, info", [("warning", "WARNING", False),
                                               ("error", "ERROR", False),
                                               ("info", "INFO", True)])
def test_the_perfcast_worker_keeps_the_requested_level(level, root, info):
    assert probe(level, "perfcast") == {"root": root, "aiokafka_debug": False,
                                        "perfcast_info": info}


def app_with(fetcher: object) -> SimpleNamespace:
    """An app whose consumer reaches ``fetcher`` the way Faust's aiokafka driver does."""
    return SimpleNamespace(consumer=SimpleNamespace(_thread=SimpleNamespace(
        _consumer=SimpleNamespace(_fetcher=fetcher))))


def test_tune_fetches_sets_the_wait_and_the_least_fetch_size():
    fetcher = SimpleNamespace(_fetch_max_wait_ms=1500, _fetch_min_bytes=1)
    assert tune_fetches(app_with(fetcher), 50, 16384) is True
    assert (fetcher._fetch_max_wait_ms, fetcher._fetch_min_bytes) == (50, 16384)


def test_tune_fetches_leaves_a_fetcher_without_the_attributes_alone(caplog):
    fetcher = SimpleNamespace(_fetch_max_wait_ms=1500)            # no _fetch_min_bytes
    assert tune_fetches(app_with(fetcher), 50, 16384) is False
    assert fetcher._fetch_max_wait_ms == 1500 and not hasattr(fetcher, "_fetch_min_bytes")
    assert "cannot tune the consumer's fetches" in caplog.text
    assert tune_fetches(SimpleNamespace(consumer=None), 50, 16384) is False

