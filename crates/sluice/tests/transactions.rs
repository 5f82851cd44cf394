//! Transactions with librdkafka (through the `rdkafka` crate) against a real `sluice`
//! process: commit and abort, read_committed consumers and the last stable offset, zombie
//! fencing by a new instance, offsets committed inside a transaction (consume, transform,
//! produce), timeouts, and an open transaction surviving a kill -9 of the broker.

mod common;
#[path = "common/wire.rs"]
mod wire;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::*;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

const T: Duration = Duration::from_secs(30);

fn txn_producer(bootstrap: &str, id: &str, extra: &[(&str, &str)]) -> BaseProducer<Deliveries> {
    let mut cfg = vec![("transactional.id", id)];
    cfg.extend_from_slice(extra);
    let p = producer(bootstrap, &cfg);
    p.init_transactions(T).expect("init_transactions");
    p
}

/// Send `values` to `topic` (keyed by value, so spread over partitions) and wait for them.
fn send(p: &BaseProducer<Deliveries>, topic: &str, values: &[String]) {
    for v in values {
        p.send(BaseRecord::to(topic).key(v).payload(v))
            .unwrap_or_else(|(e, _)| panic!("send: {e}"));
    }
    p.flush(T).expect("flush");
}

fn values(tag: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{tag}-{i}")).collect()
}

/// Everything a consumer with `isolation` reads from the start of `topic` until it has seen
/// `expect` records (and then until the end, to catch extras).
fn read(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    isolation: &str,
    expect: usize,
) -> Vec<String> {
    let c = consumer(bootstrap, &[("isolation.level", isolation)]);
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    c.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + T;
    while out.len() < expect {
        assert!(
            Instant::now() < deadline,
            "{isolation}: read {} of {expect}: {out:?}",
            out.len()
        );
        if let Some(m) = c.poll(Duration::from_millis(200)) {
            let m = m.expect("consume");
            out.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
        }
    }
    // Drain to the visible end: nothing more may come.
    while let Some(m) = c.poll(Duration::from_millis(500)) {
        out.push(String::from_utf8(m.expect("consume").payload().unwrap().to_vec()).unwrap());
    }
    out
}

/// The end offset a reader with `isolation` sees in each partition (ListOffsets latest:
/// the last stable offset for read_committed, the high watermark otherwise).
fn ends(bootstrap: &str, topic: &str, partitions: i32, isolation: &str) -> Vec<i64> {
    let c = consumer(bootstrap, &[("isolation.level", isolation)]);
    (0..partitions)
        .map(|p| c.fetch_watermarks(topic, p, T).expect("watermarks").1)
        .collect()
}

/// Run `sluice <args>` against `bootstrap`; its stdout, or a panic with everything.
fn cli(bootstrap: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(sluice_bin())
        .args(args)
        .env("SLUICE_BOOTSTRAP", bootstrap)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sluice {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Run `sluice <args>` against `bootstrap`, which must fail; its stderr.
fn cli_fails(bootstrap: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(sluice_bin())
        .args(args)
        .env("SLUICE_BOOTSTRAP", bootstrap)
        .output()
        .unwrap();
    assert!(!out.status.success(), "sluice {args:?} should fail");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn committed_transactions_are_read_and_aborted_ones_are_not() {
    let server = start(&[]);
    let b = &server.bootstrap;
    create_topic(b, "out", 3, &[]);
    let p = txn_producer(b, "tx-basic", &[]);
    p.begin_transaction().unwrap();
    send(&p, "out", &values("c1", 100));
    p.commit_transaction(T).expect("commit");
    p.begin_transaction().unwrap();
    send(&p, "out", &values("a", 100));
    p.abort_transaction(T).expect("abort");
    p.begin_transaction().unwrap();
    send(&p, "out", &values("c2", 100));
    p.commit_transaction(T).expect("commit");

    let mut want = values("c1", 100);
    want.extend(values("c2", 100));
    assert_eq!(
        sorted(read(b, "out", 3, "read_committed", 200)),
        sorted(want)
    );
    let all = read(b, "out", 3, "read_uncommitted", 300);
    assert_eq!(all.len(), 300);
    assert_eq!(all.iter().filter(|v| v.starts_with("a-")).count(), 100);
    // Every partition's stable end is its high watermark: nothing is open.
    assert_eq!(
        ends(b, "out", 3, "read_committed"),
        ends(b, "out", 3, "read_uncommitted")
    );
}

#[test]
fn an_open_transaction_holds_the_stable_offset_until_a_new_instance_fences_and_aborts_it() {
    let server = start(&[]);
    let b = &server.bootstrap;
    create_topic(b, "held", 1, &[]);
    let zombie = txn_producer(b, "tx-fence", &[]);
    zombie.begin_transaction().unwrap();
    send(&zombie, "held", &values("open", 10));
    // Another producer commits after the open transaction's records.
    let other = txn_producer(b, "tx-other", &[]);
    other.begin_transaction().unwrap();
    send(&other, "held", &values("later", 5));
    other.commit_transaction(T).expect("commit");
    // read_committed stops at the open transaction's first offset (0), read_uncommitted
    // sees everything: 10 + 5 records and one commit marker.
    assert_eq!(ends(b, "held", 1, "read_committed"), vec![0]);
    assert_eq!(ends(b, "held", 1, "read_uncommitted"), vec![16]);
    // The tools show the open transaction: at its coordinator, and in the partition.
    let list = cli(b, &["transactions", "--list"]);
    let row = |id: &str| {
        list.lines()
            .find(|l| l.starts_with(&format!("{id}\t")))
            .unwrap_or_else(|| panic!("{id} not listed: {list}"))
            .to_string()
    };
    assert!(row("tx-fence").ends_with("\tOngoing"), "{list}");
    assert!(row("tx-other").ends_with("\tCompleteCommit"), "{list}");
    let ongoing = cli(b, &["transactions", "--list", "--state", "Ongoing"]);
    assert!(
        ongoing.contains("tx-fence") && !ongoing.contains("tx-other"),
        "{ongoing}"
    );
    // KIP-1152: a pattern the whole id matches; one that does not compile is refused.
    let matching = cli(
        b,
        &[
            "transactions",
            "--list",
            "--transactional-id-pattern",
            "tx-o.*",
        ],
    );
    assert!(
        matching.contains("tx-other") && !matching.contains("tx-fence"),
        "{matching}"
    );
    let partial = cli(
        b,
        &[
            "transactions",
            "--list",
            "--transactional-id-pattern",
            "tx-o",
        ],
    );
    assert!(!partial.contains("tx-other"), "{partial}");
    let bad = cli_fails(
        b,
        &[
            "transactions",
            "--list",
            "--transactional-id-pattern",
            "tx-[",
        ],
    );
    assert!(bad.contains("InvalidRegularExpression"), "{bad}");
    let described = cli(
        b,
        &[
            "transactions",
            "--describe",
            "--transactional-id",
            "tx-fence",
        ],
    );
    let fields: Vec<&str> = described.lines().nth(1).unwrap().split('\t').collect();
    assert_eq!(
        (fields[1], fields[4], fields[7]),
        ("tx-fence", "Ongoing", "held-0"),
        "{described}"
    );
    let producers = cli(b, &["producers", "--describe", "--topic", "held"]);
    // The zombie's row: its open transaction starts at offset 0.
    assert!(
        producers
            .lines()
            .any(|l| l.starts_with(&format!("0\t{}\t", fields[2])) && l.ends_with("\t0")),
        "{producers}"
    );

    // A new instance with the same transactional id fences the zombie and aborts its
    // transaction; the committed records behind it become readable, the aborted never.
    let fresh = txn_producer(b, "tx-fence", &[]);
    assert_eq!(ends(b, "held", 1, "read_committed"), vec![17]);
    assert_eq!(
        sorted(read(b, "held", 1, "read_committed", 5)),
        sorted(values("later", 5))
    );
    let err = zombie
        .commit_transaction(T)
        .expect_err("the zombie is fenced");
    assert!(
        matches!(&err, KafkaError::Transaction(e) if e.is_fatal()),
        "zombie commit: {err:?}"
    );
    fresh.begin_transaction().unwrap();
    send(&fresh, "held", &values("fresh", 3));
    fresh.commit_transaction(T).expect("commit");
    let mut want = values("later", 5);
    want.extend(values("fresh", 3));
    assert_eq!(
        sorted(read(b, "held", 1, "read_committed", 8)),
        sorted(want)
    );
}

fn group_consumer(bootstrap: &str, group: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", "read_committed")
        .set("session.timeout.ms", "6000")
        .create()
        .expect("consumer")
}

/// The group's committed offset of partition 0 of `topic` (None: nothing committed). A
/// read_committed consumer asks for stable offsets: until the just-ended transaction's
/// marker reaches `__consumer_offsets` (EndTxn is answered before the markers are written,
/// as in Kafka) the partition is answered UNSTABLE_OFFSET_COMMIT, which librdkafka asks
/// again by itself: one call gets the offset.
fn committed(bootstrap: &str, group: &str, topic: &str) -> Option<i64> {
    committed_within(bootstrap, group, topic, T).expect("committed")
}

/// [`committed`], giving up after `timeout`.
fn committed_within(
    bootstrap: &str,
    group: &str,
    topic: &str,
    timeout: Duration,
) -> rdkafka::error::KafkaResult<Option<i64>> {
    let c = group_consumer(bootstrap, group);
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(topic, 0);
    let got = c.committed_offsets(tpl, timeout)?;
    Ok(match got.elements()[0].offset() {
        Offset::Offset(o) => Some(o),
        _ => None,
    })
}

/// The broker a test checks against Kafka's answers talks to: the one `WIRE_AGAINST=host:port`
/// names (a Kafka 4.4 broker), else a fresh Sluice (kept alive by the first value).
fn server_or_against() -> (Option<TestServer>, String) {
    match std::env::var("WIRE_AGAINST") {
        Ok(b) => (None, b),
        Err(_) => {
            let server = start(&[]);
            let b = server.bootstrap.clone();
            (Some(server), b)
        }
    }
}

/// librdkafka's `committed()` (read_committed, so require_stable) asked while a
/// transaction's offsets are pending keeps asking until its timeout (it retries the
/// partitions answered UNSTABLE_OFFSET_COMMIT, the form Kafka 4.4 answers; an error for the
/// whole group failed it at once), and gets the group's offset once the transaction is
/// aborted. Passes against Kafka 4.4 too:
/// `WIRE_AGAINST=127.0.0.1:19092 cargo test -p sluice --test transactions committed_waits`.
#[test]
fn committed_waits_for_an_aborted_transactions_offsets() {
    let (_server, b) = server_or_against();
    let b = &b;
    let run = std::process::id();
    let (group, topic) = (&format!("cw-group-{run}"), &format!("cw-{run}"));
    create_topic(b, topic, 1, &[]);
    let c = group_consumer(b, group);
    let p = txn_producer(b, &format!("cw-tx-{run}"), &[]);
    let offsets = |o: i64| {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, 0, Offset::Offset(o))
            .unwrap();
        tpl
    };
    let meta = c.group_metadata().expect("group metadata");
    p.begin_transaction().unwrap();
    p.send_offsets_to_transaction(&offsets(5), &meta, T)
        .unwrap();
    p.commit_transaction(T).unwrap();
    assert_eq!(committed(b, group, topic), Some(5));
    p.begin_transaction().unwrap();
    p.send_offsets_to_transaction(&offsets(9), &meta, T)
        .unwrap();
    // Asked while the offset 9 is pending: no answer, but librdkafka asks again until its
    // timeout rather than failing at once.
    let asked = Instant::now();
    let pending = committed_within(b, group, topic, Duration::from_secs(2));
    assert!(
        pending.is_err() && asked.elapsed() >= Duration::from_millis(1500),
        "while pending: {pending:?} after {:?}",
        asked.elapsed()
    );
    // Answered once the abort has removed it.
    p.abort_transaction(T).unwrap();
    assert_eq!(committed(b, group, topic), Some(5));
    // And right after an abort, with its markers maybe still on their way.
    p.begin_transaction().unwrap();
    p.send_offsets_to_transaction(&offsets(11), &meta, T)
        .unwrap();
    p.abort_transaction(T).unwrap();
    assert_eq!(committed(b, group, topic), Some(5));
}

#[test]
fn consume_transform_produce_commits_offsets_with_the_output_and_aborts_both() {
    let server = start(&[]);
    let b = &server.bootstrap;
    create_topic(b, "in", 1, &[]);
    create_topic(b, "out2", 2, &[]);
    produce_all(
        &producer(b, &[]),
        "in",
        &values("in", 40)
            .into_iter()
            .map(|v| (v.clone().into_bytes(), v.into_bytes(), None))
            .collect::<Vec<_>>(),
    );
    let c = group_consumer(b, "pipeline");
    c.subscribe(&["in"]).unwrap();
    let p = txn_producer(b, "tx-pipeline", &[]);
    // Transform batches of 10: the first two commit, the third aborts, then the rest commit.
    let mut batch = 0;
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while batch < 5 {
        assert!(
            Instant::now() < deadline,
            "pipeline stuck after {batch} batches"
        );
        let mut got = Vec::new();
        while got.len() < 10 && Instant::now() < deadline {
            if let Some(m) = c.poll(Duration::from_millis(200)) {
                let m = m.expect("consume");
                got.push((
                    m.offset(),
                    String::from_utf8(m.payload().unwrap().to_vec()).unwrap(),
                ));
            }
        }
        p.begin_transaction().unwrap();
        let out: Vec<String> = got.iter().map(|(_, v)| format!("{v}-out")).collect();
        send(&p, "out2", &out);
        let next = got.last().unwrap().0 + 1;
        let mut offsets = TopicPartitionList::new();
        offsets
            .add_partition_offset("in", 0, Offset::Offset(next))
            .unwrap();
        p.send_offsets_to_transaction(&offsets, &c.group_metadata().unwrap(), T)
            .expect("send offsets");
        if batch == 2 {
            p.abort_transaction(T).expect("abort");
            // The aborted batch's offsets are not committed: rewind and process it again.
            assert_eq!(committed(b, "pipeline", "in"), Some(got[0].0));
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset("in", 0, Offset::Offset(got[0].0))
                .unwrap();
            c.seek_partitions(tpl, T).expect("seek");
        } else {
            p.commit_transaction(T).expect("commit");
            assert_eq!(committed(b, "pipeline", "in"), Some(next));
            seen.extend(out);
        }
        batch += 1;
    }
    assert_eq!(seen.len(), 40);
    let expect: Vec<String> = values("in", 40)
        .iter()
        .map(|v| format!("{v}-out"))
        .collect();
    assert_eq!(
        sorted(read(b, "out2", 2, "read_committed", 40)),
        sorted(expect)
    );
    assert_eq!(read(b, "out2", 2, "read_uncommitted", 50).len(), 50);
    let _ = c.commit_consumer_state(CommitMode::Sync);
}

#[test]
fn a_hung_transaction_is_aborted_after_its_timeout() {
    let server = start(&["transaction.abort.timed.out.transaction.cleanup.interval.ms=200"]);
    let b = &server.bootstrap;
    create_topic(b, "hung", 1, &[]);
    let p = txn_producer(
        b,
        "tx-hung",
        &[
            ("transaction.timeout.ms", "2000"),
            ("message.timeout.ms", "2000"),
        ],
    );
    p.begin_transaction().unwrap();
    send(&p, "hung", &values("hung", 5));
    assert_eq!(ends(b, "hung", 1, "read_committed"), vec![0]);
    // The coordinator aborts it: the stable offset passes the abort marker.
    let deadline = Instant::now() + Duration::from_secs(20);
    while ends(b, "hung", 1, "read_committed") != vec![6] {
        assert!(
            Instant::now() < deadline,
            "the hung transaction was not aborted"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(read(b, "hung", 1, "read_committed", 0).is_empty());
    // The producer was fenced by the abort: committing fails.
    assert!(p.commit_transaction(T).is_err());
}

#[test]
fn an_idle_transactional_id_expires() {
    let server = start(&[
        "transaction.abort.timed.out.transaction.cleanup.interval.ms=200",
        "transactional.id.expiration.ms=1000",
    ]);
    let b = &server.bootstrap;
    create_topic(b, "idle", 1, &[]);
    let p = txn_producer(b, "tx-idle", &[]);
    p.begin_transaction().unwrap();
    send(&p, "idle", &values("x", 3));
    p.commit_transaction(T).expect("commit");
    assert!(cli(b, &["transactions", "--list"]).contains("tx-idle"));
    // Past the expiration with nothing open, the id is forgotten (a tombstone).
    let deadline = Instant::now() + Duration::from_secs(20);
    while cli(b, &["transactions", "--list"]).contains("tx-idle") {
        assert!(Instant::now() < deadline, "tx-idle never expired");
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(p);
    // It comes back as new (epoch 0 of a fresh producer id) and works.
    let again = txn_producer(b, "tx-idle", &[]);
    let described = cli(
        b,
        &[
            "transactions",
            "--describe",
            "--transactional-id",
            "tx-idle",
        ],
    );
    let fields: Vec<&str> = described.lines().nth(1).unwrap().split('\t').collect();
    assert_eq!(fields[3], "0", "{described}");
    again.begin_transaction().unwrap();
    send(&again, "idle", &values("y", 2));
    again.commit_transaction(T).expect("commit");
    assert_eq!(read(b, "idle", 1, "read_committed", 5).len(), 5);
}

#[test]
fn an_open_transaction_survives_a_kill_9_and_is_aborted_by_the_next_instance() {
    let mut server = start(&[]);
    create_topic(&server.bootstrap, "crash", 2, &[]);
    let p = txn_producer(&server.bootstrap, "tx-crash", &[]);
    p.begin_transaction().unwrap();
    send(&p, "crash", &values("done", 20));
    p.commit_transaction(T).expect("commit");
    p.begin_transaction().unwrap();
    send(&p, "crash", &values("open", 20));
    let open_ends = ends(&server.bootstrap, "crash", 2, "read_uncommitted");
    drop(p);
    server.kill();
    server.restart();
    let b = server.bootstrap.clone();
    // After recovery the open transaction still holds the stable offset...
    let stable = ends(&b, "crash", 2, "read_committed");
    assert!(
        stable.iter().zip(&open_ends).any(|(s, e)| s < e),
        "stable {stable:?} vs ends {open_ends:?}"
    );
    // ...until the producer comes back and its coordinator (reloaded from
    // __transaction_state) aborts it.
    let p = txn_producer(&b, "tx-crash", &[]);
    p.begin_transaction().unwrap();
    send(&p, "crash", &values("after", 10));
    p.commit_transaction(T).expect("commit");
    let got: HashSet<String> = read(&b, "crash", 2, "read_committed", 30)
        .into_iter()
        .collect();
    let mut want: HashSet<String> = values("done", 20).into_iter().collect();
    want.extend(values("after", 10));
    assert_eq!(got, want);
}

mod native {
    use std::time::{Duration, Instant};

    use sluice_client::admin::NewTopic;
    use sluice_client::{
        Admin, ClientConfig, Consumer, ErrorCode, Producer, ProducerRecord, TopicPartition,
    };

    use super::{sorted, start, values};

    fn config(bootstrap: &str, pairs: &[(&str, &str)]) -> ClientConfig {
        let mut c = ClientConfig::new(bootstrap);
        for (k, v) in pairs {
            c = c.set(k, v).unwrap();
        }
        c
    }

    /// Every value a consumer with `isolation` reads from the start of `topic`, once it has
    /// `expect` and nothing more arrives for a poll.
    async fn read(
        bootstrap: &str,
        topic: &str,
        partitions: i32,
        isolation: &str,
        expect: usize,
    ) -> Vec<String> {
        let mut c = Consumer::new(config(
            bootstrap,
            &[
                ("isolation.level", isolation),
                ("auto.offset.reset", "earliest"),
            ],
        ))
        .unwrap();
        c.assign(
            &(0..partitions)
                .map(|p| TopicPartition::new(topic, p))
                .collect::<Vec<_>>(),
        )
        .unwrap();
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let got = c.poll(Duration::from_millis(500)).await.unwrap();
            if got.is_empty() && out.len() >= expect {
                return out;
            }
            assert!(
                Instant::now() < deadline,
                "{isolation}: read {} of {expect}",
                out.len()
            );
            out.extend(
                got.into_iter()
                    .map(|r| String::from_utf8(r.value.unwrap().to_vec()).unwrap()),
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_native_client_commits_aborts_and_commits_offsets_in_transactions() {
        let server = start(&[]);
        let b = server.bootstrap.clone();
        let admin = Admin::new(ClientConfig::new(&b)).unwrap();
        for (t, n) in [("nin", 1), ("nout", 3)] {
            let r = admin
                .create_topics(&[NewTopic::new(t, n, 1)], false)
                .await
                .unwrap();
            r[0].1.as_ref().unwrap();
        }
        let plain = Producer::new(ClientConfig::new(&b)).unwrap();
        for v in values("in", 30) {
            plain
                .send(ProducerRecord::new("nin").value(v))
                .await
                .unwrap();
        }
        plain.flush().await;

        let mut consumer = Consumer::new(config(
            &b,
            &[
                ("group.id", "native-pipeline"),
                ("isolation.level", "read_committed"),
                ("auto.offset.reset", "earliest"),
            ],
        ))
        .unwrap();
        consumer.subscribe(&["nin"]).await.unwrap();
        let producer = Producer::new(config(&b, &[("transactional.id", "native-tx")])).unwrap();
        // Sending before init_transactions, or outside a transaction, is refused.
        assert!(producer.begin_transaction().await.is_err());
        producer.init_transactions().await.unwrap();
        let tp = TopicPartition::new("nin", 0);
        let mut committed_out = Vec::new();
        let mut buffered = Vec::new();
        let mut round = 0;
        let deadline = Instant::now() + Duration::from_secs(60);
        while committed_out.len() < 30 {
            assert!(
                Instant::now() < deadline,
                "pipeline stuck at {}",
                committed_out.len()
            );
            while buffered.len() < 10 {
                assert!(Instant::now() < deadline, "input stuck");
                buffered.extend(consumer.poll(Duration::from_millis(200)).await.unwrap());
            }
            let got: Vec<_> = buffered.drain(..10).collect();
            producer.begin_transaction().await.unwrap();
            let out: Vec<String> = got
                .iter()
                .map(|r| {
                    format!(
                        "{}-out",
                        String::from_utf8_lossy(r.value.as_deref().unwrap())
                    )
                })
                .collect();
            let mut acks = Vec::new();
            for v in &out {
                acks.push(
                    producer
                        .send(ProducerRecord::new("nout").key(v.clone()).value(v.clone()))
                        .await
                        .unwrap(),
                );
            }
            let next = got.last().unwrap().offset + 1;
            producer
                .send_offsets_to_transaction(
                    &[("nin".to_string(), 0, next)],
                    &consumer.group_metadata().unwrap(),
                )
                .await
                .unwrap();
            if round == 1 {
                producer.abort_transaction().await.unwrap();
                consumer.seek(&tp, got[0].offset).unwrap();
                buffered.clear();
            } else {
                producer.commit_transaction().await.unwrap();
                for a in acks {
                    assert!(a.await.unwrap().offset >= 0);
                }
                committed_out.extend(out);
            }
            // The group's committed offset moves with committed transactions only.
            let committed = consumer.committed(std::slice::from_ref(&tp)).await.unwrap();
            let expect = if round == 1 { got[0].offset } else { next };
            assert_eq!(
                committed[0].1.as_ref().map(|o| o.offset),
                Some(expect),
                "round {round}"
            );
            round += 1;
        }
        assert_eq!(
            sorted(read(&b, "nout", 3, "read_committed", 30).await),
            sorted(committed_out)
        );
        assert_eq!(read(&b, "nout", 3, "read_uncommitted", 40).await.len(), 40);

        // A second instance fences the first.
        let second = Producer::new(config(&b, &[("transactional.id", "native-tx")])).unwrap();
        second.init_transactions().await.unwrap();
        producer.begin_transaction().await.unwrap();
        let fenced = producer
            .send(ProducerRecord::new("nout").value("zombie"))
            .await
            .unwrap()
            .await;
        assert!(fenced.is_err(), "a fenced producer's send must fail");
        let err = producer.commit_transaction().await.unwrap_err();
        assert!(
            err.to_string().contains("abort") || err.code() == Some(ErrorCode::ProducerFenced),
            "{err}"
        );
        assert!(
            producer.begin_transaction().await.is_err()
                || producer.abort_transaction().await.is_err()
        );
    }
}

mod v2 {
    //! Transactions v2 (KIP-890 part 2) on the wire, as a Java 4 producer speaks it when the
    //! cluster finalizes `transaction.version` 2: no AddPartitionsToTxn or AddOffsetsToTxn
    //! (Produce v12 and TxnOffsetCommit v5 add the partitions), and EndTxn v5 bumps the epoch.

    use super::*;

    use super::wire::Wire;
    use bytes::Bytes;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::txn_offset_commit_request::{
        TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::StrBytes;
    use sluice_protocol::batch::BatchBuilder;
    use sluice_protocol::compression::Compression;

    const ID: &str = "tv2-producer";

    fn s(v: &str) -> StrBytes {
        StrBytes::from_string(v.to_string())
    }

    fn batch(pid: i64, epoch: i16, seq: i32, value: &str) -> Bytes {
        let mut b = BatchBuilder::new(Compression::None)
            .with_producer(pid, epoch, seq)
            .with_transactional(true);
        b.append(0, Some(value.as_bytes()), Some(value.as_bytes()), &[]);
        b.build(0).unwrap().into()
    }

    /// Produce v12 of one transactional batch: the partition's error code.
    fn produce(w: &mut Wire, topic: &str, partition: i32, records: Bytes) -> i16 {
        let req = ProduceRequest::default()
            .with_transactional_id(Some(TransactionalId(s(ID))))
            .with_acks(-1)
            .with_timeout_ms(10_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(s(topic)))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(records))])]);
        let resp: ProduceResponse = w.call(ApiKey::Produce, 12, &req);
        resp.responses[0].partition_responses[0].error_code
    }

    /// EndTxn v5, retried while the previous end's markers are written: (error, pid, epoch).
    fn end(w: &mut Wire, pid: i64, epoch: i16, commit: bool) -> (i16, i64, i16) {
        end_as(w, ID, pid, epoch, commit)
    }

    fn end_as(w: &mut Wire, id: &str, pid: i64, epoch: i16, commit: bool) -> (i16, i64, i16) {
        let req = EndTxnRequest::default()
            .with_transactional_id(TransactionalId(s(id)))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_committed(commit);
        let deadline = Instant::now() + T;
        loop {
            let resp: EndTxnResponse = w.call(ApiKey::EndTxn, 5, &req);
            if resp.error_code != 51 || Instant::now() > deadline {
                return (resp.error_code, resp.producer_id.0, resp.producer_epoch);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn commit_offset(w: &mut Wire, pid: i64, epoch: i16, topic: &str, offset: i64) -> i16 {
        commit_offsets(w, (ID, "tv2-group"), (pid, epoch), topic, &[(0, offset)])[0]
    }

    /// TxnOffsetCommit v5 of (partition, offset)s of `topic` for (transactional id, group),
    /// retried while the group's coordinator loads: each partition's error code.
    fn commit_offsets(
        w: &mut Wire,
        (id, group): (&str, &str),
        (pid, epoch): (i64, i16),
        topic: &str,
        offsets: &[(i32, i64)],
    ) -> Vec<i16> {
        let req = TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(s(id)))
            .with_group_id(GroupId(s(group)))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_generation_id(-1)
            .with_member_id(s(""))
            .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                .with_name(TopicName(s(topic)))
                .with_partitions(
                    offsets
                        .iter()
                        .map(|&(p, o)| {
                            TxnOffsetCommitRequestPartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(o)
                        })
                        .collect(),
                )]);
        let deadline = Instant::now() + T;
        loop {
            let resp: TxnOffsetCommitResponse = w.call(ApiKey::TxnOffsetCommit, 5, &req);
            let codes: Vec<i16> = resp.topics[0]
                .partitions
                .iter()
                .map(|p| p.error_code)
                .collect();
            // The group coordinator may still be loading its new partition, or the previous
            // transaction's markers still being written (CONCURRENT_TRANSACTIONS).
            if !codes.iter().any(|c| [14, 15, 16, 51].contains(c)) || Instant::now() > deadline {
                return codes;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// InitProducerId v5 for `id`, retried while the transaction coordinator loads.
    fn init(w: &mut Wire, id: &str) -> InitProducerIdResponse {
        let deadline = Instant::now() + T;
        loop {
            let init: InitProducerIdResponse = w.call(
                ApiKey::InitProducerId,
                5,
                &InitProducerIdRequest::default()
                    .with_transactional_id(Some(TransactionalId(s(id))))
                    .with_transaction_timeout_ms(60_000)
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1),
            );
            // The transaction topic is new: its leader is elected, then loads it.
            if ![14, 15, 16].contains(&init.error_code) || Instant::now() > deadline {
                return init;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// OffsetFetch v9 of `group`'s offsets of `topic` (all the group's when `partitions` is
    /// None): (group error, [(topic, partition, error, offset)]).
    fn fetch_offsets(
        w: &mut Wire,
        group: &str,
        topic: &str,
        partitions: Option<Vec<i32>>,
        require_stable: bool,
    ) -> (i16, Vec<(String, i32, i16, i64)>) {
        use kafka_protocol::messages::offset_fetch_request::{
            OffsetFetchRequestGroup, OffsetFetchRequestTopics,
        };
        let topics = partitions.map(|ps| {
            vec![OffsetFetchRequestTopics::default()
                .with_name(TopicName(s(topic)))
                .with_partition_indexes(ps)]
        });
        let req = OffsetFetchRequest::default()
            .with_require_stable(require_stable)
            .with_groups(vec![OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(s(group)))
                .with_topics(topics)]);
        let resp: OffsetFetchResponse = w.call(ApiKey::OffsetFetch, 9, &req);
        let g = &resp.groups[0];
        let mut rows: Vec<(String, i32, i16, i64)> = g
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| {
                    let name = t.name.to_string();
                    (name, p.partition_index, p.error_code, p.committed_offset)
                })
            })
            .collect();
        rows.sort();
        (g.error_code, rows)
    }

    #[test]
    fn a_transactional_batch_without_a_transactional_id_is_refused() {
        let server = start(&[]);
        let b = &server.bootstrap;
        create_topic(b, "no-id", 1, &[]);
        let mut w = Wire::connect(b);
        for version in [9, 12] {
            let req = ProduceRequest::default()
                .with_acks(1)
                .with_timeout_ms(10_000)
                .with_topic_data(vec![TopicProduceData::default()
                    .with_name(TopicName(s("no-id")))
                    .with_partition_data(vec![PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(batch(4321, 0, 0, "orphan")))])]);
            let resp: ProduceResponse = w.call(ApiKey::Produce, version, &req);
            let code = resp.responses[0].partition_responses[0].error_code;
            assert_eq!(
                code, 53,
                "v{version}: TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
            );
        }
        // Nothing was written: no transaction that nobody would end holds the stable offset.
        assert_eq!(ends(b, "no-id", 1, "read_uncommitted"), vec![0]);
        assert_eq!(ends(b, "no-id", 1, "read_committed"), vec![0]);
    }

    /// As Kafka's leader: one request's transactional batches come from one producer (id and
    /// epoch); batches of two are refused whole, INVALID_PRODUCER_ID_MAPPING everywhere.
    #[test]
    fn a_request_with_two_transactional_producers_is_refused_whole() {
        let server = start(&[]);
        let b = &server.bootstrap;
        create_topic(b, "two-pids", 2, &[]);
        let mut w = Wire::connect(b);
        for (first, second) in [((11, 0), (12, 0)), ((11, 0), (11, 1))] {
            let part = |index: i32, (pid, epoch): (i64, i16)| {
                PartitionProduceData::default()
                    .with_index(index)
                    .with_records(Some(batch(pid, epoch, 0, "x")))
            };
            let req = ProduceRequest::default()
                .with_transactional_id(Some(TransactionalId(s(ID))))
                .with_acks(-1)
                .with_timeout_ms(10_000)
                .with_topic_data(vec![TopicProduceData::default()
                    .with_name(TopicName(s("two-pids")))
                    .with_partition_data(vec![part(0, first), part(1, second)])]);
            let resp: ProduceResponse = w.call(ApiKey::Produce, 12, &req);
            let codes: Vec<i16> = resp.responses[0]
                .partition_responses
                .iter()
                .map(|p| p.error_code)
                .collect();
            assert_eq!(codes, vec![49, 49], "{first:?} and {second:?}");
        }
        assert_eq!(ends(b, "two-pids", 2, "read_uncommitted"), vec![0, 0]);
    }

    #[test]
    fn partitions_join_by_being_written_and_every_end_fences_the_ended_transaction() {
        let server = start(&[]);
        let b = &server.bootstrap;
        create_topic(b, "tv2", 3, &[]);
        let mut w = Wire::connect(b);
        let init = init(&mut w, ID);
        assert_eq!(init.error_code, 0);
        let (pid, e0) = (init.producer_id.0, init.producer_epoch);
        // Transaction 1: two partitions and the group's offsets, none added beforehand.
        assert_eq!(produce(&mut w, "tv2", 0, batch(pid, e0, 0, "one-0")), 0);
        assert_eq!(produce(&mut w, "tv2", 1, batch(pid, e0, 0, "one-1")), 0);
        assert_eq!(produce(&mut w, "tv2", 0, batch(pid, e0, 1, "one-2")), 0);
        assert_eq!(commit_offset(&mut w, pid, e0, "tv2", 42), 0);
        assert_eq!(end(&mut w, pid, e0, true), (0, pid, e0 + 1));
        // A retried commit is answered with the epoch the producer goes on with, once the
        // markers are written (CONCURRENT_TRANSACTIONS until then).
        assert_eq!(end(&mut w, pid, e0, true), (0, pid, e0 + 1));
        // Then the ended transaction's epoch is fenced everywhere: in a partition it wrote
        // (the marker moved the epoch there) and in one it did not (the coordinator refuses
        // it). (A write that reaches a partition before the marker is still part of the
        // transaction, as in Kafka.)
        assert_eq!(produce(&mut w, "tv2", 0, batch(pid, e0, 2, "late-0")), 47);
        assert_eq!(produce(&mut w, "tv2", 2, batch(pid, e0, 0, "late-2")), 47);
        assert_eq!(end(&mut w, pid, e0, false).0, 48, "INVALID_TXN_STATE");
        // Transaction 2 at the new epoch, aborted; then an abort with nothing open.
        let e1 = e0 + 1;
        assert_eq!(produce(&mut w, "tv2", 0, batch(pid, e1, 0, "two-0")), 0);
        assert_eq!(produce(&mut w, "tv2", 2, batch(pid, e1, 0, "two-2")), 0);
        assert_eq!(end(&mut w, pid, e1, false), (0, pid, e1 + 1));
        // A retry waits out the abort's markers (CONCURRENT_TRANSACTIONS until then).
        let retried = end(&mut w, pid, e1, false);
        assert_eq!(retried, (0, pid, e1 + 1), "the retry, once complete");
        assert_eq!(end(&mut w, pid, e1 + 1, true).0, 48, "commit of nothing");
        assert_eq!(end(&mut w, pid, e1 + 1, false), (0, pid, e1 + 2));
        // read_committed sees transaction 1 only; the group's offset is committed.
        let got = sorted(read(b, "tv2", 3, "read_committed", 3));
        assert_eq!(got, vec!["one-0", "one-1", "one-2"]);
        assert_eq!(committed(b, "tv2-group", "tv2"), Some(42));
        // The coordinator shows the last epoch.
        let out = cli(b, &["transactions", "--describe", "--transactional-id", ID]);
        let fields: Vec<&str> = out.lines().nth(1).unwrap().split('\t').collect();
        assert!(fields.contains(&(e1 + 2).to_string().as_str()), "{out}");
    }

    /// OffsetFetch that requires stable offsets while a transaction's offsets are pending:
    /// as Kafka 4.4, UNSTABLE_OFFSET_COMMIT on each pending partition (offset -1) and the
    /// group's other partitions answered as usual, group error 0, whether partitions are
    /// named or not; without require_stable the last committed offsets. Passes against Kafka
    /// 4.4 too: `WIRE_AGAINST=127.0.0.1:19092 cargo test -p sluice --test transactions
    /// pending_offsets` (interop/kafka/kafka.sh 19092 19093 DIR).
    #[test]
    fn pending_offsets_are_unstable_per_partition() {
        let (_server, b) = server_or_against();
        let b = &b;
        // Names of their own per run (Kafka keeps them across runs).
        let run = std::process::id();
        let (id, group, topic) = (
            &format!("us-tx-{run}"),
            &format!("us-group-{run}"),
            &format!("us-{run}"),
        );
        create_topic(b, topic, 3, &[]);
        let mut w = Wire::connect(b);
        let init = init(&mut w, id);
        assert_eq!(init.error_code, 0);
        let (pid, e0) = (init.producer_id.0, init.producer_epoch);
        // Committed: partitions 0 and 1.
        let offsets = [(0, 5), (1, 7)];
        assert_eq!(
            commit_offsets(&mut w, (id, group), (pid, e0), topic, &offsets),
            vec![0, 0]
        );
        assert_eq!(end_as(&mut w, id, pid, e0, true).0, 0);
        let e1 = e0 + 1;
        let t = |p: i32, code: i16, offset: i64| (topic.to_string(), p, code, offset);
        // The commit's markers are written once a stable fetch shows no pending partition.
        let deadline = Instant::now() + T;
        while fetch_offsets(&mut w, group, topic, Some(vec![0, 1]), true).1
            != vec![t(0, 0, 5), t(1, 0, 7)]
        {
            assert!(
                Instant::now() < deadline,
                "the committed offsets never showed"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // Pending: partition 0 (and 2, which has no committed offset).
        let pending = [(0, 9), (2, 4)];
        assert_eq!(
            commit_offsets(&mut w, (id, group), (pid, e1), topic, &pending),
            vec![0, 0]
        );
        let named = fetch_offsets(&mut w, group, topic, Some(vec![0, 1, 2]), true);
        assert_eq!(named, (0, vec![t(0, 88, -1), t(1, 0, 7), t(2, 88, -1)]));
        // All the group's offsets: those committed; partition 2 has none yet.
        let all = fetch_offsets(&mut w, group, topic, None, true);
        assert_eq!(all, (0, vec![t(0, 88, -1), t(1, 0, 7)]));
        let unstable_ok = fetch_offsets(&mut w, group, topic, Some(vec![0, 1, 2]), false);
        assert_eq!(unstable_ok, (0, vec![t(0, 0, 5), t(1, 0, 7), t(2, 0, -1)]));
        // Aborted: the pending offsets go, the committed ones stay.
        assert_eq!(end_as(&mut w, id, pid, e1, false).0, 0);
        let deadline = Instant::now() + T;
        loop {
            let got = fetch_offsets(&mut w, group, topic, Some(vec![0, 1, 2]), true);
            if got == (0, vec![t(0, 0, 5), t(1, 0, 7), t(2, 0, -1)]) {
                break;
            }
            assert!(Instant::now() < deadline, "after the abort: {got:?}");
            assert!(got.1.iter().all(|r| [0, 88].contains(&r.2)), "{got:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
