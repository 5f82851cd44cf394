//! Tiered storage (KIP-405) with real clients: closed segments go to an object store (a
//! local directory, or S3 served by moto's server mode, started here), local retention
//! keeps local disk bounded, and librdkafka reads every record from offset 0.

mod common;
#[path = "common/moto.rs"]
mod moto;
#[path = "common/wire.rs"]
mod wire;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse,
    MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use moto::Moto;
use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
use rdkafka::consumer::Consumer;
use rdkafka::TopicPartitionList;
use wire::Wire;

const RECORDS: usize = 5_000;
const VALUE_BYTES: usize = 1_000;

/// Records' timestamps start an hour ago: within the default retention.ms (7 days), which
/// the remote tier applies too.
fn base_ts() -> i64 {
    static BASE: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *BASE.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
            - 3_600_000
    })
}

/// Overrides of a node with tiered storage on, its tasks run often.
fn tier_overrides(uri: &str) -> Vec<String> {
    vec![
        "remote.log.storage.system.enable=true".into(),
        format!("remote.log.storage.uri={uri}"),
        "remote.log.manager.task.interval.ms=200".into(),
        "log.retention.check.interval.ms=200".into(),
    ]
}

fn start_tiered(extra: &[String]) -> TestServer {
    let refs: Vec<&str> = extra.iter().map(String::as_str).collect();
    start(&refs)
}

/// A tiered topic of 1 MiB segments that keeps nothing locally once copied.
fn create_tiered(bootstrap: &str, topic: &str) {
    create_topic(
        bootstrap,
        topic,
        1,
        &[
            ("remote.storage.enable", "true"),
            ("segment.bytes", "1048576"),
            ("local.retention.bytes", "1"),
        ],
    );
}

fn value(i: usize) -> Vec<u8> {
    let mut v = format!("record {i:06} ").into_bytes();
    v.resize(VALUE_BYTES, b'a' + (i % 26) as u8);
    v
}

fn produce_records(bootstrap: &str, topic: &str) {
    let p = producer(bootstrap, &[("acks", "all"), ("linger.ms", "20")]);
    let records: Vec<(Vec<u8>, Vec<u8>, Option<i64>)> = (0..RECORDS)
        .map(|i| {
            (
                format!("k{i}").into_bytes(),
                value(i),
                Some(base_ts() + i as i64),
            )
        })
        .collect();
    produce_all(&p, topic, &records);
}

/// ListOffsets for partition 0 at `version`: (error code, offset, leader epoch).
fn list_offset(bootstrap: &str, topic: &str, timestamp: i64, version: i16) -> (i16, i64, i32) {
    let mut w = Wire::connect(bootstrap);
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(timestamp)])]);
    let resp: ListOffsetsResponse = w.call(ApiKey::ListOffsets, version, &req);
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.offset, p.leader_epoch)
}

fn earliest_local(bootstrap: &str, topic: &str) -> i64 {
    list_offset(bootstrap, topic, -4, 9).1
}

fn latest_tiered(bootstrap: &str, topic: &str) -> i64 {
    list_offset(bootstrap, topic, -5, 9).1
}

/// Wait (polling, up to `secs`) until `done` holds.
fn wait_until(secs: u64, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Wait until everything but the active segment is copied and gone from local disk.
fn wait_tiered(bootstrap: &str, topic: &str, data_dir: &Path) -> (i64, i64) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let dir = data_dir.join(format!("{topic}-0"));
    loop {
        let seen = (
            earliest_local(bootstrap, topic),
            latest_tiered(bootstrap, topic),
        );
        // Copied up to just below the local log start, and only the active segment is local
        // (a closed segment not yet copied would otherwise pass the first test).
        if seen.0 > 0 && seen.1 == seen.0 - 1 && local_segments(&dir) == 1 {
            return seen;
        }
        assert!(
            Instant::now() < deadline,
            "not tiered: earliest local and latest tiered offsets {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every record, from offset 0, through librdkafka (read_committed, its default).
fn assert_all_readable(bootstrap: &str, topic: &str) {
    let got = consume_all(bootstrap, topic, 1, RECORDS);
    for (i, (_, offset, key, val, ts)) in got.iter().enumerate() {
        assert_eq!(*offset, i as i64, "offsets in order with no gap");
        assert_eq!(key.as_deref(), Some(format!("k{i}").as_bytes()));
        assert_eq!(val.as_deref(), Some(&value(i)[..]), "value of record {i}");
        assert_eq!(*ts, Some(base_ts() + i as i64));
    }
}

/// How many `.log` files the partition directory holds.
fn local_segments(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
                .count()
        })
        .unwrap_or(0)
}

/// Bytes of `.log` files in the partition's local directory.
fn local_log_bytes(server: &TestServer, topic: &str) -> u64 {
    std::fs::read_dir(server.data_dir().join(format!("{topic}-0")))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

/// `sluice dump-log --files FILE ARGS...`, which must succeed: its output.
fn dump_log(args: &[&str]) -> String {
    let out = Command::new(sluice_bin())
        .arg("dump-log")
        .arg("--files")
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "dump-log {args:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Files under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_tiered_topic_stays_small_locally_and_is_read_from_offset_zero() {
    let remote = tempfile::tempdir().unwrap();
    let server = start_tiered(&tier_overrides(&format!(
        "file://{}",
        remote.path().display()
    )));
    let b = &server.bootstrap;
    create_tiered(b, "tiered");
    create_topic(b, "plain", 1, &[]);
    // Nothing tiered yet: -5 is -1 (with epoch -1), -4 the log start; before v8/v9, Kafka's
    // UNSUPPORTED_VERSION.
    assert_eq!(list_offset(b, "tiered", -5, 9), (0, -1, -1));
    assert_eq!(list_offset(b, "tiered", -4, 8).1, 0);
    assert_eq!(list_offset(b, "tiered", -4, 7).0, 35);
    assert_eq!(list_offset(b, "tiered", -5, 8).0, 35);

    produce_records(b, "tiered");
    let (local_start, tiered) = wait_tiered(b, "tiered", &server.data_dir());
    assert_eq!(
        list_offset(b, "tiered", -2, 9).1,
        0,
        "the log starts in the remote tier"
    );
    assert_eq!(list_offset(b, "tiered", -1, 9).1, RECORDS as i64);
    let (code, _, epoch) = list_offset(b, "tiered", -5, 9);
    assert_eq!((code, epoch), (0, 0));
    assert!(
        tiered >= (RECORDS as i64) / 2,
        "most records are tiered ({tiered})"
    );
    // Local disk holds the active segment only.
    let local = local_log_bytes(&server, "tiered");
    assert!(local <= 1_100_000, "local .log bytes {local}");
    let remote_logs: u64 = files_under(remote.path())
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .map(|p| p.metadata().unwrap().len())
        .sum();
    assert!(remote_logs >= (local_start as u64) * VALUE_BYTES as u64);

    // The tools say it too: offsets by name, and the describe's tier columns.
    assert_eq!(
        sluice_tool(
            "offsets",
            b,
            &["--topic", "tiered", "--time", "earliest-local"]
        ),
        format!("tiered:0:{local_start}\n")
    );
    assert_eq!(
        sluice_tool("offsets", b, &["--topic", "tiered", "--time", "-5"]),
        format!("tiered:0:{tiered}\n")
    );
    let described = sluice_tool("topics", b, &["--describe", "--topic", "tiered"]);
    assert!(
        described.contains(&format!(
            "LocalLogStartOffset: {local_start}\tTieredOffset: {tiered}\tUploadLag: {}",
            RECORDS as i64 - tiered - 1
        )),
        "{described}"
    );
    let admin = server.admin().unwrap();
    let mut scrape = String::new();
    wait_until(
        30,
        "the remote size gauge counts every copied segment",
        || {
            scrape = http_get(&admin, "/metrics").1;
            metric(&scrape, "sluice_remote_log_size_bytes{topic=\"tiered\"}")
                .is_some_and(|v| v as u64 == remote_logs)
        },
    );
    assert_eq!(
        metric(&scrape, "sluice_remote_copy_lag_bytes{topic=\"tiered\"}"),
        Some(0.0)
    );
    assert!(metric(&scrape, "sluice_remote_copy_bytes_total").unwrap() >= remote_logs as f64);

    // dump-log reads a remote segment and checks its remote index against it.
    let first = files_under(remote.path())
        .into_iter()
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("00000000000000000000-") && name.ends_with(".log")
        })
        .unwrap();
    let dumped = dump_log(&[first.to_str().unwrap(), "--print-data-log"]);
    assert!(dumped.contains("Log starting offset: 0"), "{dumped}");
    assert!(dumped.contains("| offset: 0 CreateTime:"), "{dumped}");
    assert!(dumped.contains("isvalid: true") && !dumped.contains("isvalid: false"));
    let index = first.with_extension("index");
    let verified = dump_log(&[index.to_str().unwrap(), "--verify-index-only"]);
    assert!(!verified.contains("Mismatches"), "{verified}");

    assert_all_readable(b, "tiered");
    // A timestamp in the remote tier is found there.
    let c = consumer(b, &[]);
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("tiered", 0, rdkafka::Offset::Offset(base_ts() + 42))
        .unwrap();
    let found = c.offsets_for_times(tpl, Duration::from_secs(30)).unwrap();
    assert_eq!(
        found.find_partition("tiered", 0).unwrap().offset(),
        rdkafka::Offset::Offset(42)
    );
    // A topic without remote storage: -5 is -1, -4 is its log start.
    produce_all(
        &producer(b, &[]),
        "plain",
        &[(b"k".to_vec(), b"v".to_vec(), None)],
    );
    assert_eq!(list_offset(b, "plain", -5, 9), (0, -1, -1));
    assert_eq!(list_offset(b, "plain", -4, 9).1, 0);
    // Deleting the topic deletes its remote data too.
    sluice_tool("topics", b, &["--delete", "--topic", "tiered"]);
    wait_until(60, "the deleted topic's remote objects are gone", || {
        files_under(remote.path()).is_empty()
    });
}

#[test]
fn a_corrupt_remote_segment_is_refused_not_served() {
    let remote = tempfile::tempdir().unwrap();
    let server = start_tiered(&tier_overrides(&format!(
        "file://{}",
        remote.path().display()
    )));
    let b = &server.bootstrap;
    create_tiered(b, "corrupt");
    produce_records(b, "corrupt");
    wait_tiered(b, "corrupt", &server.data_dir());
    // Damage the first remote segment (nothing has read it yet, so nothing is cached).
    let first = files_under(remote.path())
        .into_iter()
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("00000000000000000000-")
                && p.extension().is_some_and(|e| e == "log")
        })
        .expect("the first remote segment");
    let mut bytes = std::fs::read(&first).unwrap();
    // A byte in the middle of the first batch's records, which its CRC covers (a byte of
    // the base offset or the leader epoch, which it does not, went unnoticed at times).
    let batch_len = i32::from_be_bytes(bytes[8..12].try_into().unwrap()) as usize;
    assert!(
        batch_len > 49 && 12 + batch_len <= bytes.len(),
        "{batch_len}"
    );
    let mid = 61 + (batch_len - 49) / 2;
    bytes[mid] ^= 0x5a;
    std::fs::write(&first, &bytes).unwrap();

    let mut w = Wire::connect(b);
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(4 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str("corrupt")))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(4 << 20)])]);
    let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &req);
    let p = &resp.responses[0].partitions[0];
    // KAFKA_STORAGE_ERROR, no records: the damaged bytes never reach a client.
    assert_eq!(p.error_code, 56);
    assert!(p.records.as_ref().is_none_or(|r| r.is_empty()));
    assert!(server.wait_for_log(Duration::from_secs(10), |l| l
        .contains("corrupt remote object")));
}

fn s3_overrides(moto: &Moto, bucket: &str) -> Vec<String> {
    let mut o = tier_overrides(&format!("s3://{bucket}/cluster-a"));
    o.extend([
        format!("remote.log.storage.s3.endpoint={}", moto.endpoint()),
        "remote.log.storage.s3.region=us-east-1".into(),
        "remote.log.storage.s3.access.key.id=test".into(),
        "remote.log.storage.s3.secret.access.key=test".into(),
        "remote.log.storage.s3.path.style.access=true".into(),
        "remote.log.storage.retries=1".into(),
        "remote.log.storage.request.timeout.ms=5000".into(),
    ]);
    o
}

#[test]
fn an_s3_store_that_is_down_delays_copies_and_loses_nothing() {
    let port = free_port();
    let mut moto = Moto::start_on(port);
    moto.create_bucket("tier");
    let server = start_tiered(&s3_overrides(&moto, "tier"));
    let b = &server.bootstrap;
    create_tiered(b, "s3");
    moto.stop();

    produce_records(b, "s3");
    let admin = server.admin().expect("admin listener");
    wait_until(60, "a copy fails", || {
        metric(
            &http_get(&admin, "/metrics").1,
            "sluice_remote_copy_errors_total",
        )
        .is_some_and(|n| n >= 1.0)
    });
    // Nothing copied, so nothing deleted locally.
    assert_eq!(latest_tiered(b, "s3"), -1);
    assert_eq!(earliest_local(b, "s3"), 0);
    assert!(local_log_bytes(&server, "s3") >= (RECORDS * VALUE_BYTES) as u64);

    // The store comes back (empty: moto keeps objects in memory); the unfinished copies
    // are cleaned up and every segment is copied.
    let moto = Moto::start_on(port);
    moto.create_bucket("tier");
    let (local_start, _) = wait_tiered(b, "s3", &server.data_dir());
    let keys = moto.keys("tier");
    assert!(
        keys.iter().all(|k| k.starts_with("cluster-a/s3-")),
        "{keys:?}"
    );
    // Each segment copied below the local log start has its six files (a later segment may
    // be on its way up while we list).
    assert!(local_start > 0);
    let base_of = |k: &str| -> i64 {
        let name = k.rsplit('/').next().unwrap();
        name[..20].parse().unwrap()
    };
    let copied: Vec<&String> = keys.iter().filter(|k| base_of(k) < local_start).collect();
    let logs: Vec<&String> = copied
        .iter()
        .copied()
        .filter(|k| k.ends_with(".log"))
        .collect();
    assert!(!logs.is_empty());
    assert_eq!(copied.len(), logs.len() * 6, "{keys:?}");
    // dump-log reads a remote segment from the S3 store.
    let first = format!("s3://tier/{}", logs[0]);
    let endpoint = format!("remote.log.storage.s3.endpoint={}", moto.endpoint());
    let dumped = dump_log(&[
        &first,
        "--remote-property",
        &endpoint,
        "--remote-property",
        "remote.log.storage.s3.path.style.access=true",
        "--remote-property",
        "remote.log.storage.s3.access.key.id=test",
        "--remote-property",
        "remote.log.storage.s3.secret.access.key=test",
        "--remote-property",
        "remote.log.storage.s3.region=us-east-1",
    ]);
    assert!(dumped.contains("baseOffset: "), "{dumped}");
    assert!(!dumped.contains("isvalid: false"), "{dumped}");
    assert_all_readable(b, "s3");
}

#[test]
fn a_leader_killed_mid_upload_leaves_no_duplicate_and_no_orphan() {
    let moto = Moto::start_on(free_port());
    moto.create_bucket("crash");
    let mut server = start_tiered(&s3_overrides(&moto, "crash"));
    let b = server.bootstrap.clone();
    // Segments of 20 MiB go up as multipart uploads: long enough to be killed in the middle.
    create_topic(
        &b,
        "crash",
        1,
        &[
            ("remote.storage.enable", "true"),
            ("segment.bytes", "20971520"),
            ("local.retention.bytes", "1"),
        ],
    );
    let p = producer(&b, &[("acks", "all"), ("linger.ms", "20")]);
    let big = vec![b'z'; 100_000];
    let records: Vec<(Vec<u8>, Vec<u8>, Option<i64>)> = (0..450)
        .map(|i| (format!("k{i}").into_bytes(), big.clone(), None))
        .collect();
    produce_all(&p, "crash", &records);
    drop(p);
    assert!(
        server.wait_for_log(Duration::from_secs(60), |l| l
            .contains("copying a segment to the remote tier")),
        "no copy started"
    );
    server.kill();
    server.restart_same_port();
    let b = server.bootstrap.clone();
    let mut last = -1;
    wait_until(120, "both closed segments are copied", || {
        // A 20 MiB segment holds about 200 of these records: both are copied.
        last = latest_tiered(&b, "crash");
        last >= 300 && earliest_local(&b, "crash") == last + 1
    });
    // An upload cut by the kill may still land in the store after the restarted leader
    // cleaned up (the store completes a request it had): the leader's periodic sweep
    // deletes objects no remote segment names.
    let mut keys = Vec::new();
    wait_until(
        60,
        "the store holds the copied segments' files only",
        || {
            keys = moto.keys("crash");
            let logs = keys.iter().filter(|k| k.ends_with(".log")).count();
            keys.len() == logs * 6
        },
    );
    let mut bases: Vec<&str> = keys
        .iter()
        .filter(|k| k.ends_with(".log"))
        .filter_map(|k| k.rsplit('/').next()?.split('-').next())
        .collect();
    let n = bases.len();
    bases.dedup();
    assert_eq!(
        bases.len(),
        n,
        "one remote segment per base offset: {keys:?}"
    );
    assert_eq!(
        keys.len(),
        n * 6,
        "no object of an unfinished copy is left: {keys:?}"
    );
    let got = consume_all(&b, "crash", 1, 450);
    let offsets: Vec<i64> = got.iter().map(|r| r.1).collect();
    assert_eq!(offsets, (0..450).collect::<Vec<i64>>());
}

/// The leader and ISR of `topic`-0 as the broker at `addr` sees them.
fn leader_and_isr(addr: &str, topic: &str) -> Option<(i32, Vec<i32>)> {
    let mut w = Wire::connect(addr);
    let md: MetadataResponse = w.call(
        ApiKey::Metadata,
        12,
        &MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(topic.into()))))])),
    );
    let p = md.topics.first()?.partitions.first()?;
    (p.error_code == 0).then(|| (p.leader_id.0, p.isr_nodes.iter().map(|b| b.0).collect()))
}

#[test]
fn a_follower_with_an_empty_disk_starts_from_the_remote_tier() {
    let remote = tempfile::tempdir().unwrap();
    let mut extra = tier_overrides(&format!("file://{}", remote.path().display()));
    extra.extend([
        "broker.session.timeout.ms=2000".to_string(),
        "broker.heartbeat.interval.ms=250".into(),
        "controller.quorum.election.timeout.ms=500".into(),
    ]);
    let refs: Vec<&str> = extra.iter().map(String::as_str).collect();
    let mut nodes = TestServer::start_all(sluice_bin(), &sluice_testkit::combined_nodes(&refs));
    let any = nodes[0].bootstrap.clone();
    let topic = NewTopic::new("rep", 1, TopicReplication::Fixed(3))
        .set("remote.storage.enable", "true")
        .set("segment.bytes", "1048576")
        .set("local.retention.bytes", "1")
        .set("min.insync.replicas", "2");
    for r in block_on(admin(&any).create_topics([&topic], &AdminOptions::new())).unwrap() {
        r.unwrap();
    }
    let mut leader = -1;
    wait_until(30, "the partition has a leader and a full ISR", || {
        leader_and_isr(&any, "rep").is_some_and(|(l, isr)| {
            leader = l;
            l > 0 && isr.len() == 3
        })
    });
    let leader_addr = nodes[leader as usize - 1].bootstrap.clone();
    produce_records(&any, "rep");
    let (_, tiered) = wait_tiered(&leader_addr, "rep", &nodes[leader as usize - 1].data_dir());

    // A follower loses its disk: it comes back with no log for the partition.
    let f = (0..3).find(|i| *i + 1 != leader as usize).unwrap();
    nodes[f].stop();
    let dir = nodes[f].data_dir().join("rep-0");
    std::fs::remove_dir_all(&dir).unwrap();
    nodes[f].restart();
    let follower_id = f as i32 + 1;
    wait_until(60, "the follower rejoins the ISR", || {
        leader_and_isr(&leader_addr, "rep").is_some_and(|(_, isr)| isr.contains(&follower_id))
    });
    // It starts where the remote tier ends: nothing of what the remote tier holds is copied
    // to it, and it knows the leader epochs from the remote segment. (It may still be in the
    // ISR from before its restart, with the empty log it recreated at offset 0 and not yet
    // replaced: that log must stay empty until it is.)
    let segments = || -> Vec<(i64, u64)> {
        std::fs::read_dir(&dir)
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter_map(|e| {
                        let name = e.file_name().to_string_lossy().into_owned();
                        let base = name.strip_suffix(".log")?.parse().ok()?;
                        Some((base, e.metadata().ok()?.len()))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    wait_until(60, "the follower starts after the remote tier", || {
        let seen = segments();
        assert!(
            seen.iter().all(|(b, len)| *b > tiered || *len == 0),
            "follower segments {seen:?} hold records the remote tier ends at {tiered}"
        );
        !seen.is_empty() && seen.iter().all(|(b, _)| *b > tiered)
    });
    // The follower writes the epochs just after it recreates its log at the new start.
    let epochs = || std::fs::read_to_string(dir.join("leader-epoch-checkpoint"));
    wait_until(30, "the follower knows the remote segment's epochs", || {
        epochs().is_ok_and(|e| e.lines().count() >= 3)
    });

    // The leader dies: the new one serves every record from offset 0, the old ones from the
    // remote tier.
    nodes[leader as usize - 1].kill();
    let survivor = nodes[f].bootstrap.clone();
    wait_until(60, "a new leader", || {
        leader_and_isr(&survivor, "rep").is_some_and(|(l, _)| l > 0 && l != leader)
    });
    assert_all_readable(&survivor, "rep");
}
