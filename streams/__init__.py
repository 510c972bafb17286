"""perfcast pipeline: record schemas, per-window state update, Faust app, embedded runner, sinks.

Dependencies point ``streams -> estimators -> solvers``.
"""
