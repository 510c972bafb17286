#!/usr/bin/env bash
# Stop the influxd started by start.sh and delete its run dir.
# Run dir: $PERFCAST_RUN_DIR, else the one start.sh recorded for $INFLUX_PORT.
# Set PERFCAST_KEEP_RUN_DIR=1 to keep data/logs.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

CACHE_ROOT="${PERFCAST_CACHE:-$HOME/.cache/perfcast}"
INFLUX_PORT="${INFLUX_PORT:-8086}"
STATE_FILE="${CACHE_ROOT}/influxdb/run-dir.${INFLUX_PORT}"

RUN_DIR="$(perfcast_run_dir_of "${STATE_FILE}")"
if [[ -z "${RUN_DIR}" || ! -d "${RUN_DIR}" ]]; then
  echo "no influxd run dir found (PERFCAST_RUN_DIR unset, ${STATE_FILE} missing); nothing to stop"
  rm -f "${STATE_FILE}"
  exit 0
fi
RUN_DIR="$(cd "${RUN_DIR}" && pwd)"   # as start.sh wrote it into the command line

perfcast_stop influxd "${RUN_DIR}/influxd.pid" "-config ${RUN_DIR}/influxdb.conf" 10
perfcast_remove_run_dir "${RUN_DIR}" .perfcast-influxdb-run-dir "${STATE_FILE}"
