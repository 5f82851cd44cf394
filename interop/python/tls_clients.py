"""TLS and SASL clients against sluice's secured listeners, driven by
crates/sluice/tests/other_clients.rs.

usage: tls_clients.py CLIENT MODE BOOTSTRAP CA CERT [MECHANISM USER PASSWORD]
  CLIENT     confluent (librdkafka) | kafka-python
  MODE       ok   — produce 20 records and read them back
             fail — the connection must fail (no/foreign/expired certificate, plaintext to a
                    TLS port, TLS to a plaintext port, wrong SASL password or mechanism):
                    prints "FAILED CLEANLY: <reason>" within the timeout, exits 0; exits 1 if
                    it worked after all
  CERT       PEM file with the client's key and certificate, '-' for none, 'plaintext' to
             speak without TLS
  MECHANISM  with USER and PASSWORD: authenticate with SASL (PLAIN, SCRAM-SHA-256,
             SCRAM-SHA-512): SASL_SSL, or SASL_PLAINTEXT when CERT is 'plaintext'
"""
import sys
import time
import uuid

client, mode, bootstrap, ca, cert = sys.argv[1:6]
sasl = sys.argv[6:9] if len(sys.argv) >= 9 else None
tls = cert != "plaintext"
label = ("SASL " if sasl else "") + ("TLS" if tls else "PLAINTEXT")
topic = "tls-" + uuid.uuid4().hex[:8]
values = [f"secure-{i}".encode() for i in range(20)]


def confluent():
    from confluent_kafka import Consumer, KafkaException, Producer

    conf = {"bootstrap.servers": bootstrap,
            "security.protocol": ("SASL_" if sasl else "") + ("SSL" if tls else "PLAINTEXT")}
    if sasl:
        conf.update({"sasl.mechanism": sasl[0], "sasl.username": sasl[1],
                     "sasl.password": sasl[2]})
    if tls:
        conf.update({"ssl.ca.location": ca, "ssl.endpoint.identification.algorithm": "https"})
        if cert != "-":
            conf.update({"ssl.certificate.location": cert, "ssl.key.location": cert})
    if mode == "fail":
        errors = []
        p = Producer({**conf, "error_cb": lambda e: errors.append(str(e))})
        try:
            p.list_topics(timeout=5)
        except KafkaException as e:
            print(f"FAILED CLEANLY: {e} {errors[:2]}")
            return
        sys.exit("the connection worked")
    p = Producer({**conf, "acks": "all"})
    for v in values:
        p.produce(topic, v)
    assert p.flush(30) == 0, "records not delivered"
    c = Consumer({**conf, "group.id": topic, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got, deadline = [], time.time() + 30
    while len(got) < len(values) and time.time() < deadline:
        m = c.poll(1)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    assert got == values, got
    print(f"confluent-kafka {label} OK")


def kafka_python():
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import KafkaError

    conf = {"bootstrap_servers": bootstrap,
            "security_protocol": ("SASL_" if sasl else "") + ("SSL" if tls else "PLAINTEXT")}
    if sasl:
        conf.update({"sasl_mechanism": sasl[0], "sasl_plain_username": sasl[1],
                     "sasl_plain_password": sasl[2]})
    if tls:
        conf.update({"ssl_cafile": ca, "ssl_check_hostname": True})
        if cert != "-":
            conf.update({"ssl_certfile": cert, "ssl_keyfile": cert})
    if mode == "fail":
        try:
            KafkaProducer(**conf, request_timeout_ms=5000, max_block_ms=5000,
                          bootstrap_timeout_ms=5000)
        except (KafkaError, OSError) as e:
            print(f"FAILED CLEANLY: {type(e).__name__}: {e}")
            return
        sys.exit("the connection worked")
    p = KafkaProducer(**conf, acks="all")
    for v in values:
        p.send(topic, v)
    p.flush(30)
    c = KafkaConsumer(topic, **conf, group_id=topic, auto_offset_reset="earliest",
                      consumer_timeout_ms=15000)
    got = [m.value for m in c][: len(values)]
    c.close()
    assert got == values, got
    print(f"kafka-python {label} OK")


{"confluent": confluent, "kafka-python": kafka_python}[client]()
