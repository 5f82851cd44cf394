#!/usr/bin/env bash
# The data-path benchmarks of issue 17, old build against new, interleaved (old, new, old,
# new, ...) in one run because this box is noisy. A benchmark, not a test: it prints numbers.
#
#   [PARTS=abcdef] scripts/bench/data-path.sh OLD_SLUICE NEW_SLUICE [rounds]
#
# Drives librdkafka's own rdkafka_performance (built from the librdkafka sources the rdkafka
# crate vendors, after `cargo build --release`) and scripts/bench/sendfile_sender.c. Brokers
# run one at a time on loopback with data under $BENCH_DIR (default /tmp/sluice-bench).
#   a  one consumer, one partition, 1 KiB records, 2 GB topic: MB/s
#   b  four consumers (separate processes) reading that topic at once: aggregate MB/s and the
#      broker's CPU-seconds per GB served (utime+stime from /proc), beside a bare sendfile
#      sender's CPU per GB over loopback
#   c  produce 100 B records, acks=1, one partition: records/s
#   d  produce 100 B records, acks=1, random partitioner over 1, 100 and 1000 partitions
#   e  end-to-end latency at 10,000 msg/s, acks=all, RF 3 on three local nodes: p50/p99/p99.9
#      of each record's produce-to-consume time (rdkafka_performance -l -A)
#   f  RSS idle and with 2,000 idle connections
set -euo pipefail
OLD=$1
NEW=$2
ROUNDS=${3:-2}
PARTS=${PARTS:-abcdef} # which of the benchmarks below to run
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BENCH_DIR=${BENCH_DIR:-/tmp/sluice-bench}
mkdir -p "$BENCH_DIR"
TICK=$(getconf CLK_TCK)

RP=$BENCH_DIR/rdkafka_performance
if [ ! -x "$RP" ]; then
  out=$(ls -d "$ROOT"/target/release/build/rdkafka-sys-*/out | head -1)
  zstd=$(ls /usr/lib/*/libzstd.so* 2>/dev/null | head -1)
  cc -O2 -o "$RP" "$out/examples/rdkafka_performance.c" -I"$out/src" "$out/src/librdkafka.a" \
    -lm "$zstd" -lssl -lcrypto -lz -ldl -lpthread -lrt
fi
SF=$BENCH_DIR/sendfile_sender
[ -x "$SF" ] || cc -O2 -o "$SF" "$ROOT/scripts/bench/sendfile_sender.c" -lpthread

PID=
start() { # start BIN DIR PORT [extra overrides...]
  local bin=$1 dir=$2 port=$3; shift 3
  "$bin" server --override log.dirs="$dir" --override listeners=PLAINTEXT://127.0.0.1:"$port" \
    --override admin.http.listener= "$@" > "$dir.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 300); do grep -q 'listening on' "$dir.log" 2>/dev/null && return; sleep 0.1; done
  echo "broker did not start: $dir.log" >&2; exit 1
}
stop() { kill -TERM "$PID"; wait "$PID" || true; }
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
now() { date +%s.%N; }
name() { [ "$1" = "$OLD" ] && echo old || echo new; }

# a, b: a 2 GB topic of 1 KiB records per build, produced once.
consume() { # BIN TAG
  local bin=$1 dir=$BENCH_DIR/data-$2 port=29092
  start "$bin" "$dir" $port
  if [ ! -f "$dir.filled" ]; then
    "$RP" -P -t big -p 0 -s 1024 -c 2000000 -a 1 -b 127.0.0.1:$port -q \
      -X linger.ms=5 -X batch.size=1000000 > /dev/null
    touch "$dir.filled"
  fi
  local t0 t1 c0 c1 pids=()
  t0=$(now)
  "$RP" -C -t big -p 0 -o beginning -c 2000000 -b 127.0.0.1:$port -q > /dev/null
  t1=$(now)
  echo "a $2 one consumer: $(python3 -c "print(round(2000000*1094/1e6/($t1-$t0)))") MB/s"
  c0=$(cpu "$PID"); t0=$(now)
  for i in 1 2 3 4; do
    "$RP" -C -t big -p 0 -o beginning -c 2000000 -b 127.0.0.1:$port -q > /dev/null & pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  c1=$(cpu "$PID"); t1=$(now)
  python3 -c "
gb = 4*2000000*1094/1e9; t = $t1-$t0; c = ($c1-$c0)/$TICK
print(f'b $2 four consumers: {gb*1000/t:.0f} MB/s aggregate, broker {c:.2f} CPU-s, {c/gb:.3f} CPU-s/GB')"
  stop
}

produce() { # BIN TAG PARTITIONS LABEL
  local bin=$1 dir=$BENCH_DIR/prod-$2-$3 port=29093
  rm -rf "$dir"
  start "$bin" "$dir" $port
  local part=() t0 t1 out
  [ "$3" = 1 ] && part=(-p 0)
  # The topic is created, and a first 100,000 records sent, before the measured run: creating
  # a thousand partitions' files takes seconds of its own (reported apart), which would
  # otherwise be most of what the 1,000-partition run measures.
  t0=$(now)
  "$ROOT/target/release/sluice" topics --bootstrap-server 127.0.0.1:$port --create --topic p \
    --partitions "$3" --replication-factor 1 > /dev/null
  "$RP" -P -t p -s 100 -c 100000 -a 1 "${part[@]}" -b 127.0.0.1:$port -X linger.ms=5 -q \
    > /dev/null 2>&1
  t1=$(now)
  echo "$4 $2 $3 partition(s): creating the topic and the first 100k records took" \
    "$(python3 -c "print(f'{$t1-$t0:.2f}')") s"
  # Three runs of 5M records one after another on the same broker: a cost that grows with
  # what the partitions hold (the index readahead this benchmark found) shows as a decline.
  local c0
  for run in 1 2 3; do
    c0=$(cpu "$PID")
    out=$("$RP" -P -t p -s 100 -c 5000000 -a 1 "${part[@]}" -b 127.0.0.1:$port \
      -X linger.ms=5 -X batch.size=1000000 -X queue.buffering.max.messages=2000000 2>&1 | tail -1)
    echo "  run $run: $(echo "$out" | grep -o '[0-9]* msgs/s'), broker" \
      "$(python3 -c "print(f'{($(cpu "$PID")-$c0)/$TICK:.2f}')") CPU-s"
  done
  stop
  rm -rf "$dir"
}

e2e() { # BIN TAG
  local bin=$1 tag=$2 v="" pids=()
  local ports=(0 29192 29292 29392) cports=(0 29193 29293 29393)
  for i in 1 2 3; do v="$v${v:+,}$i@127.0.0.1:${cports[$i]}"; done
  for i in 1 2 3; do
    local dir=$BENCH_DIR/e2e-$tag-$i
    rm -rf "$dir"
    "$bin" server --override process.roles=broker,controller --override node.id=$i \
      --override log.dirs="$dir" --override controller.listener.names=CONTROLLER \
      --override listeners=PLAINTEXT://127.0.0.1:${ports[$i]},CONTROLLER://127.0.0.1:${cports[$i]} \
      --override controller.quorum.voters=$v --override admin.http.listener= \
      --override default.replication.factor=3 --override min.insync.replicas=2 > "$dir.log" 2>&1 &
    pids+=($!)
  done
  for i in 1 2 3; do
    for _ in $(seq 1 300); do grep -q 'listening on' "$BENCH_DIR/e2e-$tag-$i.log" && break; sleep 0.1; done
  done
  local b=127.0.0.1:29192,127.0.0.1:29292,127.0.0.1:29392
  "$ROOT/target/release/sluice" topics --bootstrap-server 127.0.0.1:29192 --create --topic lat \
    --partitions 1 --replication-factor 3 > /dev/null
  # The consumer writes each record's end-to-end latency (us) to a file; linger.ms=1 so
  # 10,000 msg/s with acks=all is well within what one producer connection sustains.
  "$RP" -C -l -A "$BENCH_DIR/e2e-$tag.lat" -t lat -p 0 -o end -b $b -c 100000 -u \
    > "$BENCH_DIR/e2e-$tag.consumer" 2>&1 &
  local c=$!
  sleep 2
  "$RP" -P -l -t lat -p 0 -s 100 -a -1 -r 10000 -c 100000 -b $b -X linger.ms=1 \
    > "$BENCH_DIR/e2e-$tag.producer" 2>&1 || true
  wait $c || true
  python3 - "$BENCH_DIR/e2e-$tag.lat" "$tag" "$(tail -1 "$BENCH_DIR/e2e-$tag.producer" | grep -o '[0-9]* msgs/s')" <<'PY'
import sys
v = sorted(int(l) for l in open(sys.argv[1]) if l.strip())
q = lambda p: v[min(len(v) - 1, int(p * len(v)))] / 1000
print(f"e {sys.argv[2]} e2e acks=all RF 3, produced at {sys.argv[3]}: {len(v)} records, "
      f"p50 {q(.5):.2f} ms, p99 {q(.99):.2f} ms, p99.9 {q(.999):.2f} ms, max {v[-1] / 1000:.2f} ms")
PY
  for p in "${pids[@]}"; do kill -TERM "$p"; done
  for p in "${pids[@]}"; do wait "$p" || true; done
}

idle() { # BIN TAG
  local dir=$BENCH_DIR/idle-$2 port=29094
  rm -rf "$dir"
  start "$1" "$dir" $port
  sleep 2
  local idle_kb=$(rss_kb "$PID")
  python3 - "$port" <<'PY' &
import socket, struct, sys, time
port = int(sys.argv[1])
socks = []
# ApiVersions v0, so each connection has been read and answered once.
req = struct.pack(">hhih", 18, 0, 1, 0)
for _ in range(2000):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(struct.pack(">i", len(req)) + req)
    socks.append(s)
for s in socks:
    n = struct.unpack(">i", s.recv(4))[0]
    while n > 0:
        n -= len(s.recv(n))
print("connected", flush=True)
time.sleep(10)
PY
  local py=$!
  sleep 6
  echo "f $2 RSS idle $((idle_kb / 1024)) MiB, with 2000 idle connections $(( $(rss_kb "$PID") / 1024 )) MiB"
  wait $py || true
  stop
  rm -rf "$dir"
}

want() { case "$PARTS" in *"$1"*) return 0 ;; esac; return 1; }
if want b; then
  echo "# bare sendfile sender over loopback, 4 readers, 2 GB each"
  head -c 2000000000 /dev/zero > "$BENCH_DIR/blob"
  "$SF" "$BENCH_DIR/blob" 4 1
fi
for r in $(seq 1 "$ROUNDS"); do
  echo "# round $r"
  if want a || want b; then for bin in "$OLD" "$NEW"; do consume "$bin" "$(name "$bin")"; done; fi
  if want c; then for bin in "$OLD" "$NEW"; do produce "$bin" "$(name "$bin")" 1 c; done; fi
  if want d; then
    for n in 1 100 1000; do
      for bin in "$OLD" "$NEW"; do produce "$bin" "$(name "$bin")" "$n" d; done
    done
  fi
  if want e; then for bin in "$OLD" "$NEW"; do e2e "$bin" "$(name "$bin")"; done; fi
  if want f; then for bin in "$OLD" "$NEW"; do idle "$bin" "$(name "$bin")"; done; fi
done
if want b; then
  "$SF" "$BENCH_DIR/blob" 4 1
  rm -f "$BENCH_DIR/blob"
fi
