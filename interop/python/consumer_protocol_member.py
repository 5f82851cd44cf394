"""One member of a consumer group on the consumer group protocol (KIP-848), for tests that
kill it: it prints `assigned N` whenever its assignment changes and each record's value once
its offset is committed (synchronously), so a SIGKILL between records loses or repeats none.

Usage: consumer_protocol_member.py BOOTSTRAP GROUP TOPIC
"""
import sys

from confluent_kafka import Consumer

bootstrap, group, topic = sys.argv[1:4]
c = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": group,
    "group.protocol": "consumer",
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "fetch.wait.max.ms": 100,
})
owned = set()


def on_assign(_, parts):
    owned.update((p.topic, p.partition) for p in parts)
    print(f"assigned {len(owned)}", flush=True)


def on_revoke(_, parts):
    owned.difference_update((p.topic, p.partition) for p in parts)
    print(f"assigned {len(owned)}", flush=True)


c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
while True:
    m = c.poll(0.1)
    if m is None:
        continue
    if m.error():
        print(f"error {m.error()}", file=sys.stderr, flush=True)
        continue
    try:
        c.commit(message=m, asynchronous=False)
    except Exception as e:  # not committed (e.g. revoked meanwhile): its next owner reads it
        print(f"commit failed {e}", file=sys.stderr, flush=True)
        continue
    print(f"value {m.value().decode()}", flush=True)
