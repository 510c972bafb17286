#!/usr/bin/env bash
# Stop everything infra/testbed/up.sh started and delete its run dir (the cluster, the TSDB,
# the logs). Run dir: $TESTBED_RUN_DIR, else the one up.sh recorded. TESTBED_KEEP_RUN_DIR=1 keeps
# it (the processes are stopped all the same).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "${HERE}/env.sh"
source "${HERE}/../lib.sh"
t_start=$(date +%s.%N)
elapsed() { printf '%.1f' "$(echo "$(date +%s.%N) - ${t_start}" | bc)"; }

RUN="${TESTBED_RUN_DIR:-}"
if [[ -z "${RUN}" && -f "${TESTBED_STATE}" ]]; then RUN="$(cat "${TESTBED_STATE}")"; fi
if [[ -z "${RUN}" || ! -d "${RUN}" ]]; then
  echo "no testbed run dir found (TESTBED_RUN_DIR unset, ${TESTBED_STATE} missing); nothing to stop"
  rm -f "${TESTBED_STATE}"
  exit 0
fi

# exited: no such process, or a zombie its new parent (init) has not reaped yet
gone() { [[ ! -e "/proc/$1" || "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" == "Z" ]]; }

stop_pid() {  # name pid
  local name="$1" pid="$2"
  if testbed_owns "${pid}" "${RUN}"; then
    kill -TERM "${pid}"
    for _ in $(seq 1 150); do
      gone "${pid}" && break
      sleep 0.1
    done
    if ! gone "${pid}"; then
      echo "${name} (pid ${pid}) did not exit after SIGTERM; sending SIGKILL" >&2
      kill -KILL "${pid}" 2>/dev/null || true
    fi
    echo "stopped ${name} (pid ${pid}) at $(elapsed) s"
  else
    echo "${name} (pid ${pid}) not running"
  fi
}

# the app's master is in its own pid file (gunicorn writes it) or the one up.sh recorded; its
# workers exit with it
for name in "${TESTBED_PROCESSES[@]}"; do
  file="${RUN}/${name}.pid"
  [[ "${name}" == "app" && ! -s "${file}" ]] && file="${RUN}/app.pid.start"
  if [[ -s "${file}" ]]; then
    stop_pid "${name}" "$(cat "${file}")"
    rm -f "${file}"
  fi
done
rm -f "${RUN}/app.pid.start"

# PostgreSQL: pg_ctl's fast shutdown, by the cluster's own postmaster.pid
if [[ -s "${RUN}/pg/postmaster.pid" ]]; then
  pid="$(head -n 1 "${RUN}/pg/postmaster.pid")"
  if testbed_owns "${pid}" "${RUN}"; then
    AS_PG=()
    if [[ "$(id -u)" == "0" ]]; then AS_PG=(runuser -u "$(stat -c %U "${RUN}/pg")" --); fi
    "${AS_PG[@]}" "${TESTBED_PG_BIN}/pg_ctl" -D "${RUN}/pg" -m fast -w -t 30 stop > /dev/null \
      || stop_pid postgres "${pid}"
    echo "stopped postgres (pid ${pid}) at $(elapsed) s"
  else
    echo "postgres (pid ${pid}) not running"
  fi
fi

PERFCAST_KEEP_RUN_DIR="${TESTBED_KEEP_RUN_DIR:-0}" \
  perfcast_remove_run_dir "${RUN}" .perfcast-testbed-run-dir "${TESTBED_STATE}"
echo "testbed down in $(elapsed) s"
