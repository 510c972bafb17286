#!/usr/bin/env bash
# Stop the prometheus started by start.sh and delete its run dir (TSDB included).
# Run dir: $PERFCAST_RUN_DIR, else the one start.sh recorded for $PROMETHEUS_PORT.
# PERFCAST_KEEP_RUN_DIR=1 keeps it.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
CACHE_ROOT="${PERFCAST_CACHE:-$HOME/.cache/perfcast}"
PORT="${PROMETHEUS_PORT:-19090}"
STATE_FILE="${CACHE_ROOT}/prometheus/run-dir.${PORT}"

RUN_DIR="$(perfcast_run_dir_of "${STATE_FILE}")"
if [[ -z "${RUN_DIR}" || ! -d "${RUN_DIR}" ]]; then
  echo "no prometheus run dir found (PERFCAST_RUN_DIR unset, ${STATE_FILE} missing); nothing to stop"
  rm -f "${STATE_FILE}"
  exit 0
fi
RUN_DIR="$(cd "${RUN_DIR}" && pwd)"   # as start.sh wrote it into the command line

perfcast_stop prometheus "${RUN_DIR}/prometheus.pid" "--config.file=${RUN_DIR}/prometheus.yml" 15
perfcast_remove_run_dir "${RUN_DIR}" .perfcast-prometheus-run-dir "${STATE_FILE}"
