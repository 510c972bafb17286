#!/usr/bin/env bash
# Bring up the testbed (bench/testbed/README.md): a throw-away PostgreSQL 15 cluster with the
# shop's generated data, the shop app on gunicorn, process-exporter, postgres_exporter,
# node_exporter and a Prometheus scraping them every second -- all on 127.0.0.1, in one run dir
# under /tmp that down.sh deletes.
# Needs: Debian's postgresql-15, prometheus, prometheus-{process,postgres,node}-exporter; the
# venv's psycopg, gunicorn, prometheus-client (pip install '.[testbed]').
# Env (infra/testbed/env.sh): TESTBED_WORKERS (gunicorn workers, default 2), TESTBED_PRODUCTS
# (default 200000), TESTBED_CATEGORIES (default 40), TESTBED_SCRAPE (default 1s), the ports, CPUs,
# nice level, TESTBED_RT_PRIO (the app under SCHED_RR) and TESTBED_DB_AUTOGROUP_NICE (the
# database's session among the host's, bench/testbed/autogroup.py).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "${HERE}/../.." && pwd)"
source "${HERE}/env.sh"
WORKERS="${TESTBED_WORKERS:-2}"
PRODUCTS="${TESTBED_PRODUCTS:-200000}"
CATEGORIES="${TESTBED_CATEGORIES:-40}"
SCRAPE="${TESTBED_SCRAPE:-1s}"
t_start=$(date +%s.%N)
RT=()
[[ -n "${TESTBED_RT_PRIO}" ]] && RT=(chrt -r "${TESTBED_RT_PRIO}")

if [[ -f "${TESTBED_STATE}" && -d "$(cat "${TESTBED_STATE}")" ]]; then
  echo "error: a testbed is up already (run dir $(cat "${TESTBED_STATE}")); run down.sh first" >&2
  exit 1
fi
for port in "${TESTBED_PG_PORT}" "${TESTBED_APP_PORT}" "${TESTBED_APP_METRICS_PORT}" "${TESTBED_NODE_PORT}" \
            "${TESTBED_PROCESS_PORT}" "${TESTBED_PGEXP_PORT}" "${TESTBED_PROM_PORT}"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/${port}") 2>/dev/null; then
    echo "error: something already listens on 127.0.0.1:${port}" >&2
    exit 1
  fi
done
for bin in "${TESTBED_PG_BIN}/initdb" "${TESTBED_PG_BIN}/pg_ctl" "${TESTBED_PG_BIN}/psql" \
           "$(command -v prometheus || echo prometheus)" \
           "$(command -v prometheus-process-exporter || echo prometheus-process-exporter)" \
           "$(command -v prometheus-postgres-exporter || echo prometheus-postgres-exporter)" \
           "$(command -v prometheus-node-exporter || echo prometheus-node-exporter)"; do
  [[ -x "${bin}" ]] || { echo "error: ${bin} missing (bench/testbed/README.md, Install)" >&2; exit 1; }
done
"${TESTBED_PYTHON}" -c "import psycopg, gunicorn, prometheus_client" 2>/dev/null \
  || { echo "error: ${TESTBED_PYTHON} lacks psycopg, gunicorn or prometheus-client" >&2; exit 1; }

RUN="$(mktemp -d "${TMPDIR:-/tmp}/perfcast-testbed.XXXXXX")"
touch "${RUN}/.perfcast-testbed-run-dir"          # down.sh deletes only directories carrying it
mkdir -p "${TESTBED_CACHE}" "${RUN}/log" "${RUN}/pg" "${RUN}/sock" "${RUN}/metrics" "${RUN}/prom"
echo "${RUN}" > "${TESTBED_STATE}"
# PostgreSQL refuses to run as root: the cluster belongs to the postgres user (or, without one,
# to nobody), which must reach the run dir
PGUSER_OS="postgres"
id -u "${PGUSER_OS}" >/dev/null 2>&1 || PGUSER_OS="nobody"
chmod 755 "${RUN}"
if [[ "$(id -u)" == "0" ]]; then
  chown "${PGUSER_OS}" "${RUN}/pg" "${RUN}/sock" "${RUN}/log"
  AS_PG=(runuser -u "${PGUSER_OS}" --)
else
  AS_PG=()
fi
fail() {
  echo "error: $1; logs in ${RUN}/log (down.sh cleans up)" >&2
  tail -n 20 "${RUN}/log/$2" >&2 2>/dev/null || true
  exit 1
}
wait_http() {  # url log what
  for _ in $(seq 1 300); do
    if curl -s -o /dev/null --max-time 1 "$1"; then return 0; fi
    sleep 0.1
  done
  fail "$3 did not answer at $1 within 30 s" "$2"
}

# --- PostgreSQL 15 on the database's CPU --------------------------------------------------
"${AS_PG[@]}" "${TESTBED_PG_BIN}/initdb" -D "${RUN}/pg" --username=postgres --auth=trust \
  -E UTF8 --no-sync > "${RUN}/log/initdb.log" 2>&1 || fail "initdb failed" initdb.log
cat >> "${RUN}/pg/postgresql.conf" <<CONF_EOF
# written by perfcast infra/testbed/up.sh
listen_addresses = '127.0.0.1'
port = ${TESTBED_PG_PORT}
unix_socket_directories = '${RUN}/sock'
max_connections = 40
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.track = top
pg_stat_statements.max = 1000
# CPU-bound statements: no wait for the WAL flush on commit, no JIT compile on the search
synchronous_commit = off
jit = off
# the WAL's write and sync time in pg_stat_wal (postgres_exporter's pg_testbed_wal)
track_wal_io_timing = on
log_min_messages = warning
# the server's own account of a stall in the load's log: checkpoints (every 5 min, each ending
# with the sync of the pages it wrote) and every autovacuum, in log/postgres.log, which the
# campaign keeps beside its runs
log_checkpoints = on
log_autovacuum_min_duration = 0
CONF_EOF
taskset -c "${TESTBED_DB_CPU}" nice -n "${TESTBED_NICE}" "${AS_PG[@]}" "${TESTBED_PG_BIN}/pg_ctl" \
  -D "${RUN}/pg" -l "${RUN}/log/postgres.log" -w -t 60 start > /dev/null \
  || fail "postgres did not start" postgres.log
# the database's session lifted among the host's sessions (env.sh's TESTBED_DB_AUTOGROUP_NICE)
PYTHONPATH="${REPO}" "${TESTBED_PYTHON}" -m bench.testbed.autogroup "${RUN}" \
  --nice "${TESTBED_DB_AUTOGROUP_NICE}" > "${RUN}/log/autogroup.log" 2>&1 \
  || fail "the database's autogroup could not be set" autogroup.log
PSQL=("${TESTBED_PG_BIN}/psql" -h "${RUN}/sock" -p "${TESTBED_PG_PORT}" -U postgres -X -q
      -v ON_ERROR_STOP=1)
"${PSQL[@]}" -d postgres -c "CREATE DATABASE shop" > "${RUN}/log/schema.log" 2>&1 \
  || fail "CREATE DATABASE failed" schema.log
t_data=$(date +%s.%N)
"${PSQL[@]}" -d shop -v products="${PRODUCTS}" -v categories="${CATEGORIES}" \
  -f "${REPO}/bench/testbed/schema.sql" >> "${RUN}/log/schema.log" 2>&1 \
  || fail "the data generation failed" schema.log
"${PSQL[@]}" -d shop -c "SELECT pg_stat_statements_reset()" > /dev/null
t_data=$(echo "$(date +%s.%N) - ${t_data}" | bc)
DSN="host=${RUN}/sock port=${TESTBED_PG_PORT} user=postgres dbname=shop"

# --- the app: gunicorn's sync workers on the app's CPU ------------------------------------
# the subshell execs into gunicorn's master (nohup, taskset and nice exec too): $! is its pid,
# and no shell is left holding up.sh's standard output
( cd "${REPO}" || exit 1
  export PROMETHEUS_MULTIPROC_DIR="${RUN}/metrics" TESTBED_PG_DSN="${DSN}" PYTHONPATH="${REPO}" \
    TESTBED_APP_METRICS_PORT="${TESTBED_APP_METRICS_PORT}"
  exec nohup taskset -c "${TESTBED_APP_CPU}" "${RT[@]}" nice -n "${TESTBED_NICE}" \
    "${TESTBED_PYTHON}" -m gunicorn --config "${REPO}/bench/testbed/gunicorn_conf.py" \
    --bind "127.0.0.1:${TESTBED_APP_PORT}" --workers "${WORKERS}" --pid "${RUN}/app.pid" \
    --error-logfile "${RUN}/log/app.log" bench.testbed.app:app
) > "${RUN}/log/app.out" 2>&1 < /dev/null &
echo $! > "${RUN}/app.pid.start"              # gunicorn writes the same pid to app.pid
wait_http "http://127.0.0.1:${TESTBED_APP_PORT}/metrics" app.log "the app"
wait_http "http://127.0.0.1:${TESTBED_APP_METRICS_PORT}/metrics" app.log "the app's master /metrics"

# --- exporters ----------------------------------------------------------------------------
# process-exporter: the database's and the app's process groups, found by the run dir in their
# masters' command lines (the children -- postgres backends, gunicorn workers -- count with them).
# The database is two groups: ``db``, the backends that serve the app (PostgreSQL titles each
# backend "postgres: USER DATABASE CLIENT STATE"; the app connects over the socket, "[local]"),
# and ``db_server``, the rest of the cluster: the postmaster, the WAL writer, checkpointer and
# autovacuum, and the monitoring's own connection (postgres_exporter's, over TCP below). A
# process goes to the first group it matches, a child that matches none to its parent's.
cat > "${RUN}/process-exporter.yml" <<CONF_EOF
process_names:
  - name: db
    cmdline: ['^postgres: postgres shop \\[local\\]']
  - name: db_server
    cmdline: ['postgres.*-D ${RUN}/pg']
  - name: app
    cmdline: ['gunicorn.*--pid ${RUN}/app.pid']
CONF_EOF
# postgres_exporter: its defaults, plus the per-class statement counters of pg_stat_statements
cat > "${RUN}/postgres-exporter-queries.yml" <<'CONF_EOF'
pg_testbed_class:
  query: "SELECT substring(query from 'class=([a-z]+)') AS handler, sum(calls)::float8 AS calls, sum(total_exec_time)::float8 / 1000 AS exec_seconds, sum(rows)::float8 AS rows FROM pg_stat_statements WHERE query LIKE '/* class=%' GROUP BY 1"
  metrics:
    - handler:
        usage: "LABEL"
        description: "the request class that sent the statements"
    - calls:
        usage: "COUNTER"
        description: "statements executed"
    - exec_seconds:
        usage: "COUNTER"
        description: "the statements' execution time (pg_stat_statements total_exec_time), seconds"
    - rows:
        usage: "COUNTER"
        description: "rows returned or affected"
pg_testbed_wal:
  query: "SELECT wal_records::float8 AS records, wal_sync::float8 AS syncs, wal_write_time / 1000 AS write_seconds, wal_sync_time / 1000 AS sync_seconds FROM pg_stat_wal"
  metrics:
    - records:
        usage: "COUNTER"
        description: "WAL records written"
    - syncs:
        usage: "COUNTER"
        description: "WAL syncs to disk (issue_xlog_fsync)"
    - write_seconds:
        usage: "COUNTER"
        description: "time writing WAL buffers to disk (track_wal_io_timing), seconds"
    - sync_seconds:
        usage: "COUNTER"
        description: "time syncing WAL files to disk (track_wal_io_timing), seconds"
pg_testbed_wait:
  query: "SELECT coalesce(wait_event_type, 'CPU') AS wait, count(*)::float8 AS backends FROM pg_stat_activity WHERE state = 'active' AND query LIKE '/* class=%' GROUP BY 1"
  metrics:
    - wait:
        usage: "LABEL"
        description: "the wait event type of an active backend ('CPU': running or runnable)"
    - backends:
        usage: "GAUGE"
        description: "active client backends in that state at the scrape"
CONF_EOF
start_bg() {  # name log command...
  local name="$1" log="$2"; shift 2
  local pin=()
  [[ -n "${TESTBED_AUX_CPU}" ]] && pin=(taskset -c "${TESTBED_AUX_CPU}")
  nohup "${pin[@]}" nice -n "${TESTBED_NICE}" "$@" > "${RUN}/log/${log}" 2>&1 < /dev/null &
  echo $! > "${RUN}/${name}.pid"
}
start_bg process_exporter process-exporter.log prometheus-process-exporter \
  -config.path "${RUN}/process-exporter.yml" -threads=false -gather-smaps=false \
  -web.listen-address "127.0.0.1:${TESTBED_PROCESS_PORT}"
# over TCP: its backend is titled with its client address, not the app's "[local]"
DATA_SOURCE_NAME="host=127.0.0.1 port=${TESTBED_PG_PORT} user=postgres dbname=shop sslmode=disable" \
  start_bg postgres_exporter postgres-exporter.log \
  prometheus-postgres-exporter --web.listen-address="127.0.0.1:${TESTBED_PGEXP_PORT}" \
  --extend.query-path="${RUN}/postgres-exporter-queries.yml" --log.level=warn
start_bg node_exporter node-exporter.log prometheus-node-exporter \
  --web.listen-address="127.0.0.1:${TESTBED_NODE_PORT}" --collector.disable-defaults \
  --collector.cpu --collector.loadavg --collector.diskstats --collector.pressure \
  --collector.textfile.directory="${RUN}/log" --log.level=warn
# each backend PostgreSQL starts for a new connection is a session of its own: lifted as it comes
start_bg db_autogroup autogroup-follow.log env PYTHONPATH="${REPO}" "${TESTBED_PYTHON}" \
  -m bench.testbed.autogroup "${RUN}" --nice "${TESTBED_DB_AUTOGROUP_NICE}" --follow 1
wait_http "http://127.0.0.1:${TESTBED_PROCESS_PORT}/metrics" process-exporter.log process-exporter
wait_http "http://127.0.0.1:${TESTBED_PGEXP_PORT}/metrics" postgres-exporter.log postgres_exporter
wait_http "http://127.0.0.1:${TESTBED_NODE_PORT}/metrics" node-exporter.log node_exporter

# --- Prometheus ---------------------------------------------------------------------------
cat > "${RUN}/prometheus.yml" <<CONF_EOF
# written by perfcast infra/testbed/up.sh
global:
  scrape_interval: ${SCRAPE}
  scrape_timeout: ${SCRAPE}
scrape_configs:
  - job_name: app
    static_configs: [{targets: ["127.0.0.1:${TESTBED_APP_METRICS_PORT}"]}]
  - job_name: process
    static_configs: [{targets: ["127.0.0.1:${TESTBED_PROCESS_PORT}"]}]
  - job_name: postgres
    static_configs: [{targets: ["127.0.0.1:${TESTBED_PGEXP_PORT}"]}]
  - job_name: node
    static_configs: [{targets: ["127.0.0.1:${TESTBED_NODE_PORT}"]}]
  - job_name: load
    static_configs: [{targets: ["127.0.0.1:${TESTBED_LOAD_PORT}"]}]
  - job_name: prometheus
    static_configs: [{targets: ["127.0.0.1:${TESTBED_PROM_PORT}"]}]
CONF_EOF
start_bg prometheus prometheus.log prometheus --config.file="${RUN}/prometheus.yml" \
  --storage.tsdb.path="${RUN}/prom" --storage.tsdb.retention.time=1d \
  --web.listen-address="127.0.0.1:${TESTBED_PROM_PORT}" --log.level=warn
for _ in $(seq 1 300); do
  [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 \
        "http://127.0.0.1:${TESTBED_PROM_PORT}/-/ready" || true)" == "200" ]] && break
  kill -0 "$(cat "${RUN}/prometheus.pid")" 2>/dev/null || fail "prometheus exited" prometheus.log
  sleep 0.1
done

rows=$("${PSQL[@]}" -d shop -At -c "SELECT count(*) FROM products")
echo "testbed up in $(printf '%.1f' "$(echo "$(date +%s.%N) - ${t_start}" | bc)") s" \
     "(data: ${rows} products in $(printf '%.1f' "${t_data}") s); run dir ${RUN}"
echo "  postgres 127.0.0.1:${TESTBED_PG_PORT} (CPU ${TESTBED_DB_CPU}), app http://127.0.0.1:${TESTBED_APP_PORT}" \
     "(${WORKERS} workers, CPU ${TESTBED_APP_CPU}), prometheus http://127.0.0.1:${TESTBED_PROM_PORT}"
echo "  $(cat "${RUN}/log/autogroup.log")"
echo "  exporters: process :${TESTBED_PROCESS_PORT}, postgres :${TESTBED_PGEXP_PORT}, node :${TESTBED_NODE_PORT}"
echo "export TESTBED_RUN_DIR=${RUN}"
echo "export TESTBED_PG_DSN='${DSN}'"
