#!/usr/bin/env bash
# Stop the prometheus started by start.sh and delete its run dir (TSDB included).
# Run dir: $PERFCAST_RUN_DIR, else the one start.sh recorded for $PROMETHEUS_PORT.
# PERFCAST_KEEP_RUN_DIR=1 keeps it.
set -euo pipefail
CACHE_ROOT="${PERFCAST_CACHE:-$HOME/.cache/perfcast}"
PORT="${PROMETHEUS_PORT:-19090}"
STATE_FILE="${CACHE_ROOT}/prometheus/run-dir.${PORT}"

RUN_DIR="${PERFCAST_RUN_DIR:-}"
if [[ -z "${RUN_DIR}" && -f "${STATE_FILE}" ]]; then
  RUN_DIR="$(cat "${STATE_FILE}")"
fi
if [[ -z "${RUN_DIR}" || ! -d "${RUN_DIR}" ]]; then
  echo "no prometheus run dir found (PERFCAST_RUN_DIR unset, ${STATE_FILE} missing); nothing to stop"
  rm -f "${STATE_FILE}"
  exit 0
fi

PID_FILE="${RUN_DIR}/prometheus.pid"
if [[ -f "${PID_FILE}" ]]; then
  pid="$(cat "${PID_FILE}")"
  # only signal the process if it is still our prometheus (the pid may have been reused)
  if kill -0 "${pid}" 2>/dev/null && tr '\0' ' ' < "/proc/${pid}/cmdline" 2>/dev/null | grep -q -- "--config.file=${RUN_DIR}/"; then
    kill -TERM "${pid}"
    for _ in $(seq 1 150); do
      kill -0 "${pid}" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "${pid}" 2>/dev/null; then
      echo "prometheus (pid ${pid}) did not exit after SIGTERM; sending SIGKILL" >&2
      kill -KILL "${pid}" 2>/dev/null || true
    fi
    echo "stopped prometheus (pid ${pid})"
  else
    echo "prometheus (pid ${pid}) not running"
  fi
  rm -f "${PID_FILE}"
fi

if [[ "${PERFCAST_KEEP_RUN_DIR:-0}" == "1" ]]; then
  echo "kept run dir ${RUN_DIR}"
elif [[ -f "${RUN_DIR}/.perfcast-prometheus-run-dir" ]]; then
  rm -rf -- "${RUN_DIR}"
  echo "removed run dir ${RUN_DIR}"
else
  echo "warning: ${RUN_DIR} lacks the start.sh marker; not deleting it" >&2
fi
if [[ -f "${STATE_FILE}" && "$(cat "${STATE_FILE}")" == "${RUN_DIR}" ]]; then
  rm -f "${STATE_FILE}"
fi
