"""The Faust app at module level, as Faust's own examples declare theirs.

    PERFCAST_CONFIG=perfcast.toml faust -A streams.kafka.app worker -l info

runs the worker with Faust's own command line; ``perfcast worker`` builds the same app
(:func:`streams.kafka.worker.build_app`) with its options and without Faust's spinner. The
configuration is the TOML file named by ``PERFCAST_CONFIG`` (unset: the defaults) with the
environment's settings applied (``docs/configuration.md``); the application id is
``PERFCAST_APP_ID`` (default ``perfcast``).
"""

from __future__ import annotations

import os

from streams.core.config import load_config
from streams.kafka.worker import build_app

__all__ = ["app"]

app = build_app(load_config(os.environ.get("PERFCAST_CONFIG") or None),
                app_id=os.environ.get("PERFCAST_APP_ID", "perfcast"))
