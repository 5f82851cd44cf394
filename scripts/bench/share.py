#!/usr/bin/env python3
"""Share-group numbers (a benchmark, not a test: it prints numbers).

    scripts/bench/share.py SLUICE_BINARY [--kafka] [--records 300000] [--threads 1,4,16]
                           [--rounds 2]

One partition, RECORDS records of 100 bytes produced with Kafka's own ProducerPerformance;
then Kafka 4.4's ShareConsumerPerformance (kafka-share-consumer-perf-test.sh) reads them all
with 1, 4 and 16 share consumers of a fresh share group each (share.auto.offset.reset
=earliest, implicit acknowledgement; records/s from the consumers' start, joining included),
and ConsumerPerformance reads them with one consumer of a consumer group: the ceiling of a
consumer group on one partition, whatever its size (records/s while fetching).
With --kafka the same runs against Apache Kafka 4.4 (interop/kafka/kafka.sh), interleaved
with Sluice's (sluice, kafka, sluice, kafka, ...), each on a fresh node. Needs java and mvn
(the Java interop build, `mvn -Pkafka4 package` in interop/java, made here if missing).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import free_port, wait_port  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
JAVA_DIR = os.path.join(ROOT, "interop", "java")
CP = "target-4.4.0/classes:target-4.4.0/lib/*"


def tool(cls, *args, timeout=600):
    out = subprocess.run(
        ["java", "-Xmx1g", "-Dlog4j2.level=WARN", "-cp", CP, f"org.apache.kafka.tools.{cls}", *args],
        cwd=JAVA_DIR, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        sys.exit(f"{cls} {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}")
    return out.stdout


def start_sluice(binary, work):
    port = free_port()
    log = open(os.path.join(work, "server.log"), "a")
    proc = subprocess.Popen(
        [binary, "server", "--override", f"log.dirs={work}/data",
         "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
         "--override", "admin.http.listener="],
        stdout=log, stderr=subprocess.STDOUT)
    wait_port(port)
    return proc, f"127.0.0.1:{port}"


def start_kafka(work):
    port, cport = free_port(), free_port()
    log = open(os.path.join(work, "kafka.out"), "a")
    proc = subprocess.Popen(
        [os.path.join(ROOT, "interop", "kafka", "kafka.sh"), str(port), str(cport), work],
        stdout=log, stderr=subprocess.STDOUT)
    wait_port(port, 120)
    return proc, f"127.0.0.1:{port}"


def column(output, name):
    """The value of column `name` in a perf tool's last data line (its CSV header names
    them; the share and the classic tool order them differently)."""
    header = next((l for l in output.splitlines() if l.startswith("start.time")), None)
    lines = [l for l in output.splitlines() if re.match(r"^\d{4}-\d\d-\d\d", l)]
    if header is None or not lines:
        sys.exit(f"no numbers in:\n{output}")
    names = [n.strip() for n in header.split(",")]
    return float(lines[-1].split(",")[names.index(name)])


def run(name, start, args):
    work = tempfile.mkdtemp(prefix=f"share-bench-{name}-")
    proc, b = start(work)
    try:
        tool("TopicCommand", "--bootstrap-server", b, "--create", "--topic", "q",
             "--partitions", "1", "--replication-factor", "1")
        tool("ProducerPerformance", "--topic", "q", "--num-records", str(args.records),
             "--record-size", "100", "--throughput", "-1",
             "--producer-props", f"bootstrap.servers={b}", "acks=1", "linger.ms=5")
        out = {}
        for t in args.threads:
            group = f"share-{t}"
            tool("ConfigCommand", "--bootstrap-server", b, "--entity-type", "groups",
                 "--entity-name", group, "--alter", "--add-config",
                 "share.auto.offset.reset=earliest")
            got = tool("ShareConsumerPerformance", "--bootstrap-server", b, "--topic", "q",
                       "--group", group, "--num-records", str(args.records),
                       "--threads", str(t), "--timeout", str(args.timeout_ms))
            if args.raw:
                print(got, flush=True)
            # From the consumers' start: joining the group and the first fetch included.
            out[f"share x{t}"] = column(got, "nMsg.sec")
        got = tool("ConsumerPerformance", "--bootstrap-server", b, "--topic", "q",
                   "--group", "classic", "--messages", str(args.records),
                   "--timeout", str(args.timeout_ms))
        if args.raw:
            print(got, flush=True)
        # Fetching only: the classic group's join (and Sluice's default 3 s initial
        # rebalance delay, which Kafka's test node sets to 0) left out.
        out["consumer group x1"] = column(got, "fetch.nMsg.sec")
        return out
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sluice")
    ap.add_argument("--kafka", action="store_true")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--threads", default="1,4,16")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--timeout-ms", type=int, default=60000,
                    help="the perf tools' --timeout: the longest wait for a record")
    ap.add_argument("--raw", action="store_true", help="print the tools' output too")
    args = ap.parse_args()
    args.threads = [int(t) for t in args.threads.split(",")]
    if not os.path.isdir(os.path.join(JAVA_DIR, "target-4.4.0")):
        subprocess.run(["mvn", "-q", "-B", "-Pkafka4", "package"], cwd=JAVA_DIR, check=True)
    sluice = os.path.abspath(args.sluice)
    brokers = [("sluice", lambda w: start_sluice(sluice, w))]
    if args.kafka:
        brokers.append(("kafka-4.4", start_kafka))
    for r in range(args.rounds):
        for name, start in brokers:
            nums = run(name, start, args)
            row = "  ".join(f"{k}: {v:,.0f} rec/s" for k, v in nums.items())
            print(f"round {r + 1} {name:10} {row}", flush=True)


if __name__ == "__main__":
    main()
