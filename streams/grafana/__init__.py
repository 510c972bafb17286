"""Grafana for perfcast: the InfluxDB data source, two dashboards and the alert rules, built as
plain Python data from the InfluxDB schema (:mod:`streams.sinks.schema`), written as provisioning
files (``perfcast grafana generate``) or pushed through Grafana's HTTP API
(``perfcast grafana push``). See ``docs/grafana.md``.

* :mod:`~streams.grafana.flux` -- the Flux queries and Grafana's macro substitution;
* :mod:`~streams.grafana.dashboards` -- the dashboards;
* :mod:`~streams.grafana.rules` -- the alert rules;
* :mod:`~streams.grafana.provisioning` -- the provisioning files;
* :mod:`~streams.grafana.push` -- the idempotent upsert through the HTTP API;
* :mod:`~streams.grafana.cli` -- the ``perfcast grafana`` commands.
"""
