#!/usr/bin/env bash
# The whole test suite, on a fresh machine of this project's kind.
# Creates (or reuses) a virtualenv under ~/.cache/perfcast, installs perfcast with its test
# dependencies from PyPI, installs and starts the real services (Kafka from Maven Central,
# InfluxDB 1.8.10 from the Go module proxy, Prometheus from Debian; infra/services.sh), runs pytest,
# stops the services. Everything runs, the services and slow tests too; the fast loop while
# working is pytest -m "not services and not slow" (README).
# PERFCAST_SERVICES=0 skips the services (their tests then skip, except under CI=true where they
# fail). pytest's exit code 5 ("no tests collected") is reported and treated as success.
# Output: one line as each stage starts and ends, with the time since the start; what the
# installs and builds print goes to ~/.cache/perfcast/test-setup.log, shown only when a stage
# fails; pytest names each test file as it starts (tests/file_progress.py) and ends with the
# 25 slowest tests, then its summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${PERFCAST_CACHE:-$HOME/.cache/perfcast}"
VENV="$CACHE/venv"
PY="${PYTHON:-python3}"
mkdir -p "$CACHE/pip"
LOG="$CACHE/test-setup.log"
: >"$LOG"
STARTED=$SECONDS

# "[perfcast test +1m05s] MESSAGE"
note() {
  local s=$((SECONDS - STARTED))
  printf '[perfcast test +%dm%02ds] %s\n' $((s / 60)) $((s % 60)) "$*"
}
# stage NAME COMMAND...: run COMMAND with its output in the log, one line before and after;
# on failure the log's last lines, and the command's exit status
stage() {
  local name="$1" began=$SECONDS rc=0
  shift
  note "$name ..."
  echo "== $name: $*" >>"$LOG"
  "$@" >>"$LOG" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    note "$name: failed (exit $rc) after $((SECONDS - began)) s; the end of $LOG:"
    tail -n 40 "$LOG" | sed 's/^/  | /'
    return "$rc"
  fi
  note "$name: done in $((SECONDS - began)) s"
}

export PIP_CACHE_DIR="$CACHE/pip" PIP_DISABLE_PIP_VERSION_CHECK=1
# each step returns on failure itself: set -e does not act inside a function run by stage
install_python() {
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV" || return
  "$VENV/bin/python" -m pip install -q --upgrade pip || return
  "$VENV/bin/python" -m pip install -q -e ".[test,testbed]"
}
stage "python packages (virtualenv, pip install -e .[test,testbed])" install_python
# Debian's postgresql and exporters for the testbed's test (tests/test_testbed_services.py)
stage "testbed packages (infra/testbed/install.sh)" env TESTBED_PYTHON="$VENV/bin/python" bash infra/testbed/install.sh \
  || note "testbed not installed: its test skips (fails under CI=true)"
# Debian's chromium + chromedriver for the report's browser test (tests/test_report.py)
stage "chromium (infra/chromium.sh)" bash infra/chromium.sh \
  || note "chromium not installed: the browser test skips (fails under CI=true)"
# compose-go (Docker Compose v2's loader) from the Go module proxy, for tests/test_compose_spec.py
stage "composecheck (infra/compose/install.sh)" bash infra/compose/install.sh \
  || note "composecheck not built: its tests skip (fail under CI=true)"
if [ "${PERFCAST_SERVICES:-1}" != "0" ]; then
  services_down() {
    stage "services down" bash infra/services.sh down || true
  }
  trap services_down EXIT
  services_env="$CACHE/services.env"
  # fails the run if a service cannot start
  stage "services up (Kafka, InfluxDB, Prometheus: infra/services.sh)" \
    bash -c 'bash infra/services.sh up >"$1"' _ "$services_env"
  eval "$(cat "$services_env")"
fi
set +e
# the 25 slowest tests at the end: what to mark ``slow`` (pyproject.toml) when the fast loop,
# pytest -m "not services and not slow", grows
note "pytest ..."
PERFCAST_TEST_PROGRESS=1 "$VENV/bin/python" -m pytest --durations=25 "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests (exit 5)"
  rc=0
fi
exit "$rc"
