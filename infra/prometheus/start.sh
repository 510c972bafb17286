#!/usr/bin/env bash
# Start a throwaway Prometheus (loopback only, temp TSDB) in the background, scraping every 1 s:
#   job "prometheus": itself (its HTTP API is the tests' workload: per-handler request counters
#                     and duration histograms, process CPU seconds)
#   job "perfcast":   the targets listed in <run dir>/targets.json (file service discovery; empty
#                     at start), for tests that bring their own exporter
# Env:
#   PROMETHEUS_PORT          HTTP port (default 19090; not 9090, which Debian's service would use)
#   PERFCAST_RUN_DIR         run dir (config, data, log, pid); default: mktemp -d
#   PERFCAST_CACHE           cache root (default ~/.cache/perfcast); the binary from install.sh
#   PROMETHEUS_SCRAPE_INTERVAL  default 1s
#   PROMETHEUS_START_TIMEOUT seconds to wait for /-/ready (default 60)
set -euo pipefail
CACHE_ROOT="${PERFCAST_CACHE:-$HOME/.cache/perfcast}"
PORT="${PROMETHEUS_PORT:-19090}"
INTERVAL="${PROMETHEUS_SCRAPE_INTERVAL:-1s}"
TIMEOUT="${PROMETHEUS_START_TIMEOUT:-60}"
STATE_FILE="${CACHE_ROOT}/prometheus/run-dir.${PORT}"
URL="http://127.0.0.1:${PORT}"

BIN="${PERFCAST_PROMETHEUS_BIN:-}"
if [[ -z "${BIN}" && -f "${CACHE_ROOT}/prometheus/bin" ]]; then BIN="$(cat "${CACHE_ROOT}/prometheus/bin")"; fi
if [[ -z "${BIN}" ]]; then BIN="$(command -v prometheus || true)"; fi
if [[ -z "${BIN}" || ! -x "${BIN}" ]]; then
  echo "error: no prometheus binary; run infra/prometheus/install.sh first" >&2
  exit 1
fi

if [[ -f "${STATE_FILE}" ]]; then
  old_dir="$(cat "${STATE_FILE}")"
  if [[ -f "${old_dir}/prometheus.pid" ]] && kill -0 "$(cat "${old_dir}/prometheus.pid")" 2>/dev/null; then
    echo "error: prometheus already running (pid $(cat "${old_dir}/prometheus.pid"), run dir ${old_dir}); run stop.sh first" >&2
    exit 1
  fi
fi
if curl -s -o /dev/null --max-time 2 "${URL}/-/ready"; then
  echo "error: something already listens on 127.0.0.1:${PORT}" >&2
  exit 1
fi

if [[ -n "${PERFCAST_RUN_DIR:-}" ]]; then
  RUN_DIR="${PERFCAST_RUN_DIR}"
  mkdir -p "${RUN_DIR}"
else
  RUN_DIR="$(mktemp -d "${TMPDIR:-/tmp}/perfcast-prometheus.XXXXXX")"
fi
RUN_DIR="$(cd "${RUN_DIR}" && pwd)"
touch "${RUN_DIR}/.perfcast-prometheus-run-dir"   # stop.sh only deletes directories that carry it
rm -rf "${RUN_DIR}/data"
mkdir -p "${RUN_DIR}/data" "$(dirname "${STATE_FILE}")"
[[ -f "${RUN_DIR}/targets.json" ]] || echo '[]' > "${RUN_DIR}/targets.json"

cat > "${RUN_DIR}/prometheus.yml" <<CONF_EOF
# written by perfcast infra/prometheus/start.sh
global:
  scrape_interval: ${INTERVAL}
  scrape_timeout: ${INTERVAL}
  evaluation_interval: ${INTERVAL}
scrape_configs:
  - job_name: prometheus
    static_configs:
      - targets: ["127.0.0.1:${PORT}"]
  - job_name: perfcast
    file_sd_configs:
      - files: ["${RUN_DIR}/targets.json"]
        refresh_interval: 1s
CONF_EOF

LOG="${RUN_DIR}/prometheus.log"
PID_FILE="${RUN_DIR}/prometheus.pid"
nohup "${BIN}" --config.file="${RUN_DIR}/prometheus.yml" \
  --storage.tsdb.path="${RUN_DIR}/data" --storage.tsdb.retention.time=2d \
  --web.listen-address="127.0.0.1:${PORT}" --log.level=warn \
  >"${LOG}" 2>&1 </dev/null &
echo $! > "${PID_FILE}"
echo "${RUN_DIR}" > "${STATE_FILE}"

deadline=$(( $(date +%s) + TIMEOUT ))
until [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "${URL}/-/ready" || true)" == "200" ]]; do
  if ! kill -0 "$(cat "${PID_FILE}")" 2>/dev/null; then
    echo "error: prometheus exited during startup; log ${LOG}:" >&2
    tail -n 30 "${LOG}" >&2 || true
    exit 1
  fi
  if (( $(date +%s) >= deadline )); then
    echo "error: prometheus not ready within ${TIMEOUT}s; log ${LOG}" >&2
    tail -n 30 "${LOG}" >&2 || true
    exit 1
  fi
  sleep 0.2
done
echo "prometheus up: ${URL} (pid $(cat "${PID_FILE}"), scrape ${INTERVAL}, run dir ${RUN_DIR})"
echo "export PERFCAST_RUN_DIR=${RUN_DIR}"
echo "export PROMETHEUS_URL=${URL}"
