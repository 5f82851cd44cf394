#!/usr/bin/env bash
# Kafka's MirrorMaker 2 in dedicated mode, in the foreground. Builds the classpath on first use.
#   interop/kafka/mm2.sh PROPERTIES [--clusters TARGET]
# Env: LOG_LEVEL (WARN), HEAP (1g), MM2_LOG_DIR (./mm2-logs). Log: MM2_LOG_DIR/mm2.log.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 PROPERTIES [--clusters TARGET]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
[ -d "$here/lib-mm2" ] || (cd "$here" && mvn -q -B dependency:copy-dependencies -DoutputDirectory=lib)
logs=${MM2_LOG_DIR:-$PWD/mm2-logs}
mkdir -p "$logs"
exec java -Xms128m -Xmx"${HEAP:-1g}" -XX:+UseG1GC -Djava.awt.headless=true \
  -Dlog4j2.configurationFile="$here/log4j2.properties" -Dkafka.logs.dir="$logs" \
  -Dkafka.log.name=mm2 -Dkafka.log.level="${LOG_LEVEL:-WARN}" \
  -cp "$here/lib-mm2/*" org.apache.kafka.connect.mirror.MirrorMaker "$@"
