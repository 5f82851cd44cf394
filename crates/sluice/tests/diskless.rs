//! Diskless topics (`diskless.enable=true`) with real clients: librdkafka producers (plain
//! and idempotent) and consumer groups, on one node with the default local store and on
//! three nodes sharing an S3 bucket served by moto; a broker killed mid-produce and a new
//! one with an empty disk joining; the store going away; clients served in their rack.

mod common;
#[path = "common/moto.rs"]
mod moto;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::*;
use moto::Moto;
use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::Producer;
use rdkafka::types::RDKafkaErrorCode;

/// (key, partition, offset) of each acknowledged record.
type Acked = Vec<(Vec<u8>, i32, i64)>;

fn records(from: usize, n: usize) -> Vec<(Vec<u8>, Vec<u8>, Option<i64>)> {
    (from..from + n)
        .map(|i| {
            (
                format!("k{i:05}").into_bytes(),
                format!("value {i}").into_bytes(),
                None,
            )
        })
        .collect()
}

/// Read with a consumer group from the beginning until every key of `acked` is seen;
/// (partition, offset) -> key of everything read.
fn read_group(
    bootstrap: &str,
    topic: &str,
    group: &str,
    acked: &Acked,
) -> HashMap<(i32, i64), Vec<u8>> {
    let c: BaseConsumer = consumer(
        bootstrap,
        &[("group.id", group), ("auto.offset.reset", "earliest")],
    );
    c.subscribe(&[topic]).unwrap();
    let want: HashSet<&Vec<u8>> = acked.iter().map(|(k, _, _)| k).collect();
    let mut seen: HashMap<(i32, i64), Vec<u8>> = HashMap::new();
    let mut keys: HashSet<Vec<u8>> = HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !want.iter().all(|k| keys.contains(*k)) {
        assert!(
            Instant::now() < deadline,
            "read {} of {} acknowledged keys",
            keys.len(),
            want.len()
        );
        if let Some(m) = c.poll(Duration::from_millis(200)) {
            let m = match m {
                Ok(m) => m,
                // A killed broker's connection, reported as librdkafka reports it.
                Err(rdkafka::error::KafkaError::MessageConsumption(
                    RDKafkaErrorCode::BrokerTransportFailure | RDKafkaErrorCode::AllBrokersDown,
                )) => continue,
                Err(e) => panic!("consume error: {e}"),
            };
            let key = m.key().unwrap_or_default().to_vec();
            let prev = seen.insert((m.partition(), m.offset()), key.clone());
            assert!(prev.is_none(), "offset {} read twice", m.offset());
            assert!(keys.insert(key), "a key read twice: a duplicate record");
        }
    }
    seen
}

/// Every acknowledged record is where its acknowledgement said, once; per partition the
/// offsets read are contiguous from 0.
fn check(acked: &Acked, seen: &HashMap<(i32, i64), Vec<u8>>) {
    for (k, p, o) in acked {
        assert_eq!(
            seen.get(&(*p, *o)),
            Some(k),
            "acknowledged record at {p}/{o} not read back there"
        );
    }
    let mut per: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for (p, o) in seen.keys() {
        per.entry(*p).or_default().push(*o);
    }
    for (p, mut offsets) in per {
        offsets.sort_unstable();
        let expected: Vec<i64> = (0..offsets.len() as i64).collect();
        assert_eq!(offsets, expected, "partition {p} has gaps");
    }
}

fn acked(p: &rdkafka::producer::BaseProducer<Deliveries>) -> Acked {
    p.context().acked.lock().unwrap().clone()
}

#[test]
fn a_diskless_topic_on_one_node_needs_no_store_configured() {
    let server = start(&["diskless.append.linger.ms=20"]);
    let b = &server.bootstrap;
    create_topic(b, "dl", 3, &[("diskless.enable", "true")]);
    // The store is opened when first needed: nothing beside the log directory yet.
    let store = server.data_dir().parent().unwrap().join("remote");
    assert!(!store.exists());
    let p = producer(b, &[("enable.idempotence", "true"), ("acks", "all")]);
    produce_all(&p, "dl", &records(0, 3000));
    let plain = producer(b, &[("acks", "1")]);
    produce_all(&plain, "dl", &records(3000, 500));
    let mut all = acked(&p);
    all.extend(acked(&plain));
    assert_eq!(all.len(), 3500);
    let seen = read_group(b, "dl", "g1", &all);
    assert_eq!(seen.len(), 3500);
    check(&all, &seen);

    // The data is in the local store beside the log directory, not in it.
    let wal = server
        .data_dir()
        .parent()
        .unwrap()
        .join("remote/diskless/wal");
    let objects = std::fs::read_dir(&wal).map(|d| d.count()).unwrap_or(0);
    assert!(objects > 0, "no WAL object in {}", wal.display());
    assert!(!server.data_dir().join("dl-0").exists());

    // Offsets as Kafka answers them: earliest 0, latest the count, the group's commits.
    let c = consumer(b, &[]);
    let mut total = 0;
    for part in 0..3 {
        let (low, high) = c
            .fetch_watermarks("dl", part, Duration::from_secs(10))
            .unwrap();
        assert_eq!(low, 0);
        total += high;
    }
    assert_eq!(total, 3500);

    // DescribeProducers (`sluice producers`, as kafka-transactions.sh describe-producers):
    // the idempotent producer in each partition, its last sequence that of its last record
    // there (the plain producer has no id to show).
    let out = std::process::Command::new(sluice_bin())
        .args([
            "producers",
            "--bootstrap-server",
            b,
            "--describe",
            "--topic",
            "dl",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .map(|l| l.split('\t').collect())
        .collect();
    assert_eq!(rows.len(), 3, "{text}");
    for part in 0..3 {
        let sent = acked(&p).iter().filter(|a| a.1 == part).count() as i64;
        let row = rows.iter().find(|r| r[0] == part.to_string()).expect(&text);
        assert_eq!(row[2], "0", "epoch: {text}");
        assert_eq!(row[3], (sent - 1).to_string(), "last sequence: {text}");
        assert!(row[4].parse::<i64>().unwrap() > 0, "timestamp: {text}");
        assert_eq!(row[6], "-1", "no open transaction: {text}");
    }

    // diskless.enable is set at creation only.
    let err = std::process::Command::new(sluice_bin())
        .args(["configs", "--bootstrap-server", b, "--alter"])
        .args(["--entity-type", "topics", "--entity-name", "dl"])
        .args(["--add-config", "diskless.enable=false"])
        .output()
        .unwrap();
    assert!(!err.status.success());
    assert!(
        String::from_utf8_lossy(&err.stderr).contains("only be set when a topic is created"),
        "{}",
        String::from_utf8_lossy(&err.stderr)
    );
    // What a diskless topic cannot be is refused at creation.
    let a = admin(b);
    let t = NewTopic::new("dl-compact", 1, TopicReplication::Fixed(1))
        .set("diskless.enable", "true")
        .set("cleanup.policy", "compact");
    let r = block_on(a.create_topics([&t], &AdminOptions::new())).unwrap();
    assert!(r[0].is_err(), "a compacted diskless topic was created");
}

fn s3_overrides(moto: &Moto, bucket: &str) -> Vec<String> {
    let mut o = moto.store_overrides(bucket);
    o.push("diskless.append.linger.ms=50".into());
    o
}

#[test]
fn three_nodes_on_s3_lose_nothing_when_the_producers_broker_is_killed() {
    let moto = Moto::start_on(free_port());
    moto.create_bucket("diskless");
    let mut extra = s3_overrides(&moto, "diskless");
    extra.extend([
        "broker.session.timeout.ms=3000".to_string(),
        "broker.heartbeat.interval.ms=250".into(),
        "controller.quorum.election.timeout.ms=500".into(),
        // WAL compaction into segment objects all along, across the kill (its garbage kept
        // the default 10 min: nothing here is deleted).
        "diskless.wal.compaction.interval.ms=300".into(),
    ]);
    let refs: Vec<&str> = extra.iter().map(String::as_str).collect();
    let configs = sluice_testkit::combined_nodes(&refs);
    let mut nodes = TestServer::start_all(sluice_bin(), &configs);
    let first = nodes[0].bootstrap.clone();
    let topic = NewTopic::new("dl", 3, TopicReplication::Fixed(3)).set("diskless.enable", "true");
    for r in block_on(admin(&first).create_topics([&topic], &AdminOptions::new())).unwrap() {
        r.unwrap();
    }
    // The producer knows node 1 only; Metadata spreads the partitions over the three.
    let p = producer(
        &first,
        &[
            ("enable.idempotence", "true"),
            ("acks", "all"),
            ("retry.backoff.ms", "50"),
        ],
    );
    produce_all(&p, "dl", &records(0, 2000));
    // A reader through node 1 that keeps reading across the kill: the leader epochs
    // Metadata shows change, and it asks OffsetForLeaderEpoch before going on (KIP-320).
    let live: BaseConsumer = consumer(
        &first,
        &[("group.id", "live"), ("auto.offset.reset", "earliest")],
    );
    live.subscribe(&["dl"]).unwrap();
    let mut live_seen: HashMap<(i32, i64), Vec<u8>> = HashMap::new();
    let poll_live = |seen: &mut HashMap<(i32, i64), Vec<u8>>, until: usize| {
        let deadline = Instant::now() + Duration::from_secs(90);
        while seen.len() < until {
            assert!(
                Instant::now() < deadline,
                "the live reader read {} of {until}",
                seen.len()
            );
            match live.poll(Duration::from_millis(200)) {
                Some(Ok(m)) => {
                    let key = m.key().unwrap_or_default().to_vec();
                    assert!(seen.insert((m.partition(), m.offset()), key).is_none());
                }
                Some(Err(rdkafka::error::KafkaError::MessageConsumption(
                    RDKafkaErrorCode::BrokerTransportFailure | RDKafkaErrorCode::AllBrokersDown,
                ))) => {}
                Some(Err(e)) => panic!("the live reader: {e}"),
                None => {}
            }
        }
    };
    poll_live(&mut live_seen, 2000);
    // Node 1 dies with the producer's next records in flight; once it is fenced its
    // partitions are led by the others.
    for (k, v, _) in records(2000, 2000) {
        let rec = rdkafka::producer::BaseRecord::to("dl").key(&k).payload(&v);
        p.send(rec).map_err(|(e, _)| e).unwrap();
    }
    p.poll(Duration::from_millis(20));
    nodes[0].kill();
    p.flush(Duration::from_secs(120)).unwrap();
    assert_eq!(p.context().failed.load(Ordering::Relaxed), 0);
    let all = acked(&p);
    assert_eq!(all.len(), 4000);
    poll_live(&mut live_seen, 4000);
    check(&all, &live_seen);
    // Any broker serves every partition: a group reads it all through node 2.
    let seen = read_group(&nodes[1].bootstrap, "dl", "g", &all);
    check(&all, &seen);
    assert_eq!(seen.len(), 4000, "records beyond the acknowledged ones");
    let keys = moto.keys("diskless");
    assert!(
        keys.iter().any(|k| k.starts_with("cluster/diskless/wal/")),
        "{keys:?}"
    );
    // No broker holds the data.
    for n in &nodes[1..] {
        assert!(!n.data_dir().join("dl-0").exists());
    }

    // A transactional producer on the two nodes left; read_committed sees what it
    // committed and nothing it aborted.
    const T: Duration = Duration::from_secs(30);
    let t = producer(&nodes[2].bootstrap, &[("transactional.id", "dl-3")]);
    t.init_transactions(T).unwrap();
    for (tag, commit) in [("c", true), ("a", false)] {
        t.begin_transaction().unwrap();
        for i in 0..50 {
            let v = format!("{tag}-{i:03}");
            t.send(rdkafka::producer::BaseRecord::to("dl").key(&v).payload(&v))
                .map_err(|(e, _)| e)
                .unwrap();
        }
        t.flush(T).unwrap();
        if commit {
            t.commit_transaction(T).unwrap();
        } else {
            t.abort_transaction(T).unwrap();
        }
    }
    let read = read_values(&nodes[1].bootstrap, "dl", 3, "read_committed", 4050);
    let txn: Vec<&String> = read.iter().filter(|v| !v.starts_with("value")).collect();
    let want: Vec<String> = (0..50).map(|i| format!("c-{i:03}")).collect();
    assert_eq!(txn, want.iter().collect::<Vec<_>>());

    // A new broker (id 4, broker only) with an empty data directory joins and serves at
    // once: it reads everything committed and takes produce that the others then serve,
    // holding none of it on disk.
    let quorum = configs[0]
        .iter()
        .find(|o| o.starts_with("controller.quorum.voters="))
        .unwrap();
    let mut o = vec![
        "process.roles=broker".to_string(),
        "node.id=4".into(),
        "listeners=PLAINTEXT://127.0.0.1:0".into(),
        "controller.listener.names=CONTROLLER".into(),
        quorum.clone(),
    ];
    o.extend(extra.iter().cloned());
    let refs: Vec<&str> = o.iter().map(String::as_str).collect();
    let fresh = TestServer::start(sluice_bin(), &refs);
    let read = read_values(&fresh.bootstrap, "dl", 3, "read_committed", 4050);
    assert_eq!(read.len(), 4050);
    let p4 = producer(&fresh.bootstrap, &[("acks", "all")]);
    produce_all(&p4, "dl", &records(5000, 100));
    let new = acked(&p4);
    assert_eq!(new.len(), 100);
    let seen = read_group(&nodes[1].bootstrap, "dl", "after-4", &new);
    for (k, p, o) in &new {
        assert_eq!(seen.get(&(*p, *o)), Some(k), "{p}/{o} not read back there");
    }
    assert!(!fresh.data_dir().join("dl-0").exists());
    // Compaction ran on S3: every partition has segment objects (what was read above came
    // from them in part).
    let out = std::process::Command::new(sluice_bin())
        .args(["topics", "--bootstrap-server", &nodes[1].bootstrap])
        .args(["--describe", "--topic", "dl", "--admin-api"])
        .arg(nodes[1].admin().expect("admin listener"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    let with_segments = said
        .lines()
        .filter(|l| l.contains("\tPartition: ") && !l.contains("\tSegments: 0\t"))
        .count();
    assert_eq!(
        with_segments,
        3,
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_store_that_is_down_is_never_acknowledged() {
    let port = free_port();
    let mut moto = Moto::start_on(port);
    moto.create_bucket("diskless");
    let mut extra = s3_overrides(&moto, "diskless");
    extra.push("remote.log.storage.retries=0".into());
    let refs: Vec<&str> = extra.iter().map(String::as_str).collect();
    let server = start(&refs);
    let b = &server.bootstrap;
    create_topic(b, "dl", 1, &[("diskless.enable", "true")]);
    let p = producer(b, &[("acks", "all")]);
    produce_all(&p, "dl", &records(0, 10));
    moto.stop();
    let down = producer(b, &[("acks", "all"), ("message.timeout.ms", "3000")]);
    for (k, v, _) in records(10, 5) {
        let rec = rdkafka::producer::BaseRecord::to("dl").key(&k).payload(&v);
        down.send(rec).map_err(|(e, _)| e).unwrap();
    }
    let _ = down.flush(Duration::from_secs(30));
    assert_eq!(down.context().failed.load(Ordering::Relaxed), 5);
    assert!(acked(&down).is_empty(), "acknowledged without a store");
    let c = consumer(b, &[]);
    let (_, high) = c
        .fetch_watermarks("dl", 0, Duration::from_secs(10))
        .unwrap();
    assert_eq!(high, 10, "nothing unstored was committed");
    // The store is back: produce goes on at the next offset.
    let moto = Moto::start_on(port);
    moto.create_bucket("diskless");
    let again = producer(b, &[("acks", "all")]);
    produce_all(&again, "dl", &records(15, 3));
    assert_eq!(acked(&again).iter().map(|a| a.2).min(), Some(10));
    assert!(server.log().contains("cannot write a WAL object"));
}

/// Every value a consumer with `isolation` reads from the start of `topic`'s `partitions`
/// until `expect` are read, then until nothing more comes.
fn read_values(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    isolation: &str,
    expect: usize,
) -> Vec<String> {
    let c = consumer(bootstrap, &[("isolation.level", isolation)]);
    let mut tpl = rdkafka::TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, rdkafka::Offset::Beginning)
            .unwrap();
    }
    c.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while out.len() < expect {
        assert!(
            Instant::now() < deadline,
            "{isolation}: read {} of {expect}",
            out.len()
        );
        if let Some(m) = c.poll(Duration::from_millis(200)) {
            out.push(String::from_utf8(m.expect("consume").payload().unwrap().to_vec()).unwrap());
        }
    }
    while let Some(m) = c.poll(Duration::from_millis(700)) {
        out.push(String::from_utf8(m.expect("consume").payload().unwrap().to_vec()).unwrap());
    }
    out.sort();
    out
}

#[test]
fn transactions_on_a_diskless_topic_are_read_committed() {
    const T: Duration = Duration::from_secs(30);
    let server = start(&["diskless.append.linger.ms=20"]);
    let b = &server.bootstrap;
    create_topic(b, "dl", 2, &[("diskless.enable", "true")]);
    let p = producer(b, &[("transactional.id", "dl-tx")]);
    p.init_transactions(T).unwrap();
    let send = |tag: &str| {
        for i in 0..100 {
            let v = format!("{tag}-{i:03}");
            p.send(rdkafka::producer::BaseRecord::to("dl").key(&v).payload(&v))
                .map_err(|(e, _)| e)
                .unwrap();
        }
        p.flush(T).unwrap();
    };
    p.begin_transaction().unwrap();
    send("c1");
    p.commit_transaction(T).unwrap();
    p.begin_transaction().unwrap();
    send("a");
    p.abort_transaction(T).unwrap();
    p.begin_transaction().unwrap();
    send("c2");
    // Open: read_committed stops at the last stable offset, before it.
    let c = consumer(b, &[("isolation.level", "read_committed")]);
    let u = consumer(b, &[("isolation.level", "read_uncommitted")]);
    for part in 0..2 {
        let lso = c.fetch_watermarks("dl", part, T).unwrap().1;
        let hw = u.fetch_watermarks("dl", part, T).unwrap().1;
        assert!(
            lso < hw,
            "partition {part}: last stable {lso}, high watermark {hw}"
        );
    }
    p.commit_transaction(T).unwrap();
    let expect = |tags: &[&str]| {
        let mut v: Vec<String> = tags
            .iter()
            .flat_map(|t| (0..100).map(move |i| format!("{t}-{i:03}")))
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        read_values(b, "dl", 2, "read_committed", 200),
        expect(&["c1", "c2"])
    );
    assert_eq!(
        read_values(b, "dl", 2, "read_uncommitted", 300),
        expect(&["a", "c1", "c2"])
    );
}

/// A diskless metric of each node (by id), 0 when absent.
fn node_metrics(nodes: &[TestServer], name: &str) -> BTreeMap<i32, f64> {
    nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let scrape = http_get(&n.admin().expect("admin listener"), "/metrics").1;
            (i as i32 + 1, metric(&scrape, name).unwrap_or(0.0))
        })
        .collect()
}

/// Zones: brokers in racks rack-1..3 share one store. A client naming its rack in
/// `client.id` (`diskless_az=`) sees a broker of that rack lead every partition, so its
/// produce goes there; a consumer with `client.rack` that asks another rack's broker is sent
/// to its own (KIP-392's preferred read replica). Neither crosses a rack.
#[test]
fn clients_are_served_by_the_brokers_of_their_rack() {
    let store = tempfile::tempdir().unwrap();
    let shared = [
        format!("remote.log.storage.uri=file://{}", store.path().display()),
        "diskless.append.linger.ms=20".into(),
    ];
    let refs: Vec<&str> = shared.iter().map(String::as_str).collect();
    let mut configs = sluice_testkit::combined_nodes(&refs);
    for (i, c) in configs.iter_mut().enumerate() {
        c.push(format!("broker.rack=rack-{}", i + 1));
    }
    let nodes = TestServer::start_all(sluice_bin(), &configs);
    let first = nodes[0].bootstrap.clone();
    let topic =
        NewTopic::new("zones", 3, TopicReplication::Fixed(3)).set("diskless.enable", "true");
    for r in block_on(admin(&first).create_topics([&topic], &AdminOptions::new())).unwrap() {
        r.unwrap();
    }
    let leaders = |client_id: &str| -> Vec<i32> {
        let c = consumer(&first, &[("client.id", client_id)]);
        let m = c
            .fetch_metadata(Some("zones"), Duration::from_secs(10))
            .unwrap();
        let mut l: Vec<i32> = m.topics()[0]
            .partitions()
            .iter()
            .map(|p| p.leader())
            .collect();
        l.sort_unstable();
        l
    };
    // Without a rack the partitions spread over the three brokers; with one, its broker
    // leads them all; an unknown rack falls back to all brokers.
    assert_eq!(leaders("plain"), vec![1, 2, 3]);
    assert_eq!(leaders("app,diskless_az=rack-2"), vec![2, 2, 2]);
    assert_eq!(leaders("diskless_az=rack-9"), vec![1, 2, 3]);

    // A producer in rack-3 bootstrapped from node 1: only node 3 writes WAL objects.
    let p = producer(
        &first,
        &[("client.id", "orders,diskless_az=rack-3"), ("acks", "all")],
    );
    produce_all(&p, "zones", &records(0, 600));
    let all = acked(&p);
    assert_eq!(all.len(), 600);
    let puts = node_metrics(&nodes, "sluice_diskless_put_bytes_total");
    assert!(puts[&3] > 0.0, "{puts:?}");
    assert_eq!((puts[&1], puts[&2]), (0.0, 0.0), "{puts:?}");

    // A consumer group in rack-2 bootstrapped from node 1: node 2 reads the store for it,
    // the others serve no fetch of the topic.
    let c: BaseConsumer = consumer(
        &first,
        &[
            ("group.id", "in-rack-2"),
            ("client.rack", "rack-2"),
            ("auto.offset.reset", "earliest"),
        ],
    );
    c.subscribe(&["zones"]).unwrap();
    let mut seen: HashMap<(i32, i64), Vec<u8>> = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < all.len() {
        assert!(Instant::now() < deadline, "read {} of 600", seen.len());
        if let Some(m) = c.poll(Duration::from_millis(200)) {
            let m = m.expect("consume error");
            let key = m.key().unwrap_or_default().to_vec();
            assert!(seen.insert((m.partition(), m.offset()), key).is_none());
        }
    }
    check(&all, &seen);
    let gets = node_metrics(&nodes, "sluice_diskless_get_requests_total");
    assert!(gets[&2] > 0.0, "{gets:?}");
    assert_eq!((gets[&1], gets[&3]), (0.0, 0.0), "{gets:?}");
}

/// WAL object files in a local store directory.
fn wal_objects(store: &std::path::Path) -> usize {
    std::fs::read_dir(store.join("diskless/wal"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Retention and DeleteRecords move a diskless partition's log start; the WAL objects no
/// batch refers to any more are deleted from the store; both survive a restart.
#[test]
fn retention_and_delete_records_trim_a_diskless_log_and_its_objects() {
    let mut server = start(&[
        "diskless.append.linger.ms=20",
        "log.retention.check.interval.ms=200",
        "diskless.wal.delete.delay.ms=1000",
    ]);
    let b = server.bootstrap.clone();
    create_topic(
        &b,
        "ret",
        1,
        &[("diskless.enable", "true"), ("retention.ms", "600000")],
    );
    let store = server.data_dir().parent().unwrap().join("remote");
    // 100 records an hour old, then 100 of now, each set in WAL objects of its own.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let hour_ago = now - 3_600_000;
    let old: Vec<_> = records(0, 100)
        .into_iter()
        .map(|(k, v, _)| (k, v, Some(hour_ago)))
        .collect();
    let p = producer(&b, &[("acks", "all"), ("linger.ms", "0")]);
    produce_all(&p, "ret", &old);
    let objects_old = wal_objects(&store);
    produce_all(&p, "ret", &records(100, 100));
    let objects_all = wal_objects(&store);
    assert!(objects_old > 0 && objects_all > objects_old);
    let c = consumer(&b, &[]);
    let low = |c: &BaseConsumer| {
        c.fetch_watermarks("ret", 0, Duration::from_secs(10))
            .unwrap()
    };
    // Retention drops the old batches, then their objects go.
    let deadline = Instant::now() + Duration::from_secs(30);
    while low(&c).0 < 100 || wal_objects(&store) > objects_all - objects_old {
        assert!(
            Instant::now() < deadline,
            "watermarks {:?}, {} of {objects_all} objects left; the node's log:\n{}",
            low(&c),
            wal_objects(&store),
            server.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(low(&c), (100, 200));
    let read = read_values(&b, "ret", 1, "read_uncommitted", 100);
    assert_eq!(read.first().map(String::as_str), Some("value 100"));
    assert_eq!(read.len(), 100);

    // DeleteRecords from a real client (confluent-kafka's AdminClient), then past the end.
    let script = format!(
        r#"
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
a = AdminClient({{"bootstrap.servers": "{b}"}})
for offset in (150, 500):
    f = a.delete_records([TopicPartition("ret", 0, offset)])
    for tp, fut in f.items():
        try:
            print(fut.result().low_watermark)
        except Exception as e:
            print(e.args[0].name())
"#
    );
    let out = std::process::Command::new("python3")
        .args(["-c", &script])
        .output()
        .expect("python3 (run scripts/test, which installs confluent-kafka)");
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        said.lines().collect::<Vec<_>>(),
        ["150", "OFFSET_OUT_OF_RANGE"],
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(low(&c).0, 150);

    // The trimmed start is in the metadata log: a restart keeps it, and produce goes on.
    drop(c);
    server.restart();
    let b = server.bootstrap.clone();
    let c = consumer(&b, &[]);
    assert_eq!(low(&c), (150, 200));
    let p = producer(&b, &[("acks", "all")]);
    produce_all(&p, "ret", &records(200, 10));
    assert_eq!(low(&c), (150, 210));
    let read = read_values(&b, "ret", 1, "read_uncommitted", 60);
    assert_eq!(read.first().map(String::as_str), Some("value 150"));
    assert_eq!(read.len(), 60);

    // A deleted topic's objects go too.
    assert!(wal_objects(&store) > 0);
    block_on(admin(&b).delete_topics(&["ret"], &AdminOptions::new())).unwrap()[0]
        .as_ref()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while wal_objects(&store) > 0 {
        assert!(
            Instant::now() < deadline,
            "{} objects left",
            wal_objects(&store)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The `.log` objects of compacted segments in a local store.
fn segment_logs(store: &std::path::Path) -> Vec<std::path::PathBuf> {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = e.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|x| x == "log") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&store.join("diskless/segments"), &mut out);
    out.sort();
    out
}

/// Read partition 0 of `topic` from `from` until `end`: every record must be the one
/// `value` says for its offset, in order.
fn read_in_order(bootstrap: &str, topic: &str, from: i64, end: i64, value: impl Fn(i64) -> String) {
    let c = consumer(bootstrap, &[]);
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, rdkafka::Offset::Offset(from))
        .unwrap();
    c.assign(&tpl).unwrap();
    let mut next = from;
    let deadline = Instant::now() + Duration::from_secs(60);
    while next < end {
        assert!(Instant::now() < deadline, "read up to {next} of {end}");
        if let Some(m) = c.poll(Duration::from_millis(200)) {
            let m = m.expect("consume");
            assert_eq!(m.offset(), next, "records out of order or missing");
            assert_eq!(m.payload(), Some(value(next).as_bytes()));
            next += 1;
        }
    }
}

/// WAL compaction: a diskless partition's batches move out of the shared WAL objects into
/// segment objects (Kafka's segment format) that the tiered reader serves: everything reads
/// back in order, by offset and by time, from inside a segment after DeleteRecords, across a
/// kill -9; the WAL objects and the trimmed segments are deleted from the store.
#[test]
fn wal_compaction_moves_a_diskless_log_into_segment_objects() {
    let mut server = start(&[
        "diskless.append.linger.ms=20",
        "diskless.wal.compaction.interval.ms=300",
        "diskless.wal.delete.delay.ms=1000",
    ]);
    let b = server.bootstrap.clone();
    create_topic(
        &b,
        "cmp",
        1,
        &[("diskless.enable", "true"), ("segment.bytes", "100000")],
    );
    let store = server.data_dir().parent().unwrap().join("remote");
    let base_ts = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        - 3_600_000;
    let value = |i: i64| format!("value {i:05} {}", "x".repeat(60));
    let all: Vec<_> = (0..3000i64)
        .map(|i| {
            (
                format!("k{i}").into_bytes(),
                value(i).into_bytes(),
                Some(base_ts + i * 10),
            )
        })
        .collect();
    let p = producer(
        &b,
        &[
            ("acks", "all"),
            ("enable.idempotence", "true"),
            ("linger.ms", "5"),
        ],
    );
    for chunk in all.chunks(500) {
        produce_all(&p, "cmp", chunk);
    }
    assert!(wal_objects(&store) > 0);
    // Compaction swaps every batch for segments, then the WAL objects go.
    let deadline = Instant::now() + Duration::from_secs(60);
    while wal_objects(&store) > 0 || segment_logs(&store).len() < 2 {
        assert!(
            Instant::now() < deadline,
            "{} WAL objects left, {} segments",
            wal_objects(&store),
            segment_logs(&store).len()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let segments = segment_logs(&store);
    // Each segment of `segment.bytes` at most, with its indexes beside it.
    for s in &segments {
        assert!(std::fs::metadata(s).unwrap().len() <= 100_000, "{s:?}");
        assert!(s.with_extension("index").exists() && s.with_extension("timeindex").exists());
    }
    read_in_order(&b, "cmp", 0, 3000, value);
    // The CLI shows what the store holds (through the admin API) and the broker's times.
    let out = std::process::Command::new(sluice_bin())
        .args([
            "topics",
            "--bootstrap-server",
            &b,
            "--describe",
            "--topic",
            "cmp",
        ])
        .args(["--admin-api", &server.admin().expect("admin listener")])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = said
        .lines()
        .find(|l| l.contains("Partition: 0"))
        .unwrap_or_else(|| panic!("{said}"));
    assert!(
        line.contains(&format!("Segments: {}\t", segments.len()))
            && line.contains("WalBatches: 0\tWalObjects: 0\tWalBytes: 0"),
        "{said}"
    );
    assert!(said.contains("Diskless (broker 0): upload p50 "), "{said}");
    // By time: the exact record inside a segment (a consumer's offsetsForTimes).
    let c = consumer(&b, &[]);
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset("cmp", 0, rdkafka::Offset::Offset(base_ts + 1234 * 10 - 5))
        .unwrap();
    let found = c.offsets_for_times(tpl, Duration::from_secs(10)).unwrap();
    assert_eq!(
        found.find_partition("cmp", 0).unwrap().offset(),
        rdkafka::Offset::Offset(1234)
    );
    // DeleteRecords into the middle of a segment: reads start exactly there.
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset("cmp", 0, rdkafka::Offset::Offset(1501))
        .unwrap();
    let low = block_on(admin(&b).delete_records(&tpl, &AdminOptions::new())).unwrap();
    assert_eq!(
        low.find_partition("cmp", 0).unwrap().offset(),
        rdkafka::Offset::Offset(1501)
    );
    read_in_order(&b, "cmp", 1501, 3000, value);
    // The segments wholly below the new start are deleted from the store.
    let deadline = Instant::now() + Duration::from_secs(30);
    while segment_logs(&store).iter().any(|s| segments[0] == *s) {
        assert!(
            Instant::now() < deadline,
            "the first segment is still stored"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // kill -9: the segments and the sequencer's state are in the metadata log.
    drop((p, c));
    server.kill();
    server.restart();
    let b = server.bootstrap.clone();
    let c = consumer(&b, &[]);
    assert_eq!(
        c.fetch_watermarks("cmp", 0, Duration::from_secs(10))
            .unwrap(),
        (1501, 3000)
    );
    read_in_order(&b, "cmp", 1501, 3000, value);
    let p = producer(&b, &[("acks", "all"), ("enable.idempotence", "true")]);
    let more: Vec<_> = (3000..3010i64)
        .map(|i| (format!("k{i}").into_bytes(), value(i).into_bytes(), None))
        .collect();
    produce_all(&p, "cmp", &more);
    read_in_order(&b, "cmp", 2990, 3010, value);
}
