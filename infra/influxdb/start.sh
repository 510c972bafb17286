#!/usr/bin/env bash
# Start a throwaway local InfluxDB 1.8.10 (loopback only, auth off, Flux on) in the
# background and create database "perfcast".
# v2-compat API: url http://127.0.0.1:${INFLUX_PORT}, bucket "perfcast/autogen",
# org ignored (use "-"), token ignored while auth is disabled.
# Env:
#   PERFCAST_CACHE      cache root (default ~/.cache/perfcast); influxd from install.sh
#   PERFCAST_RUN_DIR    run dir (config, data, meta, wal, pid, log); default: mktemp -d
#   INFLUX_PORT         HTTP port (default 8086)
#   INFLUX_RPC_PORT     RPC/backup port (default 8088)
#   INFLUX_START_TIMEOUT seconds to wait for /ping (default 60)
set -euo pipefail
. "$(dirname "$0")/../lib.sh"

INFLUX_VERSION="1.8.10"
CACHE_ROOT="${PERFCAST_CACHE:-$HOME/.cache/perfcast}"
BIN="${CACHE_ROOT}/influxdb/${INFLUX_VERSION}/bin/influxd"
INFLUX_PORT="${INFLUX_PORT:-8086}"
INFLUX_RPC_PORT="${INFLUX_RPC_PORT:-8088}"
TIMEOUT="${INFLUX_START_TIMEOUT:-60}"
STATE_FILE="${CACHE_ROOT}/influxdb/run-dir.${INFLUX_PORT}"
URL="http://127.0.0.1:${INFLUX_PORT}"

if [[ ! -x "${BIN}" ]]; then
  echo "error: ${BIN} not found; run infra/influxdb/install.sh first" >&2
  exit 1
fi

# Refuse to start twice on the same port.
if [[ -f "${STATE_FILE}" ]]; then
  old_dir="$(cat "${STATE_FILE}")"
  if perfcast_ours "${old_dir}/influxd.pid" "-config ${old_dir}/influxdb.conf"; then
    echo "error: influxd already running (pid $(cat "${old_dir}/influxd.pid"), run dir ${old_dir}); run stop.sh first" >&2
    exit 1
  fi
fi
if curl -s -o /dev/null --max-time 2 "${URL}/ping"; then
  echo "error: something already listens on 127.0.0.1:${INFLUX_PORT}" >&2
  exit 1
fi

RUN_DIR="$(perfcast_new_run_dir influxdb)"
mkdir -p "${RUN_DIR}/meta" "${RUN_DIR}/data" "${RUN_DIR}/wal" "$(dirname "${STATE_FILE}")"

CONF="${RUN_DIR}/influxdb.conf"
cat > "${CONF}" <<CONF_EOF
reporting-disabled = true
bind-address = "127.0.0.1:${INFLUX_RPC_PORT}"

[meta]
  dir = "${RUN_DIR}/meta"

[data]
  dir = "${RUN_DIR}/data"
  wal-dir = "${RUN_DIR}/wal"
  query-log-enabled = false

[monitor]
  store-enabled = false

[subscriber]
  enabled = false

[http]
  enabled = true
  bind-address = "127.0.0.1:${INFLUX_PORT}"
  auth-enabled = false
  flux-enabled = true
  log-enabled = false
  unix-socket-enabled = false
  pprof-enabled = false

[logging]
  level = "info"
CONF_EOF

LOG="${RUN_DIR}/influxd.log"
PID_FILE="${RUN_DIR}/influxd.pid"
perfcast_spawn "${PID_FILE}" "${LOG}" "${BIN}" run -config "${CONF}"
echo "${RUN_DIR}" > "${STATE_FILE}"

# ready: /ping answers 204
pinged() { [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "${URL}/ping" || true)" == "204" ]]; }
perfcast_wait_ready influxd "${PID_FILE}" "${TIMEOUT}" pinged "${LOG}"

resp="$(curl -s -S --fail --max-time 10 -XPOST "${URL}/query" --data-urlencode "q=CREATE DATABASE perfcast")"
if [[ "${resp}" == *'"error"'* ]]; then
  echo "error: CREATE DATABASE failed: ${resp}" >&2
  exit 1
fi

echo "influxd ${INFLUX_VERSION} up: ${URL} (pid $(cat "${PID_FILE}"), run dir ${RUN_DIR})"
echo "export PERFCAST_RUN_DIR=${RUN_DIR}"
echo "export INFLUX_URL=${URL}"
