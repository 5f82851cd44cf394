//! Client quotas: Describe/AlterClientQuotas with Kafka's validation, `sluice configs` for
//! users and clients, throttle_time_ms plus a muted connection for a client over its quota,
//! librdkafka producers (the one over its byte-rate quota is held to it over a 20 s window
//! while an unthrottled one keeps its rate) and consumers (the same for consumer_byte_rate),
//! a client over its request_percentage muted while another is answered, and connection
//! limits (max.connections, max.connections.per.ip and its overrides) changed at runtime.

mod common;
#[path = "common/wire.rs"]
mod wire;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientContext;
use sluice_protocol::batch::BatchBuilder;
use sluice_protocol::compression::Compression;
use sluice_protocol::ErrorCode;
use wire::Wire;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn create_topic(w: &mut Wire, name: &str) {
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(s(name)))
            .with_num_partitions(1)
            .with_replication_factor(1)]);
    let resp: CreateTopicsResponse = w.call(ApiKey::CreateTopics, 5, &req);
    assert_eq!(resp.topics[0].error_code, 0);
}

/// Alter one entity's quotas: (type, name) parts, (key, value or None to remove).
fn alter(w: &mut Wire, entity: &[(&str, Option<&str>)], ops: &[(&str, Option<f64>)]) -> i16 {
    let req = AlterClientQuotasRequest::default().with_entries(vec![EntryData::default()
        .with_entity(
            entity
                .iter()
                .map(|(t, n)| {
                    EntityData::default()
                        .with_entity_type(s(t))
                        .with_entity_name(n.map(s))
                })
                .collect(),
        )
        .with_ops(
            ops.iter()
                .map(|(k, v)| {
                    OpData::default()
                        .with_key(s(k))
                        .with_value(v.unwrap_or(0.0))
                        .with_remove(v.is_none())
                })
                .collect(),
        )]);
    let resp: AlterClientQuotasResponse = w.call(ApiKey::AlterClientQuotas, 1, &req);
    resp.entries[0].error_code
}

/// (entity as (type, name) pairs, quota values) as DescribeClientQuotas lists them.
type Described = (Vec<(String, Option<String>)>, Vec<(String, f64)>);

fn describe_all(w: &mut Wire) -> Vec<Described> {
    let req = DescribeClientQuotasRequest::default()
        .with_components(Vec::<ComponentData>::new())
        .with_strict(false);
    let resp: DescribeClientQuotasResponse = w.call(ApiKey::DescribeClientQuotas, 1, &req);
    assert_eq!(resp.error_code, 0);
    resp.entries
        .unwrap_or_default()
        .into_iter()
        .map(|e| {
            (
                e.entity
                    .iter()
                    .map(|d| {
                        (
                            d.entity_type.to_string(),
                            d.entity_name.as_ref().map(|n| n.to_string()),
                        )
                    })
                    .collect(),
                e.values
                    .iter()
                    .map(|v| (v.key.to_string(), v.value))
                    .collect(),
            )
        })
        .collect()
}

fn produce(w: &mut Wire, topic: &str, bytes: usize) -> ProduceResponse {
    let mut b = BatchBuilder::new(Compression::None);
    b.append(0, None, Some(&vec![b'x'; bytes]), &[]);
    let req = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(s(topic)))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(Bytes::from(b.build(0).unwrap())))])]);
    w.call(ApiKey::Produce, 9, &req)
}

#[test]
fn quotas_are_validated_stored_and_enforced_with_a_muted_connection() {
    let mut server = start(&["quota.window.num=2", "quota.window.size.seconds=1"]);
    let mut w = Wire::connect(&server.bootstrap);
    create_topic(&mut w, "q");
    let bad = ErrorCode::InvalidRequest.code();
    for (entity, ops) in [
        (
            vec![("user", Some("alice"))],
            vec![("producer_byte_rate", Some(1.5))],
        ),
        (
            vec![("user", Some("alice"))],
            vec![("producer_byte_rate", Some(-5.0))],
        ),
        (
            vec![("user", Some("alice"))],
            vec![("no_such_quota", Some(5.0))],
        ),
        (
            vec![("group", Some("g"))],
            vec![("producer_byte_rate", Some(5.0))],
        ),
        (
            vec![("user", Some(""))],
            vec![("producer_byte_rate", Some(5.0))],
        ),
        (vec![], vec![("producer_byte_rate", Some(5.0))]),
    ] {
        assert_eq!(alter(&mut w, &entity, &ops), bad, "{entity:?} {ops:?}");
    }
    assert!(
        describe_all(&mut w).is_empty(),
        "nothing invalid was stored"
    );
    assert_eq!(
        alter(
            &mut w,
            &[("client-id", Some("tiny"))],
            &[("producer_byte_rate", Some(1024.0))]
        ),
        0
    );
    assert_eq!(
        alter(
            &mut w,
            &[("user", None)],
            &[
                ("consumer_byte_rate", Some(1e9)),
                ("request_percentage", Some(200.0))
            ]
        ),
        0
    );
    let all = describe_all(&mut w);
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(all.contains(&(
        vec![("client-id".to_string(), Some("tiny".to_string()))],
        vec![("producer_byte_rate".to_string(), 1024.0)]
    )));

    // Over the quota: the answer says how long to back off, and the broker reads nothing
    // more from that connection for as long; another client is not held up.
    let mut tiny = Wire::connect_as(&server.bootstrap, "tiny");
    let resp = produce(&mut tiny, "q", 20_000);
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
    let throttle = resp.throttle_time_ms;
    assert!(
        (500..=1000).contains(&throttle),
        "throttle_time_ms {throttle}"
    );
    let started = Instant::now();
    let mut other = Wire::connect_as(&server.bootstrap, "other");
    let resp = produce(&mut other, "q", 20_000);
    assert_eq!(resp.throttle_time_ms, 0);
    assert!(started.elapsed() < Duration::from_millis(throttle as u64 / 2));
    let resp = produce(&mut tiny, "q", 10);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(throttle as u64 * 9 / 10),
        "the muted connection answered after {waited:?}, throttle was {throttle} ms"
    );
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);

    // Removing a value; quotas are metadata and survive a kill -9.
    assert_eq!(
        alter(&mut w, &[("user", None)], &[("request_percentage", None)]),
        0
    );
    server.kill();
    server.restart();
    let mut w = Wire::connect(&server.bootstrap);
    let all = describe_all(&mut w);
    assert!(all.contains(&(
        vec![("user".to_string(), None)],
        vec![("consumer_byte_rate".to_string(), 1e9)]
    )));
    assert_eq!(all.len(), 2, "{all:?}");

    // sluice configs --entity-type users|clients.
    let configs = |args: &[&str]| sluice_tool("configs", &server.bootstrap, args);
    configs(&[
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--add-config",
        "producer_byte_rate=1048576,consumer_byte_rate=2097152",
    ]);
    configs(&[
        "--alter",
        "--user",
        "alice",
        "--client",
        "app",
        "--add-config",
        "request_percentage=25",
    ]);
    let users = configs(&["--describe", "--entity-type", "users"]);
    assert!(
        users.contains("Quota configs for user-principal 'alice' are")
            && users.contains("producer_byte_rate=1048576")
            && users.contains("the default user-principal"),
        "{users}"
    );
    let pair = configs(&["--describe", "--user", "alice", "--client", "app"]);
    assert!(pair.contains("request_percentage=25"), "{pair}");
    let clients = configs(&[
        "--describe",
        "--entity-type",
        "clients",
        "--entity-name",
        "tiny",
    ]);
    assert!(clients.contains("producer_byte_rate=1024"), "{clients}");
    configs(&[
        "--alter",
        "--entity-type",
        "clients",
        "--entity-name",
        "tiny",
        "--delete-config",
        "producer_byte_rate",
    ]);
    let clients = configs(&["--describe", "--entity-type", "clients"]);
    assert!(!clients.contains("'tiny'"), "{clients}");
}

/// Acknowledged payload bytes with the time each acknowledgement arrived.
#[derive(Default)]
struct Acks {
    acked: Mutex<Vec<(Instant, usize)>>,
}

impl ClientContext for Acks {}

impl ProducerContext for Acks {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Ok(m) = result {
            use rdkafka::Message;
            let n = m.payload().map_or(0, <[u8]>::len);
            self.acked.lock().unwrap().push((Instant::now(), n));
        }
    }
}

/// Run a librdkafka producer with `client_id` for `run`, sending 1 KiB records at most at
/// `pace` bytes/s (None: as fast as it may); returns the producer's acknowledgements.
fn run_producer(
    bootstrap: &str,
    client_id: &str,
    pace: Option<usize>,
    start: Instant,
    run: Duration,
) -> Vec<(Instant, usize)> {
    let p: BaseProducer<Acks> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("client.id", client_id)
        .set("linger.ms", "5")
        .set("batch.size", "65536")
        .set("queue.buffering.max.kbytes", "1024")
        .set("message.timeout.ms", "120000")
        .create_with_context(Acks::default())
        .expect("producer");
    let value = vec![b'q'; 1024];
    let mut sent = 0usize;
    while start.elapsed() < run {
        let allowed = pace.map_or(usize::MAX, |rate| {
            (start.elapsed().as_secs_f64() * rate as f64) as usize
        });
        if sent >= allowed {
            p.poll(Duration::from_millis(5));
            continue;
        }
        match p.send(BaseRecord::<(), [u8]>::to("quota").payload(&value[..])) {
            Ok(()) => sent += value.len(),
            Err(_) => {
                p.poll(Duration::from_millis(5));
            }
        }
        p.poll(Duration::ZERO);
    }
    let _ = p.flush(Duration::from_secs(30));
    let acked = std::mem::take(&mut *p.context().acked.lock().unwrap());
    acked
}

/// Bytes per second acknowledged between `from` and `to` after `start`.
fn rate(acked: &[(Instant, usize)], start: Instant, from: Duration, to: Duration) -> f64 {
    let bytes: usize = acked
        .iter()
        .filter(|(t, _)| {
            let at = t.duration_since(start);
            at >= from && at < to
        })
        .map(|(_, n)| n)
        .sum();
    bytes as f64 / (to - from).as_secs_f64()
}

#[test]
fn a_producer_over_its_quota_is_held_to_it_and_others_keep_their_rate() {
    const QUOTA: f64 = 256.0 * 1024.0;
    let server = start(&["quota.window.num=4", "quota.window.size.seconds=1"]);
    let mut w = Wire::connect(&server.bootstrap);
    create_topic(&mut w, "quota");
    assert_eq!(
        alter(
            &mut w,
            &[("client-id", Some("throttled"))],
            &[("producer_byte_rate", Some(QUOTA))]
        ),
        0
    );
    let start = Instant::now();
    let run = Duration::from_secs(26);
    let free_pace = 2 * 1024 * 1024;
    type Acked = Vec<(Instant, usize)>;
    let results: Arc<Mutex<Vec<(String, Acked)>>> = Arc::default();
    let threads: Vec<_> = [("throttled", None), ("free", Some(free_pace))]
        .into_iter()
        .map(|(id, pace)| {
            let bootstrap = server.bootstrap.clone();
            let results = Arc::clone(&results);
            std::thread::spawn(move || {
                let acked = run_producer(&bootstrap, id, pace, start, run);
                results.lock().unwrap().push((id.to_string(), acked));
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let results = results.lock().unwrap();
    let of = |id: &str| &results.iter().find(|(n, _)| n == id).unwrap().1;
    // Measured over 20 s, after the first window's burst has played out.
    let (from, to) = (Duration::from_secs(5), Duration::from_secs(25));
    let throttled = rate(of("throttled"), start, from, to);
    let free = rate(of("free"), start, from, to);
    println!(
        "throttled {throttled:.0} B/s (quota {QUOTA}), free {free:.0} B/s (paced at {free_pace})"
    );
    assert!(
        (throttled - QUOTA).abs() <= QUOTA * 0.10,
        "the throttled producer ran at {throttled:.0} B/s, quota {QUOTA}"
    );
    assert!(
        free >= free_pace as f64 * 0.9,
        "the unthrottled producer fell to {free:.0} B/s of {free_pace}"
    );
}

/// Read `topic` from the beginning as `client_id` for `run`; (arrival, bytes) per record.
fn run_consumer(
    bootstrap: &str,
    client_id: &str,
    start: Instant,
    run: Duration,
) -> Vec<(Instant, usize)> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::{Message, Offset, TopicPartitionList};
    let c: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("client.id", client_id)
        .set("group.id", client_id)
        .set("enable.auto.commit", "false")
        // Small fetches, so a throttled reader's rate is not one response every few seconds.
        .set("max.partition.fetch.bytes", "65536")
        .set("fetch.max.bytes", "65536")
        .set("message.max.bytes", "65536")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("fetched", 0, Offset::Beginning)
        .unwrap();
    c.assign(&tpl).unwrap();
    let mut got = Vec::new();
    while start.elapsed() < run {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(50)) {
            got.push((Instant::now(), m.payload().map_or(0, <[u8]>::len)));
        }
    }
    got
}

/// consumer_byte_rate: a librdkafka consumer over its quota reads at the quota (fetch
/// responses are counted, and a throttled fetch is answered empty and the connection muted),
/// while another consumer of the same data is not held back.
#[test]
fn a_consumer_over_its_fetch_quota_is_held_to_it_and_others_are_not() {
    const QUOTA: f64 = 512.0 * 1024.0;
    let server = start(&["quota.window.num=4", "quota.window.size.seconds=1"]);
    let mut w = Wire::connect(&server.bootstrap);
    create_topic(&mut w, "fetched");
    // 16 MiB to read: more than the throttled reader may take in the run.
    let p: BaseProducer<Acks> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &server.bootstrap)
        .set("linger.ms", "20")
        .set("batch.size", "262144")
        .create_with_context(Acks::default())
        .expect("producer");
    let value = vec![b'f'; 1024];
    for _ in 0..16 * 1024 {
        while p
            .send(BaseRecord::<(), [u8]>::to("fetched").payload(&value[..]))
            .is_err()
        {
            p.poll(Duration::from_millis(5));
        }
        p.poll(Duration::ZERO);
    }
    p.flush(Duration::from_secs(60)).unwrap();
    assert_eq!(p.context().acked.lock().unwrap().len(), 16 * 1024);
    assert_eq!(
        alter(
            &mut w,
            &[("client-id", Some("slow-reader"))],
            &[("consumer_byte_rate", Some(QUOTA))]
        ),
        0
    );
    let start = Instant::now();
    let run = Duration::from_secs(14);
    let free = std::thread::spawn({
        let bootstrap = server.bootstrap.clone();
        move || run_consumer(&bootstrap, "fast-reader", start, Duration::from_secs(8))
    });
    let slow = run_consumer(&server.bootstrap, "slow-reader", start, run);
    let free = free.join().unwrap();
    // After the first windows' burst, over 10 s.
    let (from, to) = (Duration::from_secs(4), Duration::from_secs(14));
    let slow_rate = rate(&slow, start, from, to);
    let free_total: usize = free.iter().map(|(_, n)| n).sum();
    println!("slow reader {slow_rate:.0} B/s (quota {QUOTA}); the free reader read {free_total} B");
    assert!(
        (slow_rate - QUOTA).abs() <= QUOTA * 0.15,
        "the throttled reader ran at {slow_rate:.0} B/s, quota {QUOTA}"
    );
    assert_eq!(
        free_total,
        16 * 1024 * 1024,
        "the free reader read everything"
    );
}

/// request_percentage: a client whose requests take more of the broker's handling time than
/// its quota is muted (its next request waits), while another client keeps being answered.
#[test]
fn a_client_over_its_request_percentage_is_muted_and_others_are_not() {
    let server = start(&["quota.window.num=2", "quota.window.size.seconds=1"]);
    let mut w = Wire::connect(&server.bootstrap);
    create_topic(&mut w, "rq");
    assert_eq!(
        alter(
            &mut w,
            &[("client-id", Some("busy"))],
            &[("request_percentage", Some(0.01))]
        ),
        0
    );
    // The busy client produces until one of its requests is held back noticeably.
    let bootstrap = server.bootstrap.clone();
    let busy = std::thread::spawn(move || {
        let mut busy = Wire::connect_as(&bootstrap, "busy");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let sent = Instant::now();
            let resp = produce(&mut busy, "rq", 20_000);
            assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
            let took = sent.elapsed();
            if took >= Duration::from_millis(200) {
                return took;
            }
            assert!(Instant::now() < deadline, "the busy client was never muted");
        }
    });
    // Meanwhile another client's requests are answered at once.
    let mut other = Wire::connect_as(&server.bootstrap, "other");
    let mut slowest = Duration::ZERO;
    while !busy.is_finished() {
        let sent = Instant::now();
        let resp = produce(&mut other, "rq", 100);
        assert_eq!(resp.throttle_time_ms, 0);
        slowest = slowest.max(sent.elapsed());
    }
    let held = busy.join().unwrap();
    println!("the busy client waited {held:?}; the other's slowest answer took {slowest:?}");
    assert!(
        slowest < held / 2,
        "the other client waited {slowest:?}, as long as the muted one ({held:?})"
    );
}

/// Set (or with None remove) a dynamic broker config for every broker.
fn set_broker_default(bootstrap: &str, key: &str, value: Option<&str>) {
    let change = value.map(|v| format!("{key}={v}"));
    let args: Vec<&str> = match &change {
        Some(c) => vec!["--add-config", c],
        None => vec!["--delete-config", key],
    };
    let mut all = vec!["--alter", "--entity-type", "brokers", "--entity-default"];
    all.extend(args);
    sluice_tool("configs", bootstrap, &all);
}

/// Whether the broker serves this connection: an ApiVersions answer within `wait`.
fn answered_within(w: &mut Wire, wait: Duration) -> bool {
    w.stream.set_read_timeout(Some(wait)).unwrap();
    let id = w.send(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    match w.read_frame() {
        Some(frame) => {
            assert_eq!(i32::from_be_bytes(frame[..4].try_into().unwrap()), id);
            w.stream
                .set_read_timeout(Some(Duration::from_secs(30)))
                .unwrap();
            true
        }
        None => false,
    }
}

/// Kafka's connection limits as dynamic broker configs: an address over
/// max.connections.per.ip has its new connection closed while an override lets another
/// through; at max.connections a client's connection waits unserved until another closes,
/// and the inter-broker listener (here the tools') is never held back.
#[test]
fn connection_limits_apply_at_runtime_per_address_and_per_broker() {
    let server = start(&[
        "listeners=PLAINTEXT://127.0.0.1:0,CLIENT://127.0.0.1:0",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CLIENT:PLAINTEXT",
        "inter.broker.listener.name=PLAINTEXT",
    ]);
    let b = &server.bootstrap;
    let client = server.listener("CLIENT").expect("the CLIENT listener");

    // Per address: 127.0.0.2 may hold two connections.
    // (The override first: the tools connect from 127.0.0.1.)
    set_broker_default(b, "max.connections.per.ip.overrides", Some("127.0.0.1:100"));
    set_broker_default(b, "max.connections.per.ip", Some("2"));
    let mut held: Vec<Wire> = (0..2)
        .map(|_| Wire::connect_from("127.0.0.2", &client))
        .collect();
    for w in &mut held {
        assert!(answered_within(w, Duration::from_secs(10)));
    }
    let mut third = Wire::connect_from("127.0.0.2", &client);
    third.send(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    assert!(
        third.is_closed_by_peer(),
        "a third connection from 127.0.0.2"
    );
    // Another address is not affected, and an override raises one address's limit.
    assert!(answered_within(
        &mut Wire::connect_from("127.0.0.3", &client),
        Duration::from_secs(10)
    ));
    set_broker_default(
        b,
        "max.connections.per.ip.overrides",
        Some("[127.0.0.1:100,127.0.0.2:3]"),
    );
    let mut third = Wire::connect_from("127.0.0.2", &client);
    assert!(answered_within(&mut third, Duration::from_secs(10)));
    held.push(third);
    assert!(server.wait_for_log(Duration::from_secs(10), |l| l
        .contains("max.connections.per.ip reached")));

    // Per broker: 3 connections are open (the tools' come and go on the inter-broker
    // listener, which this limit leaves alone). A fourth waits, unserved, for a slot.
    set_broker_default(b, "max.connections", Some("3"));
    let mut fourth = Wire::connect_from("127.0.0.4", &client);
    assert!(
        !answered_within(&mut fourth, Duration::from_millis(1500)),
        "a fourth connection was served at max.connections=3"
    );
    let shown = sluice_tool(
        "configs",
        b,
        &["--describe", "--entity-type", "brokers", "--entity-default"],
    );
    assert!(shown.contains("max.connections=3"), "{shown}");
    drop(held.pop());
    // Its request was read once the slot freed: the answer arrives without a resend.
    fourth
        .stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert!(fourth.read_frame().is_some(), "served once a slot was free");
    // Raising the limit lets waiting clients in without anyone leaving.
    let mut fifth = Wire::connect_from("127.0.0.4", &client);
    assert!(!answered_within(&mut fifth, Duration::from_millis(500)));
    set_broker_default(b, "max.connections", None);
    fifth
        .stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert!(
        fifth.read_frame().is_some(),
        "served once the limit was lifted"
    );
    // One listener's own limit: CLIENT has 4 connections open (two held, the fourth and
    // the fifth); at listener.name.client.max.connections=4 the next waits, while the
    // PLAINTEXT listener (the tools') is not held back.
    set_broker_default(b, "listener.name.client.max.connections", Some("4"));
    let mut sixth = Wire::connect_from("127.0.0.5", &client);
    assert!(!answered_within(&mut sixth, Duration::from_millis(1500)));
    let shown = sluice_tool(
        "configs",
        b,
        &["--describe", "--entity-type", "brokers", "--entity-default"],
    );
    assert!(
        shown.contains("listener.name.client.max.connections=4"),
        "{shown}"
    );
    drop(fifth);
    sixth
        .stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert!(
        sixth.read_frame().is_some(),
        "served once CLIENT had a free slot"
    );
    // Bad values are refused in one line.
    let out = std::process::Command::new(sluice_bin())
        .args(["configs", "--bootstrap-server", b])
        .args(["--alter", "--entity-type", "brokers", "--entity-default"])
        .args(["--add-config", "max.connections.per.ip.overrides=127.0.0.1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("host:count"), "{err}");
}

/// CreateTopics for `(name, partitions)` at `version`.
fn create_topics(w: &mut Wire, topics: &[(&str, i32)], version: i16) -> CreateTopicsResponse {
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(
            topics
                .iter()
                .map(|(n, p)| {
                    CreatableTopic::default()
                        .with_name(TopicName(s(n)))
                        .with_num_partitions(*p)
                        .with_replication_factor(1)
                })
                .collect(),
        );
    w.call(ApiKey::CreateTopics, version, &req)
}

/// KIP-599's controller_mutation_rate: partitions created or deleted per second, from a
/// bucket of rate × window. Newer request versions are refused with
/// THROTTLING_QUOTA_EXCEEDED once it is spent (and told how long to wait); older ones go
/// ahead but are throttled; other clients are not affected.
#[test]
fn topic_mutations_beyond_the_controller_mutation_rate_are_refused_or_throttled() {
    // A bucket of 2/s × 3 × 1 s = 6 partitions.
    let server = start(&["controller.quota.window.num=3"]);
    let mut admin = Wire::connect(&server.bootstrap);
    let rate = Some(2.0);
    let code = alter(
        &mut admin,
        &[("client-id", Some("mutator"))],
        &[("controller_mutation_rate", rate)],
    );
    assert_eq!(code, 0);
    let mut w = Wire::connect_as(&server.bootstrap, "mutator");
    let codes =
        |r: &CreateTopicsResponse| -> Vec<i16> { r.topics.iter().map(|t| t.error_code).collect() };
    // 4 partitions, then 5 (the bucket goes into debt, which a strict quota allows once),
    // then nothing more until the debt of 3 is paid back at 2/s.
    let r = create_topics(&mut w, &[("m1", 4), ("m2", 5), ("m3", 1)], 7);
    let refused = ErrorCode::ThrottlingQuotaExceeded.code();
    assert_eq!(codes(&r), vec![0, 0, refused]);
    assert!(
        (1000..=1500).contains(&r.throttle_time_ms),
        "throttle {} ms",
        r.throttle_time_ms
    );
    let listed = sluice_tool("topics", &server.bootstrap, &["--list"]);
    let names: Vec<&str> = listed.lines().collect();
    assert!(names.contains(&"m2") && !names.contains(&"m3"), "{listed}");
    // Another client is not affected.
    let mut other = Wire::connect_as(&server.bootstrap, "other");
    assert_eq!(codes(&create_topics(&mut other, &[("o1", 12)], 7)), vec![0]);
    // The connection is muted for the throttle time, so its next request is read once the
    // debt is paid: then the client may create again; what the controller refuses (a
    // topic that exists, a bad name) is not charged.
    let r = create_topics(&mut w, &[("m1", 4), ("bad/name", 4), ("m3", 1)], 7);
    assert_eq!(
        codes(&r),
        vec![
            ErrorCode::TopicAlreadyExists.code(),
            ErrorCode::InvalidTopicException.code(),
            0
        ]
    );
    assert_eq!(r.throttle_time_ms, 0);
    // v5 (permissive): accepted even into debt, and throttled for it.
    let r = create_topics(&mut w, &[("m5", 6)], 5);
    assert_eq!(codes(&r), vec![0]);
    assert!(
        r.throttle_time_ms >= 2000,
        "throttle {} ms",
        r.throttle_time_ms
    );
    // Deleting counts too: refused while in debt. (Through a second connection of the
    // same client: the first is muted until the debt is paid.)
    let mut w2 = Wire::connect_as(&server.bootstrap, "mutator");
    let req = DeleteTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topic_names(vec![TopicName(s("m1"))]);
    let resp: DeleteTopicsResponse = w2.call(ApiKey::DeleteTopics, 5, &req);
    assert_eq!(resp.responses[0].error_code, refused);
    assert!(resp.throttle_time_ms > 0);
    let listed = sluice_tool("topics", &server.bootstrap, &["--list"]);
    assert!(listed.lines().any(|l| l == "m1"), "{listed}");
}
