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
#   PROMETHEUS_FEATURES      --enable-feature value (default native-histograms: targets that
#                            serve the protobuf format may expose native histograms; classic
#                            histograms are scraped as before; empty: no feature flag)
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
CACHE_ROOT="${PERFCAST_CACHE:-$HOME/.cache/perfcast}"
PORT="${PROMETHEUS_PORT:-19090}"
INTERVAL="${PROMETHEUS_SCRAPE_INTERVAL:-1s}"
FEATURES="${PROMETHEUS_FEATURES-native-histograms}"
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
  if perfcast_ours "${old_dir}/prometheus.pid" "--config.file=${old_dir}/prometheus.yml"; then
    echo "error: prometheus already running (pid $(cat "${old_dir}/prometheus.pid"), run dir ${old_dir}); run stop.sh first" >&2
    exit 1
  fi
fi
if curl -s -o /dev/null --max-time 2 "${URL}/-/ready"; then
  echo "error: something already listens on 127.0.0.1:${PORT}" >&2
  exit 1
fi

RUN_DIR="$(perfcast_new_run_dir prometheus)"
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
perfcast_spawn "${PID_FILE}" "${LOG}" "${BIN}" --config.file="${RUN_DIR}/prometheus.yml" \
  --storage.tsdb.path="${RUN_DIR}/data" --storage.tsdb.retention.time=2d \
  --web.listen-address="127.0.0.1:${PORT}" --log.level=warn \
  ${FEATURES:+--enable-feature="${FEATURES}"}
echo "${RUN_DIR}" > "${STATE_FILE}"

# ready: /-/ready answers 200
ready() { [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "${URL}/-/ready" || true)" == "200" ]]; }
perfcast_wait_ready prometheus "${PID_FILE}" "${TIMEOUT}" ready "${LOG}"
echo "prometheus up: ${URL} (pid $(cat "${PID_FILE}"), scrape ${INTERVAL}, run dir ${RUN_DIR})"
echo "export PERFCAST_RUN_DIR=${RUN_DIR}"
echo "export PROMETHEUS_URL=${URL}"
