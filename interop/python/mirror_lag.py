"""Lag of a mirror at a steady produce rate: produce RATE records/s of 1 KiB (unique values) to
TOPIC on SOURCE for SECONDS, read the topic on SOURCE and on DEST from their ends meanwhile,
and report for each record how long after it could be read on the source it could be read on
the destination (the mirror's own lag), and after it was produced (end to end).

usage: mirror_lag.py SOURCE DEST TOPIC RATE SECONDS
prints: records mirror_p50_ms mirror_p99_ms mirror_max_ms e2e_p50_ms e2e_p99_ms
"""
import sys
import threading
import time

from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition

source, dest, topic, rate, seconds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
total = rate * seconds
pad = b"x" * 1000
seen = {"src": {}, "dst": {}}
ready = threading.Barrier(3)


def read(name, bootstrap):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "mirror-lag-" + name,
                  "enable.auto.commit": False, "fetch.wait.max.ms": 5})
    parts = sorted(c.list_topics(topic, timeout=10).topics[topic].partitions)
    c.assign([TopicPartition(topic, p, OFFSET_END) for p in parts])
    # Positions resolved before the first record is produced.
    c.consume(1, 1.0)
    ready.wait()
    got = seen[name]
    deadline = time.time() + seconds + 60
    while len(got) < total and time.time() < deadline:
        for m in c.consume(10000, 0.1):
            if not m.error():
                got[m.value()[:12]] = time.time()
    c.close()


threads = [threading.Thread(target=read, args=(n, b)) for n, b in (("src", source), ("dst", dest))]
for t in threads:
    t.start()
p = Producer({"bootstrap.servers": source, "linger.ms": 1})
ready.wait()
produced = {}
start = time.time()
for i in range(total):
    due = start + i / rate
    while time.time() < due:
        p.poll(0)
        time.sleep(0.0005)
    key = b"%012d" % i
    produced[key] = time.time()
    p.produce(topic, value=key + pad)
    p.poll(0)
p.flush(30)
for t in threads:
    t.join()
mirror, e2e = [], []
for k, t_dst in seen["dst"].items():
    if k in seen["src"]:
        mirror.append(max(0.0, t_dst - seen["src"][k]) * 1000)
    if k in produced:
        e2e.append((t_dst - produced[k]) * 1000)
mirror.sort()
e2e.sort()
if not mirror:
    print("0 - - - - -")
    sys.exit(1)
q = lambda v, x: v[min(len(v) - 1, int(x * len(v)))]
print(f"{len(seen['dst'])} {q(mirror, 0.5):.0f} {q(mirror, 0.99):.0f} {mirror[-1]:.0f} {q(e2e, 0.5):.0f} {q(e2e, 0.99):.0f}")
sys.exit(0 if len(seen["dst"]) >= total else 1)
