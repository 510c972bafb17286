"""The real services the pipeline will use, as started by ``infra/services.sh``.

Kafka (KRaft, from Maven Central jars) and InfluxDB 1.8.10 (built from the Go module proxy) are
started by ``infra/test.sh`` before pytest. These tests carry a window record of the input
contract (``docs/pipeline.md``) through the real broker and a point through the real
database. Outside CI they skip when the services were not started (``PERFCAST_SERVICES=0``);
under ``CI=true`` a missing service is a failure, never a skip.
"""

from __future__ import annotations

import json
import uuid

import pytest

from solvers.simulation import ClosedNetwork, Queue, monitor_closed


@pytest.fixture(scope="module")
def windows() -> list[dict]:
    network = ClosedNetwork([Queue("front", 0.004), Queue("db", 0.003)], [20], [0.5])
    return monitor_closed(network, 30.0, 5.0, system="shop", start_time=1_795_000_000.0, seed=7)


def test_window_records_round_trip_through_kafka(windows, kafka_bootstrap):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    topic = f"perfcast.windows.test-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    for record in windows:
        producer.send(topic, key=record["system"].encode(), value=json.dumps(record).encode())
    producer.flush(timeout=30)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=kafka_bootstrap,
                             auto_offset_reset="earliest", consumer_timeout_ms=20_000)
    received = []
    for message in consumer:
        received.append((message.key.decode(), json.loads(message.value.decode())))
        if len(received) == len(windows):
            break
    consumer.close()
    assert received == [(r["system"], r) for r in windows]


def test_points_round_trip_through_influxdb_with_flux(windows, influx_url):
    from influxdb_client import InfluxDBClient, Point
    from influxdb_client.client.write_api import SYNCHRONOUS

    run = uuid.uuid4().hex[:8]
    with InfluxDBClient(url=influx_url, token="", org="-") as client:
        write = client.write_api(write_options=SYNCHRONOUS)
        points = [Point("windows").tag("run", run).tag("tier", r["tier"])
                  .field("utilization", float(r["utilization"])).time(int(r["end"] * 1e9))
                  for r in windows]
        write.write(bucket="perfcast/autogen", record=points)
        tables = client.query_api().query(
            f'from(bucket: "perfcast/autogen") |> range(start: 2026-01-01T00:00:00Z) '
            f'|> filter(fn: (r) => r._measurement == "windows" and r.run == "{run}")')
        got = sorted((rec.values["tier"], rec.get_time().timestamp(), rec.get_value())
                     for table in tables for rec in table.records)
    want = sorted((r["tier"], float(r["end"]), float(r["utilization"])) for r in windows)
    assert len(got) == len(want)
    for (tier, t, u), (tier_w, t_w, u_w) in zip(got, want):
        assert (tier, u) == (tier_w, u_w) and t == pytest.approx(t_w, abs=1e-6)
