//! Protocol edge cases at the byte level: version negotiation, malformed and hostile frames,
//! and the error codes Kafka gives for bad produce and fetch requests.

mod common;
#[path = "common/wire.rs"]
mod wire;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use sluice_protocol::batch::{BatchBuilder, BatchIter};
use sluice_protocol::compression::Compression;
use sluice_protocol::ErrorCode;
use wire::Wire;

fn api_versions(w: &mut Wire) -> ApiVersionsResponse {
    let req = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("sluice-test"))
        .with_client_software_version(StrBytes::from_static_str("1.0"));
    w.call(ApiKey::ApiVersions, 3, &req)
}

fn batch(n: usize, value_len: usize) -> Vec<u8> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let mut b = BatchBuilder::new(Compression::None);
    for i in 0..n {
        b.append(
            now,
            Some(format!("k{i}").as_bytes()),
            Some(&vec![b'v'; value_len]),
            &[],
        );
    }
    b.build(0).unwrap()
}

fn produce(w: &mut Wire, topic: &str, acks: i16, records: Vec<u8>) -> ProduceResponse {
    let req = produce_request(topic, acks, records);
    w.call(ApiKey::Produce, 9, &req)
}

fn produce_request(topic: &str, acks: i16, records: Vec<u8>) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(Bytes::from(records)))])])
}

fn produce_code(resp: &ProduceResponse) -> i16 {
    resp.responses[0].partition_responses[0].error_code
}

fn fetch_request(
    topic: &str,
    offset: i64,
    max_wait_ms: i32,
    min_bytes: i32,
    partition_max_bytes: i32,
) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(min_bytes)
        .with_max_bytes(50 * 1024 * 1024)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(partition_max_bytes)])])
}

#[test]
fn api_versions_lists_the_handler_table_and_falls_back_to_v0() {
    let server = start(&[]);
    let mut w = Wire::connect(&server.bootstrap);
    let resp = api_versions(&mut w);
    assert_eq!(resp.error_code, 0);
    let keys: Vec<i16> = resp.api_keys.iter().map(|k| k.api_key).collect();
    for k in [0, 1, 2, 3, 18, 19, 20, 22, 32, 37, 60] {
        assert!(keys.contains(&k), "api key {k} missing from {keys:?}");
    }
    // A version from the future: answered at v0 with UNSUPPORTED_VERSION and, as Kafka 4.4
    // answers, ApiVersions' own range alone, so the client retries at its maximum.
    let id = w.send_as(ApiKey::ApiVersions, 99, 3, &ApiVersionsRequest::default());
    let v0: ApiVersionsResponse = w.recv(ApiKey::ApiVersions, 0, id);
    assert_eq!(v0.error_code, ErrorCode::UnsupportedVersion.code());
    let own = resp.api_keys.iter().find(|k| k.api_key == 18).unwrap();
    assert_eq!(v0.api_keys.len(), 1);
    assert_eq!(
        (v0.api_keys[0].api_key, v0.api_keys[0].max_version),
        (18, own.max_version)
    );
    // The connection stays usable.
    assert_eq!(api_versions(&mut w).error_code, 0);
}

/// Every API a default Apache Kafka 4.4 broker lists (the fixture, recorded by
/// `interop/kafka/api-versions.sh` against Kafka 4.4) is served by Sluice at the same
/// versions, or is a row of the README's table of differences with exactly the versions
/// Sluice serves; no row is stale, and Sluice lists nothing Kafka does not unless a row says
/// why.
#[test]
fn api_versions_match_kafka_4_4_or_are_listed() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let fixture =
        std::fs::read_to_string(root.join("tests/fixtures/kafka-4.4-api-versions.txt")).unwrap();
    let readme = std::fs::read_to_string(root.join("../../README.md")).unwrap();
    let range = |(min, max): (i16, i16)| format!("{min}-{max}");
    // key -> (name, Kafka's range)
    let kafka: std::collections::BTreeMap<i16, (String, String)> = fixture
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let n = |i: usize| f[i].parse::<i16>().unwrap();
            (n(0), (f[3].to_string(), range((n(1), n(2)))))
        })
        .collect();
    assert!(kafka.len() > 70, "fixture too short: {fixture}");
    // The README's rows: key -> (name, Kafka's range, Sluice's, reason).
    let section = readme
        .split("### Kafka 4.4's APIs that Sluice answers differently")
        .nth(1)
        .expect("README section of API differences");
    let section = section.split("\n#").next().unwrap();
    let rows: std::collections::BTreeMap<i16, [String; 4]> = section
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| API "))
        .map(|l| {
            let c: Vec<String> = l
                .trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect();
            assert_eq!(c.len(), 5, "README row {l}");
            let key = c[1].parse().unwrap_or_else(|_| panic!("README row {l}"));
            (
                key,
                [c[0].clone(), c[2].clone(), c[3].clone(), c[4].clone()],
            )
        })
        .collect();
    assert!(!rows.is_empty(), "no rows in the README's table");

    let server = start(&[]);
    let mut w = Wire::connect(&server.bootstrap);
    let resp = api_versions(&mut w);
    let sluice: std::collections::BTreeMap<i16, String> = resp
        .api_keys
        .iter()
        .map(|k| (k.api_key, range((k.min_version, k.max_version))))
        .collect();
    let mut problems = Vec::new();
    for (key, (name, theirs)) in &kafka {
        let ours = sluice.get(key).cloned().unwrap_or_else(|| "none".into());
        match rows.get(key) {
            None if &ours != theirs => problems.push(format!(
                "{name} ({key}): Kafka 4.4 {theirs}, Sluice {ours}, and no README row says why"
            )),
            None => {}
            Some(_) if &ours == theirs => problems.push(format!(
                "{name} ({key}): Sluice now serves {ours} as Kafka does; remove its README row"
            )),
            Some([row_name, row_kafka, row_sluice, why]) => {
                if row_name != name || row_kafka != theirs || row_sluice != &ours {
                    problems.push(format!(
                        "{name} ({key}): README row says {row_name} Kafka {row_kafka} Sluice \
                         {row_sluice}, but it is Kafka {theirs} Sluice {ours}"
                    ));
                }
                if why.len() < 10 {
                    problems.push(format!("{name} ({key}): README row gives no reason"));
                }
            }
        }
    }
    // An API default Kafka does not list (it needs a plugin there) may be listed by Sluice
    // when a row says so, with Kafka's column "none".
    for (key, row) in rows.iter().filter(|(k, _)| !kafka.contains_key(k)) {
        let ours = sluice.get(key).cloned().unwrap_or_else(|| "none".into());
        if row[1] != "none" || row[2] != ours || row[3].len() < 10 {
            problems.push(format!(
                "README row for key {key}, which Kafka 4.4 does not list: it must say Kafka \
                 none, Sluice {ours}, and why"
            ));
        }
    }
    for (key, ours) in sluice
        .iter()
        .filter(|(k, _)| !kafka.contains_key(k) && !rows.contains_key(k))
    {
        problems.push(format!(
            "Sluice lists key {key} ({ours}), which Kafka 4.4 does not, and no README row says why"
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn api_versions_v3_carries_no_default_tagged_fields() {
    // librdkafka < 2.2 misreads ApiVersions v3 responses carrying default-valued tagged
    // fields; Kafka omits them, and so must we. Kafka does send the features (tags 0, 1, 2:
    // supported, finalized epoch, finalized), and so do we; never `zk_migration_ready` (3),
    // which is at its default.
    let server = start(&[]);
    let mut w = Wire::connect(&server.bootstrap);
    let req = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("t"))
        .with_client_software_version(StrBytes::from_static_str("1"));
    w.send(ApiKey::ApiVersions, 3, &req);
    let frame = w.read_frame().unwrap();
    // correlation id (4) + error code (2) + compact array len + n*(2+2+2+1) + throttle (4),
    // then the tagged fields: a count and each (tag, size, data), all unsigned varints here.
    let n = (frame[6] - 1) as usize;
    let mut at = 4 + 2 + 1 + n * 7 + 4;
    let varint = |at: &mut usize| {
        let mut v = 0usize;
        let mut shift = 0;
        loop {
            let b = frame[*at];
            *at += 1;
            v |= usize::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return v;
            }
            shift += 7;
        }
    };
    let mut tags = Vec::new();
    for _ in 0..varint(&mut at) {
        tags.push(varint(&mut at));
        let size = varint(&mut at);
        at += size;
    }
    assert_eq!(
        tags,
        [0, 1, 2],
        "the features, and no tagged field at its default"
    );
    assert_eq!(at, frame.len(), "nothing after the tagged fields");
}

#[test]
fn hostile_frames_close_only_their_connection() {
    let server = start(&["socket.request.max.bytes=4096"]);
    let mut healthy = Wire::connect(&server.bootstrap);
    assert_eq!(api_versions(&mut healthy).error_code, 0);

    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "oversized frame",
            [&100_000i32.to_be_bytes()[..], &[0u8; 16]].concat(),
        ),
        ("negative size", (-1i32).to_be_bytes().to_vec()),
        (
            "unknown api key",
            [
                &10i32.to_be_bytes()[..],
                &[0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0, 0],
            ]
            .concat(),
        ),
        (
            "too short for a header",
            [&3i32.to_be_bytes()[..], &[0, 3, 0]].concat(),
        ),
        (
            "unsupported produce version",
            [&10i32.to_be_bytes()[..], &[0, 0, 0, 1, 0, 0, 0, 1, 0, 0]].concat(),
        ),
        // Metadata v0 claiming 2^31-1 topics in a 14-byte frame: must not allocate for them.
        (
            "absurd array length",
            [
                &14i32.to_be_bytes()[..],
                &[0, 3, 0, 0, 0, 0, 0, 7, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff],
            ]
            .concat(),
        ),
        // A compact array claiming 2^32-2 elements in a flexible request.
        (
            "absurd compact array length",
            [
                &16i32.to_be_bytes()[..],
                &[
                    0, 3, 0, 12, 0, 0, 0, 7, 0xff, 0xff, 0, 0xff, 0xff, 0xff, 0xff, 0x0f,
                ],
            ]
            .concat(),
        ),
    ];
    for (what, bytes) in cases {
        let mut w = Wire::connect(&server.bootstrap);
        w.write_raw(&bytes);
        assert!(w.is_closed_by_peer(), "{what}: connection should be closed");
    }
    // A frame cut short by the client closing: the broker just cleans up.
    let mut w = Wire::connect(&server.bootstrap);
    w.write_raw(&[0, 0, 0, 50, 0, 3]);
    drop(w);
    assert_eq!(
        api_versions(&mut healthy).error_code,
        0,
        "other connections are unaffected"
    );
    assert!(server.wait_for_log(Duration::from_secs(10), |l| l
        .contains("exceeds socket.request.max.bytes")
        && l.contains("unknown api key")));
}

#[test]
fn random_bytes_never_take_the_broker_down() {
    let server = start(&[]);
    let seed: u64 = std::env::var("SLUICE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    println!("fuzz seed {seed} (rerun with SLUICE_FUZZ_SEED={seed})");
    let mut state = seed | 1;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for round in 0..300 {
        let len = (next() % 200) as usize;
        let mut body: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if round % 2 == 0 && body.len() >= 4 {
            // Half the rounds: a plausible header (known key, small version) then garbage.
            let key = [0u16, 1, 2, 3, 18, 19, 20, 22, 32, 37, 60][(next() % 11) as usize];
            body[0..2].copy_from_slice(&key.to_be_bytes());
            body[2..4].copy_from_slice(&((next() % 14) as u16).to_be_bytes());
        }
        let mut w = Wire::connect(&server.bootstrap);
        w.write_raw(&(body.len() as i32).to_be_bytes());
        w.write_raw(&body);
        // Either an answer or a close; never a hang or a crash.
        let _ = w.read_frame();
    }
    let mut w = Wire::connect(&server.bootstrap);
    assert_eq!(
        api_versions(&mut w).error_code,
        0,
        "broker alive after fuzzing (seed {seed})"
    );
}

#[test]
fn produce_errors_match_kafka() {
    let server = start(&["auto.create.topics.enable=false"]);
    create_topic(
        &server.bootstrap,
        "p",
        1,
        &[("max.message.bytes", "2000"), ("min.insync.replicas", "2")],
    );
    let mut w = Wire::connect(&server.bootstrap);

    let mut corrupt = batch(3, 10);
    let n = corrupt.len();
    corrupt[n - 2] ^= 0xff;
    assert_eq!(
        produce_code(&produce(&mut w, "p", 1, corrupt)),
        ErrorCode::CorruptMessage.code()
    );
    assert_eq!(
        produce_code(&produce(&mut w, "p", 1, batch(10, 500))),
        ErrorCode::MessageTooLarge.code()
    );
    assert_eq!(
        produce_code(&produce(&mut w, "p", -1, batch(1, 10))),
        ErrorCode::NotEnoughReplicas.code()
    );
    assert_eq!(
        produce_code(&produce(&mut w, "p", 2, batch(1, 10))),
        ErrorCode::InvalidRequiredAcks.code()
    );
    assert_eq!(
        produce_code(&produce(&mut w, "nope", 1, batch(1, 10))),
        ErrorCode::UnknownTopicOrPartition.code()
    );
    assert_eq!(
        produce_code(&produce(&mut w, "bad/name", 1, batch(1, 10))),
        ErrorCode::InvalidTopicException.code()
    );
    let ok = produce(&mut w, "p", 1, batch(2, 10));
    assert_eq!(produce_code(&ok), 0);
    assert_eq!(ok.responses[0].partition_responses[0].base_offset, 0);

    // acks=0: no response; the next request's answer comes back in order.
    w.send(ApiKey::Produce, 9, &produce_request("p", 0, batch(1, 10)));
    let resp = produce(&mut w, "p", 1, batch(1, 10));
    assert_eq!(resp.responses[0].partition_responses[0].base_offset, 3);
    // acks=0 with an error closes the connection, as Kafka does.
    let mut w0 = Wire::connect(&server.bootstrap);
    w0.send(
        ApiKey::Produce,
        9,
        &produce_request("nope", 0, batch(1, 10)),
    );
    assert!(w0.is_closed_by_peer());
}

/// A batch of `keys` (None: no key) with CreateTime `timestamps`.
fn keyed_batch(codec: Compression, keys: &[Option<&str>], timestamps: &[i64]) -> Vec<u8> {
    let mut b = BatchBuilder::new(codec);
    for (k, ts) in keys.iter().zip(timestamps) {
        b.append(*ts, k.map(str::as_bytes), Some(b"v"), &[]);
    }
    b.build(0).unwrap()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Per-record errors (KIP-467) with Kafka 4.4's codes, indexes and wording (measured against
/// Kafka 4.4.0): every record at fault is named, the batch is refused whole, and a partition
/// holds one batch per request.
#[test]
fn records_at_fault_are_named_as_kafka_names_them() {
    let server = start(&["auto.create.topics.enable=false"]);
    create_topic(
        &server.bootstrap,
        "cmp",
        1,
        &[("cleanup.policy", "compact")],
    );
    create_topic(&server.bootstrap, "plain", 1, &[]);
    let mut w = Wire::connect(&server.bootstrap);
    let now = now_ms();
    let no_key = "Compacted topic cannot accept message without key in topic partition cmp-0";
    for codec in [Compression::None, Compression::Gzip, Compression::Lz4] {
        let keys = [Some("k0"), None, Some("k2"), None, Some("k4")];
        let resp = produce(&mut w, "cmp", 1, keyed_batch(codec, &keys, &[now; 5]));
        let p = &resp.responses[0].partition_responses[0];
        assert_eq!(p.error_code, ErrorCode::InvalidRecord.code(), "{codec:?}");
        assert_eq!(p.base_offset, -1);
        let errors: Vec<(i32, String)> = p
            .record_errors
            .iter()
            .map(|e| {
                let m = e.batch_index_error_message.as_ref().map(|m| m.to_string());
                (e.batch_index, m.unwrap_or_default())
            })
            .collect();
        assert_eq!(
            errors,
            vec![(1, no_key.to_string()), (3, no_key.to_string())]
        );
        assert_eq!(
            p.error_message.as_deref(),
            Some(
                format!(
                    "One or more records have been rejected due to 2 record errors in total, and \
                     only showing the first three errors at most: [RecordError(batchIndex=1, \
                     message='{no_key}'), RecordError(batchIndex=3, message='{no_key}')]"
                )
                .as_str()
            )
        );
    }
    // A timestamp out of range: INVALID_TIMESTAMP, naming the record.
    let future = now + 2 * 3_600_000;
    let resp = produce(
        &mut w,
        "plain",
        1,
        keyed_batch(
            Compression::None,
            &[Some("a"), Some("b"), Some("c")],
            &[now, future, now],
        ),
    );
    let p = &resp.responses[0].partition_responses[0];
    assert_eq!(p.error_code, ErrorCode::InvalidTimestamp.code());
    assert_eq!(p.record_errors.len(), 1);
    assert_eq!(p.record_errors[0].batch_index, 1);
    let message = p.record_errors[0]
        .batch_index_error_message
        .as_ref()
        .unwrap()
        .to_string();
    assert!(
        message.starts_with(&format!(
            "Timestamp {future} of message with offset 1 is out of range. The timestamp should be within ["
        )),
        "{message}"
    );
    assert_eq!(
        p.error_message.as_deref(),
        Some("One or more records have been rejected due to invalid timestamp")
    );
    // Two batches for one partition, or a base offset other than 0: INVALID_RECORD, no
    // record named.
    let two = [batch(1, 10), batch(1, 10)].concat();
    let mut based = batch(1, 10);
    based[..8].copy_from_slice(&100i64.to_be_bytes());
    for refused in [two, based] {
        let resp = produce(&mut w, "plain", 1, refused);
        let p = &resp.responses[0].partition_responses[0];
        assert_eq!(p.error_code, ErrorCode::InvalidRecord.code());
        assert!(p.record_errors.is_empty());
    }
    // Nothing of any refused batch was written.
    for topic in ["cmp", "plain"] {
        let keys = [Some("k")];
        let ok = produce(
            &mut w,
            topic,
            1,
            keyed_batch(Compression::None, &keys, &[now]),
        );
        assert_eq!(produce_code(&ok), 0);
        assert_eq!(
            ok.responses[0].partition_responses[0].base_offset, 0,
            "{topic}"
        );
    }
}

/// A Fetch v12 of partitions (index, offset) of `topic` in session (`id`, `epoch`), forgetting
/// `forget`; answers at once.
fn session_fetch(
    w: &mut Wire,
    topic: &str,
    id: i32,
    epoch: i32,
    partitions: &[(i32, i64)],
    forget: &[i32],
) -> FetchResponse {
    let name = TopicName(StrBytes::from_string(topic.into()));
    let mut req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_session_id(id)
        .with_session_epoch(epoch);
    if !partitions.is_empty() {
        req.topics = vec![FetchTopic::default()
            .with_topic(name.clone())
            .with_partitions(
                partitions
                    .iter()
                    .map(|(p, offset)| {
                        FetchPartition::default()
                            .with_partition(*p)
                            .with_fetch_offset(*offset)
                            .with_partition_max_bytes(1 << 20)
                    })
                    .collect(),
            )];
    }
    if !forget.is_empty() {
        req.forgotten_topics_data = vec![
            kafka_protocol::messages::fetch_request::ForgottenTopic::default()
                .with_topic(name)
                .with_partitions(forget.to_vec()),
        ];
    }
    w.call(ApiKey::Fetch, 12, &req)
}

/// The partitions a fetch answer holds, with the bytes of records of each.
fn answered(resp: &FetchResponse) -> Vec<(i32, usize)> {
    resp.responses
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (p.partition_index, p.records.as_ref().map_or(0, Bytes::len)))
        })
        .collect()
}

/// Incremental fetch sessions (KIP-227): after a full fetch, a client sends only what changed
/// and hears only about partitions with something new; a session continues only at its
/// epoch, and ends when emptied or asked to.
#[test]
fn fetch_sessions_carry_only_what_changed() {
    let server = start(&[]);
    create_topic(&server.bootstrap, "s", 3, &[]);
    let mut w = Wire::connect(&server.bootstrap);
    let mut producer = Wire::connect(&server.bootstrap);
    let produce_to = |producer: &mut Wire, partition: i32| {
        let mut req = produce_request("s", 1, batch(2, 10));
        req.topic_data[0].partition_data[0].index = partition;
        let resp: ProduceResponse = producer.call(ApiKey::Produce, 9, &req);
        assert_eq!(produce_code(&resp), 0);
    };
    produce_to(&mut producer, 0);
    // A full fetch that asks for a session (epoch 0): every partition, and a session id.
    let all = [(0, 0), (1, 0), (2, 0)];
    let full = session_fetch(&mut w, "s", 0, 0, &all, &[]);
    assert_eq!(full.error_code, 0);
    let id = full.session_id;
    assert!(id > 0, "a session was created");
    assert_eq!(answered(&full).len(), 3);
    assert!(answered(&full)[0].1 > 0);
    // Partition 0's new position is all that is sent; nothing changed, nothing is answered.
    let quiet = session_fetch(&mut w, "s", id, 1, &[(0, 2)], &[]);
    assert_eq!((quiet.error_code, quiet.session_id), (0, id));
    assert_eq!(answered(&quiet), vec![]);
    // New records in partition 1: only it is answered.
    produce_to(&mut producer, 1);
    let news = session_fetch(&mut w, "s", id, 2, &[], &[]);
    assert_eq!(answered(&news).len(), 1);
    assert_eq!(answered(&news)[0].0, 1);
    assert!(answered(&news)[0].1 > 0);
    // Another epoch than the session's, or another session: refused at the top level.
    let stale = session_fetch(&mut w, "s", id, 2, &[], &[]);
    assert_eq!(stale.error_code, ErrorCode::InvalidFetchSessionEpoch.code());
    assert_eq!((stale.session_id, answered(&stale)), (0, vec![]));
    let unknown = session_fetch(&mut w, "s", id ^ 0x40, 1, &[], &[]);
    assert_eq!(unknown.error_code, ErrorCode::FetchSessionIdNotFound.code());
    // The refusals did not end it; forgetting every partition does.
    let kept = session_fetch(&mut w, "s", id, 3, &[(1, 2)], &[]);
    assert_eq!((kept.error_code, kept.session_id), (0, id));
    let emptied = session_fetch(&mut w, "s", id, 4, &[], &[0, 1, 2]);
    assert_eq!((emptied.error_code, emptied.session_id), (0, 0));
    let gone = session_fetch(&mut w, "s", id, 5, &[], &[]);
    assert_eq!(gone.error_code, ErrorCode::FetchSessionIdNotFound.code());
    // Epoch -1 ends a session too; (0, -1) is a fetch without one, as librdkafka sends.
    let second = session_fetch(&mut w, "s", 0, 0, &all, &[]).session_id;
    assert!(second > 0);
    let closing = session_fetch(&mut w, "s", second, -1, &all, &[]);
    assert_eq!((closing.session_id, answered(&closing).len()), (0, 3));
    let ended = session_fetch(&mut w, "s", second, 1, &[], &[]);
    assert_eq!(ended.error_code, ErrorCode::FetchSessionIdNotFound.code());

    // Without cache slots there are no sessions: full answers, session id 0.
    let none = start(&["max.incremental.fetch.session.cache.slots=0"]);
    create_topic(&none.bootstrap, "s", 1, &[]);
    let mut w = Wire::connect(&none.bootstrap);
    let full = session_fetch(&mut w, "s", 0, 0, &[(0, 0)], &[]);
    assert_eq!((full.error_code, full.session_id), (0, 0));
}

#[test]
fn fetch_long_polls_without_busy_waiting_and_honours_sizes() {
    let server = start(&[]);
    create_topic(&server.bootstrap, "f", 1, &[]);
    let mut w = Wire::connect(&server.bootstrap);
    // Nothing to read: waits max_wait_ms, then answers empty.
    let started = Instant::now();
    let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &fetch_request("f", 0, 300, 1, 1 << 20));
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(290),
        "returned after {waited:?}"
    );
    assert_eq!(
        resp.responses[0].partitions[0]
            .records
            .as_ref()
            .map_or(0, Bytes::len),
        0
    );

    // A parked fetch is woken by a produce, long before its max wait.
    let bootstrap = server.bootstrap.clone();
    let producer_thread = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        let mut p = Wire::connect(&bootstrap);
        produce(&mut p, "f", 1, batch(5, 100));
    });
    let started = Instant::now();
    let resp: FetchResponse = w.call(
        ApiKey::Fetch,
        12,
        &fetch_request("f", 0, 20_000, 1, 1 << 20),
    );
    let waited = started.elapsed();
    producer_thread.join().unwrap();
    assert!(
        waited < Duration::from_secs(10),
        "fetch was not woken by the produce: {waited:?}"
    );
    let data = &resp.responses[0].partitions[0];
    assert_eq!(data.high_watermark, 5);
    assert!(!data.records.as_ref().unwrap().is_empty());

    // partition_max_bytes smaller than the first batch: the whole first batch still comes.
    let mut p = Wire::connect(&server.bootstrap);
    produce(&mut p, "f", 1, batch(50, 200));
    let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &fetch_request("f", 5, 0, 0, 10));
    let records = resp.responses[0].partitions[0].records.clone().unwrap();
    let batches: Vec<_> = BatchIter::new(&records).collect::<Result<_, _>>().unwrap();
    assert_eq!(batches.len(), 1);
    assert_eq!(batches[0].0.record_count, 50);
    // ...and partition_max_bytes caps the rest: from offset 0 only the first batch fits.
    let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &fetch_request("f", 0, 0, 0, 600));
    let records = resp.responses[0].partitions[0].records.clone().unwrap();
    assert_eq!(BatchIter::new(&records).count(), 1);

    // Beyond the log end: OFFSET_OUT_OF_RANGE.
    let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &fetch_request("f", 1000, 0, 0, 1 << 20));
    assert_eq!(
        resp.responses[0].partitions[0].error_code,
        ErrorCode::OffsetOutOfRange.code()
    );
}

#[test]
fn list_offsets_earliest_latest_and_max_timestamp() {
    let server = start(&[]);
    create_topic(&server.bootstrap, "lo", 1, &[]);
    let mut w = Wire::connect(&server.bootstrap);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let mut b = BatchBuilder::new(Compression::Gzip);
    for (i, ts) in [now - 50, now - 10, now - 30].iter().enumerate() {
        b.append(*ts, Some(format!("k{i}").as_bytes()), Some(b"v"), &[]);
    }
    produce(&mut w, "lo", 1, b.build(0).unwrap());
    let ask = |w: &mut Wire, ts: i64| -> (i16, i64, i64) {
        let req = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("lo")))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(ts)])]);
        let resp: ListOffsetsResponse = w.call(ApiKey::ListOffsets, 7, &req);
        let p = &resp.topics[0].partitions[0];
        (p.error_code, p.offset, p.timestamp)
    };
    assert_eq!(ask(&mut w, -2), (0, 0, -1));
    assert_eq!(ask(&mut w, -1), (0, 3, -1));
    assert_eq!(ask(&mut w, -3), (0, 1, now - 10));
    assert_eq!(ask(&mut w, now - 40), (0, 1, now - 10));
    assert_eq!(ask(&mut w, now - 20).1, 1);
    assert_eq!(ask(&mut w, now + 1000).1, -1);
}

#[test]
fn metadata_auto_creates_only_when_allowed() {
    let server = start(&["num.partitions=3"]);
    let mut w = Wire::connect(&server.bootstrap);
    let ask = |w: &mut Wire, name: &str, allow: bool| -> MetadataResponse {
        let req = MetadataRequest::default()
            .with_topics(Some(vec![MetadataRequestTopic::default()
                .with_name(Some(TopicName(StrBytes::from_string(name.into()))))]))
            .with_allow_auto_topic_creation(allow);
        w.call(ApiKey::Metadata, 12, &req)
    };
    assert_eq!(
        ask(&mut w, "no-auto", false).topics[0].error_code,
        ErrorCode::UnknownTopicOrPartition.code()
    );
    let created = ask(&mut w, "auto", true);
    assert_eq!(created.topics[0].error_code, 0);
    assert_eq!(created.topics[0].partitions.len(), 3);
    assert!(!created.topics[0].topic_id.is_nil());
    assert_eq!(
        ask(&mut w, "bad name!", true).topics[0].error_code,
        ErrorCode::InvalidTopicException.code()
    );
    // By topic id alone (v10+; the Java admin sends an empty name).
    let id = created.topics[0].topic_id;
    for name in [None, Some(TopicName(StrBytes::from_static_str("")))] {
        let req =
            MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
                .with_topic_id(id)
                .with_name(name)]));
        let by_id: MetadataResponse = w.call(ApiKey::Metadata, 12, &req);
        assert_eq!(
            by_id.topics[0].name.as_deref().map(|n| n.as_str()),
            Some("auto")
        );
        assert_eq!(by_id.topics[0].topic_id, id);
    }
    let unknown = sluice_metadata::Uuid::from_bytes([7; 16]);
    let req = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_topic_id(unknown)
    ]));
    let by_id: MetadataResponse = w.call(ApiKey::Metadata, 12, &req);
    assert_eq!(
        (by_id.topics[0].error_code, by_id.topics[0].topic_id),
        (ErrorCode::UnknownTopicId.code(), unknown)
    );
    let all: MetadataResponse = w.call(
        ApiKey::Metadata,
        12,
        &MetadataRequest::default().with_topics(None),
    );
    assert_eq!(all.topics.len(), 1);
    assert_eq!(all.brokers.len(), 1);
    assert_eq!(
        all.brokers[0].port,
        server
            .bootstrap
            .rsplit(':')
            .next()
            .unwrap()
            .parse::<i32>()
            .unwrap()
    );
}

#[test]
fn describe_cluster_names_this_node_as_broker_and_controller() {
    let server = start(&["node.id=7"]);
    let mut w = Wire::connect(&server.bootstrap);
    let resp: DescribeClusterResponse = w.call(
        ApiKey::DescribeCluster,
        1,
        &DescribeClusterRequest::default().with_endpoint_type(1),
    );
    assert_eq!(resp.error_code, 0);
    assert_eq!(resp.controller_id, BrokerId(7));
    assert_eq!(resp.brokers.len(), 1);
    assert_eq!(resp.brokers[0].broker_id, BrokerId(7));
    assert!(!resp.cluster_id.is_empty());
    let bad: DescribeClusterResponse = w.call(
        ApiKey::DescribeCluster,
        1,
        &DescribeClusterRequest::default().with_endpoint_type(9),
    );
    assert_eq!(bad.error_code, ErrorCode::UnsupportedEndpointType.code());
}

fn sasl_handshake(w: &mut Wire, version: i16, mechanism: &str) -> SaslHandshakeResponse {
    let req =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(mechanism.into()));
    w.call(ApiKey::SaslHandshake, version, &req)
}

fn sasl_token(w: &mut Wire, token: Vec<u8>) -> SaslAuthenticateResponse {
    let req = SaslAuthenticateRequest::default().with_auth_bytes(token.into());
    w.call(ApiKey::SaslAuthenticate, 2, &req)
}

fn metadata_ok(w: &mut Wire) -> bool {
    let resp: MetadataResponse = w.call(ApiKey::Metadata, 12, &MetadataRequest::default());
    !resp.brokers.is_empty()
}

/// KIP-368: with `connections.max.reauth.ms`, a SASL session ends after that long; the
/// client re-authenticates on its connection (as the same principal) and carries on, and a
/// connection whose session ended is closed at its next request.
#[test]
fn sasl_sessions_end_unless_the_client_reauthenticates() {
    let jaas = r#"listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_bob="bob-secret";"#;
    let server = start(&[
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms=PLAIN",
        "listener.name.sasl_plaintext.connections.max.reauth.ms=4000",
        jaas,
    ]);
    let sasl = server.listener("SASL_PLAINTEXT").expect("SASL listener");
    let login = |w: &mut Wire, token: &[u8]| {
        assert_eq!(sasl_handshake(w, 1, "PLAIN").error_code, 0);
        sasl_token(w, token.to_vec())
    };
    // Waits here are for the sessions' clock itself: each is until a point in time that the
    // answers bound (a session ends at most 4 s after its SaslAuthenticate was answered, and
    // a renewal sent at T ends no earlier than T + 4 s).
    let sleep_until = |t: Instant| std::thread::sleep(t.saturating_duration_since(Instant::now()));
    // The session's lifetime is announced; re-authenticating before it ends renews it.
    let mut w = Wire::connect(&sasl);
    let resp = login(&mut w, b"\0alice\0alice-secret");
    assert_eq!((resp.error_code, resp.session_lifetime_ms), (0, 4000));
    let first_ends_by = Instant::now() + Duration::from_millis(4000);
    assert!(metadata_ok(&mut w));
    // A session left to end, on another connection.
    let mut idle = Wire::connect(&sasl);
    assert_eq!(login(&mut idle, b"\0bob\0bob-secret").error_code, 0);
    let idle_ends_by = Instant::now() + Duration::from_millis(4000);
    let renewal = first_ends_by - Duration::from_millis(2500);
    sleep_until(renewal);
    let resp = login(&mut w, b"\0alice\0alice-secret");
    assert_eq!((resp.error_code, resp.session_lifetime_ms), (0, 4000));
    // Past the first session's end, well within the renewed one (which ends after
    // renewal + 4 s).
    sleep_until(first_ends_by + Duration::from_millis(100));
    assert!(metadata_ok(&mut w));
    // The session that was not renewed: the next request closes its connection.
    sleep_until(idle_ends_by + Duration::from_millis(100));
    idle.send(ApiKey::Metadata, 12, &MetadataRequest::default());
    assert!(idle.is_closed_by_peer());
    // The reason is logged as the connection closes, which the client may see first.
    assert!(server.wait_for_log(Duration::from_secs(10), |l| l
        .contains("SASL session expired")));
    // Re-authenticating as someone else closes the connection.
    let mut other = Wire::connect(&sasl);
    assert_eq!(login(&mut other, b"\0alice\0alice-secret").error_code, 0);
    assert_eq!(sasl_handshake(&mut other, 1, "PLAIN").error_code, 0);
    other.send(
        ApiKey::SaslAuthenticate,
        2,
        &SaslAuthenticateRequest::default().with_auth_bytes(b"\0bob\0bob-secret".to_vec().into()),
    );
    assert!(other.is_closed_by_peer());
}

/// SCRAM credentials through the admin APIs, with Kafka's per-user error codes.
#[test]
fn scram_credentials_are_altered_and_described_with_kafkas_errors() {
    use kafka_protocol::messages::alter_user_scram_credentials_request::{
        ScramCredentialDeletion, ScramCredentialUpsertion,
    };
    use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
    use sluice_protocol::scram::{self, Mechanism};

    let mut server = start(&[]);
    let mut w = Wire::connect(&server.bootstrap);
    let s = |v: &str| StrBytes::from_string(v.into());
    let upsert = |user: &str, mechanism: i8, iterations: i32| {
        let salted = scram::salted_password(Mechanism::Sha256, b"pw", b"salt", 4096);
        ScramCredentialUpsertion::default()
            .with_name(s(user))
            .with_mechanism(mechanism)
            .with_iterations(iterations)
            .with_salt(Bytes::from_static(b"salt"))
            .with_salted_password(salted.into())
    };
    let req = AlterUserScramCredentialsRequest::default()
        .with_upsertions(vec![
            upsert("bob", 1, 4096),
            upsert("carol", 2, 8192),
            upsert("dave", 1, 8192),
            upsert("dave", 2, 8192),
            upsert("erin", 1, 100),
            upsert("frank", 9, 4096),
            upsert("", 1, 4096),
        ])
        .with_deletions(vec![ScramCredentialDeletion::default()
            .with_name(s("gina"))
            .with_mechanism(1)]);
    let resp: AlterUserScramCredentialsResponse =
        w.call(ApiKey::AlterUserScramCredentials, 0, &req);
    let codes: std::collections::HashMap<String, i16> = resp
        .results
        .iter()
        .map(|r| (r.user.to_string(), r.error_code))
        .collect();
    assert_eq!(codes["bob"], 0);
    assert_eq!(codes["carol"], 0);
    assert_eq!(codes["dave"], ErrorCode::DuplicateResource.code());
    assert_eq!(codes["erin"], ErrorCode::UnacceptableCredential.code());
    assert_eq!(codes["frank"], ErrorCode::UnsupportedSaslMechanism.code());
    assert_eq!(codes[""], ErrorCode::UnacceptableCredential.code());
    assert_eq!(codes["gina"], ErrorCode::ResourceNotFound.code());

    let describe = |w: &mut Wire, users: Option<&[&str]>| {
        let req = DescribeUserScramCredentialsRequest::default().with_users(users.map(|u| {
            u.iter()
                .map(|n| UserName::default().with_name(s(n)))
                .collect()
        }));
        let resp: DescribeUserScramCredentialsResponse =
            w.call(ApiKey::DescribeUserScramCredentials, 0, &req);
        resp.results
            .into_iter()
            .map(|r| {
                let infos: Vec<(i8, i32)> = r
                    .credential_infos
                    .iter()
                    .map(|c| (c.mechanism, c.iterations))
                    .collect();
                (r.user.to_string(), r.error_code, infos)
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        describe(&mut w, None),
        vec![
            ("bob".to_string(), 0, vec![(1, 4096)]),
            ("carol".to_string(), 0, vec![(2, 8192)]),
        ]
    );
    let named = describe(&mut w, Some(&["carol", "nobody", "bob", "bob"]));
    assert_eq!(named[0], ("carol".to_string(), 0, vec![(2, 8192)]));
    assert_eq!(named[1].1, ErrorCode::ResourceNotFound.code());
    assert_eq!(named[2].1, ErrorCode::DuplicateResource.code());
    assert_eq!(named.len(), 3);

    // Delete one; it is gone, the other stays.
    let req = AlterUserScramCredentialsRequest::default().with_deletions(vec![
        ScramCredentialDeletion::default()
            .with_name(s("bob"))
            .with_mechanism(1),
    ]);
    let resp: AlterUserScramCredentialsResponse =
        w.call(ApiKey::AlterUserScramCredentials, 0, &req);
    assert_eq!(resp.results[0].error_code, 0);
    assert_eq!(
        describe(&mut w, None),
        vec![("carol".to_string(), 0, vec![(2, 8192)])]
    );
    // Credentials are metadata: they survive a kill -9 and restart.
    server.kill();
    server.restart();
    let mut w = Wire::connect(&server.bootstrap);
    assert_eq!(
        describe(&mut w, None),
        vec![("carol".to_string(), 0, vec![(2, 8192)])]
    );
}

/// A SASL_PLAINTEXT listener: only ApiVersions before authenticating; PLAIN (handshake v1
/// and the bare-token v0 form) and SCRAM-SHA-256 against stored credentials; every failure
/// answered with Kafka's error and the connection closed; no re-authentication.
#[test]
fn sasl_listener_authenticates_before_serving() {
    use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
    use sluice_protocol::scram::{self, ClientFirst, Mechanism};

    let jaas = r#"listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";"#;
    let server = start(&[
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
        "sasl.server.max.receive.size=1024",
        jaas,
    ]);
    let sasl = server.listener("SASL_PLAINTEXT").expect("SASL listener");

    // On a listener without SASL, a handshake is out of place.
    let mut plain = Wire::connect(&server.bootstrap);
    assert_eq!(
        sasl_handshake(&mut plain, 1, "PLAIN").error_code,
        ErrorCode::IllegalSaslState.code()
    );
    let salt = b"pepper".to_vec();
    let salted = scram::salted_password(Mechanism::Sha256, b"bob-secret", &salt, 4096);
    let req = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
        ScramCredentialUpsertion::default()
            .with_name(StrBytes::from_static_str("bob"))
            .with_mechanism(Mechanism::Sha256.code())
            .with_iterations(4096)
            .with_salt(salt.into())
            .with_salted_password(salted.into()),
    ]);
    let resp: AlterUserScramCredentialsResponse =
        plain.call(ApiKey::AlterUserScramCredentials, 0, &req);
    assert_eq!(resp.results[0].error_code, 0);

    // Before authenticating: ApiVersions yes, anything else closes the connection.
    let mut w = Wire::connect(&sasl);
    assert_eq!(api_versions(&mut w).error_code, 0);
    w.send(ApiKey::Metadata, 12, &MetadataRequest::default());
    assert!(w.is_closed_by_peer(), "Metadata before SASL must close");

    // A mechanism the listener does not offer: the list, then close.
    let mut w = Wire::connect(&sasl);
    let resp = sasl_handshake(&mut w, 1, "GSSAPI");
    assert_eq!(resp.error_code, ErrorCode::UnsupportedSaslMechanism.code());
    let offered: Vec<String> = resp.mechanisms.iter().map(|m| m.to_string()).collect();
    assert_eq!(offered, ["PLAIN", "SCRAM-SHA-256"]);
    assert!(w.is_closed_by_peer());

    // Frames before authentication are capped by sasl.server.max.receive.size.
    let mut w = Wire::connect(&sasl);
    w.write_raw(&[&4000i32.to_be_bytes()[..], &[0u8; 64]].concat());
    assert!(w.is_closed_by_peer(), "an oversized unauthenticated frame");

    // PLAIN, wrong password: SASL_AUTHENTICATION_FAILED with a message, then close.
    let mut w = Wire::connect(&sasl);
    assert_eq!(sasl_handshake(&mut w, 1, "PLAIN").error_code, 0);
    let resp = sasl_token(&mut w, b"\0alice\0guess".to_vec());
    assert_eq!(resp.error_code, ErrorCode::SaslAuthenticationFailed.code());
    assert!(
        resp.error_message
            .unwrap()
            .contains("Invalid username or password"),
        "Kafka's message"
    );
    assert!(w.is_closed_by_peer());

    // PLAIN, right password: served; the session does not end, so a second handshake is
    // refused (as Kafka: there is nothing to re-authenticate).
    let mut w = Wire::connect(&sasl);
    assert_eq!(sasl_handshake(&mut w, 1, "PLAIN").error_code, 0);
    let resp = sasl_token(&mut w, b"\0alice\0alice-secret".to_vec());
    assert_eq!(resp.error_code, 0);
    assert_eq!(resp.session_lifetime_ms, 0);
    assert!(metadata_ok(&mut w));
    assert_eq!(
        sasl_handshake(&mut w, 1, "PLAIN").error_code,
        ErrorCode::IllegalSaslState.code()
    );
    assert!(metadata_ok(&mut w));

    // PLAIN with the v0 handshake: the token travels as a bare frame.
    let mut w = Wire::connect(&sasl);
    assert_eq!(sasl_handshake(&mut w, 0, "PLAIN").error_code, 0);
    let token = b"\0alice\0alice-secret";
    w.write_raw(&[&(token.len() as i32).to_be_bytes()[..], token].concat());
    assert_eq!(
        w.read_frame().as_deref(),
        Some(&b""[..]),
        "empty server token"
    );
    assert!(metadata_ok(&mut w));

    // SCRAM-SHA-256 against the stored credential; the server proves it knows it too.
    for (password, ok) in [("bob-secret", true), ("wrong", false)] {
        let mut w = Wire::connect(&sasl);
        assert_eq!(sasl_handshake(&mut w, 1, "SCRAM-SHA-256").error_code, 0);
        let (client, first) = ClientFirst::new(Mechanism::Sha256, "bob", password);
        let resp = sasl_token(&mut w, first);
        assert_eq!(resp.error_code, 0);
        let (client, last) = client.respond(&resp.auth_bytes).unwrap();
        let resp = sasl_token(&mut w, last);
        if ok {
            assert_eq!(resp.error_code, 0);
            client.verify(&resp.auth_bytes).unwrap();
            assert!(metadata_ok(&mut w));
        } else {
            assert_eq!(resp.error_code, ErrorCode::SaslAuthenticationFailed.code());
            assert!(w.is_closed_by_peer());
        }
    }
    // An unknown user fails at the first message.
    let mut w = Wire::connect(&sasl);
    assert_eq!(sasl_handshake(&mut w, 1, "SCRAM-SHA-256").error_code, 0);
    let (_, first) = ClientFirst::new(Mechanism::Sha256, "mallory", "x");
    let resp = sasl_token(&mut w, first);
    assert_eq!(resp.error_code, ErrorCode::SaslAuthenticationFailed.code());
    assert!(w.is_closed_by_peer());

    let log = server.log();
    assert!(log.contains("SASL authentication failed"), "{log}");
    assert!(
        log.contains("exceeds sasl.server.max.receive.size=1024"),
        "{log}"
    );
    // The broker is unharmed.
    assert_eq!(api_versions(&mut plain).error_code, 0);
}

/// Dynamic broker configs: the cluster-wide default and a broker's own value of a topic
/// config default take effect without a restart, are described with their sources, survive a
/// kill -9; keys that are read at startup only are refused.
#[test]
fn dynamic_broker_configs_apply_without_restart() {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    let mut server = start(&[]);
    create_topic(&server.bootstrap, "dyn", 1, &[]);
    let mut w = Wire::connect(&server.bootstrap);
    let alter = |w: &mut Wire, broker: &str, key: &str, value: Option<&str>| -> (i16, String) {
        let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(4)
                .with_resource_name(StrBytes::from_string(broker.into()))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(StrBytes::from_string(key.into()))
                    .with_config_operation(if value.is_some() { 0 } else { 1 })
                    .with_value(value.map(|v| StrBytes::from_string(v.into())))]),
        ]);
        let resp: IncrementalAlterConfigsResponse =
            w.call(ApiKey::IncrementalAlterConfigs, 1, &req);
        let r = &resp.responses[0];
        (
            r.error_code,
            r.error_message
                .as_ref()
                .map(|m| m.to_string())
                .unwrap_or_default(),
        )
    };
    let describe = |w: &mut Wire, rt: i8, name: &str, key: &str| -> (Option<String>, i8) {
        let req = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(rt)
                .with_resource_name(StrBytes::from_string(name.into()))
                .with_configuration_keys(Some(vec![StrBytes::from_string(key.into())])),
        ]);
        let resp: DescribeConfigsResponse = w.call(ApiKey::DescribeConfigs, 4, &req);
        let c = &resp.results[0].configs[0];
        (c.value.as_ref().map(|v| v.to_string()), c.config_source)
    };
    // A topic without its own max.message.bytes follows the broker default.
    let ok = produce(&mut w, "dyn", 1, batch(1, 5_000));
    assert_eq!(produce_code(&ok), 0);
    let log = server.log();
    let node = log
        .split("Sluice node ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .expect("the node id in the start line")
        .to_string();
    let node = node.as_str();
    let (code, msg) = alter(&mut w, "", "message.max.bytes", Some("2000"));
    assert_eq!(code, 0, "{msg}");
    let refused = produce(&mut w, "dyn", 1, batch(1, 5_000));
    assert_eq!(produce_code(&refused), ErrorCode::MessageTooLarge.code());
    assert_eq!(
        describe(&mut w, 2, "dyn", "max.message.bytes"),
        (Some("2000".to_string()), 3),
        "DYNAMIC_DEFAULT_BROKER_CONFIG"
    );
    // This broker's own value wins over the cluster default.
    let (code, msg) = alter(&mut w, node, "message.max.bytes", Some("100000"));
    assert_eq!(code, 0, "{msg}");
    assert_eq!(produce_code(&produce(&mut w, "dyn", 1, batch(1, 5_000))), 0);
    assert_eq!(
        describe(&mut w, 4, node, "message.max.bytes"),
        (Some("100000".to_string()), 2),
        "DYNAMIC_BROKER_CONFIG"
    );
    // Keys read at startup only (by Kafka too) are refused; bad values too; both with
    // Kafka's INVALID_REQUEST and message.
    let (code, msg) = alter(&mut w, "", "log.retention.hours", Some("4"));
    assert_eq!(code, ErrorCode::InvalidRequest.code());
    assert_eq!(
        msg,
        "Cannot update these configs dynamically: [log.retention.hours]"
    );
    let (code, msg) = alter(&mut w, "", "log.retention.ms", Some("soon"));
    assert_eq!(code, ErrorCode::InvalidRequest.code());
    assert_eq!(
        msg,
        "Invalid value soon for configuration log.retention.ms: Not a number of type LONG"
    );
    // A key no definition knows (a plugin's own setting) is kept, as Kafka keeps it, and
    // described as sensitive: no value shown.
    let (code, msg) = alter(&mut w, node, "my.plugin.setting", Some("42"));
    assert_eq!(code, 0, "{msg}");
    assert_eq!(
        describe(&mut w, 4, node, "my.plugin.setting"),
        (None, 2),
        "DYNAMIC_BROKER_CONFIG, no value"
    );
    // Stored in metadata: a restarted broker still applies them.
    server.kill();
    server.restart();
    let mut w = Wire::connect(&server.bootstrap);
    assert_eq!(
        describe(&mut w, 4, node, "message.max.bytes"),
        (Some("100000".to_string()), 2)
    );
    let (code, _) = alter(&mut w, node, "message.max.bytes", None);
    assert_eq!(code, 0);
    let refused = produce(&mut w, "dyn", 1, batch(1, 5_000));
    assert_eq!(
        produce_code(&refused),
        ErrorCode::MessageTooLarge.code(),
        "back to the cluster default"
    );
    // The same through `sluice configs` for the cluster-wide default.
    let b = &server.bootstrap;
    sluice_tool(
        "configs",
        b,
        &[
            "--alter",
            "--entity-type",
            "brokers",
            "--entity-default",
            "--add-config",
            "log.retention.ms=3600000",
        ],
    );
    let shown = sluice_tool(
        "configs",
        b,
        &["--describe", "--entity-type", "brokers", "--entity-default"],
    );
    assert!(
        shown.contains("log.retention.ms=3600000")
            && shown.contains("DYNAMIC_DEFAULT_BROKER_CONFIG")
            && shown.contains("message.max.bytes=2000"),
        "{shown}"
    );
}

/// KIP-412: a broker's log levels change at runtime through its BROKER_LOGGER resource
/// (`sluice configs --entity-type broker-loggers`, IncrementalAlterConfigs), with Kafka's
/// errors for a bad level, removing the root level, or the wrong broker.
#[test]
fn log_levels_change_at_runtime_through_broker_loggers() {
    let server = start(&[]);
    let configs = |args: &[&str]| {
        let mut a = vec!["--entity-type", "broker-loggers", "--entity-name", "0"];
        a.extend_from_slice(args);
        sluice_tool("configs", &server.bootstrap, &a)
    };
    let opened = || server.log().matches("connection opened").count();
    let described = configs(&["--describe"]);
    assert!(
        described.contains("root=INFO sensitive=false source=DYNAMIC_BROKER_LOGGER_CONFIG"),
        "{described}"
    );
    assert_eq!(opened(), 0, "debug lines are off at INFO");
    configs(&["--alter", "--add-config", "sluice_broker::network=DEBUG"]);
    assert!(configs(&["--describe"]).contains("sluice_broker::network=DEBUG"));
    // Each tool run opens a connection, which the network module now logs at DEBUG.
    let deadline = Instant::now() + Duration::from_secs(10);
    while opened() == 0 {
        assert!(Instant::now() < deadline, "no debug line after the change");
        std::thread::sleep(Duration::from_millis(50));
    }
    configs(&["--alter", "--delete-config", "sluice_broker::network"]);
    let before = opened();
    // A topic creation logs at INFO after this tool's connection: once that line is read,
    // a debug line for the connection would have been read too.
    sluice_tool(
        "topics",
        &server.bootstrap,
        &["--create", "--topic", "after-reset", "--partitions", "1"],
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !server.log().contains("partition=after-reset-0") {
        assert!(Instant::now() < deadline, "no INFO line for the new topic");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(opened(), before, "the logger went back under root's INFO");
    assert!(!configs(&["--describe"]).contains("sluice_broker::network"));
    // Kafka's refusals.
    let mut w = Wire::connect(&server.bootstrap);
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    let mut alter = |broker: &str, logger: &str, op: i8, level: Option<&str>| -> i16 {
        let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(8)
                .with_resource_name(StrBytes::from_string(broker.into()))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(StrBytes::from_string(logger.into()))
                    .with_config_operation(op)
                    .with_value(level.map(|v| StrBytes::from_string(v.into())))]),
        ]);
        let resp: IncrementalAlterConfigsResponse =
            w.call(ApiKey::IncrementalAlterConfigs, 1, &req);
        resp.responses[0].error_code
    };
    assert_eq!(
        alter("0", "root", 0, Some("LOUD")),
        ErrorCode::InvalidConfig.code()
    );
    assert_eq!(
        alter("0", "root", 1, None),
        ErrorCode::InvalidRequest.code()
    );
    assert_eq!(
        alter("0", "x", 2, Some("INFO")),
        ErrorCode::InvalidRequest.code()
    );
    assert_eq!(
        alter("7", "x", 0, Some("INFO")),
        ErrorCode::InvalidRequest.code()
    );
    assert_eq!(alter("0", "openraft", 0, Some("ERROR")), 0);
    // The legacy AlterConfigs does not take loggers, as in Kafka.
    use kafka_protocol::messages::alter_configs_request::AlterConfigsResource as Legacy;
    let resp: AlterConfigsResponse = w.call(
        ApiKey::AlterConfigs,
        2,
        &AlterConfigsRequest::default().with_resources(vec![Legacy::default()
            .with_resource_type(8)
            .with_resource_name(StrBytes::from_static_str("0"))]),
    );
    assert_eq!(
        resp.responses[0].error_code,
        ErrorCode::InvalidRequest.code()
    );
    // A bad level through the tool: one line, exit 1.
    let out = std::process::Command::new(sluice_bin())
        .args(["configs", "--bootstrap-server", &server.bootstrap])
        .args(["--entity-type", "broker-loggers", "--entity-name", "0"])
        .args(["--alter", "--add-config", "root=LOUD"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("not a supported log level"), "{err}");
}

/// One ConsumerGroupHeartbeat (v1) of member `member` at `epoch`; a join (epoch 0) sends a
/// full request.
fn cg_heartbeat(
    w: &mut Wire,
    group: &str,
    member: &str,
    epoch: i32,
    change: impl FnOnce(&mut ConsumerGroupHeartbeatRequest),
) -> ConsumerGroupHeartbeatResponse {
    let mut r = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(StrBytes::from_string(group.into()).into())
        .with_member_id(StrBytes::from_string(member.into()))
        .with_member_epoch(epoch);
    if epoch == 0 {
        r.rebalance_timeout_ms = 30_000;
        r.subscribed_topic_names = Some(vec![StrBytes::from_static_str("cgw").into()]);
        r.topic_partitions = Some(Vec::new());
    }
    change(&mut r);
    w.call(ApiKey::ConsumerGroupHeartbeat, 1, &r)
}

fn cg_commit(w: &mut Wire, version: i16, member: &str, epoch: i32) -> i16 {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    let r = OffsetCommitRequest::default()
        .with_group_id(StrBytes::from_static_str("cgw-group").into())
        .with_generation_id_or_member_epoch(epoch)
        .with_member_id(StrBytes::from_string(member.into()))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(StrBytes::from_static_str("cgw").into())
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(0)])]);
    let resp: OffsetCommitResponse = w.call(ApiKey::OffsetCommit, version, &r);
    resp.topics[0].partitions[0].error_code
}

fn cg_fetch(w: &mut Wire, member: Option<&str>, epoch: i32) -> i16 {
    use kafka_protocol::messages::offset_fetch_request::{
        OffsetFetchRequestGroup, OffsetFetchRequestTopics,
    };
    let r = OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
        .with_group_id(StrBytes::from_static_str("cgw-group").into())
        .with_member_id(member.map(|m| StrBytes::from_string(m.into())))
        .with_member_epoch(epoch)
        .with_topics(Some(vec![OffsetFetchRequestTopics::default()
            .with_name(StrBytes::from_static_str("cgw").into())
            .with_partition_indexes(vec![0])]))]);
    let resp: OffsetFetchResponse = w.call(ApiKey::OffsetFetch, 9, &r);
    resp.groups[0].error_code
}

/// The consumer group protocol's answers on the wire, as Kafka 4.4's (checked against it
/// with `WIRE_AGAINST=host:port` naming a Kafka 4.4 broker): request checks and their
/// messages, epochs, offset commits and fetches validated by member epoch, the classic
/// APIs' view of a consumer group, describe, leave and delete.
#[test]
fn consumer_group_protocol_answers_match_kafka() {
    let server;
    let bootstrap = match std::env::var("WIRE_AGAINST") {
        Ok(b) => b,
        Err(_) => {
            server = start(&[]);
            server.bootstrap.clone()
        }
    };
    create_topic(&bootstrap, "cgw", 2, &[]);
    let mut w = Wire::connect(&bootstrap);
    let g = "cgw-group";
    let msg = |r: &ConsumerGroupHeartbeatResponse| {
        (
            r.error_code,
            r.error_message
                .as_ref()
                .map(|m| m.to_string())
                .unwrap_or_default(),
        )
    };
    // The coordinator is ready once its `__consumer_offsets` partition is (FindCoordinator
    // creates the topic).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let f: FindCoordinatorResponse = w.call(
            ApiKey::FindCoordinator,
            4,
            &FindCoordinatorRequest::default()
                .with_key_type(0)
                .with_coordinator_keys(vec![StrBytes::from_static_str(g)]),
        );
        let probe = cg_heartbeat(&mut w, g, "probe", 5, |_| {});
        if f.coordinators[0].error_code == 0 && ![14, 15, 16].contains(&probe.error_code) {
            break;
        }
        assert!(Instant::now() < deadline, "no coordinator: {probe:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Request checks, before any group exists.
    let r = cg_heartbeat(&mut w, g, "", 0, |_| {});
    assert_eq!(msg(&r), (42, "MemberId can't be empty.".into()));
    let r = cg_heartbeat(&mut w, g, "m1", 0, |r| r.topic_partitions = None);
    assert_eq!(
        msg(&r),
        (
            42,
            "TopicPartitions must be empty when (re-)joining.".into()
        )
    );
    let r = cg_heartbeat(&mut w, g, "m1", 0, |r| {
        r.server_assignor = Some(StrBytes::from_static_str("sticky"))
    });
    assert_eq!(r.error_code, ErrorCode::UnsupportedAssignor.code(), "{r:?}");
    let r = cg_heartbeat(&mut w, g, "m1", 3, |_| {});
    assert_eq!(r.error_code, ErrorCode::GroupIdNotFound.code(), "{r:?}");
    let r = cg_heartbeat(&mut w, g, "m1", 0, |r| {
        r.subscribed_topic_regex = Some(StrBytes::from_static_str("cgw-(["))
    });
    assert_eq!(
        r.error_code,
        ErrorCode::InvalidRegularExpression.code(),
        "{r:?}"
    );
    assert!(
        msg(&r)
            .1
            .starts_with("SubscribedTopicRegex `cgw-([` is not a valid regular expression: "),
        "{r:?}"
    );
    // A member joins: an epoch (Kafka 4.2 starts a new group at 1, 4.4 at 2), both
    // partitions, the broker's heartbeat interval.
    let r = cg_heartbeat(&mut w, g, "m1", 0, |_| {});
    assert_eq!(r.error_code, 0, "{r:?}");
    let e = r.member_epoch;
    assert!(e >= 1, "{r:?}");
    assert_eq!(r.member_id.as_deref(), Some("m1"));
    assert_eq!(r.heartbeat_interval_ms, 5000);
    let assigned = r.assignment.expect("an assignment");
    assert_eq!(assigned.topic_partitions.len(), 1);
    assert_eq!(assigned.topic_partitions[0].partitions, vec![0, 1]);
    // A plain heartbeat at the same epoch: nothing changed, no assignment.
    let r = cg_heartbeat(&mut w, g, "m1", e, |_| {});
    assert_eq!((r.error_code, r.member_epoch), (0, e));
    assert!(r.assignment.is_none(), "{r:?}");
    let r = cg_heartbeat(&mut w, g, "m1", e + 6, |_| {});
    assert_eq!(r.error_code, ErrorCode::FencedMemberEpoch.code(), "{r:?}");
    let r = cg_heartbeat(&mut w, g, "m9", e, |_| {});
    assert_eq!(r.error_code, ErrorCode::UnknownMemberId.code(), "{r:?}");
    // Offset commits and fetches name the member and its epoch.
    assert_eq!(cg_commit(&mut w, 9, "m1", e), 0);
    assert_eq!(
        cg_commit(&mut w, 9, "m1", e - 1),
        ErrorCode::StaleMemberEpoch.code()
    );
    assert_eq!(
        cg_commit(&mut w, 9, "m9", e),
        ErrorCode::UnknownMemberId.code()
    );
    assert_eq!(
        cg_commit(&mut w, 9, "", -1),
        ErrorCode::UnknownMemberId.code()
    );
    assert_eq!(
        cg_commit(&mut w, 8, "m1", e),
        ErrorCode::UnsupportedVersion.code()
    );
    assert_eq!(cg_fetch(&mut w, Some("m1"), e), 0);
    assert_eq!(cg_fetch(&mut w, None, -1), 0);
    assert_eq!(
        cg_fetch(&mut w, Some("m1"), e - 1),
        ErrorCode::StaleMemberEpoch.code()
    );
    assert_eq!(
        cg_fetch(&mut w, Some("m9"), e),
        ErrorCode::UnknownMemberId.code()
    );
    // The offsets of a topic the group consumes cannot be deleted.
    let offset_delete = |w: &mut Wire| -> i16 {
        use kafka_protocol::messages::offset_delete_request::{
            OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
        };
        let r: OffsetDeleteResponse = w.call(
            ApiKey::OffsetDelete,
            0,
            &OffsetDeleteRequest::default()
                .with_group_id(StrBytes::from_static_str(g).into())
                .with_topics(vec![OffsetDeleteRequestTopic::default()
                    .with_name(StrBytes::from_static_str("cgw").into())
                    .with_partitions(vec![
                        OffsetDeleteRequestPartition::default().with_partition_index(0)
                    ])]),
        );
        let t = r.topics.first().map(|t| t.partitions[0].error_code);
        if r.error_code != 0 {
            r.error_code
        } else {
            t.unwrap_or(-1)
        }
    };
    assert_eq!(
        offset_delete(&mut w),
        ErrorCode::GroupSubscribedToTopic.code()
    );
    // The classic APIs' view of it.
    let d: DescribeGroupsResponse = w.call(
        ApiKey::DescribeGroups,
        6,
        &DescribeGroupsRequest::default().with_groups(vec![StrBytes::from_static_str(g).into()]),
    );
    assert_eq!(d.groups[0].error_code, ErrorCode::GroupIdNotFound.code());
    assert_eq!(d.groups[0].group_state.as_str(), "Dead");
    assert_eq!(
        d.groups[0].error_message.as_deref(),
        Some("Group cgw-group is not a classic group.")
    );
    let l: ListGroupsResponse = w.call(
        ApiKey::ListGroups,
        5,
        &ListGroupsRequest::default()
            .with_types_filter(vec![StrBytes::from_static_str("Consumer")]),
    );
    let listed: Vec<_> = l
        .groups
        .iter()
        .map(|g| {
            (
                g.group_id.to_string(),
                g.protocol_type.to_string(),
                g.group_state.to_string(),
                g.group_type.to_string(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        vec![(
            g.to_string(),
            "consumer".to_string(),
            "Stable".to_string(),
            "consumer".to_string()
        )]
    );
    let del = |w: &mut Wire| {
        let r: DeleteGroupsResponse = w.call(
            ApiKey::DeleteGroups,
            2,
            &DeleteGroupsRequest::default()
                .with_groups_names(vec![StrBytes::from_static_str(g).into()]),
        );
        r.results[0].error_code
    };
    assert_eq!(del(&mut w), ErrorCode::NonEmptyGroup.code());
    // ConsumerGroupDescribe.
    let describe = |w: &mut Wire| -> ConsumerGroupDescribeResponse {
        w.call(
            ApiKey::ConsumerGroupDescribe,
            1,
            &ConsumerGroupDescribeRequest::default()
                .with_group_ids(vec![StrBytes::from_static_str(g).into()]),
        )
    };
    let d = describe(&mut w);
    let dg = &d.groups[0];
    assert_eq!(dg.error_code, 0, "{dg:?}");
    assert_eq!(
        (
            dg.group_state.as_str(),
            dg.group_epoch,
            dg.assignment_epoch,
            dg.assignor_name.as_str()
        ),
        ("Stable", e, e, "uniform")
    );
    assert_eq!(dg.members.len(), 1);
    let m = &dg.members[0];
    assert_eq!(
        (m.member_id.as_str(), m.member_epoch, m.member_type),
        ("m1", e, 1)
    );
    assert_eq!(m.assignment.topic_partitions[0].topic_name.as_str(), "cgw");
    assert_eq!(
        m.target_assignment.topic_partitions[0].partitions,
        vec![0, 1]
    );
    // The member leaves; the empty group can be deleted, after which it is not found.
    let r = cg_heartbeat(&mut w, g, "m1", -1, |_| {});
    assert_eq!((r.error_code, r.member_epoch), (0, -1), "{r:?}");
    let d = describe(&mut w);
    assert_eq!(d.groups[0].group_state.as_str(), "Empty");
    assert_eq!(d.groups[0].group_epoch, e + 1);
    assert_eq!(
        cg_commit(&mut w, 9, "", -1),
        0,
        "an empty group takes admin commits"
    );
    assert_eq!(offset_delete(&mut w), 0);
    assert_eq!(del(&mut w), 0);
    let d = describe(&mut w);
    assert_eq!(d.groups[0].error_code, ErrorCode::GroupIdNotFound.code());
    assert_eq!(
        d.groups[0].error_message.as_deref(),
        Some("Group cgw-group not found.")
    );
}

/// A StreamsGroupHeartbeat of `member` at `epoch`; a join (0) carries a word-count topology
/// over `<group>-in` (a repartition topic and a changelog) and empty task lists.
fn sg_heartbeat(
    w: &mut Wire,
    group: &str,
    member: &str,
    epoch: i32,
    change: impl FnOnce(&mut StreamsGroupHeartbeatRequest),
) -> StreamsGroupHeartbeatResponse {
    use kafka_protocol::messages::streams_group_heartbeat_request::{
        Subtopology, TopicInfo, Topology,
    };
    let s = |v: &str| StrBytes::from_string(v.into());
    let mut r = StreamsGroupHeartbeatRequest::default()
        .with_group_id(s(group).into())
        .with_member_id(s(member))
        .with_member_epoch(epoch)
        .with_endpoint_information_epoch(-1);
    if epoch == 0 {
        r.rebalance_timeout_ms = 30_000;
        r.process_id = Some(s("11111111-2222-3333-4444-555555555555"));
        r.active_tasks = Some(Vec::new());
        r.standby_tasks = Some(Vec::new());
        r.warmup_tasks = Some(Vec::new());
        r.topology = Some(Topology::default().with_epoch(0).with_subtopologies(vec![
                Subtopology::default()
                    .with_subtopology_id(s("0"))
                    .with_source_topics(vec![s(&format!("{group}-in")).into()])
                    .with_repartition_sink_topics(vec![
                        s(&format!("{group}-rk-repartition")).into()
                    ]),
                Subtopology::default()
                    .with_subtopology_id(s("1"))
                    .with_repartition_source_topics(vec![TopicInfo::default()
                        .with_name(s(&format!("{group}-rk-repartition")).into())])
                    .with_state_changelog_topics(vec![TopicInfo::default()
                        .with_name(s(&format!("{group}-store-changelog")).into())]),
            ]));
    }
    change(&mut r);
    w.call(ApiKey::StreamsGroupHeartbeat, 1, &r)
}

/// The streams group protocol (KIP-1071) on the wire: request checks and their messages, a
/// member joining a group whose internal topics the broker creates, its tasks once they
/// exist, fencing, StreamsGroupDescribe with the topology as configured, the group's type in
/// ListGroups, leaving and deleting. Passes against Kafka 4.4 too:
/// `WIRE_AGAINST=127.0.0.1:19092 cargo test -p sluice --test wire_protocol streams_group`.
#[test]
fn streams_group_protocol_answers_match_kafka() {
    let server;
    let bootstrap = match std::env::var("WIRE_AGAINST") {
        Ok(b) => b,
        Err(_) => {
            server = start(&[]);
            server.bootstrap.clone()
        }
    };
    // A group and topics of its own per run (Kafka keeps them across runs).
    let g = &format!("sgw-{}", std::process::id());
    create_topic(&bootstrap, &format!("{g}-in"), 2, &[]);
    let mut w = Wire::connect(&bootstrap);
    let msg = |r: &StreamsGroupHeartbeatResponse| {
        (
            r.error_code,
            r.error_message
                .as_ref()
                .map(|m| m.to_string())
                .unwrap_or_default(),
        )
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let f: FindCoordinatorResponse = w.call(
            ApiKey::FindCoordinator,
            4,
            &FindCoordinatorRequest::default()
                .with_key_type(0)
                .with_coordinator_keys(vec![StrBytes::from_string(g.clone())]),
        );
        let probe = sg_heartbeat(&mut w, g, "probe", 5, |_| {});
        if f.coordinators[0].error_code == 0 && ![14, 15, 16].contains(&probe.error_code) {
            assert_eq!(
                msg(&probe),
                (69, format!("Streams group {g} not found.")),
                "unknown group"
            );
            break;
        }
        assert!(Instant::now() < deadline, "no coordinator: {probe:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Request checks.
    let r = sg_heartbeat(&mut w, g, "", 0, |_| {});
    assert_eq!(msg(&r), (42, "MemberId can't be empty.".into()));
    let r = sg_heartbeat(&mut w, g, "m1", 0, |r| r.rebalance_timeout_ms = -1);
    assert_eq!(
        msg(&r),
        (
            42,
            "RebalanceTimeoutMs must be provided in first request.".into()
        )
    );
    let r = sg_heartbeat(&mut w, g, "m1", 0, |r| r.active_tasks = None);
    assert_eq!(
        msg(&r),
        (42, "ActiveTasks must be empty when (re-)joining.".into())
    );
    let r = sg_heartbeat(&mut w, g, "m1", 0, |r| r.topology = None);
    assert_eq!(
        msg(&r),
        (42, "Topology must be non-null when (re-)joining.".into())
    );
    let r = sg_heartbeat(&mut w, g, "m1", 0, |r| {
        if let Some(t) = r.topology.as_mut() {
            t.subtopologies[1].state_changelog_topics[0].partitions = 3;
        }
    });
    assert_eq!(
        msg(&r),
        (
            130,
            format!("Changelog topic {g}-store-changelog must have an undefined partition count, but it is set to 3.")
        )
    );
    let r = sg_heartbeat(&mut w, g, "m1", 0, |r| {
        if let Some(t) = r.topology.as_mut() {
            t.subtopologies[0].source_topics =
                vec![StrBytes::from_static_str("__consumer_offsets").into()];
        }
    });
    assert_eq!(
        msg(&r),
        (
            130,
            "Use of Kafka internal topics __consumer_offsets in a Kafka Streams topology is prohibited.".into()
        )
    );
    let r = sg_heartbeat(&mut w, g, "m1", 0, |r| r.member_epoch = -3);
    assert_eq!(
        msg(&r),
        (
            42,
            "MemberEpoch is -3, but must be greater than or equal to -2.".into()
        )
    );
    // A group that has only offsets (an empty classic group) stays one when a join is
    // refused for its topology (a repartition topic nothing writes).
    {
        use kafka_protocol::messages::offset_commit_request::{
            OffsetCommitRequestPartition, OffsetCommitRequestTopic,
        };
        let c: OffsetCommitResponse = w.call(
            ApiKey::OffsetCommit,
            8,
            &OffsetCommitRequest::default()
                .with_group_id(StrBytes::from_string(g.clone()).into())
                .with_generation_id_or_member_epoch(-1)
                .with_topics(vec![OffsetCommitRequestTopic::default()
                    .with_name(StrBytes::from_string(format!("{g}-in")).into())
                    .with_partitions(vec![OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(5)])]),
        );
        assert_eq!(c.topics[0].partitions[0].error_code, 0, "{c:?}");
    }
    let r = sg_heartbeat(&mut w, g, "m1", 0, |r| {
        if let Some(t) = r.topology.as_mut() {
            t.subtopologies[0].repartition_sink_topics.clear();
        }
    });
    assert_eq!(
        msg(&r),
        (
            130,
            "Failed to compute number of partitions for all repartition topics, because a repartition source topic is never used as a sink topic.".into()
        )
    );
    let d: DescribeGroupsResponse = w.call(
        ApiKey::DescribeGroups,
        5,
        &DescribeGroupsRequest::default()
            .with_groups(vec![StrBytes::from_string(g.clone()).into()]),
    );
    assert_eq!(
        (d.groups[0].error_code, d.groups[0].group_state.as_str()),
        (0, "Empty"),
        "{d:?}"
    );
    // A join: the internal topics are missing (the broker creates them), so no tasks yet.
    let j = sg_heartbeat(&mut w, g, "m1", 0, |_| {});
    assert_eq!(msg(&j), (0, String::new()), "{j:?}");
    assert!(j.member_epoch > 0, "{j:?}");
    assert_eq!(j.active_tasks.as_ref().map(Vec::len), Some(0), "{j:?}");
    let status = j.status.clone().unwrap_or_default();
    let missing = status
        .iter()
        .find(|s| s.status_code == 3)
        .expect("MISSING_INTERNAL_TOPICS");
    let detail = missing.status_detail.to_string();
    assert!(
        detail.starts_with("Internal topics are missing: ")
            && detail.contains(&format!("{g}-rk-repartition"))
            && detail.contains(&format!("{g}-store-changelog")),
        "{detail}"
    );
    // Heartbeats until the member has its four tasks (two subtopologies, two partitions).
    let mut epoch = j.member_epoch;
    let deadline = Instant::now() + Duration::from_secs(30);
    let tasks = loop {
        let r = sg_heartbeat(&mut w, g, "m1", epoch, |r| {
            r.active_tasks = Some(Vec::new());
            r.standby_tasks = Some(Vec::new());
            r.warmup_tasks = Some(Vec::new());
        });
        assert_eq!(r.error_code, 0, "{r:?}");
        epoch = r.member_epoch;
        let n: usize = r
            .active_tasks
            .iter()
            .flatten()
            .map(|t| t.partitions.len())
            .sum();
        if n > 0 {
            assert_eq!(r.status.as_ref().map(Vec::len), Some(0), "{r:?}");
            break r.active_tasks.unwrap_or_default();
        }
        assert!(Instant::now() < deadline, "no tasks: {r:?}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut ids: Vec<(String, Vec<i32>)> = tasks
        .iter()
        .map(|t| (t.subtopology_id.to_string(), t.partitions.clone()))
        .collect();
    ids.sort();
    assert_eq!(
        ids,
        [("0".to_string(), vec![0, 1]), ("1".to_string(), vec![0, 1])]
    );
    // The created topics have the partitions decided.
    for topic in [
        format!("{g}-rk-repartition"),
        format!("{g}-store-changelog"),
    ] {
        let m: MetadataResponse = w.call(
            ApiKey::Metadata,
            12,
            &MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
                .with_name(Some(StrBytes::from_string(topic.clone()).into()))])),
        );
        assert_eq!(m.topics[0].partitions.len(), 2, "{topic}");
    }
    // A higher epoch is fenced.
    let r = sg_heartbeat(&mut w, g, "m1", epoch + 1, |_| {});
    assert_eq!(
        msg(&r),
        (
            110,
            format!("The streams group member has a greater member epoch ({}) than the one known by the group coordinator ({epoch}). The member must abandon all its partitions and rejoin.", epoch + 1)
        )
    );
    // Described with the topology as configured.
    let d: StreamsGroupDescribeResponse = w.call(
        ApiKey::StreamsGroupDescribe,
        0,
        &StreamsGroupDescribeRequest::default().with_group_ids(vec![
            StrBytes::from_string(g.clone()).into(),
            StrBytes::from_static_str("sgw-none").into(),
        ]),
    );
    // (Kafka answers groups in no particular order.)
    let find = |id: &str| {
        d.groups
            .iter()
            .find(|x| x.group_id.as_str() == id)
            .expect("described")
    };
    let described = find(g);
    assert_eq!(described.error_code, 0, "{described:?}");
    assert_eq!(described.group_state.as_str(), "Stable");
    assert_eq!(described.members.len(), 1);
    assert_eq!(described.members[0].member_epoch, epoch);
    let subs = described
        .topology
        .as_ref()
        .and_then(|t| t.subtopologies.clone())
        .unwrap_or_default();
    assert_eq!(subs.len(), 2);
    assert_eq!(subs[1].state_changelog_topics[0].partitions, 2);
    assert_eq!(subs[1].repartition_source_topics[0].partitions, 2);
    let none = find("sgw-none");
    assert_eq!(none.error_code, 69);
    assert_eq!(
        none.error_message.as_deref(),
        Some("Group sgw-none not found.")
    );
    // Not a consumer group; listed as a streams group.
    let r = cg_heartbeat(&mut w, g, "c1", 0, |_| {});
    assert_eq!(
        (r.error_code, r.error_message.map(|m| m.to_string())),
        (69, Some(format!("Group {g} is not a consumer group.")))
    );
    let l: ListGroupsResponse = w.call(ApiKey::ListGroups, 5, &ListGroupsRequest::default());
    let listed = l
        .groups
        .iter()
        .find(|x| x.group_id.as_str() == g)
        .expect("listed");
    assert_eq!(
        (listed.group_type.as_str(), listed.protocol_type.as_str()),
        ("streams", "streams")
    );
    // Static members: an instance id is held by one live member; one that left for a while
    // (-2) is replaced by the next member with its instance id.
    let i1 = || Some(StrBytes::from_static_str("i1"));
    let r = sg_heartbeat(&mut w, g, "s1", 0, |r| r.instance_id = i1());
    assert_eq!(r.error_code, 0, "{r:?}");
    let r = sg_heartbeat(&mut w, g, "s2", 0, |r| r.instance_id = i1());
    assert_eq!(
        r.error_code,
        ErrorCode::UnreleasedInstanceId.code(),
        "{r:?}"
    );
    let r = sg_heartbeat(&mut w, g, "s1", -2, |_| {});
    assert_eq!(msg(&r), (42, "InstanceId can't be null.".into()));
    let r = sg_heartbeat(&mut w, g, "s1", -2, |r| r.instance_id = i1());
    assert_eq!((r.error_code, r.member_epoch), (0, -2), "{r:?}");
    let r = sg_heartbeat(&mut w, g, "s2", 0, |r| r.instance_id = i1());
    assert_eq!(r.error_code, 0, "{r:?}");
    let r = sg_heartbeat(&mut w, g, "s2", -1, |r| r.instance_id = i1());
    assert_eq!((r.error_code, r.member_epoch), (0, -1), "{r:?}");
    // Leaving, then deleting the empty group.
    let r = sg_heartbeat(&mut w, g, "m1", -1, |_| {});
    assert_eq!((r.error_code, r.member_epoch), (0, -1), "{r:?}");
    let del: DeleteGroupsResponse = w.call(
        ApiKey::DeleteGroups,
        2,
        &DeleteGroupsRequest::default()
            .with_groups_names(vec![StrBytes::from_string(g.clone()).into()]),
    );
    assert_eq!(del.results[0].error_code, 0);
}

/// FindCoordinator for `group` (which creates `__consumer_offsets` on first use).
fn find_group_coordinator(w: &mut Wire, group: &str) {
    let _: FindCoordinatorResponse = w.call(
        ApiKey::FindCoordinator,
        4,
        &FindCoordinatorRequest::default()
            .with_key_type(0)
            .with_coordinator_keys(vec![StrBytes::from_string(group.to_string())]),
    );
}

/// A streams group is kept in `__consumer_offsets`: after a kill -9 and restart the member
/// heartbeats at its epoch with its tasks and goes on, nothing reassigned; the group is
/// described as it was (epoch, members, topology).
#[test]
fn a_streams_group_is_resumed_after_a_crash() {
    use kafka_protocol::messages::streams_group_heartbeat_request::TaskIds;
    let mut server = start(&["group.streams.initial.rebalance.delay.ms=0"]);
    let g = "sgr";
    create_topic(&server.bootstrap, "sgr-in", 2, &[]);
    let mut w = Wire::connect(&server.bootstrap);
    let owned = |tasks: &[(String, Vec<i32>)]| -> Vec<TaskIds> {
        tasks
            .iter()
            .map(|(s, ps)| {
                TaskIds::default()
                    .with_subtopology_id(StrBytes::from_string(s.clone()))
                    .with_partitions(ps.clone())
            })
            .collect()
    };
    // Join, then heartbeat until the member has its tasks (the broker creates the internal
    // topics first) and is stable.
    let mut epoch = 0;
    let mut tasks: Vec<(String, Vec<i32>)> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = sg_heartbeat(&mut w, g, "m1", epoch, |r| {
            r.active_tasks = Some(owned(&tasks));
            r.standby_tasks = Some(Vec::new());
            r.warmup_tasks = Some(Vec::new());
        });
        if [14, 15, 16].contains(&r.error_code) {
            assert!(Instant::now() < deadline, "no coordinator: {r:?}");
            find_group_coordinator(&mut w, g);
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        assert_eq!(r.error_code, 0, "{r:?}");
        epoch = r.member_epoch;
        if let Some(active) = &r.active_tasks {
            tasks = active
                .iter()
                .map(|t| (t.subtopology_id.to_string(), t.partitions.clone()))
                .collect();
        }
        if tasks.iter().map(|t| t.1.len()).sum::<usize>() == 4 && r.status == Some(Vec::new()) {
            break;
        }
        assert!(Instant::now() < deadline, "no tasks: {r:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let describe = |w: &mut Wire| -> (i16, i32, Vec<(String, i32)>, usize) {
        let d: StreamsGroupDescribeResponse = w.call(
            ApiKey::StreamsGroupDescribe,
            0,
            &StreamsGroupDescribeRequest::default()
                .with_group_ids(vec![StrBytes::from_static_str("sgr").into()]),
        );
        let x = &d.groups[0];
        let members = x
            .members
            .iter()
            .map(|m| (m.member_id.to_string(), m.member_epoch))
            .collect();
        let subtopologies = x
            .topology
            .as_ref()
            .and_then(|t| t.subtopologies.as_ref())
            .map_or(0, Vec::len);
        (x.error_code, x.group_epoch, members, subtopologies)
    };
    let before = describe(&mut w);
    assert_eq!((before.0, before.3), (0, 2), "{before:?}");
    server.kill();
    server.restart();
    let mut w = Wire::connect(&server.bootstrap);
    let deadline = Instant::now() + Duration::from_secs(30);
    let r = loop {
        let r = sg_heartbeat(&mut w, g, "m1", epoch, |r| {
            r.active_tasks = Some(owned(&tasks));
            r.standby_tasks = Some(Vec::new());
            r.warmup_tasks = Some(Vec::new());
        });
        if ![14, 15, 16].contains(&r.error_code) {
            break r;
        }
        assert!(Instant::now() < deadline, "no coordinator: {r:?}");
        find_group_coordinator(&mut w, g);
        std::thread::sleep(Duration::from_millis(100));
    };
    // Accepted at its epoch, its tasks unchanged (none sent back).
    assert_eq!((r.error_code, r.member_epoch), (0, epoch), "{r:?}");
    assert_eq!(r.active_tasks, None, "{r:?}");
    assert_eq!(describe(&mut w), before);
    // `sluice groups` describes it: the member, its epoch, and the partitions its tasks
    // read (each task's partition of its subtopology's input topics).
    let out = sluice_tool(
        "groups",
        &server.bootstrap,
        &["--describe", "--group", g, "--members", "--verbose"],
    );
    let row = out
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("m1"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        row.contains(&format!(" {epoch} ")) && row.contains("sgr-in:0,1;sgr-rk-repartition:0,1"),
        "{out}"
    );
}

/// `group.version` and `streams.version` are finalized (1) on a new cluster, as Kafka 4.4's;
/// turned off (0), the consumer and streams group protocols are answered UNSUPPORTED_VERSION
/// (Kafka's isConsumerGroupProtocolEnabled / isStreamsGroupProtocolEnabled), and back on, they
/// serve again.
#[test]
fn the_group_protocols_follow_their_features() {
    use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
    let server = start(&[]);
    let mut w = Wire::connect(&server.bootstrap);
    let finalized = |w: &mut Wire| -> (Option<i16>, Option<i16>) {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("sluice-test"))
            .with_client_software_version(StrBytes::from_static_str("1.0"));
        let r: ApiVersionsResponse = w.call(ApiKey::ApiVersions, 4, &req);
        assert_eq!(r.error_code, 0, "{r:?}");
        let level = |name: &str| {
            r.finalized_features
                .iter()
                .find(|f| f.name.as_str() == name)
                .map(|f| f.max_version_level)
        };
        (level("group.version"), level("streams.version"))
    };
    assert_eq!(finalized(&mut w), (Some(1), Some(1)));
    let update = |w: &mut Wire, level: i16, how: i8| {
        let updates = ["group.version", "streams.version"]
            .iter()
            .map(|n| {
                FeatureUpdateKey::default()
                    .with_feature(StrBytes::from_static_str(n))
                    .with_max_version_level(level)
                    .with_upgrade_type(how)
            })
            .collect();
        let r: UpdateFeaturesResponse = w.call(
            ApiKey::UpdateFeatures,
            1,
            &UpdateFeaturesRequest::default()
                .with_timeout_ms(10_000)
                .with_feature_updates(updates),
        );
        assert_eq!(r.error_code, 0, "{r:?}");
        assert!(r.results.iter().all(|x| x.error_code == 0), "{r:?}");
    };
    let wait_for = |w: &mut Wire, levels: (Option<i16>, Option<i16>)| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while finalized(w) != levels {
            assert!(Instant::now() < deadline, "levels never reached {levels:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    // Off (a safe downgrade).
    update(&mut w, 0, 2);
    wait_for(&mut w, (None, None));
    let unsupported = ErrorCode::UnsupportedVersion.code();
    assert_eq!(
        cg_heartbeat(&mut w, "gv", "m1", 0, |_| {}).error_code,
        unsupported
    );
    assert_eq!(
        sg_heartbeat(&mut w, "gv", "m1", 0, |_| {}).error_code,
        unsupported
    );
    let d: ConsumerGroupDescribeResponse = w.call(
        ApiKey::ConsumerGroupDescribe,
        0,
        &ConsumerGroupDescribeRequest::default()
            .with_group_ids(vec![StrBytes::from_static_str("gv").into()]),
    );
    assert_eq!(d.groups[0].error_code, unsupported, "{d:?}");
    // On again.
    update(&mut w, 1, 1);
    wait_for(&mut w, (Some(1), Some(1)));
    // (The group's coordinator comes up with `__consumer_offsets`, which FindCoordinator
    // creates.)
    let deadline = Instant::now() + Duration::from_secs(30);
    let r = loop {
        find_group_coordinator(&mut w, "gv");
        let r = cg_heartbeat(&mut w, "gv", "m1", 0, |_| {});
        if ![14, 15, 16].contains(&r.error_code) {
            break r;
        }
        assert!(Instant::now() < deadline, "no coordinator: {r:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!((r.error_code, r.member_epoch), (0, 1), "{r:?}");
}
