//! librdkafka (through the `rdkafka` crate) against a real `sluice` process: keyed produce
//! with every codec, consume back, partitioning identical to Kafka's, timestamp lookup,
//! nothing lost across restarts and crashes, and an idempotent producer's retry written once.

mod common;
#[path = "common/proxy.rs"]
mod proxy;

use std::collections::HashSet;
use std::time::Duration;

use common::*;
use rdkafka::consumer::Consumer;
use rdkafka::producer::Producer;
use rdkafka::{Offset, TopicPartitionList};
use sluice_protocol::batch::BatchHeader;
use sluice_protocol::compression::Compression;
use sluice_protocol::murmur2::partition_for_key;

const RECORDS: usize = 100_000;
const PARTITIONS: i32 = 6;

fn keyed(n: usize, tag: &str) -> Vec<(Vec<u8>, Vec<u8>, Option<i64>)> {
    (0..n)
        .map(|i| {
            (
                format!("key-{}", i % 5000).into_bytes(),
                format!("{tag}-value-{i}-{}", "x".repeat(i % 50)).into_bytes(),
                None,
            )
        })
        .collect()
}

#[test]
fn every_codec_round_trips_100k_keyed_records_with_kafka_partitioning() {
    let server = start(&[]);
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
        let topic = format!("codec-{codec}");
        create_topic(&server.bootstrap, &topic, PARTITIONS, &[]);
        let records = keyed(RECORDS, codec);
        let p = producer(
            &server.bootstrap,
            &[("compression.codec", codec), ("batch.num.messages", "2000")],
        );
        produce_all(&p, &topic, &records);
        let acked = p.context().acked.lock().unwrap().clone();
        assert_eq!(acked.len(), RECORDS);
        for (key, partition, _) in &acked {
            assert_eq!(
                *partition,
                partition_for_key(key, PARTITIONS),
                "{codec}: key {:?}",
                String::from_utf8_lossy(key)
            );
        }
        // The batches on disk carry the producer's codec (librdkafka compresses lz4 only for
        // brokers that advertise FindCoordinator, its LZ4 feature probe).
        let first = std::fs::read(
            server
                .data_dir()
                .join(format!("{topic}-0/00000000000000000000.log")),
        )
        .unwrap();
        let stored = BatchHeader::parse(&first).unwrap().compression().unwrap();
        assert_eq!(
            stored,
            Compression::from_name(codec).unwrap(),
            "{codec}: stored codec"
        );
        let consumed = consume_all(&server.bootstrap, &topic, PARTITIONS, RECORDS);
        assert_eq!(consumed.len(), RECORDS, "{codec}");
        let mut seen = HashSet::new();
        for (partition, offset, key, value, _) in &consumed {
            assert!(
                seen.insert((*partition, *offset)),
                "{codec}: duplicate offset {partition}/{offset}"
            );
            let key = key.as_ref().unwrap();
            assert_eq!(*partition, partition_for_key(key, PARTITIONS));
            assert!(value.as_ref().unwrap().starts_with(codec.as_bytes()));
        }
        // Per partition, offsets are dense from 0: nothing skipped, nothing duplicated.
        for p in 0..PARTITIONS {
            let mut offs: Vec<i64> = consumed.iter().filter(|r| r.0 == p).map(|r| r.1).collect();
            offs.sort_unstable();
            assert!(
                offs.iter().enumerate().all(|(i, o)| *o == i as i64),
                "{codec}: partition {p} has gaps"
            );
        }
    }
}

#[test]
fn offsets_for_times_finds_the_first_record_at_or_after_a_timestamp() {
    let server = start(&[]);
    create_topic(&server.bootstrap, "times", 1, &[]);
    let base = 1_700_000_000_000i64
        + (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
            - 1_700_000_000_000);
    // 1000 records, 10 ms apart, in the past so they pass the timestamp window.
    let start_ts = base - 100_000;
    let records: Vec<_> = (0..1000)
        .map(|i| {
            (
                format!("k{i}").into_bytes(),
                b"v".to_vec(),
                Some(start_ts + 10 * i as i64),
            )
        })
        .collect();
    let p = producer(&server.bootstrap, &[("linger.ms", "20")]);
    produce_all(&p, "times", &records);
    let c = consumer(&server.bootstrap, &[]);
    for (ts, want) in [
        (start_ts - 5, 0i64),
        (start_ts, 0),
        (start_ts + 1, 1),
        (start_ts + 4995, 500),
        (start_ts + 9990, 999),
    ] {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("times", 0, Offset::Offset(ts))
            .unwrap();
        let got = c.offsets_for_times(tpl, Duration::from_secs(10)).unwrap();
        let off = got.find_partition("times", 0).unwrap().offset();
        assert_eq!(off, Offset::Offset(want), "timestamp {ts}");
    }
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("times", 0, Offset::Offset(start_ts + 100_000))
        .unwrap();
    let got = c.offsets_for_times(tpl, Duration::from_secs(10)).unwrap();
    assert_eq!(
        got.find_partition("times", 0).unwrap().offset(),
        Offset::End
    );
    let (low, high) = c
        .fetch_watermarks("times", 0, Duration::from_secs(10))
        .unwrap();
    assert_eq!((low, high), (0, 1000));
}

#[test]
fn clean_restart_between_produce_and_consume_loses_nothing() {
    let mut server = start(&[]);
    create_topic(&server.bootstrap, "durable", 3, &[]);
    let records = keyed(20_000, "restart");
    produce_all(
        &producer(&server.bootstrap, &[("acks", "all")]),
        "durable",
        &records,
    );
    let status = server.stop();
    assert!(status.success(), "SIGTERM must exit 0, got {status}");
    assert!(server.data_dir().join(".kafka_cleanshutdown").exists());
    server.restart();
    let consumed = consume_all(&server.bootstrap, "durable", 3, records.len());
    assert_eq!(consumed.len(), records.len());
}

#[test]
fn kill_9_after_acks_all_loses_nothing_acknowledged() {
    let mut server = start(&["log.segment.bytes=1048576"]);
    create_topic(&server.bootstrap, "crashy", 2, &[]);
    let records = keyed(30_000, "crash");
    let p = producer(
        &server.bootstrap,
        &[("acks", "all"), ("compression.codec", "lz4")],
    );
    produce_all(&p, "crashy", &records);
    let acked = p.context().acked.lock().unwrap().len();
    drop(p);
    server.kill();
    // Tear the tail of the active segment as a crash in mid-write would.
    let dir = server.data_dir().join("crashy-0");
    let mut logs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    let active = logs.last().unwrap();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(active)
        .unwrap();
    std::io::Write::write_all(&mut f, &[0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 1, 0, 1, 2, 3]).unwrap();
    drop(f);
    server.restart();
    assert!(
        server
            .log()
            .contains("truncated a torn or corrupt log tail"),
        "{}",
        server.log()
    );
    let consumed = consume_all(&server.bootstrap, "crashy", 2, acked);
    assert_eq!(consumed.len(), acked);
    // And the log takes new writes after recovery.
    produce_all(
        &producer(&server.bootstrap, &[("acks", "all")]),
        "crashy",
        &keyed(10, "after"),
    );
}

/// Several log directories (JBOD): a topic's partitions are spread over them (the one with
/// the fewest first), each directory is formatted for the node (its own directory id), and a
/// kill -9 loses nothing acknowledged: every partition is recovered in its own directory.
#[test]
fn several_log_dirs_spread_partitions_and_keep_them_across_kill_9() {
    let disks = tempfile::tempdir().unwrap();
    let (d1, d2) = (disks.path().join("disk1"), disks.path().join("disk2"));
    let mut server = start(&[&format!("log.dirs={},{}", d1.display(), d2.display())]);
    create_topic(&server.bootstrap, "jbod", 6, &[]);
    let records = keyed(6_000, "jbod");
    let p = producer(&server.bootstrap, &[("acks", "all")]);
    produce_all(&p, "jbod", &records);
    let acked = p.context().acked.lock().unwrap().len();
    drop(p);
    let held = |dir: &std::path::Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("jbod-"))
            .collect();
        names.sort();
        names
    };
    let (before1, before2) = (held(&d1), held(&d2));
    assert_eq!(
        (before1.len(), before2.len()),
        (3, 3),
        "{before1:?} {before2:?}"
    );
    let meta =
        |dir: &std::path::Path| std::fs::read_to_string(dir.join("meta.properties")).unwrap();
    let field = |text: &str, key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .map(str::to_owned)
    };
    let (m1, m2) = (meta(&d1), meta(&d2));
    assert_eq!(field(&m1, "cluster.id"), field(&m2, "cluster.id"));
    assert_ne!(field(&m1, "directory.id"), field(&m2, "directory.id"));

    server.kill();
    server.restart();
    let consumed = consume_all(&server.bootstrap, "jbod", 6, acked);
    assert_eq!(consumed.len(), acked);
    assert_eq!((held(&d1), held(&d2)), (before1, before2));
    // New partitions keep filling the directories evenly.
    create_topic(&server.bootstrap, "jbod2", 2, &[]);
    let count = |dir: &std::path::Path| {
        std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("jbod2-"))
            .count()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while count(&d1) + count(&d2) < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "jbod2's logs were not created"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!((count(&d1), count(&d2)), (1, 1));
}

/// The committed end of partition 0 of `topic`, read on `bootstrap`.
fn high_watermark(bootstrap: &str, topic: &str) -> i64 {
    consumer(bootstrap, &[])
        .fetch_watermarks(topic, 0, Duration::from_secs(5))
        .unwrap()
        .1
}

/// An idempotent producer whose Produce answer is lost retries the batch on a new
/// connection; the broker recognises it (same producer id, epoch and sequence) and answers
/// with the original offset, so the record is written once. Clients reach the broker through
/// a proxy (it advertises the proxy); the test looks at the log on a second, direct listener.
#[test]
fn an_idempotent_retry_after_a_lost_answer_is_written_once() {
    let (port, direct_port) = (free_port(), free_port());
    let via = proxy::Proxy::start(format!("127.0.0.1:{port}"));
    let listeners =
        format!("listeners=PLAINTEXT://127.0.0.1:{port},DIRECT://127.0.0.1:{direct_port}");
    let advertised = format!(
        "advertised.listeners=PLAINTEXT://127.0.0.1:{},DIRECT://127.0.0.1:{direct_port}",
        via.port
    );
    let _server = start(&[
        &listeners,
        &advertised,
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,DIRECT:PLAINTEXT",
    ]);
    let bootstrap = format!("127.0.0.1:{}", via.port);
    let direct = format!("127.0.0.1:{direct_port}");
    create_topic(&direct, "idem", 1, &[]);
    let p = producer(
        &bootstrap,
        &[
            ("enable.idempotence", "true"),
            ("linger.ms", "0"),
            ("retry.backoff.ms", "50"),
        ],
    );
    let one = |v: &str| vec![(b"k".to_vec(), v.as_bytes().to_vec(), None)];
    produce_all(&p, "idem", &one("first"));
    // The next answer is lost: the broker appends, the client never hears.
    via.set(proxy::Mode::LoseAnswers);
    p.send(
        rdkafka::producer::BaseRecord::to("idem")
            .key("k")
            .payload("second"),
    )
    .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while high_watermark(&direct, "idem") < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the broker never appended"
        );
        p.poll(Duration::from_millis(50));
    }
    // The connection drops; the client reconnects and sends the same batch again.
    via.set(proxy::Mode::Cut);
    via.set(proxy::Mode::Pass);
    p.flush(Duration::from_secs(30)).unwrap();
    let acked = p.context().acked.lock().unwrap().clone();
    assert_eq!(
        acked.iter().map(|(_, _, o)| *o).collect::<Vec<_>>(),
        vec![0, 1],
        "the retry is acknowledged at the original offset"
    );
    assert_eq!(high_watermark(&direct, "idem"), 2, "written once");
    let read: Vec<Vec<u8>> = consume_all(&direct, "idem", 1, 2)
        .into_iter()
        .filter_map(|r| r.3)
        .collect();
    assert_eq!(read, vec![b"first".to_vec(), b"second".to_vec()]);
    // The leader's producer state, as `sluice producers --describe` shows it: one producer,
    // epoch 0, last sequence 1 (two single-record batches).
    let out = std::process::Command::new(sluice_bin())
        .args([
            "producers",
            "--describe",
            "--topic",
            "idem",
            "--bootstrap-server",
            &direct,
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .map(|l| l.split('\t').collect())
        .collect();
    assert_eq!(rows.len(), 1, "{text}");
    assert_eq!(
        (rows[0][0], rows[0][2], rows[0][3]),
        ("0", "0", "1"),
        "{text}"
    );
    let unknown = std::process::Command::new(sluice_bin())
        .args([
            "producers",
            "--describe",
            "--topic",
            "idem",
            "--partition",
            "7",
        ])
        .args(["--bootstrap-server", &direct, "--timeout", "2000"])
        .output()
        .unwrap();
    assert_eq!(unknown.status.code(), Some(1));
}

/// librdkafka fails exactly the records a compacted topic refuses (no key): those get
/// INVALID_RECORD, the others of the same batch _INVALID_DIFFERENT_RECORD (KIP-467), as with
/// Kafka; the producer goes on working.
#[test]
fn a_batch_with_keyless_records_fails_exactly_those_records() {
    use rdkafka::error::{KafkaError, RDKafkaErrorCode};
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let server = start(&[]);
    create_topic(
        &server.bootstrap,
        "compacted",
        1,
        &[("cleanup.policy", "compact")],
    );
    for codec in ["none", "gzip"] {
        let p: FutureProducer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", &server.bootstrap)
            .set("linger.ms", "200")
            .set("compression.codec", codec)
            .create()
            .unwrap();
        let keys = [Some("k0"), None, Some("k2"), None, Some("k4")];
        let pending: Vec<_> = keys
            .iter()
            .map(|k| {
                let mut r = FutureRecord::<str, str>::to("compacted").payload("v");
                if let Some(k) = k {
                    r = r.key(*k);
                }
                p.send_result(r).map_err(|_| "queue full").unwrap()
            })
            .collect();
        let codes: Vec<Option<RDKafkaErrorCode>> = pending
            .into_iter()
            .map(|d| match block_on(d).unwrap() {
                Ok(_) => None,
                Err((KafkaError::MessageProduction(code), _)) => Some(code),
                Err((e, _)) => panic!("{codec}: unexpected {e}"),
            })
            .collect();
        let refused = Some(RDKafkaErrorCode::InvalidRecord);
        let collateral = Some(RDKafkaErrorCode::InvalidDifferentRecord);
        assert_eq!(
            codes,
            vec![collateral, refused, collateral, refused, collateral],
            "{codec}"
        );
        // The producer keeps working.
        let ok = block_on(
            p.send_result(FutureRecord::to("compacted").key("k").payload("v"))
                .map_err(|_| "queue full")
                .unwrap(),
        )
        .unwrap();
        assert!(ok.is_ok(), "{codec}: {ok:?}");
    }
}
