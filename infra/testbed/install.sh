#!/usr/bin/env bash
# Install what the testbed (bench/testbed/README.md) needs on a fresh Debian machine:
# Debian's postgresql (15 on bookworm), prometheus-process-exporter, prometheus-postgres-exporter
# and prometheus-node-exporter (Prometheus itself: infra/prometheus/install.sh), and the venv's
# testbed extra (pyproject's [testbed]: psycopg[binary], gunicorn, prometheus-client).
# The packages' own services must not start: they would take the default ports (5432, 9256,
# 9187, 9100) beside the testbed's own instances (infra/lib.sh's perfcast_apt_install).
# Idempotent and quick when everything is there: apt-get runs only for a missing package,
# pip only for a missing module.
# Env: PERFCAST_CACHE (default ~/.cache/perfcast), its venv's python unless TESTBED_PYTHON.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "${HERE}/../.." && pwd)"
source "${HERE}/env.sh"
source "${HERE}/../lib.sh"
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
  perfcast_apt_install "${LOG}" "${missing[@]}"
  echo "testbed install: apt-get installed ${missing[*]}" >&2
fi

if ! "${TESTBED_PYTHON}" -c "import psycopg, gunicorn, prometheus_client" 2>/dev/null; then
  # the extra's requirements as pyproject lists them (not the project itself: the venv's
  # perfcast install is infra/test.sh's)
  mapfile -t reqs < <("${TESTBED_PYTHON}" -c "import sys, tomllib; print('\n'.join(tomllib.load(
    open(sys.argv[1], 'rb'))['project']['optional-dependencies']['testbed']))" \
    "${REPO}/pyproject.toml")
  "${TESTBED_PYTHON}" -m pip install -q "${reqs[@]}" >> "${LOG}" 2>&1 || {
    echo "testbed install: pip install '.[testbed]' failed (log ${LOG}):" >&2
    tail -n 30 "${LOG}" >&2
    exit 1
  }
  echo "testbed install: pip installed the [testbed] extra" >&2
fi
echo "testbed installed: $("${TESTBED_PG_BIN}/postgres" --version)," \
     "process-exporter, postgres_exporter, node_exporter; psycopg, gunicorn, prometheus-client"
