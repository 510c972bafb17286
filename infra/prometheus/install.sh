#!/usr/bin/env bash
# Install Prometheus for the Prometheus source's tests: Debian's `prometheus` package (2.42 on
# bookworm), without letting its service start on the default port 9090 (a policy-rc.d denies
# service starts during the install; a daemon the package started anyway is stopped and its
# init script disabled). The tests run their own instance (infra/prometheus/start.sh).
# Idempotent: does nothing when a prometheus binary is already there.
# Result: the path of the binary, also written to ${PERFCAST_CACHE:-~/.cache/perfcast}/prometheus/bin
# Env: PERFCAST_PROMETHEUS_BIN  use this binary instead (e.g. one built with
#        go install github.com/prometheus/prometheus/cmd/prometheus@v0.316.0)
set -euo pipefail
CACHE_ROOT="${PERFCAST_CACHE:-$HOME/.cache/perfcast}"
STATE="${CACHE_ROOT}/prometheus/bin"
mkdir -p "$(dirname "${STATE}")"

found() {
  local bin="${PERFCAST_PROMETHEUS_BIN:-$(command -v prometheus || true)}"
  [[ -n "${bin}" && -x "${bin}" ]] || return 1
  echo "${bin}" > "${STATE}"
  echo "prometheus installed: ${bin} ($("${bin}" --version 2>&1 | head -n 1))"
}

if [[ "${1:-}" != "--force" ]] && found; then
  exit 0
fi

source "$(dirname "$0")/../lib.sh"
perfcast_apt_install "${CACHE_ROOT}/prometheus/install.log" prometheus
found
