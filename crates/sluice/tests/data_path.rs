//! The data path under load, against a real `sluice` process: the request budget
//! (`queued.max.request.bytes`) holding memory while hundreds of connections send large
//! produce requests at once; disk work (appends, fsyncs, segment rolls) kept off the threads
//! that serve other partitions; record sets arriving whole on plaintext (sendfile) and TLS
//! (pooled buffer) listeners alike.

mod common;
#[path = "common/wire.rs"]
mod wire;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use rdkafka::consumer::Consumer;
use sluice_protocol::batch::BatchBuilder;
use sluice_protocol::compression::Compression;
use wire::Wire;

/// These tests load the machine (and one measures latency): one at a time.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// One batch of `n` records of `size` bytes.
fn batch(n: usize, size: usize) -> Bytes {
    let mut b = BatchBuilder::new(Compression::None);
    let value = vec![b'v'; size];
    let now = now_ms();
    for i in 0..n {
        b.append(now, Some(format!("k{i}").as_bytes()), Some(&value), &[]);
    }
    b.build(0).unwrap().into()
}

fn produce_request(topic: &str, partition: i32, acks: i16, records: Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])])
}

/// Peak resident memory of a process (VmHWM), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    kb * 1024
}

fn log_end(bootstrap: &str, topic: &str) -> i64 {
    let c = consumer(bootstrap, &[]);
    c.fetch_watermarks(topic, 0, Duration::from_secs(10))
        .unwrap()
        .1
}

/// Hundreds of connections each send a produce request near `socket.request.max.bytes` at
/// once. With `queued.max.request.bytes` the broker reads a frame's body only once the budget
/// admits it, so its memory stays bounded (here: the peak RSS below 256 MiB, where buffering
/// every request at once would take 800 MB), every request is answered, and every record
/// acknowledged is in the log.
#[test]
fn a_flood_of_large_produce_requests_is_held_to_the_request_budget() {
    let _serial = one_at_a_time();
    const CONNECTIONS: usize = 200;
    const RECORDS: usize = 61;
    let server = start(&[
        "socket.request.max.bytes=4194304",
        "queued.max.request.bytes=33554432",
        "message.max.bytes=5000000",
    ]);
    create_topic(&server.bootstrap, "flood", 1, &[]);
    // One batch of about 3.9 MiB: near the frame limit.
    let request = Arc::new(produce_request("flood", 0, 1, batch(RECORDS, 64 * 1024)));
    let start_line = Arc::new(std::sync::Barrier::new(CONNECTIONS));
    let threads: Vec<_> = (0..CONNECTIONS)
        .map(|_| {
            let (bootstrap, request, start_line) = (
                server.bootstrap.clone(),
                Arc::clone(&request),
                Arc::clone(&start_line),
            );
            std::thread::spawn(move || {
                let mut w = Wire::connect(&bootstrap);
                start_line.wait();
                let resp: ProduceResponse = w.call(ApiKey::Produce, 9, &*request);
                resp.responses[0].partition_responses[0].error_code
            })
        })
        .collect();
    let codes: Vec<i16> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let acked = codes.iter().filter(|c| **c == 0).count();
    // Every request answered; none refused for memory, since the budget makes them wait.
    assert_eq!(acked, CONNECTIONS, "codes: {codes:?}");
    assert_eq!(
        log_end(&server.bootstrap, "flood"),
        (acked * RECORDS) as i64
    );
    let peak = peak_rss(server.pid());
    eprintln!("peak RSS {} MiB", peak >> 20);
    assert!(
        peak < 256 << 20,
        "peak RSS {} MiB with {CONNECTIONS} x 4 MiB requests in flight",
        peak >> 20
    );
}

/// Fetch round trips on one partition, max_wait 0: their latencies in order.
fn fetch_latencies(bootstrap: &str, topic: &str, rounds: usize) -> Vec<Duration> {
    let mut w = Wire::connect(bootstrap);
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    (0..rounds)
        .map(|_| {
            let started = Instant::now();
            let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &req);
            assert_eq!(resp.responses[0].partitions[0].error_code, 0);
            started.elapsed()
        })
        .collect()
}

fn percentile(mut samples: Vec<Duration>, p: f64) -> Duration {
    samples.sort_unstable();
    samples[((samples.len() - 1) as f64 * p) as usize]
}

/// Partition B rolls a segment every megabyte and fsyncs every append
/// (`segment.bytes=1048576`, `flush.messages=1`) under several producers, while a client
/// fetches partition A: A's fetch latency stays flat, because appends, fsyncs and rolls run
/// on blocking threads and fsyncs after the log's lock, never on the threads serving A.
#[test]
fn fetch_latency_on_one_partition_stays_flat_while_another_rolls_and_fsyncs() {
    let _serial = one_at_a_time();
    let server = start(&[]);
    create_topic(&server.bootstrap, "quiet", 1, &[]);
    create_topic(
        &server.bootstrap,
        "busy",
        1,
        &[("segment.bytes", "1048576"), ("flush.messages", "1")],
    );
    let mut w = Wire::connect(&server.bootstrap);
    let resp: ProduceResponse = w.call(
        ApiKey::Produce,
        9,
        &produce_request("quiet", 0, 1, batch(10, 100)),
    );
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
    let alone = fetch_latencies(&server.bootstrap, "quiet", 2000);

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let appended = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let producers: Vec<_> = (0..4)
        .map(|_| {
            let (bootstrap, stop, appended) = (
                server.bootstrap.clone(),
                Arc::clone(&stop),
                Arc::clone(&appended),
            );
            std::thread::spawn(move || {
                let mut w = Wire::connect(&bootstrap);
                // 256 KiB per append: a roll every 4 appends, an fsync every one.
                let req = produce_request("busy", 0, 1, batch(4, 64 * 1024));
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let resp: ProduceResponse = w.call(ApiKey::Produce, 9, &req);
                    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
                    appended.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            })
        })
        .collect();
    // Let the rolls get going, then measure A meanwhile.
    while appended.load(std::sync::atomic::Ordering::Relaxed) < 20 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let before = appended.load(std::sync::atomic::Ordering::Relaxed);
    let loaded = fetch_latencies(&server.bootstrap, "quiet", 2000);
    let during = appended.load(std::sync::atomic::Ordering::Relaxed) - before;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for p in producers {
        p.join().unwrap();
    }
    let segments = std::fs::read_dir(server.data_dir().join("busy-0"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".log"))
        })
        .count();
    let (p50, p99) = (percentile(loaded.clone(), 0.5), percentile(loaded, 0.99));
    let (q50, q99) = (percentile(alone.clone(), 0.5), percentile(alone, 0.99));
    eprintln!(
        "fetch latency alone p50 {q50:?} p99 {q99:?}; while {during} fsynced appends and {segments} segments: p50 {p50:?} p99 {p99:?}"
    );
    assert!(
        during >= 8 && segments >= 3,
        "the busy partition was not busy"
    );
    // Flat: the median and the tail while the other partition fsyncs and rolls stay within a
    // few times their quiet values (small absolute allowances cover a 2-core box's scheduling
    // noise). Appends on the async workers put every fsync in A's way: its median then goes
    // from tens of microseconds to milliseconds.
    assert!(
        p50 <= q50 * 3 + Duration::from_millis(1),
        "p50 {p50:?} under load against {q50:?} alone"
    );
    assert!(
        p99 <= q99 * 4 + Duration::from_millis(5),
        "p99 {p99:?} under load against {q99:?} alone"
    );
}

/// The same record sets arrive over a plaintext listener (sendfile) and a TLS one (a pooled
/// buffer), whole and identical, including fetches cut short by `max.partition.fetch.bytes`
/// across several segments.
#[test]
fn record_sets_arrive_whole_over_plaintext_and_tls() {
    let _serial = one_at_a_time();
    use rdkafka::consumer::BaseConsumer;
    use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
    let fixture = |name: &str| {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/tls")
            .join(name)
            .display()
            .to_string()
    };
    let keystore = format!("ssl.keystore.location={}", fixture("server.pem"));
    let truststore = format!("ssl.truststore.location={}", fixture("ca.pem"));
    let server = start(&[
        "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        &keystore,
        &truststore,
    ]);
    create_topic(&server.bootstrap, "both", 1, &[("segment.bytes", "200000")]);
    let mut w = Wire::connect(&server.bootstrap);
    for i in 0..60 {
        let resp: ProduceResponse = w.call(
            ApiKey::Produce,
            9,
            &produce_request("both", 0, 1, batch(1 + i % 7, 1000 + i * 37)),
        );
        assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
    }
    let end = log_end(&server.bootstrap, "both");
    let read = |config: &mut ClientConfig| -> Vec<(i64, Vec<u8>)> {
        let c: BaseConsumer = config
            .set("group.id", "both")
            .set("enable.auto.commit", "false")
            .set("max.partition.fetch.bytes", "30000")
            .create()
            .unwrap();
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("both", 0, Offset::Beginning)
            .unwrap();
        c.assign(&tpl).unwrap();
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while (out.len() as i64) < end {
            assert!(Instant::now() < deadline, "read {} of {end}", out.len());
            if let Some(m) = c.poll(Duration::from_millis(200)) {
                let m = m.unwrap();
                out.push((m.offset(), m.payload().unwrap_or_default().to_vec()));
            }
        }
        out
    };
    let plain = read(ClientConfig::new().set("bootstrap.servers", &server.bootstrap));
    let ssl = server.listener("SSL").expect("the SSL listener");
    let tls = read(
        ClientConfig::new()
            .set("bootstrap.servers", &ssl)
            .set("security.protocol", "SSL")
            .set("ssl.ca.location", fixture("ca.pem")),
    );
    assert_eq!(plain.len() as i64, end);
    assert!(plain.iter().enumerate().all(|(i, (o, _))| *o == i as i64));
    assert!(plain == tls, "the two listeners served different records");
}
