"""Alerts: the alert book (hysteresis), the alert conditions and the alert prose."""
