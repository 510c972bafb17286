#!/usr/bin/env bash
# Install what the testbed (bench/testbed/README.md) needs on a fresh Debian machine:
# Debian's postgresql (15 on bookworm), prometheus-process-exporter, prometheus-postgres-exporter
# and prometheus-node-exporter (Prometheus itself: infra/prometheus/install.sh), and the venv's
# testbed extra (pyproject's [testbed]: psycopg[binary], gunicorn, prometheus-client).
# The packages' own services must not start: they would take the default ports (5432, 9256,
# 9187, 9100) and run beside the testbed's own instances. A policy-rc.d denies service starts
# during the install (Debian's protocol: exit 101), as infra/prometheus/install.sh does; a
# daemon started anyway is stopped and its init script disabled.
# Idempotent and quick when everything is there: apt-get runs only for a missing package (with
# one apt-get update first), pip only for a missing module.
# Env: PERFCAST_CACHE (default ~/.cache/perfcast), its venv's python unless TESTBED_PYTHON.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "${HERE}/../.." && pwd)"
source "${HERE}/env.sh"
# (up.sh also runs curl and bc, which a minimal image may lack)
PACKAGES=(postgresql prometheus-process-exporter prometheus-postgres-exporter
          prometheus-node-exporter curl bc)
# the binaries the testbed runs, one per package above
BINARIES=("${TESTBED_PG_BIN}/initdb" /usr/bin/prometheus-process-exporter
          /usr/bin/prometheus-postgres-exporter /usr/bin/prometheus-node-exporter
          /usr/bin/curl /usr/bin/bc)
LOG="${TESTBED_CACHE}/install.log"
mkdir -p "${TESTBED_CACHE}"

missing=()
for i in "${!PACKAGES[@]}"; do
  [[ -x "${BINARIES[$i]}" ]] || missing+=("${PACKAGES[$i]}")
done

if (( ${#missing[@]} )); then
  SUDO=""
  if [[ "$(id -u)" != "0" ]]; then
    command -v sudo >/dev/null || { echo "testbed install: needs root (or sudo) for apt-get" >&2; exit 1; }
    SUDO="sudo"
  fi
  POLICY=/usr/sbin/policy-rc.d
  OWN_POLICY=0
  if [[ ! -e "${POLICY}" ]]; then
    printf '#!/bin/sh\n# written by perfcast infra/testbed/install.sh during apt-get install\nexit 101\n' \
      | ${SUDO} tee "${POLICY}" >/dev/null
    ${SUDO} chmod 755 "${POLICY}"
    OWN_POLICY=1
  fi
  cleanup() { if [[ "${OWN_POLICY}" == "1" ]]; then ${SUDO} rm -f "${POLICY}"; fi; }
  trap cleanup EXIT
  export DEBIAN_FRONTEND=noninteractive
  if ! { ${SUDO} apt-get update && ${SUDO} apt-get install -y --no-install-recommends \
           "${missing[@]}"; } > "${LOG}" 2>&1; then
    echo "testbed install: apt-get install ${missing[*]} failed (log ${LOG}):" >&2
    tail -n 30 "${LOG}" >&2
    exit 1
  fi
  # the packages' own daemons must not run (no systemd in a container: SysV scripts)
  for svc in postgresql prometheus-process-exporter prometheus-postgres-exporter \
             prometheus-node-exporter; do
    if [[ -x "/etc/init.d/${svc}" ]]; then
      ${SUDO} "/etc/init.d/${svc}" stop >/dev/null 2>&1 || true
      ${SUDO} update-rc.d "${svc}" disable >/dev/null 2>&1 || true
    fi
    if command -v systemctl >/dev/null && [[ -d /run/systemd/system ]]; then
      ${SUDO} systemctl disable --now "${svc}" >/dev/null 2>&1 || true
    fi
  done
  echo "testbed install: apt-get installed ${missing[*]}" >&2
fi

if ! "${TESTBED_PYTHON}" -c "import psycopg, gunicorn, prometheus_client" 2>/dev/null; then
  # the extra's requirements as pyproject lists them (not the project itself: the venv's
  # perfcast install is infra/test.sh's)
  mapfile -t reqs < <("${TESTBED_PYTHON}" -c "import sys, tomllib; print('\n'.join(tomllib.load(
    open(sys.argv[1], 'rb'))['project']['optional-dependencies']['testbed']))" "${REPO}/pyproject.toml")
  "${TESTBED_PYTHON}" -m pip install -q "${reqs[@]}" >> "${LOG}" 2>&1 || {
    echo "testbed install: pip install '.[testbed]' failed (log ${LOG}):" >&2
    tail -n 30 "${LOG}" >&2
    exit 1
  }
  echo "testbed install: pip installed the [testbed] extra" >&2
fi
echo "testbed installed: $("${TESTBED_PG_BIN}/postgres" --version)," \
     "process-exporter, postgres_exporter, node_exporter; psycopg, gunicorn, prometheus-client"
