#!/usr/bin/env python3
"""Diskless topic numbers next to a classic RF 3 topic (a benchmark, not a test).

    scripts/bench/diskless.py SLUICE_BINARY [--mb 200] [--lingers 50,250,1000] [--rounds 1]
                              [--compaction-ms MS]

Each run is a fresh three-node cluster (combined broker + controller nodes on loopback) whose
object store is moto's S3 server (pip install 'moto[server]'), started here, fresh each run.
Runs, interleaved per round: `classic` (a topic of 3 partitions, replication factor 3,
min.insync.replicas=2) and `diskless-<L>` (diskless.enable=true, diskless.append.linger.ms=L)
for each L. In each, `sluice perf produce` sends MB MiB of 1 KiB records (acks=all,
linger.ms=5, or --producer-props) through node 1, then `sluice perf consume` reads them all back. It reports
produce throughput and p50/p99 acknowledgement latency, consume throughput, and the
object-store requests the nodes counted (/metrics): PUTs per GiB written and GETs per GiB
read, the numbers that make up a cloud bill. The classic topic makes no store requests; its
cost is replication traffic (2 copies of every byte between brokers).

With --compaction-ms, diskless runs compact their WAL every MS ms
(diskless.wal.compaction.interval.ms); after the first read the run waits until every batch is
in a segment object, counts what compaction cost (PUTs and GETs per GiB), then reads the
topic again, from the segments, and counts its GETs per GiB.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import free_port, wait_port  # noqa: E402

VALUE = 1024


def start_moto(work):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=open(os.path.join(work, "moto.log"), "w"), stderr=subprocess.STDOUT)
    wait_port(port)
    req = urllib.request.Request(f"http://127.0.0.1:{port}/bench", method="PUT")
    urllib.request.urlopen(req).read()
    return proc, f"http://127.0.0.1:{port}"


def start_cluster(binary, work, extra):
    ports = [(free_port(), free_port(), free_port()) for _ in range(3)]
    voters = ",".join(f"{i + 1}@127.0.0.1:{c}" for i, (_, c, _) in enumerate(ports))
    procs = []
    for i, (p, c, a) in enumerate(ports):
        args = [binary, "server",
                "--override", f"log.dirs={work}/n{i + 1}",
                "--override", "process.roles=broker,controller",
                "--override", f"node.id={i + 1}",
                "--override", f"listeners=PLAINTEXT://127.0.0.1:{p},CONTROLLER://127.0.0.1:{c}",
                "--override", "controller.listener.names=CONTROLLER",
                "--override", f"controller.quorum.voters={voters}",
                "--override", f"admin.http.listener=127.0.0.1:{a}"]
        for o in extra:
            args += ["--override", o]
        log = open(os.path.join(work, f"n{i + 1}.log"), "w")
        procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT))
    for p, _, _ in ports:
        wait_port(p)
    return procs, [f"127.0.0.1:{p}" for p, _, _ in ports], [f"127.0.0.1:{a}" for _, _, a in ports]


def sluice(binary, *args, timeout=1800):
    out = subprocess.run([binary, *args], capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        sys.exit(f"sluice {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}")
    return out.stdout


def metric_sum(admins, name):
    total = 0.0
    for a in admins:
        body = urllib.request.urlopen(f"http://{a}/metrics").read().decode()
        for line in body.splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                total += float(line.rsplit(" ", 1)[1])
    return total


def compacted(admin):
    """Whether every partition of `bench` is in segment objects (the admin API's view)."""
    with urllib.request.urlopen(f"http://{admin}/api/topics") as r:
        topics = json.load(r)
    parts = [p for t in topics if t["name"] == "bench" for p in t["partitions"]]
    return bool(parts) and all(p["diskless"]["wal_batches"] == 0 for p in parts)


def run(binary, name, linger, mb, props, throughput, compaction_ms=None):
    work = tempfile.mkdtemp(prefix=f"diskless-bench-{name}-")
    moto, endpoint = start_moto(work)
    extra = [
        "remote.log.storage.uri=s3://bench/cluster",
        f"remote.log.storage.s3.endpoint={endpoint}",
        "remote.log.storage.s3.region=us-east-1",
        "remote.log.storage.s3.access.key.id=test",
        "remote.log.storage.s3.secret.access.key=test",
        "remote.log.storage.s3.path.style.access=true",
    ]
    if linger:
        extra.append(f"diskless.append.linger.ms={linger}")
    if linger and compaction_ms:
        extra.append(f"diskless.wal.compaction.interval.ms={compaction_ms}")
    procs, boots, admins = start_cluster(binary, work, extra)
    try:
        b = boots[0]
        configs = ["--config", "diskless.enable=true"] if linger else [
            "--config", "min.insync.replicas=2"]
        for _ in range(100):
            out = subprocess.run([binary, "topics", "--bootstrap-server", b, "--create", "--topic", "bench",
                                  "--partitions", "3", "--replication-factor", "3", *configs],
                                 capture_output=True, text=True)
            if out.returncode == 0:
                break
            time.sleep(0.3)
        else:
            sys.exit(f"cannot create the topic: {out.stderr}")
        records = mb * 1024 * 1024 // VALUE
        produced = json.loads(sluice(binary, "perf", "produce", "--bootstrap-server", b, "--topic", "bench",
                                     "--records", str(records), "--record-size", str(VALUE), "--json",
                                     "--throughput", str(throughput),
                                     "--producer-props", *props).strip().splitlines()[-1])
        puts = metric_sum(admins, "sluice_diskless_put_requests_total")
        put_bytes = metric_sum(admins, "sluice_diskless_put_bytes_total")
        consumed = json.loads(sluice(binary, "perf", "consume", "--bootstrap-server", boots[1], "--topic", "bench",
                                     "--messages", str(records), "--json").strip().splitlines()[-1])
        gets = metric_sum(admins, "sluice_diskless_get_requests_total")
        gib = records * VALUE / 2**30
        lat = produced.get("latency_ms", {})
        extra_numbers = {}
        if linger and compaction_ms:
            deadline = time.time() + 120
            while not compacted(admins[0]):
                if time.time() > deadline:
                    sys.exit("compaction did not finish in 120 s")
                time.sleep(0.5)
            puts2 = metric_sum(admins, "sluice_diskless_put_requests_total")
            gets2 = metric_sum(admins, "sluice_diskless_get_requests_total")
            again = json.loads(sluice(binary, "perf", "consume", "--bootstrap-server", boots[2], "--topic",
                                      "bench", "--messages", str(records), "--json").strip().splitlines()[-1])
            gets3 = metric_sum(admins, "sluice_diskless_get_requests_total")
            extra_numbers = {
                "compaction_puts_per_gib": (puts2 - puts) / gib,
                "compaction_gets_per_gib": (gets2 - gets) / gib,
                "segment_consume_mb_s": again["mb_per_sec"],
                "segment_gets_per_gib": (gets3 - gets2) / gib,
            }
        return {
            **extra_numbers,
            "name": name,
            "produce_mb_s": produced["mb_per_sec"],
            "p50_ms": lat.get("p50"),
            "p99_ms": lat.get("p99"),
            "consume_mb_s": consumed["mb_per_sec"],
            "puts_per_gib": puts / gib,
            "put_mib": put_bytes / 2**20,
            "gets_per_gib": gets / gib,
        }
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(60)
        moto.terminate()
        moto.wait(30)
        if os.environ.get("BENCH_KEEP"):
            print(f"(kept {work})", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--lingers", default="50,250,1000")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--no-classic", action="store_true", help="diskless runs only")
    ap.add_argument("--compaction-ms", type=int, default=None,
                    help="diskless.wal.compaction.interval.ms of the diskless runs (see above)")
    ap.add_argument("--throughput", type=int, default=-1,
                    help="records/s the producer aims for (-1: as fast as it can); latency is "
                         "best compared at a fixed rate both kinds of topic keep up with")
    ap.add_argument("--producer-props", default="acks=all linger.ms=5",
                    help="the producer's configs, space separated (the same for every run)")
    a = ap.parse_args()
    runs = [] if a.no_classic else [("classic", None)]
    runs += [(f"diskless-{l}", int(l)) for l in a.lingers.split(",")]
    print(f"{'run':<16}{'produce MB/s':>13}{'p50 ms':>9}{'p99 ms':>9}{'consume MB/s':>14}"
          f"{'PUT/GiB':>9}{'GET/GiB':>9}")
    for _ in range(a.rounds):
        for name, linger in runs:
            r = run(a.binary, name, linger, a.mb, a.producer_props.split(), a.throughput, a.compaction_ms)
            print(f"{r['name']:<16}{r['produce_mb_s']:>13.1f}{r['p50_ms']:>9.1f}{r['p99_ms']:>9.1f}"
                  f"{r['consume_mb_s']:>14.1f}{r['puts_per_gib']:>9.0f}{r['gets_per_gib']:>9.0f}", flush=True)
            if "compaction_puts_per_gib" in r:
                print(f"{'':<16}compaction: {r['compaction_puts_per_gib']:.0f} PUT/GiB, "
                      f"{r['compaction_gets_per_gib']:.0f} GET/GiB; read from segments: "
                      f"{r['segment_consume_mb_s']:.1f} MB/s, {r['segment_gets_per_gib']:.0f} GET/GiB",
                      flush=True)


if __name__ == "__main__":
    main()
