"""kafka-python (a pure-Python client, idempotent producer by default) against Sluice."""
import sys

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

bootstrap = sys.argv[1]
N = 2000
admin = KafkaAdminClient(bootstrap_servers=bootstrap)
admin.create_topics([NewTopic("kp", num_partitions=2, replication_factor=1)])
assert "kp" in admin.list_topics()

for codec in [None, "gzip", "snappy", "lz4", "zstd"]:
    try:
        p = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, acks="all")
    except Exception as e:  # a codec library missing on this machine is not a broker problem
        sys.exit("cannot create producer with %s: %s" % (codec, e))
    futures = [p.send("kp", key=b"k%d" % i, value=b"v%d" % i) for i in range(N)]
    p.flush()
    for f in futures:
        md = f.get(timeout=30)
        assert md.offset >= 0
    p.close()

c = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=10000)
c.assign([TopicPartition("kp", 0), TopicPartition("kp", 1)])
count = sum(1 for _ in c)
assert count == 5 * N, count
end = c.end_offsets([TopicPartition("kp", 0), TopicPartition("kp", 1)])
assert sum(end.values()) == 5 * N, end
# A consumer group: subscribe, read everything, commit; a new member resumes after it.
g = KafkaConsumer("kp", bootstrap_servers=bootstrap, group_id="kpgroup", auto_offset_reset="earliest",
                  enable_auto_commit=False, consumer_timeout_ms=10000)
count = sum(1 for _ in g)
assert count == 5 * N, count
g.commit()
g.close()
listed = {g["group_id"]: g for g in admin.list_groups()}
assert listed["kpgroup"]["group_state"] == "Empty", listed
offsets = admin.list_group_offsets("kpgroup")["kpgroup"]
assert sum(o.offset for o in offsets.values()) == 5 * N, offsets
g = KafkaConsumer("kp", bootstrap_servers=bootstrap, group_id="kpgroup", auto_offset_reset="earliest",
                  consumer_timeout_ms=3000)
assert sum(1 for _ in g) == 0
g.close()
# kafka-python 3 pages DescribeTopicPartitions (KIP-966) with the cursor; the answers are the
# ones Kafka 4.4 gives for the same calls.
if hasattr(admin, "describe_topic_partitions"):
    pages, cursor = [], None
    while True:
        r = admin.describe_topic_partitions(["nope", "kp"], 1, cursor)
        pages.append([(t["name"], t["error_code"], [p["partition_index"] for p in t["partitions"]])
                      for t in r["topics"]])
        cursor = r["next_cursor"]
        if cursor is None:
            break
    assert pages == [[("kp", 0, [0])], [("kp", 0, [1])], [("nope", 3, [])]], pages
    bad = admin.describe_topic_partitions(["kp"], 5, {"topic_name": "other", "partition_index": 0})
    assert [t["error_code"] for t in bad["topics"]] == [42], bad
admin.delete_topics(["kp"])
# kafka-python 3 describes the metadata quorum (DescribeQuorum); older ones lack the call.
if hasattr(admin, "describe_metadata_quorum"):
    quorum = admin.describe_metadata_quorum()
    p = quorum["topics"][0]["partitions"][0]
    assert p["error"] is None and p["leader_id"] == 0 and p["high_watermark"] > 0, quorum
    assert [v["replica_id"] for v in p["current_voters"]] == [0], quorum
print("kafka-python OK")
