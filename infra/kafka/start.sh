#!/usr/bin/env bash
# Start a single-node Apache Kafka broker in KRaft mode (combined broker+controller), no Docker.
# Needs infra/kafka/install.sh to have been run (it is run here if the jars are missing).
#
# Env:
#   KAFKA_PORT             client listener port (default 9092), bound to 127.0.0.1 only
#   KAFKA_CONTROLLER_PORT  KRaft controller port (default 9093), bound to 127.0.0.1 only
#   PERFCAST_RUN_DIR       run dir for server.properties, data/, logs/, kafka.pid
#                          (default ${TMPDIR:-/tmp}/perfcast-kafka-$KAFKA_PORT; stop.sh uses the same rule)
#   KAFKA_VERSION          jars to use (default: version in pom.xml), PERFCAST_CACHE as in install.sh
#   KAFKA_HEAP_OPTS        JVM heap (default -Xms256m -Xmx1g)
#   KAFKA_START_TIMEOUT    seconds to wait for the broker to answer a metadata request (default 90)
#
# The broker is ready when this script returns 0: it answered a Metadata request listing itself.
set -euo pipefail
. "$(dirname "$0")/env.sh"
. "$(dirname "$0")/../lib.sh"
PORT="${KAFKA_PORT:-9092}"
CPORT="${KAFKA_CONTROLLER_PORT:-9093}"
RUN="${PERFCAST_RUN_DIR:-${TMPDIR:-/tmp}/perfcast-kafka-$PORT}"
TIMEOUT="${KAFKA_START_TIMEOUT:-90}"
HOST=127.0.0.1
PIDFILE="$RUN/kafka.pid"
DATA="$RUN/data"
LOGS="$RUN/logs"

port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

# Metadata request v0 (api key 3, all topics) over /dev/tcp; succeeds when the response lists
# at least one broker, i.e. this broker is registered with the controller and unfenced.
metadata_ok() {
  local hex
  hex="$(
    exec 2>/dev/null
    exec 3<>"/dev/tcp/$HOST/$PORT" || exit 1
    # size=22 | api_key=3 | api_version=0 | correlation_id=7 | client_id="perfcast" | topics=[] (all)
    printf '\x00\x00\x00\x16\x00\x03\x00\x00\x00\x00\x00\x07\x00\x08perfcast\x00\x00\x00\x00' >&3
    timeout 3 head -c 12 <&3 | od -An -tx1 | tr -d ' \n'
  )" 2>/dev/null || return 1
  # 4 bytes size, 4 bytes correlation id (=7), 4 bytes broker count (>0)
  [ "${#hex}" -eq 24 ] || return 1
  [ "${hex:8:8}" = "00000007" ] || return 1
  [ "${hex:16:8}" != "00000000" ]
}

if perfcast_ours "$PIDFILE" "kafka.Kafka $RUN/server.properties"; then
  echo "start.sh: kafka already running (pid $(cat "$PIDFILE"), run dir $RUN); stop it with infra/kafka/stop.sh" >&2
  exit 1
fi
for p in "$PORT" "$CPORT"; do
  if port_open "$p"; then
    echo "start.sh: port $HOST:$p is already in use; set KAFKA_PORT / KAFKA_CONTROLLER_PORT" >&2
    exit 1
  fi
done
if [ ! -f "$LIBS/.complete" ]; then
  KAFKA_VERSION="$VERSION" "$HERE/install.sh"
fi

t0=$(date +%s.%N)
rm -rf "$DATA" "$LOGS"   # fresh broker and fresh logs on every start
mkdir -p "$DATA" "$LOGS"
cat > "$RUN/server.properties" <<PROPS
# written by perfcast infra/kafka/start.sh: single-node KRaft broker+controller on loopback
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$HOST:$CPORT
listeners=PLAINTEXT://$HOST:$PORT,CONTROLLER://$HOST:$CPORT
advertised.listeners=PLAINTEXT://$HOST:$PORT
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$DATA
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
delete.topic.enable=true
PROPS

JAVA_OPTS=(
  ${KAFKA_HEAP_OPTS:--Xms256m -Xmx1g}
  -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true
  "-Dlog4j.configuration=file:$HERE/log4j.properties"
  "-Dkafka.logs.dir=$LOGS"
)

# cluster id: 16 random bytes, base64url without padding (what `kafka-storage random-uuid` prints).
# Passed as --cluster-id=ID: an id starting with '-' (1 in 64) read as `-t ID` is taken for an
# option ("argument --cluster-id/-t: expected one argument")
CLUSTER_ID="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
if ! java "${JAVA_OPTS[@]}" -cp "$LIBS/*" kafka.tools.StorageTool format \
      "--cluster-id=$CLUSTER_ID" -c "$RUN/server.properties" > "$LOGS/format.log" 2>&1; then
  echo "start.sh: storage format failed:" >&2
  cat "$LOGS/format.log" >&2
  exit 1
fi

perfcast_spawn "$PIDFILE" "$LOGS/stdout.log" \
  java "${JAVA_OPTS[@]}" -cp "$LIBS/*" kafka.Kafka "$RUN/server.properties"
pid="$(cat "$PIDFILE")"
perfcast_wait_ready kafka "$PIDFILE" "$TIMEOUT" metadata_ok "$LOGS/server.log" "$LOGS/stdout.log"
t1=$(date +%s.%N)
printf 'kafka %s ready on %s:%s (controller %s, pid %s, run dir %s) in %.1fs\n' \
  "$VERSION" "$HOST" "$PORT" "$CPORT" "$pid" "$RUN" "$(awk "BEGIN{print $t1 - $t0}")"
