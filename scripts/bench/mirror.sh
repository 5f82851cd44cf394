#!/usr/bin/env bash
# Mirroring between two Sluice nodes: Sluice's cluster link (the destination's leader copies
# batches as they are) against Kafka's MirrorMaker 2 (a consumer and a producer in a JVM
# between the clusters; IdentityReplicationPolicy, tasks.max 3), interleaved (link, mm2,
# link, mm2, ...) on fresh nodes each round, as this box is noisy. A benchmark: it prints.
#
#   scripts/bench/mirror.sh SLUICE_BINARY [rounds] [backlog_records] [rate_per_s]
#
# Per round and mode, 1 KiB records in a 3-partition topic:
#   backlog  BACKLOG records (default 500,000: 500 MB) produced before the mirror starts;
#            MB/s from the first copied record to the last, and CPU-seconds per GB copied of
#            the destination node plus (for MM2) the MirrorMaker process (utime+stime, /proc)
#            over that time
#   steady   RATE records/s (default 2,000: 2 MB/s) for 30 s with the mirror running
#            (interop/python/mirror_lag.py): per record, ms from readable on the source to
#            readable on the destination (lag p50/p99/max), and from produced (e2e p50/p99)
# Needs `cargo build --release`, librdkafka's rdkafka_performance (built below from the
# librdkafka the rdkafka crate built), java and mvn (interop/kafka builds MirrorMaker 2's classpath).
set -euo pipefail
BIN=$(realpath "$1")
ROUNDS=${2:-2}
BACKLOG=${3:-500000}
RATE=${4:-2000}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BENCH_DIR=${BENCH_DIR:-/tmp/sluice-bench}
mkdir -p "$BENCH_DIR"
TICK=$(getconf CLK_TCK)
RP=$BENCH_DIR/rdkafka_performance
if [ ! -x "$RP" ]; then
  # librdkafka as the rdkafka crate built it (a dev-dependency: `cargo test --no-run` or
  # `cargo build --release --tests` builds it).
  out=$(ls -d "$ROOT"/target/release/build/rdkafka-sys-*/out "$ROOT"/target/debug/build/rdkafka-sys-*/out 2>/dev/null | head -1 || true)
  zstd=$(ls /usr/lib/*/libzstd.so* 2>/dev/null | head -1)
  cc -O2 -o "$RP" "$out/examples/rdkafka_performance.c" -I"$out/src" "$out/src/librdkafka.a" \
    -lm "$zstd" -lssl -lcrypto -lz -ldl -lpthread -lrt
fi
(cd "$ROOT/interop/kafka" && [ -d lib-mm2 ] || mvn -q -B dependency:copy-dependencies -DoutputDirectory=lib)

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
start() { # DIR PORT -> pid in $PID
  local dir=$1 port=$2
  rm -rf "$dir"
  "$BIN" server --override log.dirs="$dir" --override listeners=PLAINTEXT://127.0.0.1:"$port" \
    --override admin.http.listener= --override group.initial.rebalance.delay.ms=0 > "$dir.log" 2>&1 &
  PID=$!
  pids+=("$PID")
  for _ in $(seq 1 300); do grep -q 'listening on' "$dir.log" 2>/dev/null && return; sleep 0.1; done
  echo "broker did not start: $dir.log" >&2; exit 1
}
now() { date +%s.%N; }

printf '%-6s %-5s %12s %14s %10s %8s %8s %8s %8s %8s\n' round mode backlog_MB/s cpu_s_per_GB records \
  lag_p50 lag_p99 lag_max e2e_p50 e2e_p99
for round in $(seq 1 "$ROUNDS"); do
  for mode in link mm2; do
    start "$BENCH_DIR/mirror-src" 29192; src=$PID
    start "$BENCH_DIR/mirror-dst" 29292; dst=$PID
    "$BIN" topics --bootstrap-server 127.0.0.1:29192 --create --topic bench --partitions 3 >/dev/null
    "$RP" -P -t bench -s 1024 -c "$BACKLOG" -a 1 -b 127.0.0.1:29192 -q -X linger.ms=5 \
      -X batch.size=1000000 > /dev/null
    helper=
    if [ "$mode" = link ]; then
      "$BIN" mirror --bootstrap-server 127.0.0.1:29292 --create --link bench \
        --source-bootstrap-server 127.0.0.1:29192 >/dev/null
      "$BIN" mirror --bootstrap-server 127.0.0.1:29292 --add --link bench --topic bench >/dev/null
    else
      "$ROOT/interop/kafka/mm2-properties.sh" 127.0.0.1:29192 127.0.0.1:29292 bench \
        'replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy' \
        'tasks.max = 3' 'refresh.topics.interval.seconds = 1' > "$BENCH_DIR/mm2.properties"
      MM2_LOG_DIR=$BENCH_DIR/mm2-logs "$ROOT/interop/kafka/mm2.sh" "$BENCH_DIR/mm2.properties" \
        --clusters B & helper=$!
      pids+=("$helper")
    fi
    # The copy, from the first record on the destination to the last (sampled every 20 ms),
    # and the CPU the destination node and MM2 spent meanwhile.
    read -r t0 first t1 ticks < <(python3 - 127.0.0.1:29292 "$BACKLOG" "$dst" $helper <<'PY'
import sys, time
from confluent_kafka import Consumer, TopicPartition as T
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "bench-hw"})
n, pids, t0, first, c0 = int(sys.argv[2]), sys.argv[3:], None, 0, 0
cpu = lambda: sum(sum(int(x) for x in open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[11:13]) for p in pids)
while True:
    md = c.list_topics("bench", timeout=5).topics.get("bench")
    hw = sum(c.get_watermark_offsets(T("bench", p), timeout=5)[1] for p in md.partitions) if md and md.partitions and not md.error else 0
    if hw > 0 and t0 is None:
        t0, first, c0 = time.time(), hw, cpu()
    if hw >= n:
        print(t0, first, time.time(), cpu() - c0)
        break
    time.sleep(0.02)
PY
)
    mb=$(echo "($BACKLOG - $first) * 1024 / 1000000" | bc -l)
    rate=$(echo "$mb / ($t1 - $t0 + 0.001)" | bc -l)
    per_gb=$(echo "$ticks / $TICK / ($mb + 0.001) * 1000" | bc -l)
    # Steady: RATE records/s for 30 s on the source while the mirror runs.
    read -r got m50 m99 mmax e50 e99 < <(python3 "$ROOT/interop/python/mirror_lag.py" \
      127.0.0.1:29192 127.0.0.1:29292 bench "$RATE" 30 | tail -1)
    printf '%-6s %-5s %12.1f %14.1f %10s %8s %8s %8s %8s %8s\n' "$round" "$mode" "$rate" "$per_gb" \
      "$got" "$m50" "$m99" "$mmax" "$e50" "$e99"
    [ -n "$helper" ] && { kill "$helper"; wait "$helper" 2>/dev/null || true; }
    kill "$src" "$dst"; wait "$src" "$dst" 2>/dev/null || true
    pids=()
  done
done
