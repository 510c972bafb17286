#!/usr/bin/env bash
# The whole test suite, on a fresh machine of this project's kind.
# Creates (or reuses) a virtualenv under ~/.cache/perfcast, installs perfcast with its test
# dependencies from PyPI, installs and starts the real services (Kafka from Maven Central,
# InfluxDB 1.8.10 from the Go module proxy, Prometheus from Debian; infra/services.sh), runs pytest,
# stops the services. Everything runs, the services and slow tests too; the fast loop while
# working is pytest -m "not services and not slow" (README).
# PERFCAST_SERVICES=0 skips the services (their tests then skip, except under CI=true where they
# fail). pytest's exit code 5 ("no tests collected") is reported and treated as success.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${PERFCAST_CACHE:-$HOME/.cache/perfcast}"
VENV="$CACHE/venv"
PY="${PYTHON:-python3}"
mkdir -p "$CACHE/pip"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
export PIP_CACHE_DIR="$CACHE/pip"
"$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
"$VENV/bin/python" -m pip install -q -e ".[test,testbed]"
# Debian's postgresql and exporters for the testbed's test (tests/test_testbed_services.py)
TESTBED_PYTHON="$VENV/bin/python" bash infra/testbed/install.sh >&2 || echo "testbed not installed: its test skips (fails under CI=true)" >&2
# Debian's chromium + chromedriver for the report's browser test (tests/test_report.py)
bash infra/chromium.sh >&2 || echo "chromium not installed: the browser test skips (fails under CI=true)" >&2
# compose-go (Docker Compose v2's loader) from the Go module proxy, for tests/test_compose_spec.py
bash infra/compose/install.sh >/dev/null || echo "composecheck not built: its tests skip (fail under CI=true)" >&2
if [ "${PERFCAST_SERVICES:-1}" != "0" ]; then
  trap 'bash infra/services.sh down' EXIT
  services_env="$(bash infra/services.sh up)"   # fails the run if a service cannot start
  eval "$services_env"
fi
set +e
# the 25 slowest tests at the end: what to mark ``slow`` (pyproject.toml) when the fast loop,
# pytest -m "not services and not slow", grows
"$VENV/bin/python" -m pytest --durations=25 "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests (exit 5)"
  rc=0
fi
exit "$rc"
