"""The command line and the embedded shell it drives.

- :mod:`~streams.cli.commands`: the ``perfcast`` commands (typer + rich);
- :mod:`~streams.cli.embedded`: the embedded shell (``perfcast run``): the core over a trace or
  the demo in one process, writing JSON lines and a SQLite store;
- :mod:`~streams.cli.demo`: the built-in demo workload;
- :mod:`~streams.cli.prometheus`: ``perfcast ingest prometheus`` and
  ``perfcast run --source prometheus``;
- :mod:`~streams.cli.settings`: the configuration as the commands take it (an error ends the
  command).
"""
