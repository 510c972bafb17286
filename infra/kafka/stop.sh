#!/usr/bin/env bash
# Stop the broker started by infra/kafka/start.sh (same KAFKA_PORT / PERFCAST_RUN_DIR) and remove
# its data dir. Logs stay in <run dir>/logs. Exits 0 when nothing is running.
# Env: KAFKA_PORT, PERFCAST_RUN_DIR (as for start.sh), KAFKA_STOP_TIMEOUT (default 30 s, then SIGKILL).
set -euo pipefail
PORT="${KAFKA_PORT:-9092}"
RUN="${PERFCAST_RUN_DIR:-${TMPDIR:-/tmp}/perfcast-kafka-$PORT}"
TIMEOUT="${KAFKA_STOP_TIMEOUT:-30}"
PIDFILE="$RUN/kafka.pid"

if [ -f "$PIDFILE" ]; then
  pid="$(cat "$PIDFILE")"
  # only signal the process if it is still our broker (the pid may have been reused)
  if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q 'kafka\.Kafka'; then
    kill -TERM "$pid"
    deadline=$(( $(date +%s) + TIMEOUT ))
    while kill -0 "$pid" 2>/dev/null; do
      if [ "$(date +%s)" -ge "$deadline" ]; then
        echo "stop.sh: kafka (pid $pid) still running after ${TIMEOUT}s, sending SIGKILL" >&2
        kill -KILL "$pid" 2>/dev/null || true
        break
      fi
      sleep 0.2
    done
    echo "kafka (pid $pid) stopped"
  else
    echo "kafka not running (stale pid file $PIDFILE)"
  fi
  rm -f "$PIDFILE"
else
  echo "kafka not running (no pid file in $RUN)"
fi
rm -rf "$RUN/data"
