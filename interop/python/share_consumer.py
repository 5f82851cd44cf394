"""Share groups (KIP-932) with confluent-kafka's ShareConsumer (librdkafka 2.15+).

Two share consumers of one group read a one-partition topic in implicit mode: together they
get every record exactly once. Then a consumer in explicit mode releases one record (it comes
back with delivery count 2) and rejects another (it never comes back).
Prints "share-consumer OK" at the end; raises on any failure.
Usage: python3 share_consumer.py BOOTSTRAP
"""

import sys
import time
import uuid

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

BOOTSTRAP = sys.argv[1]


def set_up(admin, topic, group, count):
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset",
                "earliest",
                incremental_operation=AlterConfigOpType.SET,
            )
        ],
    )
    for f in admin.incremental_alter_configs([resource]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": BOOTSTRAP})
    for i in range(count):
        p.produce(topic, value=str(i).encode())
    assert p.flush(30) == 0, "produce did not finish"


def share_consumer(group, topic, explicit=False):
    c = ShareConsumer(
        {
            "bootstrap.servers": BOOTSTRAP,
            "group.id": group,
            "share.acknowledgement.mode": "explicit" if explicit else "implicit",
        }
    )
    c.subscribe([topic])
    return c


def poll_records(c, timeout):
    out = []
    for m in c.poll(timeout):
        if m.error() is None:
            out.append(m)
    return out


def two_consumers_read_each_record_once(admin):
    topic, group, count = "py-share-" + uuid.uuid4().hex[:8], "py-share-g", 400
    set_up(admin, topic, group, count)
    consumers = [share_consumer(group, topic) for _ in range(2)]
    seen = {}
    deadline = time.time() + 60
    while sum(seen.values()) < count and time.time() < deadline:
        for c in consumers:
            for m in poll_records(c, 0.5):
                seen[m.offset()] = seen.get(m.offset(), 0) + 1
    for c in consumers:
        c.close()
    twice = [o for o, n in seen.items() if n > 1]
    assert len(seen) == count and not twice, (len(seen), twice[:10])


def release_and_reject(admin):
    topic, group = "py-acks-" + uuid.uuid4().hex[:8], "py-acks-g"
    set_up(admin, topic, group, 3)

    c = share_consumer(group, topic, explicit=True)
    got = []
    deadline = time.time() + 30
    while len(got) < 3 and time.time() < deadline:
        batch = poll_records(c, 0.5)
        for m in batch:
            got.append(m)
            kind = {0: AcknowledgeType.ACCEPT, 1: AcknowledgeType.RELEASE}.get(
                m.offset(), AcknowledgeType.REJECT
            )
            c.acknowledge(m, kind)
        if batch:
            c.commit_sync()
    assert sorted(m.offset() for m in got) == [0, 1, 2], [m.offset() for m in got]
    again = []
    deadline = time.time() + 15
    while not again and time.time() < deadline:
        again = poll_records(c, 0.5)
        for m in again:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        if again:
            c.commit_sync()
    assert [m.offset() for m in again] == [1], [m.offset() for m in again]
    assert again[0].delivery_count() == 2, again[0].delivery_count()
    later = []
    deadline = time.time() + 4
    while time.time() < deadline:
        later += poll_records(c, 0.5)
    assert not later, [m.offset() for m in later]
    c.close()


def main():
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    two_consumers_read_each_record_once(admin)
    release_and_reject(admin)
    print("share-consumer OK")


if __name__ == "__main__":
    main()
