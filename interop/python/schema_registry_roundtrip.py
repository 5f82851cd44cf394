"""Sluice's built-in schema registry through confluent-kafka-python's own client and
serializers (as a Confluent Schema Registry user would use them), then its `_schemas`
records through a plain consumer, then bad input over raw HTTP.

Usage: schema_registry_roundtrip.py BOOTSTRAP REGISTRY_URL
"""
import json
import sys
import urllib.error
import urllib.request
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from confluent_kafka.serialization import MessageField, SerializationContext

bootstrap, url = sys.argv[1], sys.argv[2]
run = uuid.uuid4().hex[:8]
registry = SchemaRegistryClient({"url": url})

USER_V1 = json.dumps({
    "type": "record", "name": "User", "namespace": "sluice.test",
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}],
})
USER_V2 = json.dumps({
    "type": "record", "name": "User", "namespace": "sluice.test",
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"},
               {"name": "email", "type": ["null", "string"], "default": None}],
})
USER_BAD = json.dumps({
    "type": "record", "name": "User", "namespace": "sluice.test",
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"},
               {"name": "country", "type": "string"}],
})
ORDER_JSON = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
    "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
    "required": ["id", "item"], "additionalProperties": False,
})


def roundtrip(topic, serializer, deserializer, values, expect=None):
    producer = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        ctx = SerializationContext(topic, MessageField.VALUE)
        producer.produce(topic, value=serializer(v, ctx))
    assert producer.flush(30) == 0, "unflushed records"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "sr-" + topic,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got = []
    while len(got) < len(values):
        m = consumer.poll(30)
        assert m is not None, f"timed out with {len(got)} of {len(values)} records"
        assert m.error() is None, m.error()
        raw = m.value()
        assert raw[0] == 0, "Confluent's wire format starts with magic byte 0"
        got.append(deserializer(raw, SerializationContext(topic, MessageField.VALUE)))
    consumer.close()
    expect = values if expect is None else expect
    assert got == expect, (got, expect)
    return got


# Avro: the serializer registers the schema under "<topic>-value" and prefixes the id.
avro_topic = f"sr-avro-{run}"
users = [{"name": f"user{i}", "age": 20 + i} for i in range(10)]
roundtrip(avro_topic, AvroSerializer(registry, USER_V1), AvroDeserializer(registry), users)
subject = f"{avro_topic}-value"
latest = registry.get_latest_version(subject)
assert latest.version == 1 and latest.schema.schema_type == "AVRO", latest
v1_id = latest.schema_id

# Registering the same schema again is idempotent; a compatible change gets a new version.
assert registry.register_schema(subject, Schema(USER_V1, "AVRO")) == v1_id
v2_id = registry.register_schema(subject, Schema(USER_V2, "AVRO"))
assert v2_id != v1_id
assert registry.get_versions(subject) == [1, 2]
assert registry.test_compatibility(subject, Schema(USER_V2, "AVRO"))
assert not registry.test_compatibility(subject, Schema(USER_BAD, "AVRO"))

# An incompatible change is refused with HTTP 409, as Confluent's registry answers.
try:
    registry.register_schema(subject, Schema(USER_BAD, "AVRO"))
    raise AssertionError("an incompatible schema was registered")
except SchemaRegistryError as e:
    assert e.http_status_code == 409, e

# Compatibility levels: per subject, then NONE lets the change through.
registry.set_compatibility(subject, "NONE")
assert registry.get_compatibility(subject) == "NONE"
assert registry.get_compatibility() == "BACKWARD"
v3_id = registry.register_schema(subject, Schema(USER_BAD, "AVRO"))
assert v3_id not in (v1_id, v2_id)

# Records written with v1 still read with v2's reader schema.
old = roundtrip(f"sr-avro2-{run}", AvroSerializer(registry, USER_V1),
                AvroDeserializer(registry, USER_V2), users[:3],
                expect=[dict(u, email=None) for u in users[:3]])

# JSON Schema.
json_topic = f"sr-json-{run}"
orders = [{"id": i, "item": f"thing{i}"} for i in range(5)]
roundtrip(json_topic, JSONSerializer(ORDER_JSON, registry),
          JSONDeserializer(ORDER_JSON, schema_registry_client=registry), orders)
json_latest = registry.get_latest_version(f"{json_topic}-value")
assert json_latest.schema.schema_type == "JSON", json_latest

# Protobuf: the serializer sends the file's descriptor (base64), the deserializer asks for
# it back with format=serialized. The message class is built at run time (no protoc here).
F = descriptor_pb2.FieldDescriptorProto
fdp = descriptor_pb2.FileDescriptorProto(name=f"sluice_order_{run}.proto", package="sluicetest",
                                         syntax="proto3")
msg = fdp.message_type.add(name="Order")
msg.field.add(name="id", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
msg.field.add(name="item", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
msg.field.add(name="tags", number=3, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
pool = descriptor_pool.DescriptorPool()
pool.Add(fdp)
Order = message_factory.GetMessageClass(pool.FindMessageTypeByName("sluicetest.Order"))
proto_topic = f"sr-proto-{run}"
proto_orders = [Order(id=i, item=f"thing{i}", tags=["a", str(i)]) for i in range(5)]
roundtrip(proto_topic, ProtobufSerializer(Order, registry),
          ProtobufDeserializer(Order, {}, schema_registry_client=registry), proto_orders)
proto_latest = registry.get_latest_version(f"{proto_topic}-value")
assert proto_latest.schema.schema_type == "PROTOBUF", proto_latest
# A field changing from int64 to double is refused; a new field is not.
changed = descriptor_pb2.FileDescriptorProto()
changed.CopyFrom(fdp)
changed.message_type[0].field[0].type = F.TYPE_DOUBLE
import base64
as_text = lambda fd: base64.b64encode(fd.SerializeToString()).decode()
assert not registry.test_compatibility(f"{proto_topic}-value", Schema(as_text(changed), "PROTOBUF"))
grown = descriptor_pb2.FileDescriptorProto()
grown.CopyFrom(fdp)
grown.message_type[0].field.add(name="note", number=4, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
assert registry.register_schema(f"{proto_topic}-value", Schema(as_text(grown), "PROTOBUF")) > 0
assert registry.get_versions(f"{proto_topic}-value") == [1, 2]
# .proto text is taken too.
text_id = registry.register_schema(f"proto-text-{run}", Schema(
    'syntax = "proto3"; package t; message M { string a = 1; }', "PROTOBUF"))
assert text_id > 0

# The same schema under another subject gets the same id.
assert registry.register_schema(f"other-{run}", Schema(USER_V1, "AVRO")) == v1_id
assert registry.lookup_schema(f"other-{run}", Schema(USER_V1, "AVRO")).version == 1
assert f"other-{run}" in registry.get_subjects()

# Soft delete, then permanent delete.
assert registry.delete_subject(f"other-{run}") == [1]
assert f"other-{run}" not in registry.get_subjects()
try:
    registry.delete_subject(f"other-{run}")
    raise AssertionError("a soft-deleted subject was deleted again")
except SchemaRegistryError as e:
    assert e.error_code == 40404, e
assert registry.delete_subject(f"other-{run}", permanent=True) == [1]
assert registry.get_schema(v1_id).schema_str, "the id is still used by the avro subject"

# The _schemas topic holds Confluent's records: read it with a plain consumer.
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"schemas-{run}",
                     "enable.auto.commit": False})
consumer.assign([TopicPartition("_schemas", 0, 0)])
keys = {}
seen = 0
while True:
    m = consumer.poll(5)
    if m is None:
        break
    assert m.error() is None, m.error()
    key = json.loads(m.key())
    keys.setdefault(key["keytype"], []).append((m.key().decode(), m.value()))
    seen += 1
consumer.close()
assert seen > 0
schema_key, schema_value = next(
    (k, v) for k, v in keys["SCHEMA"] if json.loads(k)["subject"] == subject)
assert list(json.loads(schema_key).keys()) == ["keytype", "subject", "version", "magic"], schema_key
value = json.loads(schema_value)
assert value["subject"] == subject and value["id"] == v1_id and value["schemaType"] == "AVRO", value
assert json.loads(value["schema"])["name"] == "User"
config_key, config_value = next(
    (k, v) for k, v in keys["CONFIG"] if json.loads(k)["subject"] == subject)
assert json.loads(config_key) == {"keytype": "CONFIG", "subject": subject, "magic": 0}
assert json.loads(config_value)["compatibilityLevel"] == "NONE"
assert any(json.loads(k)["subject"] == f"other-{run}" for k, _ in keys["DELETE_SUBJECT"])
assert any(v is None for k, v in keys["SCHEMA"] if json.loads(k)["subject"] == f"other-{run}"), \
    "a permanent delete writes a tombstone"


# Bad input over raw HTTP: Confluent's error codes, and nothing stored.
def call(method, path, body, content_type="application/vnd.schemaregistry.v1+json"):
    data = body if isinstance(body, bytes) else body.encode()
    req = urllib.request.Request(url + path, data=data, method=method,
                                 headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


before = registry.get_subjects()
bad = f"bad-{run}"
cases = [
    ("not json", b"{nope", 400, None),
    ("not an object", b"[1]", 422, None),
    ("malformed avro", json.dumps({"schema": "{\"type\":\"record\"}"}), 422, 42201),
    ("unknown avro type", json.dumps({"schema": "\"nosuchtype\""}), 422, 42201),
    ("unknown schema type", json.dumps({"schema": "{}", "schemaType": "XML"}), 422, 42201),
    ("empty schema", json.dumps({"schema": ""}), 422, 42201),
    ("bad json schema", json.dumps({"schema": "[1]", "schemaType": "JSON"}), 422, 42201),
    ("bad proto", json.dumps({"schema": "message {", "schemaType": "PROTOBUF"}), 422, 42201),
    ("missing reference", json.dumps({"schema": "\"int\"", "references": [
        {"name": "x", "subject": "nope", "version": 1}]}), 422, 42201),
    ("oversized", json.dumps({"schema": "\"" + "x" * (4 << 20) + "\""}), 422, 42209),
]
for name, body, status, code in cases:
    got_status, got = call("POST", f"/subjects/{bad}/versions", body)
    assert got_status == status, (name, got_status, got)
    assert "message" in got and "error_code" in got, (name, got)
    if code is not None:
        assert got["error_code"] == code, (name, got)
status, got = call("GET", f"/subjects/{bad}/versions/0", b"")
assert (status, got["error_code"]) == (422, 42202), got
status, got = call("GET", "/schemas/ids/999999", b"")
assert (status, got["error_code"]) == (404, 40403), got
status, got = call("PUT", "/config", json.dumps({"compatibility": "SIDEWAYS"}))
assert (status, got["error_code"]) == (422, 42203), got
status, got = call("GET", f"/subjects/{bad}/versions", b"")
assert (status, got["error_code"]) == (404, 40401), got
assert registry.get_subjects() == before, "bad input stored something"
assert set(call("GET", "/schemas/types", b"")[1]) == {"AVRO", "JSON", "PROTOBUF"}

print("schema registry OK")
