"""Alerts: when a prediction becomes an alert and when the alert ends (no I/O).

- :mod:`~streams.alerts.book`: the alert book, hysteresis over solves per system and kind;
- :mod:`~streams.alerts.conditions`: the breach, current-breach and model-error conditions;
- :mod:`~streams.alerts.text`: the alert prose, read from the typed prediction.
"""
