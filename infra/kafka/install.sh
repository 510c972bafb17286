#!/usr/bin/env bash
# Install the jars of a single-node Apache Kafka broker (KRaft mode) from Maven Central, no Docker.
#   libs  -> ${PERFCAST_CACHE:-~/.cache/perfcast}/kafka/<version>/libs
#   Maven local repository (download cache) -> ${PERFCAST_CACHE}/m2
# Idempotent: does nothing when libs/ is already complete (marker file .complete).
# Env: KAFKA_VERSION (default: the version in pom.xml), PERFCAST_CACHE, MVN (default mvn).
set -euo pipefail
. "$(dirname "$0")/env.sh"
MVN="${MVN:-mvn}"

if [ -f "$LIBS/.complete" ] && ls "$LIBS"/kafka_2.13-"$VERSION".jar >/dev/null 2>&1; then
  echo "kafka $VERSION already installed in $LIBS"
  exit 0
fi

command -v java >/dev/null || { echo "install.sh: java not found (Kafka needs Java 11+, 17 recommended)" >&2; exit 1; }
command -v "$MVN" >/dev/null || { echo "install.sh: $MVN not found" >&2; exit 1; }

mkdir -p "$CACHE/m2"
TMP="$LIBS.tmp.$$"
rm -rf "$TMP"
trap 'rm -rf "$TMP"' EXIT
LOG="$CACHE/kafka/$VERSION/install.log"
mkdir -p "$(dirname "$LOG")"
# mvn output goes to a log (mvn -q still prints ANSI resets); shown only if mvn fails
if ! "$MVN" -q -B -Dstyle.color=never -f "$HERE/pom.xml" \
    -Dmaven.repo.local="$CACHE/m2" \
    -Dkafka.version="$VERSION" \
    dependency:copy-dependencies \
    -DincludeScope=runtime \
    -DoutputDirectory="$TMP" > "$LOG" 2>&1; then
  echo "install.sh: mvn failed (log: $LOG):" >&2
  cat "$LOG" >&2
  exit 1
fi
rm -rf "$LIBS"
mv "$TMP" "$LIBS"
trap - EXIT
touch "$LIBS/.complete"
echo "kafka $VERSION installed in $LIBS ($(ls "$LIBS"/*.jar | wc -l) jars)"
