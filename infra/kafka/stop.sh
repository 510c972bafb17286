#!/usr/bin/env bash
# Stop the broker started by infra/kafka/start.sh (same KAFKA_PORT / PERFCAST_RUN_DIR) and remove
# its data dir. Logs stay in <run dir>/logs. Exits 0 when nothing is running.
# Env: KAFKA_PORT, PERFCAST_RUN_DIR (as for start.sh), KAFKA_STOP_TIMEOUT (default 30 s, then SIGKILL).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
PORT="${KAFKA_PORT:-9092}"
RUN="${PERFCAST_RUN_DIR:-${TMPDIR:-/tmp}/perfcast-kafka-$PORT}"
TIMEOUT="${KAFKA_STOP_TIMEOUT:-30}"
PIDFILE="$RUN/kafka.pid"

perfcast_stop kafka "$PIDFILE" "kafka.Kafka $RUN/server.properties" "$TIMEOUT"
rm -rf "$RUN/data"
