#!/usr/bin/env bash
# Apache Kafka 4.4 from Maven Central: one KRaft node (broker and controller) on 127.0.0.1,
# in the foreground. Builds the classpath on first use.
#   interop/kafka/kafka.sh PORT CONTROLLER_PORT DATA_DIR
# Env: LOG_LEVEL (WARN), HEAP (1g), EXTRA_PROPS (more server.properties lines).
# Log: DATA_DIR/logs/server.log.
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 PORT CONTROLLER_PORT DATA_DIR" >&2; exit 2; }
port=$1 cport=$2
dir=$(mkdir -p "$3" && cd "$3" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
[ -d "$here/lib" ] || (cd "$here" && mvn -q -B dependency:copy-dependencies -DoutputDirectory=lib)
java_opts=(-Xms256m -Xmx"${HEAP:-1g}" -XX:+UseG1GC -Djava.awt.headless=true
  -Dlog4j2.configurationFile="$here/log4j2.properties" -Dkafka.logs.dir="$dir/logs"
  -Dkafka.log.name=server -Dkafka.log.level="${LOG_LEVEL:-WARN}")
mkdir -p "$dir/logs" "$dir/data"
cat > "$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$dir/data
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
${EXTRA_PROPS:-}
PROPS
if [ ! -f "$dir/data/meta.properties" ]; then
  id=$(java -cp "$here/lib/*" kafka.tools.StorageTool random-uuid)
  java "${java_opts[@]}" -cp "$here/lib/*" kafka.tools.StorageTool format -t "$id" \
    -c "$dir/server.properties" --ignore-formatted >/dev/null
fi
exec java "${java_opts[@]}" -cp "$here/lib/*" kafka.Kafka "$dir/server.properties"
