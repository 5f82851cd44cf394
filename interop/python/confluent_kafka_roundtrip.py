"""confluent-kafka (librdkafka) against Sluice: admin, keyed produce with every codec,
consume back, offsets by time, a consumer group of two with group admin calls. Exits non-zero
on the first failed expectation."""
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

bootstrap = sys.argv[1]
N = 5000
admin = AdminClient({"bootstrap.servers": bootstrap})


def wait(futures):
    for f in futures.values():
        f.result(timeout=30)


wait(admin.create_topics([NewTopic("ck", num_partitions=3, replication_factor=1, config={"retention.ms": "86400000"})]))
try:
    wait(admin.create_topics([NewTopic("ck", num_partitions=1, replication_factor=1)]))
    sys.exit("duplicate topic creation must fail")
except KafkaException as e:
    assert e.args[0].name() == "TOPIC_ALREADY_EXISTS", e
configs = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "ck")])
entries = list(configs.values())[0].result(timeout=30)
assert entries["retention.ms"].value == "86400000", entries["retention.ms"]
assert entries["segment.bytes"].value == "1073741824"
md = admin.list_topics(timeout=10)
assert len(md.topics["ck"].partitions) == 3
assert md.cluster_id, "cluster id"

start_ts = int(time.time() * 1000) - 60_000
for codec in ["none", "gzip", "snappy", "lz4", "zstd"]:
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5})
    errors = []
    for i in range(N):
        p.produce("ck", key=b"key-%d" % i, value=b"%s-%d" % (codec.encode(), i), timestamp=start_ts + i,
                  headers=[("h", b"v"), ("n", None)],
                  on_delivery=lambda err, msg: err and errors.append(err))
        p.poll(0)
    assert p.flush(30) == 0, "unflushed"
    assert not errors, errors[:3]

c = Consumer({"bootstrap.servers": bootstrap, "group.id": "py", "enable.auto.commit": False})
c.assign([TopicPartition("ck", p, 0) for p in range(3)])
seen = set()
while len(seen) < 5 * N:
    m = c.poll(10)
    assert m is not None, "timed out after %d records" % len(seen)
    assert m.error() is None, m.error()
    assert (m.partition(), m.offset()) not in seen
    seen.add((m.partition(), m.offset()))
    assert m.headers() == [("h", b"v"), ("n", None)], m.headers()
# The first record of the 'none' round at or after start_ts + 100 is key-100.
tps = c.offsets_for_times([TopicPartition("ck", p, start_ts + 100) for p in range(3)], timeout=10)
assert all(tp.offset >= 0 for tp in tps), tps
c.close()

# A consumer group of two: each record once, both members get partitions, commits on close.
members = [Consumer({"bootstrap.servers": bootstrap, "group.id": "pygroup", "auto.offset.reset": "earliest",
                     "session.timeout.ms": 10000, "heartbeat.interval.ms": 500}) for _ in range(2)]
for m in members:
    m.subscribe(["ck"])
seen = set()
deadline = time.time() + 90
while len(seen) < 5 * N or not all(m.assignment() for m in members):
    assert time.time() < deadline, "group consumed %d, assignments %s" % (len(seen), [m.assignment() for m in members])
    for m in members:
        for msg in m.consume(num_messages=1000, timeout=0.05):
            assert msg.error() is None, msg.error()
            assert (msg.partition(), msg.offset()) not in seen, "read twice"
            seen.add((msg.partition(), msg.offset()))
assert len(seen) == 5 * N, len(seen)
listed = admin.list_consumer_groups().result(timeout=30)
assert "pygroup" in [g.group_id for g in listed.valid], listed.valid
desc = admin.describe_consumer_groups(["pygroup"])["pygroup"].result(timeout=30)
assert desc.state == ConsumerGroupState.STABLE, desc.state
assert len(desc.members) == 2, desc.members
assert sum(len(mb.assignment.topic_partitions) for mb in desc.members) == 3
for m in members:
    m.close()
committed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("pygroup")])["pygroup"].result(timeout=30)
assert sum(tp.offset for tp in committed.topic_partitions) == 5 * N, committed.topic_partitions
wait(admin.delete_consumer_groups(["pygroup"]))

wait(admin.create_partitions([NewPartitions("ck", 5)]))
try:
    wait(admin.create_partitions([NewPartitions("ck", 2)]))
    sys.exit("shrinking partitions must fail")
except KafkaException as e:
    assert e.args[0].name() == "INVALID_PARTITIONS", e
wait(admin.delete_topics(["ck"]))
print("confluent-kafka OK")
