#!/usr/bin/env bash
# Print what a broker answers to ApiVersions, one API per line: KEY MIN MAX NAME (UNSUPPORTED
# APIs, which the broker does not list, are left out). Uses Kafka 4.4's own
# kafka-broker-api-versions tool.
#   interop/kafka/api-versions.sh HOST:PORT
# The comparison test's reference, crates/sluice/tests/fixtures/kafka-4.4-api-versions.txt, is this
# script's output against a default Apache Kafka 4.4 node (interop/kafka/kafka.sh):
#   interop/kafka/kafka.sh 19092 19093 /tmp/k44 &   # then, once it listens:
#   interop/kafka/api-versions.sh 127.0.0.1:19092 > crates/sluice/tests/fixtures/kafka-4.4-api-versions.txt
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 HOST:PORT" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
[ -d "$here/lib" ] || (cd "$here" && mvn -q -B dependency:copy-dependencies -DoutputDirectory=lib)
java -Dlog4j2.configurationFile="$here/log4j2.properties" -cp "$here/lib/*" \
  org.apache.kafka.tools.BrokerApiVersionsCommand --bootstrap-server "$1" |
  tr ',' '\n' |
  sed -nE 's/^[[:space:]]*([A-Za-z]+)\(([0-9]+)\): ([0-9]+)( to ([0-9]+))? \[.*/\2 \3 \5 \1/p' |
  awk '{ if (NF == 3) print $1, $2, $2, $3; else print $1, $2, $3, $4 }'
