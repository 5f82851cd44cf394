"""Tools for checking mirroring between two Kafka-protocol clusters (interop/kafka/check-mirroring.sh).

usage:
  mirror_tools.py produce BOOTSTRAP TOPIC N            N keyed records with a header and explicit
                                                       timestamps, idempotent, into a 3-partition topic
  mirror_tools.py transactions BOOTSTRAP TOPIC         6 transactions of 50 records, every third aborted
  mirror_tools.py commit BOOTSTRAP GROUP TOPIC OFFSET  commit OFFSET for every partition of TOPIC
  mirror_tools.py offsets BOOTSTRAP GROUP TOPIC        print the group's committed offsets, one per partition
  mirror_tools.py compare A TOPIC_A B TOPIC_B ISOLATION [offsets|values]
                                                       read both topics to their ends and compare record for
                                                       record (offsets: partition, offset, timestamp, key,
                                                       value, headers; values: the multiset of key/value)
  mirror_tools.py wait BOOTSTRAP TOPIC N [TIMEOUT_S]   wait until the topic's high watermarks sum to >= N
Exit status 0 when the check holds.
"""
import sys
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def create(bootstrap, topic, partitions=3):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1)])
    for f in futures.values():
        try:
            f.result(30)
        except Exception as e:  # already there is fine
            if "already exists" not in str(e).lower():
                raise


def produce(bootstrap, topic, n):
    create(bootstrap, topic)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    errors = []
    base = int(time.time() * 1000) - 3_600_000
    for i in range(n):
        while True:
            try:
                p.produce(topic, key=f"k{i % 101}", value=f"v{i}", headers=[("n", str(i).encode())],
                          timestamp=base + i, on_delivery=lambda e, m: e and errors.append(e))
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    left = p.flush(60)
    print(f"produced {n} records to {topic}: {left} undelivered, {len(errors)} errors")
    return left == 0 and not errors


def transactions(bootstrap, topic):
    create(bootstrap, topic)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "mirror-check-" + uuid.uuid4().hex[:6]})
    p.init_transactions(30)
    for t in range(6):
        p.begin_transaction()
        for i in range(50):
            p.produce(topic, value=f"t{t}-{i}")
        # Sent before the end: an abort would otherwise drop them unsent.
        p.flush(30)
        if t % 3 == 2:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    print(f"wrote 6 transactions of 50 to {topic} (2 aborted)")
    return True


def partitions_of(client, topic):
    md = client.list_topics(topic, timeout=10).topics[topic]
    return sorted(md.partitions)


def commit(bootstrap, group, topic, offset):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    tps = [TopicPartition(topic, p, int(offset)) for p in partitions_of(c, topic)]
    for attempt in range(30):
        try:
            c.commit(offsets=tps, asynchronous=False)
            break
        except Exception as e:  # e.g. the coordinator still loading __consumer_offsets
            if attempt == 29:
                raise
            time.sleep(1)
    c.close()
    print(f"group {group} committed {offset} on each partition of {topic}")
    return True


def committed(bootstrap, group, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    got = c.committed([TopicPartition(topic, p) for p in partitions_of(c, topic)], timeout=10)
    c.close()
    return [tp.offset for tp in got]


def read_all(bootstrap, topic, isolation):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "mirror-check-" + uuid.uuid4().hex[:8],
                  "enable.auto.commit": False, "isolation.level": isolation})
    parts = partitions_of(c, topic)
    ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    out = []
    idle_since = time.time()
    while time.time() - idle_since < 3:
        msgs = c.consume(1000, 0.5)
        for m in msgs:
            if m.error():
                raise SystemExit(f"{topic}@{bootstrap}: {m.error()}")
            out.append((m.partition(), m.offset(), m.timestamp()[1], m.key(), m.value(),
                        tuple(m.headers() or ())))
        if msgs:
            idle_since = time.time()
        if all(c.position([TopicPartition(topic, p)])[0].offset >= ends[p] for p in parts if ends[p] > 0):
            break
    c.close()
    out.sort()
    return out


def compare(a, ta, b, tb, isolation, how="offsets"):
    ra, rb = read_all(a, ta, isolation), read_all(b, tb, isolation)
    if how == "values":
        ra = sorted((r[3], r[4]) for r in ra)
        rb = sorted((r[3], r[4]) for r in rb)
    same = ra == rb
    print(f"{ta}@{a} {len(ra)} records, {tb}@{b} {len(rb)} records ({isolation}, by {how}): "
          + ("identical" if same else "DIFFERENT"))
    if not same:
        for x, y in zip(ra, rb):
            if x != y:
                print(f"  first difference: {x} vs {y}")
                break
    return same and len(ra) > 0


def wait(bootstrap, topic, n, timeout=120.0):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "mirror-wait"})
    t0 = time.time()
    total = -1
    while time.time() - t0 < timeout:
        md = c.list_topics(topic, timeout=5).topics.get(topic)
        if md and not md.error and md.partitions:
            total = sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1] for p in md.partitions)
            if total >= n:
                break
        time.sleep(0.2)
    c.close()
    print(f"{topic}@{bootstrap}: {total} of {n} after {time.time() - t0:.1f} s")
    return total >= n


def main(argv):
    cmd, args = argv[1], argv[2:]
    if cmd == "produce":
        return produce(args[0], args[1], int(args[2]))
    if cmd == "transactions":
        return transactions(args[0], args[1])
    if cmd == "commit":
        return commit(*args[:4])
    if cmd == "offsets":
        print(" ".join(str(o) for o in committed(*args[:3])))
        return True
    if cmd == "compare":
        return compare(*args[:6])
    if cmd == "wait":
        return wait(args[0], args[1], int(args[2]), float(args[3]) if len(args) > 3 else 120.0)
    raise SystemExit(__doc__)


if __name__ == "__main__":
    sys.exit(0 if main(sys.argv) else 1)
