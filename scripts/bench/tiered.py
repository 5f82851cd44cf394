#!/usr/bin/env python3
"""Tiered storage numbers (a benchmark, not a test: it prints numbers).

    scripts/bench/tiered.py SLUICE_BINARY [--mb 1024] [--store file|s3] [--rounds 2]

One node on loopback, data under $BENCH_DIR (default /tmp/sluice-tier-bench). Two topics of
the same records (1 KiB values, 64 MiB segments): `plain`, and `tiered` with
remote.storage.enable=true and local.retention.bytes of one segment. It reports
- upload throughput: what the leader's copies logged (bytes / time spent copying);
- local disk of each topic once everything closed is copied;
- first-byte latency of a cold remote read (the node restarted, so its chunk cache is empty)
  against a local read: librdkafka (confluent-kafka) assigned at offset 0 until its first
  record;
- read throughput from offset 0 of the whole topic with librdkafka: remote cold, remote warm
  (the chunks cached), and local; each read checks that every offset from 0 comes, in order.

With --store s3 the store is moto's S3 server (pip install 'moto[server]'), started here.
A soak of several GB is the same command with --mb 4096 (the file store: moto keeps objects
in memory).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import time

from confluent_kafka import Consumer, TopicPartition

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import free_port, wait_port  # noqa: E402

VALUE = 1024
SEGMENT = 64 * 1024 * 1024


class Node:
    def __init__(self, binary, data, overrides):
        self.binary, self.data, self.overrides = binary, data, overrides
        self.port = free_port()
        self.log_path = os.path.join(data, "server.log")
        self.proc = None

    def start(self):
        args = [self.binary, "server",
                "--override", f"log.dirs={self.data}/data",
                "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "--override", "admin.http.listener="]
        for o in self.overrides:
            args += ["--override", o]
        self.log = open(self.log_path, "a")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        wait_port(self.port)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(60)

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def tool(self, *args):
        # `sluice perf produce --bootstrap-server ...`: the flag follows the subcommand.
        head = 2 if args[0] == "perf" else 1
        out = subprocess.run([self.binary, *args[:head], "--bootstrap-server", self.bootstrap,
                              *args[head:]], capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"sluice {' '.join(args)}: {out.stderr}")
        return out.stdout


def offset(node, topic, time_spec):
    # `topic:0:` (no offset) where there is none, as kafka-get-offsets prints it.
    return int(node.tool("offsets", "--topic", topic, "--time", time_spec).strip().rsplit(":", 1)[1] or -1)


def dir_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    return total


def log_bytes(path):
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path) if f.endswith(".log"))


def first_record_ms(bootstrap, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False})
    started = time.time()
    c.assign([TopicPartition(topic, 0, 0)])
    while True:
        m = c.poll(5)
        if m is not None and not m.error():
            ms = (time.time() - started) * 1000
            c.close()
            return ms


def read_all_mbps(bootstrap, topic, count):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 8388608})
    c.assign([TopicPartition(topic, 0, 0)])
    n, size, started = 0, 0, time.time()
    while n < count:
        for m in c.consume(10000, 5):
            if m.error():
                continue
            # Every record from offset 0, in order, none missing: a soak checks as it measures.
            if m.offset() != n:
                sys.exit(f"{topic}: offset {m.offset()} read where {n} was expected")
            n += 1
            size += len(m.value() or b"")
    secs = time.time() - started
    c.close()
    return size / secs / 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--store", choices=["file", "s3"], default="file")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    base = os.environ.get("BENCH_DIR", "/tmp/sluice-tier-bench")
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    overrides = ["remote.log.storage.system.enable=true",
                 "remote.log.manager.task.interval.ms=1000",
                 "log.retention.check.interval.ms=1000"]
    moto = None
    if a.store == "s3":
        mport = free_port()
        moto = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(mport)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(mport)
        subprocess.run(["curl", "-s", "-X", "PUT", f"http://127.0.0.1:{mport}/bench"], check=True)
        overrides += ["remote.log.storage.uri=s3://bench/sluice",
                      f"remote.log.storage.s3.endpoint=http://127.0.0.1:{mport}",
                      "remote.log.storage.s3.region=us-east-1",
                      "remote.log.storage.s3.access.key.id=bench",
                      "remote.log.storage.s3.secret.access.key=bench",
                      "remote.log.storage.s3.path.style.access=true"]
    else:
        overrides.append(f"remote.log.storage.uri=file://{base}/remote")
    node = Node(a.binary, base, overrides)
    node.start()
    try:
        records = a.mb * 1024 * 1024 // VALUE
        for topic, extra in [("plain", []), ("tiered", ["--config", "remote.storage.enable=true",
                                                       "--config", f"local.retention.bytes={SEGMENT}"])]:
            node.tool("topics", "--create", "--topic", topic, "--config", f"segment.bytes={SEGMENT}", *extra)
            node.tool("perf", "produce", "--topic", topic, "--records", str(records),
                      "--record-size", str(VALUE))
        end = offset(node, "tiered", "-1")
        started = time.time()
        while True:
            local, tiered = offset(node, "tiered", "earliest-local"), offset(node, "tiered", "latest-tiered")
            # Everything but the active segment copied, and local disk trimmed.
            if tiered >= 0 and local > 0 and end - (tiered + 1) < SEGMENT // VALUE:
                break
            if time.time() - started > 1800:
                sys.exit(f"not tiered after 30 minutes: local start {local}, tiered {tiered}")
            time.sleep(1)
        copies = re.findall(r"copied a segment to the remote tier .* bytes=(\d+) ms=(\d+)",
                            open(node.log_path).read())
        up_bytes = sum(int(b) for b, _ in copies)
        up_ms = sum(int(m) for _, m in copies)
        data = os.path.join(base, "data")
        print(f"records: {records} x {VALUE} B per topic ({a.mb} MiB), store: {a.store}")
        print(f"upload: {len(copies)} segments, {up_bytes / 1e6:.1f} MB in {up_ms / 1000:.1f} s of copying: "
              f"{up_bytes / 1e3 / max(up_ms, 1):.1f} MB/s")
        print(f"local disk: plain {dir_bytes(os.path.join(data, 'plain-0')) / 1e6:.1f} MB "
              f"(.log {log_bytes(os.path.join(data, 'plain-0')) / 1e6:.1f}), "
              f"tiered {dir_bytes(os.path.join(data, 'tiered-0')) / 1e6:.1f} MB "
              f"(.log {log_bytes(os.path.join(data, 'tiered-0')) / 1e6:.1f})")
        for r in range(a.rounds):
            node.stop()
            node.start()  # an empty chunk cache
            cold_first = first_record_ms(node.bootstrap, "tiered")
            local_first = first_record_ms(node.bootstrap, "plain")
            node.stop()
            node.start()
            cold = read_all_mbps(node.bootstrap, "tiered", records)
            warm = read_all_mbps(node.bootstrap, "tiered", records)
            plain = read_all_mbps(node.bootstrap, "plain", records)
            print(f"round {r + 1}: first record: remote cold {cold_first:.0f} ms, local {local_first:.0f} ms; "
                  f"read from 0: remote cold {cold:.0f} MB/s, remote warm {warm:.0f} MB/s, local {plain:.0f} MB/s")
    finally:
        node.stop()
        if moto:
            moto.terminate()


if __name__ == "__main__":
    main()
