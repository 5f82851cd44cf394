"""Exactly-once pipeline for the cluster test: consume `in_topic` in group `group`
(read_committed), copy each record to `out_topic` and commit the consumed offsets in the same
transaction (transactional.id `txn_id`). Runs until killed; any error ends the process with
status 1 (the test restarts it: the new instance fences the old one and resumes from the
committed offsets). Prints one line per committed transaction.

usage: eos_pipeline.py BOOTSTRAP IN_TOPIC OUT_TOPIC GROUP TXN_ID BATCH PAUSE_MS
"""
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

bootstrap, in_topic, out_topic, group, txn_id, batch, pause_ms = sys.argv[1:8]
batch = int(batch)
pause = int(pause_ms) / 1000.0

consumer = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": group,
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "isolation.level": "read_committed",
    "session.timeout.ms": 6000,
})
producer = Producer({
    "bootstrap.servers": bootstrap,
    "transactional.id": txn_id,
    "transaction.timeout.ms": 10000,
    "linger.ms": 5,
})
producer.init_transactions(30)
consumer.subscribe([in_topic])
print("started", flush=True)
while True:
    msgs = consumer.consume(batch, 1.0)
    msgs = [m for m in msgs if m.error() is None]
    if not msgs:
        continue
    producer.begin_transaction()
    for m in msgs:
        producer.produce(out_topic, key=m.key(), value=m.value())
    positions = {}
    for m in msgs:
        positions[(m.topic(), m.partition())] = m.offset() + 1
    offsets = [TopicPartition(t, p, o) for (t, p), o in positions.items()]
    producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
    producer.commit_transaction(30)
    print(f"committed {len(msgs)}", flush=True)
    time.sleep(pause)
