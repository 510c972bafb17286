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

SUDO=""
if [[ "$(id -u)" != "0" ]]; then
  command -v sudo >/dev/null || { echo "install.sh: needs root (or sudo) for apt-get" >&2; exit 1; }
  SUDO="sudo"
fi

# deny service starts while the package installs (Debian's policy-rc.d protocol: exit 101);
# an existing policy-rc.d is left alone and restored
POLICY=/usr/sbin/policy-rc.d
OWN_POLICY=0
if [[ ! -e "${POLICY}" ]]; then
  printf '#!/bin/sh\n# written by perfcast infra/prometheus/install.sh during apt-get install\nexit 101\n' \
    | ${SUDO} tee "${POLICY}" >/dev/null
  ${SUDO} chmod 755 "${POLICY}"
  OWN_POLICY=1
fi
cleanup() { if [[ "${OWN_POLICY}" == "1" ]]; then ${SUDO} rm -f "${POLICY}"; fi; }
trap cleanup EXIT

LOG="${CACHE_ROOT}/prometheus/install.log"
export DEBIAN_FRONTEND=noninteractive
if ! { ${SUDO} apt-get install -y --no-install-recommends prometheus \
       || { ${SUDO} apt-get update && ${SUDO} apt-get install -y --no-install-recommends prometheus; }; \
     } > "${LOG}" 2>&1; then
  echo "install.sh: apt-get install prometheus failed (log ${LOG}):" >&2
  tail -n 30 "${LOG}" >&2
  exit 1
fi

# the package's own daemon must not hold :9090 (no systemd here: its SysV script would run it)
if [[ -x /etc/init.d/prometheus ]]; then
  ${SUDO} /etc/init.d/prometheus stop >/dev/null 2>&1 || true
  ${SUDO} update-rc.d prometheus disable >/dev/null 2>&1 || true
fi
if command -v systemctl >/dev/null && [[ -d /run/systemd/system ]]; then
  ${SUDO} systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
found
