"""Server-side schema validation (confluent.value.schema.validation=true) seen from
confluent-kafka: records serialized against the registry go in, on every partition
(whichever node leads it); a value not in the registry's wire format, or with an id not
registered under <topic>-value, is refused with INVALID_RECORD.

Usage: schema_validation.py BOOTSTRAP REGISTRY_URL TOPIC PARTITIONS
"""
import json
import struct
import sys

from confluent_kafka import KafkaError, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

bootstrap, url, topic, partitions = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
registry = SchemaRegistryClient({"url": url})
schema = json.dumps({"type": "record", "name": "Reading",
                     "fields": [{"name": "sensor", "type": "string"}, {"name": "value", "type": "double"}]})
serialize = AvroSerializer(registry, schema)
# An id that exists, but under another subject.
other_id = registry.register_schema("unrelated-value", Schema('"string"', "AVRO"))


def produce(values):
    results = []
    p = Producer({"bootstrap.servers": bootstrap, "message.send.max.retries": 0,
                  "linger.ms": 0})
    for part, v in values:
        p.produce(topic, value=v, partition=part,
                  on_delivery=lambda err, msg: results.append(err))
        p.flush(30)
    assert len(results) == len(values), results
    return results


good = [(part, serialize({"sensor": f"s{part}", "value": part * 1.5},
                         SerializationContext(topic, MessageField.VALUE)))
        for part in range(partitions)]
errors = produce(good)
assert all(e is None for e in errors), errors

bad = []
for part in range(partitions):
    bad.append((part, b"plain text, no schema id"))
    bad.append((part, b"\x00" + struct.pack(">i", 999999) + b"payload"))
    bad.append((part, b"\x00" + struct.pack(">i", other_id) + b"payload"))
errors = produce(bad)
for e in errors:
    assert e is not None and e.code() == KafkaError.INVALID_RECORD, e
print("schema validation OK")
