#!/usr/bin/env bash
# Build infra/compose/check (compose-go, the Compose Specification's reference loader, the one
# Docker Compose v2 uses) from the Go module proxy, and print the binary's path. No Docker
# engine runs on these machines; this loads and validates docker-compose.yml as
# `docker compose config` would (tests/test_compose_spec.py).
# Result: ${PERFCAST_CACHE:-$HOME/.cache/perfcast}/compose-check/<source hash>/composecheck
set -euo pipefail
cd "$(dirname "$0")/check"
CACHE_ROOT="${PERFCAST_CACHE:-$HOME/.cache/perfcast}"
HASH="$(cat go.mod go.sum main.go | sha256sum | cut -c1-16)"
BIN="${CACHE_ROOT}/compose-check/${HASH}/composecheck"
if [[ ! -x "${BIN}" ]]; then
  command -v go >/dev/null 2>&1 || { echo "error: 'go' not found in PATH" >&2; exit 1; }
  GO_ROOT_DIR="${CACHE_ROOT}/go"
  export GOENV=off GOPATH="${GO_ROOT_DIR}/path" GOMODCACHE="${GO_ROOT_DIR}/mod" \
         GOCACHE="${GO_ROOT_DIR}/build-cache" GOFLAGS="-mod=readonly" GO111MODULE=on \
         CGO_ENABLED=0 GOPROXY="${GOPROXY:-https://proxy.golang.org,direct}" \
         GOSUMDB="${GOSUMDB:-sum.golang.org}" GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
  mkdir -p "$(dirname "${BIN}")"
  echo "building composecheck (compose-go $(grep 'compose-go/v2 v' go.mod | awk '{print $NF}'))" >&2
  go build -trimpath -ldflags "-s -w" -o "${BIN}.tmp" . >&2
  mv "${BIN}.tmp" "${BIN}"
fi
echo "${BIN}"
