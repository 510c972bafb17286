# The start/stop steps the services' scripts share (sourced, not run): infra/kafka,
# infra/influxdb and infra/prometheus start.sh / stop.sh; and the Debian installs of
# infra/prometheus/install.sh and infra/testbed/install.sh (perfcast_apt_install).
#
# A service runs in the background with its pid in a pid file. A pid file can outlive its
# process and the pid be reused by another one, so a process counts as the service only while
# it is alive AND its command line holds a string naming this run (its configuration file in
# the run dir): nothing else is ever signalled or taken for a running service.

# perfcast_ours PID_FILE NEEDLE: the pid file's process is alive and its command line contains
# NEEDLE (a fixed string).
perfcast_ours() {
  local pid
  [[ -f "$1" ]] || return 1
  pid="$(cat "$1")"
  [[ -n "${pid}" ]] && kill -0 "${pid}" 2>/dev/null || return 1
  tr '\0' ' ' < "/proc/${pid}/cmdline" 2>/dev/null | grep -qF -- "$2"
}

# perfcast_spawn PID_FILE LOG COMMAND...: COMMAND in the background (no stdin, output to LOG),
# its pid in PID_FILE.
perfcast_spawn() {
  local pid_file="$1" log="$2"
  shift 2
  nohup "$@" > "${log}" 2>&1 < /dev/null &
  echo $! > "${pid_file}"
}

# perfcast_wait_ready NAME PID_FILE TIMEOUT_S CHECK LOG...: poll CHECK (a command) every 0.2 s
# until it succeeds; fail, with the logs' tails, if the process exits or TIMEOUT_S passes.
perfcast_wait_ready() {
  local name="$1" pid_file="$2" timeout="$3" check="$4"
  shift 4
  local pid deadline
  pid="$(cat "${pid_file}")"
  deadline=$(( $(date +%s) + timeout ))
  until "${check}"; do
    if ! kill -0 "${pid}" 2>/dev/null; then
      echo "error: ${name} (pid ${pid}) exited during startup; last log lines:" >&2
      tail -n 30 "$@" >&2 2>/dev/null || true
      rm -f "${pid_file}"
      return 1
    fi
    if (( $(date +%s) >= deadline )); then
      echo "error: ${name} not ready within ${timeout}s (pid ${pid} still running)" >&2
      tail -n 30 "$@" >&2 2>/dev/null || true
      return 1
    fi
    sleep 0.2
  done
}

# perfcast_stop NAME PID_FILE NEEDLE TIMEOUT_S: SIGTERM the service if it is ours
# (perfcast_ours), SIGKILL if still alive after TIMEOUT_S; remove the pid file.
perfcast_stop() {
  local name="$1" pid_file="$2" needle="$3" timeout="$4" pid deadline
  if [[ ! -f "${pid_file}" ]]; then
    echo "${name} not running (no pid file ${pid_file})"
    return 0
  fi
  pid="$(cat "${pid_file}")"
  if perfcast_ours "${pid_file}" "${needle}"; then
    kill -TERM "${pid}"
    deadline=$(( $(date +%s) + timeout ))
    while kill -0 "${pid}" 2>/dev/null; do
      if (( $(date +%s) >= deadline )); then
        echo "${name} (pid ${pid}) still running after ${timeout}s; sending SIGKILL" >&2
        kill -KILL "${pid}" 2>/dev/null || true
        break
      fi
      sleep 0.1
    done
    echo "stopped ${name} (pid ${pid})"
  else
    echo "${name} (pid ${pid}) not running (stale pid file ${pid_file})"
  fi
  rm -f "${pid_file}"
}

# perfcast_run_dir_of STATE_FILE: the run dir to stop -- $PERFCAST_RUN_DIR, else the one
# start.sh recorded in STATE_FILE (empty if neither).
perfcast_run_dir_of() {
  if [[ -n "${PERFCAST_RUN_DIR:-}" ]]; then
    echo "${PERFCAST_RUN_DIR}"
  elif [[ -f "$1" ]]; then
    cat "$1"
  fi
}

# perfcast_remove_run_dir RUN_DIR MARKER STATE_FILE: delete RUN_DIR if it carries MARKER (the
# file start.sh leaves there) unless PERFCAST_KEEP_RUN_DIR=1; forget STATE_FILE if it names it.
perfcast_remove_run_dir() {
  local run_dir="$1" marker="$2" state_file="$3"
  if [[ "${PERFCAST_KEEP_RUN_DIR:-0}" == "1" ]]; then
    echo "kept run dir ${run_dir}"
  elif [[ -f "${run_dir}/${marker}" ]]; then
    rm -rf -- "${run_dir}"
    echo "removed run dir ${run_dir}"
  else
    echo "warning: ${run_dir} lacks the start.sh marker; not deleting it" >&2
  fi
  if [[ -f "${state_file}" && "$(cat "${state_file}")" == "${run_dir}" ]]; then
    rm -f "${state_file}"
  fi
}

# perfcast_new_run_dir NAME: the run dir to start in -- $PERFCAST_RUN_DIR (created), else a
# fresh temporary one -- as an absolute path, marked for stop.sh (perfcast_remove_run_dir
# deletes only marked directories: .perfcast-NAME-run-dir).
perfcast_new_run_dir() {
  local dir
  if [[ -n "${PERFCAST_RUN_DIR:-}" ]]; then
    dir="${PERFCAST_RUN_DIR}"
    mkdir -p "${dir}"
  else
    dir="$(mktemp -d "${TMPDIR:-/tmp}/perfcast-$1.XXXXXX")"
  fi
  dir="$(cd "${dir}" && pwd)"
  touch "${dir}/.perfcast-$1-run-dir"
  echo "${dir}"
}

# perfcast_apt_install LOG PACKAGE...: apt-get install PACKAGEs (apt-get update first when the
# install alone fails: a fresh image has no package lists), output to LOG, its tail on failure.
# Root or sudo. The packages' own services must not start (they would take their default ports
# beside the instances the tests run): a policy-rc.d denies service starts during the install
# (Debian's protocol: exit 101; an existing one is left alone), and a daemon started anyway is
# stopped and its init script, named as its package, disabled.
perfcast_apt_install() (
  log="$1"
  shift
  sudo=""
  if [[ "$(id -u)" != "0" ]]; then
    command -v sudo >/dev/null || { echo "apt-get install $*: needs root (or sudo)" >&2; exit 1; }
    sudo="sudo"
  fi
  policy=/usr/sbin/policy-rc.d
  if [[ ! -e "${policy}" ]]; then
    printf '#!/bin/sh\n# written by perfcast infra/lib.sh during apt-get install\nexit 101\n' \
      | ${sudo} tee "${policy}" >/dev/null
    ${sudo} chmod 755 "${policy}"
    trap '${sudo} rm -f "${policy}"' EXIT
  fi
  export DEBIAN_FRONTEND=noninteractive
  install=(apt-get install -y --no-install-recommends "$@")
  if ! { ${sudo} "${install[@]}" || { ${sudo} apt-get update && ${sudo} "${install[@]}"; }; } \
       > "${log}" 2>&1; then
    echo "apt-get install $* failed (log ${log}):" >&2
    tail -n 30 "${log}" >&2
    exit 1
  fi
  for svc in "$@"; do
    if [[ -x "/etc/init.d/${svc}" ]]; then
      ${sudo} "/etc/init.d/${svc}" stop >/dev/null 2>&1 || true
      ${sudo} update-rc.d "${svc}" disable >/dev/null 2>&1 || true
    fi
    if command -v systemctl >/dev/null && [[ -d /run/systemd/system ]]; then
      ${sudo} systemctl disable --now "${svc}" >/dev/null 2>&1 || true
    fi
  done
)
