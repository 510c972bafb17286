#!/usr/bin/env bash
# The whole test suite, on a fresh machine of this project's kind.
# Creates (or reuses) a virtualenv under ~/.cache/perfcast, installs perfcast with its test
# dependencies from PyPI, and runs pytest. pytest's exit code 5 ("no tests collected") is a failure
# here only if tests were expected; we treat it as success with a message.
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
"$VENV/bin/python" -m pip install -q -e ".[test]"
set +e
"$VENV/bin/python" -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests (exit 5)"
  rc=0
fi
exit "$rc"
