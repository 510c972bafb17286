"""What streams.worker changes in Faust's and aiokafka's defaults, and that it takes.

* ``faust_worker``: the worker's logging stays at the requested level. Faust's own worker, at
  WARN and above, sets the root logger to DEBUG for its terminal spinner, so every debug call
  of aiokafka builds a record for nothing (docs/benchmarks.md). Logging is process-wide, so
  each case runs mode's real logging setup in a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pipeline_harness import ROOT

PROBE = """
import json, logging, sys
import faust
from streams.config import Config
from streams.worker import build_app, faust_worker
app = build_app(Config(), app_id="logging-probe", influx=False)
worker = (faust_worker(app, sys.argv[1]) if sys.argv[2] == "perfcast"
          else faust.Worker(app, loglevel=sys.argv[1]))
worker._setup_logging()                      # what Worker.execute_from_commandline runs first
# (it also redirects sys.stdout into the logger)
sys.__stdout__.write(json.dumps({"root": logging.getLevelName(logging.root.level),
                  "aiokafka_debug": logging.getLogger("aiokafka.conn").isEnabledFor(logging.DEBUG),
                  "perfcast_info": logging.getLogger("perfcast.worker").isEnabledFor(logging.INFO)}))
sys.__stdout__.flush()
"""


def probe(level: str, which: str) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, level, which], cwd=ROOT, text=True,
                         capture_output=True, timeout=120, env={"PYTHONPATH": str(ROOT),
                                                               "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_faust_alone_turns_debug_records_on_at_warning_level():
    """The upstream behaviour this module works around (if Faust changes it, this says so)."""
    assert probe("warning", "faust") == {"root": "DEBUG", "aiokafka_debug": True,
                                         "perfcast_info": True}


@pytest.mark.parametrize("level, root, info", [("warning", "WARNING", False),
                                               ("error", "ERROR", False),
                                               ("info", "INFO", True)])
def test_the_perfcast_worker_keeps_the_requested_level(level, root, info):
    assert probe(level, "perfcast") == {"root": root, "aiokafka_debug": False,
                                        "perfcast_info": info}

