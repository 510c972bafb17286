#!/usr/bin/env bash
# The testbed's smoke run: up, a closed load (default 5 users, think time 1 s, 60 s, nice 19),
# perfcast over the Prometheus data (bench/testbed/perfcast.toml), the ground truth, down (also
# on failure). Everything lands in OUT (default /tmp/perfcast-testbed-smoke):
#   load.jsonl, truth.txt, truth.json, perfcast/ (perfcast run's outputs, the windows read)
# Env: SMOKE_USERS, SMOKE_THINK, SMOKE_DURATION, SMOKE_MAPPING (a prom-config file), and up.sh's.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "${HERE}/../.." && pwd)"
OUT="${1:-/tmp/perfcast-testbed-smoke}"
PY="${TESTBED_PYTHON:-$HOME/.cache/perfcast/venv/bin/python}"
USERS="${SMOKE_USERS:-5}"
THINK="${SMOKE_THINK:-1}"
DURATION="${SMOKE_DURATION:-60}"
MAPPING="${SMOKE_MAPPING:-${HERE}/perfcast.toml}"
rm -rf "${OUT}"
mkdir -p "${OUT}"

trap 'bash "${REPO}/infra/testbed/down.sh" | tee "${OUT}/down.txt"' EXIT
bash "${REPO}/infra/testbed/up.sh" | tee "${OUT}/up.txt"
eval "$(grep '^export ' "${OUT}/up.txt")"
cd "${REPO}"
PYTHONPATH="${REPO}" "${PY}" -m bench.testbed.load --duration "${DURATION}" \
  --out "${OUT}/load.jsonl" closed --users "${USERS}" --think "${THINK}"
sleep 3                                      # the last scrapes (1 s) reach the TSDB
t0=$("${PY}" -c "import json,sys; print(int(next(r for r in map(json.loads, open(sys.argv[1])) if r.get('kind') == 'run')['start']) - 10)" "${OUT}/load.jsonl")
t1=$(( t0 + DURATION + 25 ))
PYTHONPATH="${REPO}" nice -n 10 "${PY}" -m streams.cli.commands run --source prometheus \
  --prom-config "${MAPPING}" --config "${HERE}/system.toml" --from "${t0}" --to "${t1}" \
  --out "${OUT}/perfcast" | tee "${OUT}/perfcast.txt" || true
PYTHONPATH="${REPO}" "${PY}" -m bench.testbed.truth "${OUT}/load.jsonl" --json "${OUT}/truth.json" \
  | tee "${OUT}/truth.txt"
PYTHONPATH="${REPO}" "${PY}" -m bench.testbed.compare "${OUT}/truth.json" "${OUT}/perfcast" | tee "${OUT}/compare.txt" || true
