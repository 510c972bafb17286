#!/usr/bin/env bash
# Build InfluxDB OSS 1.8.10 (influxd) from source via the Go module proxy.
# No Docker, no downloads other than proxy.golang.org (modules + Go toolchain module).
# Result: ${PERFCAST_CACHE:-$HOME/.cache/perfcast}/influxdb/1.8.10/bin/influxd
set -euo pipefail

INFLUX_VERSION="1.8.10"
CACHE_ROOT="${PERFCAST_CACHE:-$HOME/.cache/perfcast}"
PREFIX="${CACHE_ROOT}/influxdb/${INFLUX_VERSION}"
BIN="${PREFIX}/bin/influxd"
# Go toolchain used for the build. Fetched as module golang.org/toolchain via the
# Go proxy when it differs from the installed go. Override with PERFCAST_INFLUX_GOTOOLCHAIN.
# "local" = the installed go (verified with go1.26.x, CGO_ENABLED=0). If it fails,
# install.sh retries once with FALLBACK_GOTOOLCHAIN.
BUILD_GOTOOLCHAIN="${PERFCAST_INFLUX_GOTOOLCHAIN:-local}"
FALLBACK_GOTOOLCHAIN="${PERFCAST_INFLUX_FALLBACK_GOTOOLCHAIN:-go1.20.14}"

if [[ -x "${BIN}" && "${1:-}" != "--force" ]]; then
  echo "influxd ${INFLUX_VERSION} already installed: ${BIN}"
  exit 0
fi

command -v go >/dev/null 2>&1 || { echo "error: 'go' not found in PATH" >&2; exit 1; }

GO_ROOT_DIR="${CACHE_ROOT}/go"
mkdir -p "${PREFIX}/bin" "${GO_ROOT_DIR}"

# Isolate from the user's go env file (it may carry flags older toolchains reject).
export GOENV=off
export GOPATH="${GO_ROOT_DIR}/path"
export GOMODCACHE="${GO_ROOT_DIR}/mod"
export GOCACHE="${GO_ROOT_DIR}/build-cache"
export GOBIN="${PREFIX}/bin"
export GOPROXY="${GOPROXY:-https://proxy.golang.org,direct}"
export GOSUMDB="${GOSUMDB:-sum.golang.org}"
export GOFLAGS="-mod=mod"
export GO111MODULE=on
# Flux v0.65 (used by 1.8.10) is pure Go; no cgo needed.
export CGO_ENABLED="${PERFCAST_INFLUX_CGO:-0}"
LDFLAGS="-s -w -X main.version=${INFLUX_VERSION} -X main.branch=1.8 -X main.commit=v${INFLUX_VERSION}"

build() {
  local tc="$1"
  echo "building influxd ${INFLUX_VERSION} (GOTOOLCHAIN=${tc}, CGO_ENABLED=${CGO_ENABLED})"
  GOTOOLCHAIN="${tc}" go version
  GOTOOLCHAIN="${tc}" go install -ldflags "${LDFLAGS}" \
    "github.com/influxdata/influxdb/cmd/influxd@v${INFLUX_VERSION}"
}

start=$(date +%s)
if ! build "${BUILD_GOTOOLCHAIN}"; then
  if [[ -n "${FALLBACK_GOTOOLCHAIN}" && "${FALLBACK_GOTOOLCHAIN}" != "${BUILD_GOTOOLCHAIN}" ]]; then
    echo "build with ${BUILD_GOTOOLCHAIN} failed; retrying with ${FALLBACK_GOTOOLCHAIN}" >&2
    build "${FALLBACK_GOTOOLCHAIN}"
  else
    exit 1
  fi
fi
end=$(date +%s)

"${BIN}" version
echo "built ${BIN} in $((end - start))s"
