#!/usr/bin/env bash
# Mirroring against Apache Kafka 4.4 (from Maven Central), end to end:
#  1. a Sluice cluster link with Apache Kafka as its source: mirror topics identical to the
#     source record for record (offsets, timestamps, keys, values, headers), read_committed
#     equal with committed and aborted transactions, a group's offsets copied as they are,
#     promotion;
#  2. Kafka's MirrorMaker 2 from Apache Kafka into Sluice, and
#  3. from Sluice into Apache Kafka.
#   interop/kafka/check-mirroring.sh [SLUICE_BINARY]     (default target/release/sluice)
# Needs java, mvn, python3 with confluent-kafka (scripts/test installs them). About 2 minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(realpath "${1:-target/release/sluice}")
tools="python3 interop/python/mirror_tools.py"
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_up() { # BOOTSTRAP NAME
  for _ in $(seq 1 180); do
    python3 -c "from confluent_kafka.admin import AdminClient; AdminClient({'bootstrap.servers':'$1'}).list_topics(timeout=1)" \
      2>/dev/null && return 0
    sleep 1
  done
  echo "$2 did not come up" >&2; exit 1
}
step() { echo; echo "== $*"; }

kafka_port=$(free_port) kafka_cport=$(free_port) sluice_port=$(free_port)
kafka=127.0.0.1:$kafka_port sluice=127.0.0.1:$sluice_port
step "Apache Kafka 4.4 on $kafka, Sluice on $sluice"
interop/kafka/kafka.sh "$kafka_port" "$kafka_cport" "$work/kafka" & pids+=($!)
"$bin" server --override "log.dirs=$work/sluice" --override "listeners=PLAINTEXT://$sluice" \
  --override admin.http.listener=127.0.0.1:0 --override group.initial.rebalance.delay.ms=0 \
  >"$work/sluice.log" 2>&1 & pids+=($!)
wait_up "$sluice" Sluice
wait_up "$kafka" "Apache Kafka"

step "1. A Sluice cluster link with Apache Kafka as the source"
$tools produce "$kafka" orders 10000
$tools transactions "$kafka" payments
$tools commit "$kafka" app orders 1234
"$bin" mirror --bootstrap-server "$sluice" --create --link kafka --source-bootstrap-server "$kafka" \
  --consumer-groups app --link-config consumer.offset.sync.ms=1000
"$bin" mirror --bootstrap-server "$sluice" --add --link kafka --topic orders
"$bin" mirror --bootstrap-server "$sluice" --add --link kafka --topic payments
$tools wait "$sluice" orders 10000
$tools wait "$sluice" payments "$(python3 -c "
from confluent_kafka import Consumer, TopicPartition as T
c=Consumer({'bootstrap.servers':'$kafka','group.id':'x'})
print(sum(c.get_watermark_offsets(T('payments',p))[1] for p in range(3)))")"
$tools compare "$kafka" orders "$sluice" orders read_uncommitted offsets
$tools compare "$kafka" payments "$sluice" payments read_uncommitted offsets
$tools compare "$kafka" payments "$sluice" payments read_committed offsets
for _ in $(seq 1 30); do
  [ "$($tools offsets "$sluice" app orders)" = "1234 1234 1234" ] && break
  sleep 1
done
echo "group app on Sluice: $($tools offsets "$sluice" app orders) (on Kafka: $($tools offsets "$kafka" app orders))"
[ "$($tools offsets "$sluice" app orders)" = "1234 1234 1234" ]
"$bin" mirror --bootstrap-server "$sluice" --describe --link kafka
"$bin" mirror --bootstrap-server "$sluice" --promote --link kafka


step "2. MirrorMaker 2 from Apache Kafka into Sluice"
$tools produce "$kafka" mm2-in 10000
interop/kafka/mm2-properties.sh "$kafka" "$sluice" mm2-in >"$work/mm2-in.properties"
MM2_LOG_DIR=$work/mm2-in interop/kafka/mm2.sh "$work/mm2-in.properties" --clusters B & mm2=$!
pids+=($mm2)
$tools wait "$sluice" A.mm2-in 10000 180
$tools compare "$kafka" mm2-in "$sluice" A.mm2-in read_uncommitted values
kill "$mm2"

step "3. MirrorMaker 2 from Sluice into Apache Kafka"
$tools produce "$sluice" mm2-out 10000
interop/kafka/mm2-properties.sh "$sluice" "$kafka" mm2-out >"$work/mm2-out.properties"
MM2_LOG_DIR=$work/mm2-out interop/kafka/mm2.sh "$work/mm2-out.properties" --clusters B & mm2=$!
pids+=($mm2)
$tools wait "$kafka" A.mm2-out 10000 180
$tools compare "$sluice" mm2-out "$kafka" A.mm2-out read_uncommitted values
kill "$mm2"
if grep -h -E "ERROR|Could not alter configuration" "$work"/mm2-*/mm2.log; then
  echo "MirrorMaker 2 logged the errors above" >&2
  exit 1
fi
step "all mirroring checks passed"
