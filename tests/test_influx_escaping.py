"""InfluxDB line protocol of names (system, tier, class) with the characters line protocol treats
specially -- comma, equals sign, space, backslash -- and what InfluxDB reads back.

The unit tests read the sink's lines with a model of InfluxDB's own tag parser
(``models/points.go`` of InfluxDB 1.8, the same in 2.x): a comma, equals sign or space preceded
by a backslash is part of the value and loses that backslash; every other backslash is kept
as it is. The last test writes such names into the real InfluxDB (``infra/services.sh``) through
the sink and finds them by their real names.
"""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.sinks.influx import _escape_tag, _series, lines
from streams.core.records import valid_name
from streams.core.outputs import Outputs, TierEstimate


def _unescape(value: str) -> str:
    """``models/points.go`` ``unescapeTag``: only ``\\,``, ``\\ `` and ``\\=`` are escapes."""
    return value.replace("\\,", ",").replace("\\ ", " ").replace("\\=", "=")


def _read_series(line: str) -> tuple[str, dict[str, str]]:
    """Measurement and tags of a line, as ``models/points.go`` scans them: a comma, space or
    equals sign is a separator unless the character before it is a backslash."""
    def split(text: str, sep: str, stop: str = "") -> tuple[list[str], str]:
        parts, start = [], 0
        for i, ch in enumerate(text):
            escaped = i > 0 and text[i - 1] == "\\"
            if ch == stop and not escaped:
                parts.append(text[start:i])
                return parts, text[i + 1:]
            if ch == sep and not escaped:
                parts.append(text[start:i])
                start = i + 1
        parts.append(text[start:])
        return parts, ""

    series, _rest = split(line, ",", stop=" ")
    tags = {}
    for pair in series[1:]:
        key, value = split(pair, "=")[0]
        tags[_unescape(key)] = _unescape(value)
    return series[0], tags


NAMES = ["plain", "a b", "a,b", "a=b", "a\\b", "a\\,b", "a\\ b", "a\\=b", "\\lead",
         "x\\\\y", "a,b c=d\\e", "caf\u00e9 \u2603", "=,= ,"]


@pytest.mark.parametrize("name", NAMES)
def test_every_valid_name_reads_back_as_itself(name):
    assert valid_name(name)
    measurement, tags = _read_series(_series("demand", (("class", name), ("system", "s"))) +
                                     " kalman=1 1")
    assert measurement == "demand" and tags == {"class": name, "system": "s"}


def test_the_escapes_are_pinned():
    """A comma, equals sign and space get a backslash; a backslash is not doubled (InfluxDB
    keeps a doubled one doubled: ``a\\\\b`` would be stored with two backslashes)."""
    assert _escape_tag("a,b c=d") == "a\\,b\\ c\\=d"
    assert _escape_tag("a\\b") == "a\\b"
    assert _escape_tag("a\\,b") == "a\\\\,b"


names = st.text(st.characters(exclude_categories=("Cs", "Cc")) | st.sampled_from(
    list(",= \\")), min_size=1, max_size=20).filter(valid_name)


@settings(max_examples=500, deadline=None)
@given(names, names)
def test_any_valid_names_read_back_as_themselves(system, tier):
    out = Outputs(estimates=[TierEstimate(system=system, tier=tier, end=1.0, seq=1,
                                          utilization=0.5, late=False, demands={},
                                          demand_std={}, kalman_flag=None,
                                          change_detected=False)])
    (line,) = lines(out)
    measurement, tags = _read_series(line)
    assert (measurement, tags) == ("tier_estimate", {"system": system, "tier": tier})


def test_names_line_protocol_cannot_store_are_not_valid():
    """A trailing backslash would escape the separator after it (InfluxDB refuses the whole
    write, HTTP 400); a control character would end the line."""
    for name in ("end\\", "a\nb", "a\rb", "tab\t", "del\x7f", "c1\x85", "\ud800", ""):
        assert not valid_name(name), repr(name)


# ---------------------------------------------------------------------------------------------
def _flux_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@pytest.mark.timeout(300)
def test_names_with_backslashes_and_commas_are_found_by_their_real_names_in_influxdb(
        influx_url):
    """The demo shop under a system name and a request class with a backslash, a comma, an
    equals sign and a space, through the pipeline and the InfluxDB sink; Flux finds every
    measurement by the real names. With a p95 SLO on every class: the predicted quantiles,
    the SLO's statistic, its bound and its value read back as the predictions have them."""
    import asyncio
    from dataclasses import replace

    from influxdb_client import InfluxDBClient

    from streams.core.config import Config, InfluxSettings
    from streams.cli.demo import DemoScenario, demo_config, demo_records
    from streams.sinks.influx import InfluxSink
    from streams.engine.pipeline import Pipeline

    system = f"shop\\{uuid.uuid4().hex[:6]},eu west=1"
    cls = "home\\page,v=2 beta"
    records = []
    scenario = DemoScenario(duration_s=180)
    base = demo_config(scenario).systems[scenario.system]
    config = Config(systems={system: replace(base, slo={"*": {"p95": scenario.sla_s}},
                                             sla_s={})})
    for r in demo_records(scenario):
        r = {**r, "system": system}
        for key in ("completions", "response_time_s"):
            if "home" in r.get(key, {}):
                r[key] = {(cls if c == "home" else c): v for c, v in r[key].items()}
        records.append(json.dumps(r))
    pipeline = Pipeline(config)
    out = pipeline.process_many(records)
    out.extend(pipeline.finish())
    assert not out.deadletter and out.predictions
    sink = InfluxSink(InfluxSettings(url=influx_url))
    try:
        asyncio.run(sink.write(lines(out)))
        assert sink.dropped == 0
    finally:
        sink.close()
    demand_points = sum(1 for p in out.predictions
                        for t in p["tiers"].values() if cls in (t.get("demands") or {}))
    with InfluxDBClient(url=influx_url, token="", org="-", timeout=30_000) as client:
        def count(measurement: str, extra: str = "") -> int:
            query = (f'from(bucket: "perfcast") |> range(start: 0) '
                     f'|> filter(fn: (r) => r._measurement == "{measurement}" and '
                     f'r.system == {_flux_string(system)}{extra}) |> group() |> count()')
            tables = client.query_api().query(query)
            return sum(int(rec.get_value()) for t in tables for rec in t.records)

        by_class = f" and r.class == {_flux_string(cls)}"
        assert count("tier_estimate", ' and r._field == "utilization"') == len(records)
        assert count("prediction", ' and r._field == "users"') == len(out.predictions)
        assert count("class_prediction", by_class + ' and r._field == "throughput"') == \
            len(out.predictions)
        assert demand_points > 0
        assert count("demand", by_class + ' and r._field == "kalman"') == demand_points
        parts = [p["classes"][cls] for p in out.predictions if cls in (p["classes"] or {})]
        assert parts and all(part["slo_statistic"] == "p95" for part in parts)
        for field in ("response_time_p50_s", "response_time_p95_s", "response_time_p99_s",
                      "response_time_forecast_p95_s", "slo_statistic", "slo_bound_s",
                      "response_time_slo_s", "response_time_slo_forecast_s"):
            assert count("class_prediction", by_class + f' and r._field == "{field}"') == \
                len(parts), field
        last = parts[-1]
        query = (f'from(bucket: "perfcast") |> range(start: 0) |> filter(fn: (r) => '
                 f'r._measurement == "class_prediction" and r.system == '
                 f'{_flux_string(system)}{by_class}) |> last()')
        stored = {rec.get_field(): rec.get_value()
                  for t in client.query_api().query(query) for rec in t.records}
        assert stored["response_time_p95_s"] == last["response_time_quantiles_s"]["p95"]
        assert stored["response_time_forecast_p99_s"] == \
            last["response_time_quantiles_forecast_s"]["p99"]
        assert stored["response_time_slo_s"] == last["response_time_quantiles_s"]["p95"]
        assert stored["slo_statistic"] == "p95"
        assert stored["slo_bound_s"] == scenario.sla_s
