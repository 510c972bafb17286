#!/usr/bin/env bash
# Install (cached under ~/.cache/perfcast) and start, or stop, the real services the tests use:
# a single-node Kafka broker (KRaft), InfluxDB 1.8.10 with Flux, and Prometheus scraping itself
# every second (the Prometheus source's tests), all on loopback.
#   bash infra/services.sh up     # prints the environment the tests read (eval-able)
#   bash infra/services.sh down
#   bash infra/services.sh influx-restart [PAUSE_S]   # stop InfluxDB, keep its data, start again
# Ports: PERFCAST_KAFKA_PORT (default 19092, controller +1), PERFCAST_INFLUX_PORT (default 18086,
# RPC port +2), PERFCAST_PROMETHEUS_PORT (default 19090). Non-default ports keep clear of a
# developer's own Kafka/InfluxDB/Prometheus.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
KPORT="${PERFCAST_KAFKA_PORT:-19092}"
IPORT="${PERFCAST_INFLUX_PORT:-18086}"
RUN_ROOT="${PERFCAST_SERVICES_DIR:-${TMPDIR:-/tmp}/perfcast-services-$KPORT}"

kafka() { KAFKA_PORT="$KPORT" KAFKA_CONTROLLER_PORT="$((KPORT + 1))" \
  PERFCAST_RUN_DIR="$RUN_ROOT/kafka" bash "$HERE/kafka/$1.sh"; }
influx() { INFLUX_PORT="$IPORT" INFLUX_RPC_PORT="$((IPORT + 2))" \
  PERFCAST_RUN_DIR="$RUN_ROOT/influxdb" bash "$HERE/influxdb/$1.sh"; }
PPORT="${PERFCAST_PROMETHEUS_PORT:-19090}"
prometheus() { PROMETHEUS_PORT="$PPORT" PERFCAST_RUN_DIR="$RUN_ROOT/prometheus" \
  bash "$HERE/prometheus/$1.sh"; }

case "${1:-}" in
  up)
    mkdir -p "$RUN_ROOT"
    kafka install >&2
    influx install >&2
    kafka start >&2
    influx start >&2
    prometheus install >&2
    prometheus start >&2
    echo "export PERFCAST_KAFKA_BOOTSTRAP=127.0.0.1:$KPORT"
    echo "export PERFCAST_INFLUX_URL=http://127.0.0.1:$IPORT"
    echo "export PERFCAST_PROMETHEUS_URL=http://127.0.0.1:$PPORT"
    # file service discovery of the "perfcast" scrape job (tests that bring an exporter)
    echo "export PERFCAST_PROMETHEUS_TARGETS=$RUN_ROOT/prometheus/targets.json"
    ;;
  influx-restart)
    PERFCAST_KEEP_RUN_DIR=1 influx stop >&2
    sleep "${2:-3}"
    influx start >&2
    ;;
  down)
    kafka stop >&2 || true
    influx stop >&2 || true
    prometheus stop >&2 || true
    rm -rf "$RUN_ROOT"
    ;;
  *)
    echo "usage: $0 up|down|influx-restart [PAUSE_S]" >&2
    exit 2
    ;;
esac
