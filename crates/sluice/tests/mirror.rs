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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_topic_keeps_the_sources_offsets_and_becomes_writable_when_promoted() {
    let source = start(&[]);
    let dest = start(&[]);
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
    let committed = read_all(&dest.bootstrap, "payments", 3, "read_committed").await;
    same_records(
        &read_all(&source.bootstrap, "payments", 3, "read_committed").await,
        &committed,
    );
    assert_eq!(committed.len(), 200, "four committed transactions of 50");
    assert!(committed
        .iter()
        .all(|r| !r.value.as_ref().unwrap().starts_with(b"t2-")
            && !r.value.as_ref().unwrap().starts_with(b"t5-")));

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
    // A link with an active mirror topic cannot be deleted.
    assert!(dest_admin.delete_link("dr").await.is_err());

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
    sluice_tool(
        "mirror",
        &dest.bootstrap,
        &["--failover", "--topic", "payments"],
    );
    sluice_tool("mirror", &dest.bootstrap, &["--delete", "--link", "dr"]);
    assert!(dest_admin.list_links().await.unwrap().is_empty());
}
