//! Mirror topics between two Sluice clusters: a cluster link on the destination, mirror
//! topics that keep the source's offsets, timestamps, keys, values, headers and transaction
//! markers, refuse producers until promoted, and continue the source's offsets after.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use sluice_client::admin::NewTopic;
use sluice_client::{
    Admin, ClientConfig, Consumer, ConsumerRecord, ErrorCode, Producer, ProducerRecord,
    TopicPartition,
};

fn admin(bootstrap: &str) -> Admin {
    Admin::new(ClientConfig::new(bootstrap)).unwrap()
}

/// Every record of `topic` (`partitions` of them) up to each partition's end, read as
/// `isolation` (`read_uncommitted` / `read_committed`), in (partition, offset) order.
async fn read_all(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    isolation: &str,
) -> Vec<ConsumerRecord> {
    let admin = admin(bootstrap);
    let ends: Vec<(TopicPartition, sluice_client::admin::OffsetSpec)> = (0..partitions)
        .map(|p| {
            (
                TopicPartition::new(topic, p),
                sluice_client::admin::OffsetSpec::Latest,
            )
        })
        .collect();
    let ends: Vec<i64> = admin
        .list_offsets(&ends)
        .await
        .unwrap()
        .into_iter()
        .map(|(_, r)| r.unwrap().offset)
        .collect();
    let mut c = Consumer::new(
        ClientConfig::new(bootstrap)
            .set("auto.offset.reset", "earliest")
            .unwrap()
            .set("isolation.level", isolation)
            .unwrap(),
    )
    .unwrap();
    let tps: Vec<TopicPartition> = (0..partitions)
        .map(|p| TopicPartition::new(topic, p))
        .collect();
    c.assign(&tps).unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut done = true;
        for (tp, end) in tps.iter().zip(&ends) {
            done &= c.position(tp).await.unwrap() >= *end;
        }
        if done {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{topic} on {bootstrap}: not read to its end"
        );
        out.extend(c.poll(Duration::from_millis(200)).await.unwrap());
    }
    out.sort_by_key(|r| (r.partition, r.offset));
    out
}

/// Wait until every partition of mirror topic `topic` on `link` has no lag and ends where
/// the source ends.
async fn wait_caught_up(dest: &str, source: &str, link: &str, topic: &str, partitions: i32) {
    let src = admin(source);
    let wanted: Vec<_> = (0..partitions)
        .map(|p| {
            (
                TopicPartition::new(topic, p),
                sluice_client::admin::OffsetSpec::Latest,
            )
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ends: Vec<i64> = src
            .list_offsets(&wanted)
            .await
            .unwrap()
            .into_iter()
            .map(|(_, r)| r.unwrap().offset)
            .collect();
        let d = admin(dest).describe_link(link).await.unwrap();
        let lags: Vec<_> = d.partitions.iter().filter(|p| p.topic == topic).collect();
        let done = lags.len() == partitions as usize
            && lags
                .iter()
                .all(|p| p.lag_records == 0 && p.log_end_offset == ends[p.partition as usize]);
        if done {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "mirror {topic} did not catch up: {lags:?} vs source ends {ends:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn same_records(a: &[ConsumerRecord], b: &[ConsumerRecord]) {
    assert_eq!(a.len(), b.len(), "record counts differ");
    for (x, y) in a.iter().zip(b) {
        assert_eq!(
            (
                x.partition,
                x.offset,
                x.timestamp,
                &x.key,
                &x.value,
                &x.headers
            ),
            (
                y.partition,
                y.offset,
                y.timestamp,
                &y.key,
                &y.value,
                &y.headers
            ),
        );
    }
}

/// Wait until `group`'s committed offsets on `bootstrap` are `positions` (by partition).
async fn wait_group_offsets(bootstrap: &str, group: &str, positions: &[(TopicPartition, i64)]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let copied: Vec<(TopicPartition, i64)> = admin(bootstrap)
            .list_group_offsets(group, None)
            .await
            .map(|rows| {
                let mut rows: Vec<_> = rows
                    .into_iter()
                    .filter_map(|(tp, c)| c.map(|c| (tp, c.offset)))
                    .collect();
                rows.sort_by_key(|(tp, _)| tp.partition.0);
                rows
            })
            .unwrap_or_default();
        if copied == positions {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "group offsets not copied: {copied:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Join `group` on `bootstrap`, subscribed to `topic`: the offset of the first record it gets
/// from each of its `partitions`.
async fn first_positions(
    bootstrap: &str,
    group: &str,
    topic: &str,
    partitions: usize,
) -> Vec<(TopicPartition, i64)> {
    let mut app = Consumer::new(
        ClientConfig::new(bootstrap)
            .set("group.id", group)
            .unwrap()
            .set("enable.auto.commit", "false")
            .unwrap(),
    )
    .unwrap();
    app.subscribe(&[topic]).await.unwrap();
    let mut first: std::collections::BTreeMap<i32, i64> = Default::default();
    let deadline = Instant::now() + Duration::from_secs(30);
    while first.len() < partitions {
        assert!(
            Instant::now() < deadline,
            "the group did not resume: {first:?}"
        );
        for r in app.poll(Duration::from_millis(200)).await.unwrap() {
            first.entry(r.partition).or_insert(r.offset);
        }
    }
    first
        .into_iter()
        .map(|(p, o)| (TopicPartition::new(topic, p), o))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_topic_keeps_the_sources_offsets_and_becomes_writable_when_promoted() {
    let source = start(&[]);
    let mut dest = start(&[]);
    let src_admin = admin(&source.bootstrap);
    for t in ["orders", "payments"] {
        let r = src_admin
            .create_topics(&[NewTopic::new(t, 3, 1)], false)
            .await
            .unwrap();
        r[0].1.as_ref().unwrap();
    }
    // Records with keys, headers and explicit timestamps; gaps in offsets from aborted
    // transactions' markers in "payments".
    let p = Producer::new(ClientConfig::new(&source.bootstrap)).unwrap();
    for i in 0..3_000i64 {
        p.send(
            ProducerRecord::new("orders")
                .key(Bytes::from(format!("k{}", i % 97)))
                .value(Bytes::from(format!("order-{i}")))
                .header("n", Some(Bytes::from(i.to_string())))
                .timestamp(1_700_000_000_000 + i),
        )
        .await
        .unwrap();
    }
    p.flush().await;
    let txp = Producer::new(
        ClientConfig::new(&source.bootstrap)
            .set("transactional.id", "mirror-test")
            .unwrap(),
    )
    .unwrap();
    txp.init_transactions().await.unwrap();
    for t in 0..6 {
        txp.begin_transaction().await.unwrap();
        for i in 0..50 {
            txp.send(ProducerRecord::new("payments").value(Bytes::from(format!("t{t}-{i}"))))
                .await
                .unwrap();
        }
        if t % 3 == 2 {
            txp.abort_transaction().await.unwrap();
        } else {
            txp.commit_transaction().await.unwrap();
        }
    }

    // A consumer group's position on the source (committed from outside, as a stopped
    // application's would be).
    let positions: Vec<(TopicPartition, i64)> = (0..3)
        .map(|p| (TopicPartition::new("orders", p), 100 + 50 * p as i64))
        .collect();
    for (_, r) in src_admin
        .alter_group_offsets("app", &positions)
        .await
        .unwrap()
    {
        r.unwrap();
    }

    // The link and the mirror topics, through the CLI as an operator would.
    sluice_tool(
        "mirror",
        &dest.bootstrap,
        &[
            "--create",
            "--link",
            "dr",
            "--source-bootstrap-server",
            &source.bootstrap,
            "--consumer-groups",
            "*",
            "--link-config",
            // Copied when a mirror topic appears and when one is promoted, not in between.
            "consumer.offset.sync.ms=600000",
        ],
    );
    sluice_tool(
        "mirror",
        &dest.bootstrap,
        &["--add", "--link", "dr", "--topic", "orders"],
    );
    sluice_tool(
        "mirror",
        &dest.bootstrap,
        &["--add", "--link", "dr", "--topic", "payments"],
    );
    let dest_admin = admin(&dest.bootstrap);
    assert_eq!(
        dest_admin.describe_topics(&["orders"]).await.unwrap()[0]
            .partitions
            .len(),
        3,
        "a mirror topic has its source's partition count"
    );
    wait_caught_up(&dest.bootstrap, &source.bootstrap, "dr", "orders", 3).await;
    wait_caught_up(&dest.bootstrap, &source.bootstrap, "dr", "payments", 3).await;
    same_records(
        &read_all(&source.bootstrap, "orders", 3, "read_uncommitted").await,
        &read_all(&dest.bootstrap, "orders", 3, "read_uncommitted").await,
    );
    let committed_txns = read_all(&dest.bootstrap, "payments", 3, "read_committed").await;
    same_records(
        &read_all(&source.bootstrap, "payments", 3, "read_committed").await,
        &committed_txns,
    );
    assert_eq!(
        committed_txns.len(),
        200,
        "four committed transactions of 50"
    );
    assert!(committed_txns
        .iter()
        .all(|r| !r.value.as_ref().unwrap().starts_with(b"t2-")
            && !r.value.as_ref().unwrap().starts_with(b"t5-")));
    // A transaction left open on the source (its producer gone before the end): copied,
    // it holds the mirror's last stable offset until the mirror is promoted.
    txp.begin_transaction().await.unwrap();
    for i in 0..10 {
        txp.send(ProducerRecord::new("payments").value(Bytes::from(format!("open-{i}"))))
            .await
            .unwrap();
    }
    txp.flush().await;
    wait_caught_up(&dest.bootstrap, &source.bootstrap, "dr", "payments", 3).await;

    // New records keep flowing while the mirror is active.
    for i in 3_000..3_100i64 {
        p.send(ProducerRecord::new("orders").value(Bytes::from(format!("order-{i}"))))
            .await
            .unwrap();
    }
    p.flush().await;
    wait_caught_up(&dest.bootstrap, &source.bootstrap, "dr", "orders", 3).await;
    let described = sluice_tool("mirror", &dest.bootstrap, &["--describe", "--link", "dr"]);
    assert!(
        described.contains("Topic: orders") && described.contains("Lag: 0"),
        "{described}"
    );

    // Read-only until promoted, with Kafka's error for it. (Not idempotent: the first
    // producer id this cluster hands out goes to the producer after promotion below.)
    let dp = Producer::new(
        ClientConfig::new(&dest.bootstrap)
            .set("retries", "0")
            .unwrap()
            .set("enable.idempotence", "false")
            .unwrap(),
    )
    .unwrap();
    let refused = dp
        .send_and_wait(
            ProducerRecord::new("orders")
                .partition(0)
                .value(Bytes::from_static(b"x")),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            sluice_client::Error::Kafka {
                code: ErrorCode::InvalidRequest,
                ..
            }
        ),
        "{refused}"
    );
    // The group's offsets were copied as they are.
    wait_group_offsets(&dest.bootstrap, "app", &positions).await;
    // A link with an active mirror topic cannot be deleted.
    assert!(dest_admin.delete_link("dr").await.is_err());

    // The application commits once more on the source just before the switch: --promote
    // waits for a last copy of the group offsets (the periodic one is ten minutes away).
    let positions: Vec<(TopicPartition, i64)> = (0..3)
        .map(|p| (TopicPartition::new("orders", p), 200 + 70 * p as i64))
        .collect();
    for (_, r) in src_admin
        .alter_group_offsets("app", &positions)
        .await
        .unwrap()
    {
        r.unwrap();
    }
    // Promote: writable, continuing at the source's offsets.
    sluice_tool(
        "mirror",
        &dest.bootstrap,
        &["--promote", "--topic", "orders"],
    );
    let src_end = src_admin
        .list_offsets(&[(
            TopicPartition::new("orders", 0),
            sluice_client::admin::OffsetSpec::Latest,
        )])
        .await
        .unwrap()[0]
        .1
        .as_ref()
        .unwrap()
        .offset;
    // At once, and with no producer-id clash: this cluster's first producer id is not the
    // source's first (whose state orders-0 holds at a later sequence: a clash would be
    // refused with OUT_OF_ORDER_SEQUENCE).
    let fresh = Producer::new(
        ClientConfig::new(&dest.bootstrap)
            .set("retries", "0")
            .unwrap(),
    )
    .unwrap();
    let written = fresh
        .send_and_wait(
            ProducerRecord::new("orders")
                .partition(0)
                .value(Bytes::from_static(b"after")),
        )
        .await
        .unwrap();
    assert_eq!(
        written.offset, src_end,
        "the promoted topic continues the source's offsets"
    );
    // The group resumes on this cluster exactly where it was on the source.
    assert_eq!(
        first_positions(&dest.bootstrap, "app", "orders", 3).await,
        positions
    );
    // Paused, then this cluster killed and restarted before the failover: the broker that
    // promotes never copied the partition in its process, and still aborts the source's
    // open transaction (the promotion epoch is kept in metadata).
    sluice_tool(
        "mirror",
        &dest.bootstrap,
        &["--pause", "--topic", "payments"],
    );
    dest.kill();
    dest.restart_same_port();
    sluice_tool(
        "mirror",
        &dest.bootstrap,
        &["--failover", "--topic", "payments"],
    );
    // Promoted, the mirror aborts the source's open transaction: read_committed reads to the
    // end and sees the committed transactions only.
    let after = read_all(&dest.bootstrap, "payments", 3, "read_committed").await;
    same_records(&committed_txns, &after);
    // Local transactions on the promoted topic commit and are read.
    let local = Producer::new(
        ClientConfig::new(&dest.bootstrap)
            .set("transactional.id", "after-promotion")
            .unwrap(),
    )
    .unwrap();
    local.init_transactions().await.unwrap();
    local.begin_transaction().await.unwrap();
    for p in 0..3 {
        local
            .send(
                ProducerRecord::new("payments")
                    .partition(p)
                    .value(Bytes::from_static(b"local")),
            )
            .await
            .unwrap();
    }
    local.commit_transaction().await.unwrap();
    let with_local = read_all(&dest.bootstrap, "payments", 3, "read_committed").await;
    assert_eq!(
        with_local
            .iter()
            .filter(|r| r.value.as_deref() == Some(b"local".as_slice()))
            .count(),
        3
    );
    sluice_tool("mirror", &dest.bootstrap, &["--delete", "--link", "dr"]);
    assert!(dest_admin.list_links().await.unwrap().is_empty());
}

/// Three combined nodes with failure detection on second-scale timeouts.
fn three_nodes() -> Vec<TestServer> {
    TestServer::start_all(
        sluice_bin(),
        &sluice_testkit::combined_nodes(&[
            "broker.session.timeout.ms=2000",
            "broker.heartbeat.interval.ms=250",
            "controller.quorum.election.timeout.ms=500",
            "default.replication.factor=3",
            "min.insync.replicas=2",
            "offsets.topic.replication.factor=3",
        ]),
    )
}

/// The index of the node that leads `topic`-`partition` (by node id 1-3).
async fn leader_index(bootstrap: &str, topic: &str, partition: i32) -> usize {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let leader = admin(bootstrap)
            .describe_topics(&[topic])
            .await
            .ok()
            .and_then(|t| t.first().cloned())
            .and_then(|t| t.partitions.into_iter().find(|p| p.partition == partition))
            .map(|p| p.leader)
            .filter(|l| *l > 0);
        if let Some(l) = leader {
            return l as usize - 1;
        }
        assert!(
            Instant::now() < deadline,
            "{topic}-{partition} has no leader"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Under a steady produce load, kill -9 the source partition's leader and then the mirror
/// partition's leader (the broker that copies it), each restarted after: the mirror ends
/// with exactly the source's records at the source's offsets, none missing, none twice; a
/// group's offsets are copied, and after promotion the group resumes here where it was and
/// producers continue the source's offsets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_resumes_without_gaps_or_duplicates_after_kill_9_on_either_side() {
    const RECORDS: u64 = 10_000;
    let mut source = three_nodes();
    let mut dest = three_nodes();
    let src_boot: Vec<String> = source.iter().map(|n| n.bootstrap.clone()).collect();
    let src_boot = src_boot.join(",");
    let dest_boot = dest[0].bootstrap.clone();
    let r = admin(&src_boot)
        .create_topics(&[NewTopic::new("load", 2, 3)], false)
        .await
        .unwrap();
    r[0].1.as_ref().unwrap();
    admin(&dest_boot)
        .create_link(
            "dr",
            &[
                ("bootstrap.servers".to_string(), src_boot.clone()),
                (
                    "consumer.offset.sync.enable".to_string(),
                    "true".to_string(),
                ),
                (
                    "consumer.offset.group.filters".to_string(),
                    "app".to_string(),
                ),
                ("consumer.offset.sync.ms".to_string(), "1000".to_string()),
            ],
        )
        .await
        .unwrap();
    admin(&dest_boot)
        .create_mirror_topic("load", "dr", None, 3)
        .await
        .unwrap();

    // A steady load on the source: acks=all, idempotent, with retries through failovers.
    let producing = {
        let boot = src_boot.clone();
        tokio::spawn(async move {
            let p = Producer::new(
                ClientConfig::new(&boot)
                    .set("delivery.timeout.ms", "60000")
                    .unwrap(),
            )
            .unwrap();
            let mut pending = Vec::new();
            for i in 0..RECORDS {
                pending.push(
                    // Keyed: both partitions get records (each is killed under and moved).
                    p.send(
                        ProducerRecord::new("load")
                            .key(Bytes::from(format!("k{i}")))
                            .value(Bytes::from(format!("v{i}"))),
                    )
                    .await
                    .unwrap(),
                );
                if i % 100 == 99 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            let mut acked = 0u64;
            for f in pending {
                f.await.unwrap();
                acked += 1;
            }
            acked
        })
    };
    // Once the mirror is copying, the source leader dies.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !admin(&dest_boot).describe_link("dr").await.is_ok_and(|d| {
        d.partitions
            .iter()
            .map(|p| p.log_end_offset.max(0))
            .sum::<i64>()
            > 500
    }) {
        assert!(
            Instant::now() < deadline,
            "the mirror never started copying"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let s = leader_index(&src_boot, "load", 0).await;
    source[s].kill();
    let other = source[(s + 1) % 3].bootstrap.clone();
    while leader_index(&other, "load", 0).await == s {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    source[s].restart();
    // Then the broker that copies into the mirror's partition 0.
    let d = leader_index(&dest_boot, "load", 0).await;
    dest[d].kill();
    let dest_boot = dest[(d + 1) % 3].bootstrap.clone();
    while leader_index(&dest_boot, "load", 0).await == d {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    dest[d].restart();
    assert_eq!(producing.await.unwrap(), RECORDS);

    wait_caught_up(&dest_boot, &src_boot, "dr", "load", 2).await;
    let from_source = read_all(&src_boot, "load", 2, "read_uncommitted").await;
    let mirrored = read_all(&dest_boot, "load", 2, "read_uncommitted").await;
    same_records(&from_source, &mirrored);
    let mut values: Vec<&Bytes> = mirrored.iter().filter_map(|r| r.value.as_ref()).collect();
    values.sort();
    values.dedup();
    assert_eq!(
        values.len() as u64,
        RECORDS,
        "every record once, none twice"
    );

    // A stopped application's group on the source: copied, then it moves here.
    let positions: Vec<(TopicPartition, i64)> = (0..2)
        .map(|p| (TopicPartition::new("load", p), 1_000 + 700 * p as i64))
        .collect();
    for (_, r) in admin(&src_boot)
        .alter_group_offsets("app", &positions)
        .await
        .unwrap()
    {
        r.unwrap();
    }
    wait_group_offsets(&dest_boot, "app", &positions).await;
    sluice_tool("mirror", &dest_boot, &["--promote", "--topic", "load"]);
    assert_eq!(
        first_positions(&dest_boot, "app", "load", 2).await,
        positions
    );
    let next = Producer::new(ClientConfig::new(&dest_boot))
        .unwrap()
        .send_and_wait(
            ProducerRecord::new("load")
                .partition(1)
                .value(Bytes::from_static(b"after")),
        )
        .await
        .unwrap();
    let source_end = from_source.iter().filter(|r| r.partition == 1).count() as i64;
    assert_eq!(
        next.offset, source_end,
        "the promoted mirror continues the source's offsets"
    );
}

/// The mirror topic names on `link` (any state), sorted.
async fn mirror_topics(dest: &str, link: &str) -> Vec<String> {
    let mut t: Vec<String> = admin(dest)
        .describe_link(link)
        .await
        .unwrap()
        .topics
        .into_iter()
        .map(|t| t.topic)
        .collect();
    t.sort();
    t
}

/// A link with a topic pattern mirrors the source topics that match it, those there already
/// and those created later (with their records), and nothing else; a pattern removed makes
/// no more; a pattern that is not a regular expression is refused with Kafka's message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_mirrors_the_source_topics_its_patterns_match_as_they_appear() {
    let source = start(&[]);
    let dest = start(&[]);
    let src = admin(&source.bootstrap);
    let create = |names: &'static [&'static str]| {
        let src = admin(&source.bootstrap);
        async move {
            let topics: Vec<NewTopic> = names.iter().map(|n| NewTopic::new(n, 2, 1)).collect();
            for (_, r) in src.create_topics(&topics, false).await.unwrap() {
                r.unwrap();
            }
        }
    };
    create(&["orders.eu", "orders.us", "payments", "reorders"]).await;
    let p = Producer::new(ClientConfig::new(&source.bootstrap)).unwrap();
    for i in 0..200 {
        p.send(ProducerRecord::new("orders.eu").value(Bytes::from(format!("eu-{i}"))))
            .await
            .unwrap();
    }
    p.flush().await;

    sluice_tool(
        "mirror",
        &dest.bootstrap,
        &[
            "--create",
            "--link",
            "dr",
            "--source-bootstrap-server",
            &source.bootstrap,
            "--link-config",
            "topic.config.sync.ms=1000",
        ],
    );
    let bad = std::process::Command::new(sluice_bin())
        .args(["mirror", "--bootstrap-server", &dest.bootstrap])
        .args(["--add", "--link", "dr", "--topic-pattern", "orders.(eu"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&bad.stderr);
    assert!(
        !bad.status.success() && said.contains("Invalid value orders.(eu for configuration"),
        "{said}"
    );
    sluice_tool(
        "mirror",
        &dest.bootstrap,
        &["--add", "--link", "dr", "--topic-pattern", "orders\\..*"],
    );
    let wait_for = |want: Vec<&'static str>| {
        let dest = dest.bootstrap.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let have = mirror_topics(&dest, "dr").await;
                if have == want {
                    return;
                }
                assert!(
                    Instant::now() < deadline,
                    "mirror topics {have:?}, wanted {want:?}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    wait_for(vec!["orders.eu", "orders.us"]).await;
    wait_caught_up(&dest.bootstrap, &source.bootstrap, "dr", "orders.eu", 2).await;
    same_records(
        &read_all(&source.bootstrap, "orders.eu", 2, "read_uncommitted").await,
        &read_all(&dest.bootstrap, "orders.eu", 2, "read_uncommitted").await,
    );
    let described = sluice_tool("mirror", &dest.bootstrap, &["--describe", "--link", "dr"]);
    assert!(
        described.contains("TopicPatterns: orders\\..*"),
        "{described}"
    );

    // A topic the source creates later is picked up; one that does not match is not.
    create(&["orders.asia", "invoices"]).await;
    wait_for(vec!["orders.asia", "orders.eu", "orders.us"]).await;
    for i in 0..50 {
        p.send(ProducerRecord::new("orders.asia").value(Bytes::from(format!("asia-{i}"))))
            .await
            .unwrap();
    }
    p.flush().await;
    wait_caught_up(&dest.bootstrap, &source.bootstrap, "dr", "orders.asia", 2).await;

    // Without the pattern, new source topics stay where they are; the mirrors made stay.
    sluice_tool(
        "mirror",
        &dest.bootstrap,
        &["--remove", "--link", "dr", "--topic-pattern", "orders\\..*"],
    );
    create(&["orders.africa"]).await;
    // A look at the source's topics that finds one created after it (for another pattern)
    // passes it by.
    sluice_tool(
        "mirror",
        &dest.bootstrap,
        &["--add", "--link", "dr", "--topic-pattern", "shipments\\..*"],
    );
    create(&["shipments.eu"]).await;
    wait_for(vec![
        "orders.asia",
        "orders.eu",
        "orders.us",
        "shipments.eu",
    ])
    .await;
    assert!(src
        .list_topics(false)
        .await
        .unwrap()
        .contains(&"orders.africa".to_string()));
    // A mirror topic removed is deleted here, not on the source.
    sluice_tool(
        "mirror",
        &dest.bootstrap,
        &["--remove", "--topic", "orders.us"],
    );
    assert_eq!(
        mirror_topics(&dest.bootstrap, "dr").await,
        ["orders.asia", "orders.eu", "shipments.eu"]
    );
    // Promote every topic of the link at once.
    sluice_tool("mirror", &dest.bootstrap, &["--promote", "--link", "dr"]);
    let d = admin(&dest.bootstrap).describe_link("dr").await.unwrap();
    assert!(
        d.topics.iter().all(|t| t.state == "stopped"),
        "{:?}",
        d.topics
    );
}

/// With `acl.sync.enable`, the destination takes the source's ACLs, follows a deletion there
/// (also one made while the destination was down), and keeps the ACLs made on the destination
/// itself, even one the source also has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_copies_the_sources_acls_and_follows_their_deletion() {
    use sluice_client::acl::{op, pattern, permission, resource, AclBinding, AclFilter};
    let secured = [
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:ANONYMOUS",
    ];
    let source = start(&secured);
    let mut dest = start(&secured);
    let acl = |name: &str, principal: &str, operation| AclBinding {
        resource_type: resource::TOPIC,
        resource_name: name.into(),
        pattern_type: pattern::LITERAL,
        principal: principal.into(),
        host: "*".into(),
        operation,
        permission: permission::ALLOW,
    };
    let from_source = vec![
        acl("orders", "User:app", op::READ),
        acl("orders", "User:loader", op::WRITE),
        AclBinding {
            resource_type: resource::GROUP,
            pattern_type: pattern::PREFIXED,
            ..acl("app-", "User:app", op::READ)
        },
    ];
    for r in admin(&source.bootstrap)
        .create_acls(&from_source)
        .await
        .unwrap()
    {
        r.unwrap();
    }
    let own = acl("reports", "User:auditor", op::DESCRIBE);
    let shared = acl("shared", "User:ops", op::DESCRIBE);
    for r in admin(&dest.bootstrap)
        .create_acls(&[own.clone(), shared.clone()])
        .await
        .unwrap()
    {
        r.unwrap();
    }
    for r in admin(&source.bootstrap)
        .create_acls(std::slice::from_ref(&shared))
        .await
        .unwrap()
    {
        r.unwrap();
    }
    admin(&dest.bootstrap)
        .create_link(
            "dr",
            &[
                ("bootstrap.servers".to_string(), source.bootstrap.clone()),
                ("acl.sync.enable".to_string(), "true".to_string()),
                ("acl.sync.ms".to_string(), "1000".to_string()),
            ],
        )
        .await
        .unwrap();
    let any = AclFilter::any();
    let dest_bootstrap = dest.bootstrap.clone();
    let wait_for = |want: Vec<AclBinding>| {
        let dest = dest_bootstrap.clone();
        let any = any.clone();
        async move {
            let mut want = want;
            want.sort();
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let mut have = admin(&dest).describe_acls(&any).await.unwrap();
                have.sort();
                if have == want {
                    return;
                }
                assert!(
                    Instant::now() < deadline,
                    "ACLs here {have:?}, wanted {want:?}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let mut all = from_source.clone();
    all.push(own.clone());
    all.push(shared.clone());
    wait_for(all).await;
    // Deleted on the source: deleted here; the destination's own ACL stays.
    let deleted = AclFilter {
        resource_type: resource::TOPIC,
        resource_name: Some("orders".into()),
        pattern_type: pattern::LITERAL,
        principal: Some("User:loader".into()),
        host: Some("*".into()),
        operation: op::WRITE,
        permission: permission::ALLOW,
    };
    for r in admin(&source.bootstrap)
        .delete_acls(&[deleted])
        .await
        .unwrap()
    {
        assert_eq!(r.unwrap().len(), 1);
    }
    wait_for(vec![
        from_source[0].clone(),
        from_source[2].clone(),
        own.clone(),
        shared.clone(),
    ])
    .await;
    // Deleted on the source while this cluster is down: deleted here after the restart
    // (the copied ACLs are known by their ids, not by the memory of the broker that
    // copied them). The ACL made here stays though the source deleted its twin.
    dest.kill();
    for r in admin(&source.bootstrap)
        .delete_acls(&[AclFilter::exact(&from_source[0]), AclFilter::exact(&shared)])
        .await
        .unwrap()
    {
        assert_eq!(r.unwrap().len(), 1);
    }
    dest.restart_same_port();
    wait_for(vec![from_source[2].clone(), own, shared]).await;
}
