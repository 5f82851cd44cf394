//! The native client (`sluice-client`) against a real node: every codec, ordering with
//! retries across a broker restart, Kafka's key partitioning, backpressure, delivery
//! timeouts, admin calls, consumer positioning, and records crossing between sluice-client
//! and librdkafka in both directions.

mod common;
#[path = "common/proxy.rs"]
mod proxy;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use rdkafka::consumer::Consumer as _;
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, Producer as _};
use sluice_client::admin::{AlterOp, ConfigResource, NewTopic, OffsetSpec};
use sluice_client::{
    Admin, ClientConfig, Compression, Consumer, ConsumerRecord, Error, ErrorCode, Producer,
    ProducerRecord, TopicPartition,
};

fn config(bootstrap: &str) -> ClientConfig {
    ClientConfig::new(bootstrap)
}

async fn create(bootstrap: &str, name: &str, partitions: i32) {
    let admin = Admin::new(config(bootstrap)).unwrap();
    let res = admin
        .create_topics(&[NewTopic::new(name, partitions, 1)], false)
        .await
        .unwrap();
    res[0].1.as_ref().unwrap();
}

/// A consumer assigned every partition of `topic`, from the earliest offset.
fn assigned(bootstrap: &str, topic: &str, partitions: i32) -> Consumer {
    let mut c = Consumer::new(
        config(bootstrap)
            .set("auto.offset.reset", "earliest")
            .unwrap(),
    )
    .unwrap();
    c.assign(
        &(0..partitions)
            .map(|p| TopicPartition::new(topic, p))
            .collect::<Vec<_>>(),
    )
    .unwrap();
    c
}

async fn consume_n(bootstrap: &str, topic: &str, partitions: i32, n: usize) -> Vec<ConsumerRecord> {
    let mut c = assigned(bootstrap, topic, partitions);
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while out.len() < n {
        assert!(Instant::now() < deadline, "consumed {} of {n}", out.len());
        out.extend(c.poll(Duration::from_millis(500)).await.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_codec_round_trips_keys_values_headers_and_timestamps() {
    let server = start(&[]);
    for codec in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let topic = format!("sc-{}", codec.name());
        let mut cfg = config(&server.bootstrap);
        cfg.compression = codec;
        let p = Producer::new(cfg).unwrap();
        let mut futures = Vec::new();
        for i in 0..20_000i64 {
            let mut r = ProducerRecord::new(topic.clone())
                .key(format!("k{}", i % 300))
                .timestamp(1_700_000_000_000 + i);
            if i % 100 != 7 {
                r = r.value(format!("value-{i}"));
            }
            if i % 10 == 0 {
                r = r
                    .header("h", Some(Bytes::from_static(b"hv")))
                    .header("empty", None);
            }
            futures.push(p.send(r).await.unwrap());
        }
        for f in futures {
            f.await.unwrap();
        }
        let stored = std::fs::read(
            server
                .data_dir()
                .join(format!("{topic}-0/00000000000000000000.log")),
        )
        .unwrap();
        let header = sluice_protocol::batch::BatchHeader::parse(&stored).unwrap();
        assert_eq!(
            header.compression().unwrap(),
            codec,
            "the batch on disk carries the codec"
        );
        let records = consume_n(&server.bootstrap, &topic, 1, 20_000).await;
        for (i, r) in records.iter().enumerate() {
            let i = i as i64;
            assert_eq!(r.offset, i);
            assert_eq!(r.timestamp, 1_700_000_000_000 + i);
            assert_eq!(r.key.as_deref(), Some(format!("k{}", i % 300).as_bytes()));
            if i % 100 == 7 {
                assert_eq!(r.value, None);
            } else {
                assert_eq!(r.value.as_deref(), Some(format!("value-{i}").as_bytes()));
            }
            if i % 10 == 0 {
                assert_eq!(
                    r.headers,
                    vec![
                        ("h".to_string(), Some(Bytes::from_static(b"hv"))),
                        ("empty".to_string(), None)
                    ]
                );
            }
        }
        p.close(Duration::from_secs(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn order_holds_per_partition_with_retries_across_a_broker_restart() {
    let mut server = start(&[]);
    create(&server.bootstrap, "ordered", 2).await;
    let cfg = config(&server.bootstrap)
        .set_all([
            ("acks", "all"),
            ("max.in.flight.requests.per.connection", "5"),
            ("retry.backoff.ms", "50"),
            ("linger.ms", "2"),
            ("batch.size", "2048"),
        ])
        .unwrap();
    let p = Producer::new(cfg).unwrap();
    let total = 20_000u32;
    let mut futures = Vec::new();
    for i in 0..total {
        if i == total / 2 {
            // Restart the broker in the middle of the stream; sends keep going and retry.
            server.restart_same_port();
        }
        let r = ProducerRecord::new("ordered")
            .partition((i % 2) as i32)
            .value(i.to_be_bytes().to_vec());
        futures.push(p.send(r).await.unwrap());
    }
    for f in futures {
        f.await.expect("every record is eventually acknowledged");
    }
    // The producer is idempotent (the default with acks=all): a batch retried across the
    // restart is written once, so each partition holds exactly the values sent, in order.
    let records = consume_n(&server.bootstrap, "ordered", 2, total as usize).await;
    for partition in 0..2 {
        let seq: Vec<u32> = records
            .iter()
            .filter(|r| r.partition == partition)
            .map(|r| u32::from_be_bytes(r.value.as_deref().unwrap().try_into().unwrap()))
            .collect();
        let expected: Vec<u32> = (0..total).filter(|i| (i % 2) as i32 == partition).collect();
        assert_eq!(
            seq, expected,
            "partition {partition}: not exactly once, in order"
        );
    }
    let latest = Admin::new(config(&server.bootstrap))
        .unwrap()
        .list_offsets(&[
            (TopicPartition::new("ordered", 0), OffsetSpec::Latest),
            (TopicPartition::new("ordered", 1), OffsetSpec::Latest),
        ])
        .await
        .unwrap();
    let end: i64 = latest.into_iter().map(|(_, r)| r.unwrap().offset).sum();
    assert_eq!(end, i64::from(total), "nothing written twice");
}

/// A lost Produce answer: the client retries the batch with the same producer id and
/// sequence, the broker answers with the original offset, and the record is in the log once.
/// With idempotence off the same loss writes it twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotent_retry_after_a_lost_answer_is_written_once() {
    for (idempotence, expected_end) in [("true", 2), ("false", 3)] {
        let (port, direct_port) = (free_port(), free_port());
        let via = proxy::Proxy::start(format!("127.0.0.1:{port}"));
        let _server = start(&[
            &format!("listeners=PLAINTEXT://127.0.0.1:{port},DIRECT://127.0.0.1:{direct_port}"),
            &format!(
                "advertised.listeners=PLAINTEXT://127.0.0.1:{},DIRECT://127.0.0.1:{direct_port}",
                via.port
            ),
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,DIRECT:PLAINTEXT",
        ]);
        let direct = format!("127.0.0.1:{direct_port}");
        create(&direct, "idem", 1).await;
        let p = Producer::new(
            config(&format!("127.0.0.1:{}", via.port))
                .set_all([
                    ("enable.idempotence", idempotence),
                    ("retry.backoff.ms", "50"),
                    ("linger.ms", "0"),
                ])
                .unwrap(),
        )
        .unwrap();
        let send = |v: &'static str| ProducerRecord::new("idem").partition(0).value(v);
        let first = p.send(send("first")).await.unwrap().await.unwrap();
        assert_eq!(first.offset, 0);
        via.set(proxy::Mode::LoseAnswers);
        let second = p.send(send("second")).await.unwrap();
        let admin = Admin::new(config(&direct)).unwrap();
        let latest = || async {
            admin
                .list_offsets(&[(TopicPartition::new("idem", 0), OffsetSpec::Latest)])
                .await
                .unwrap()[0]
                .1
                .clone()
                .unwrap()
                .offset
        };
        // The broker appended the record whose answer is lost: a consumer's long poll sees it.
        let mut c = assigned(&direct, "idem", 1);
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut read = 0;
        while read < 2 {
            assert!(Instant::now() < deadline, "the broker never appended");
            read += c.poll(Duration::from_secs(1)).await.unwrap().len();
        }
        // The connection drops; the client sends the batch again on a new one.
        via.set(proxy::Mode::Cut);
        via.set(proxy::Mode::Pass);
        let second = second.await.unwrap();
        assert_eq!(latest().await, expected_end, "idempotence={idempotence}");
        if idempotence == "true" {
            assert_eq!(second.offset, 1, "acknowledged at the original offset");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_land_where_librdkafka_puts_them() {
    let server = start(&[]);
    create(&server.bootstrap, "keys-ours", 7).await;
    create(&server.bootstrap, "keys-theirs", 7).await;
    let keys: Vec<String> = (0..2000)
        .map(|i| format!("user-{i}-{}", i * 7919))
        .collect();
    let theirs = producer(&server.bootstrap, &[]);
    let records: Vec<_> = keys
        .iter()
        .map(|k| (k.clone().into_bytes(), b"v".to_vec(), None))
        .collect();
    tokio::task::block_in_place(|| produce_all(&theirs, "keys-theirs", &records));
    let rd_partition: HashMap<Vec<u8>, i32> = theirs
        .context()
        .acked
        .lock()
        .unwrap()
        .iter()
        .map(|(k, p, _)| (k.clone(), *p))
        .collect();
    let ours = Producer::new(config(&server.bootstrap)).unwrap();
    for k in &keys {
        let md = ours
            .send_and_wait(ProducerRecord::new("keys-ours").key(k.clone()).value("v"))
            .await
            .unwrap();
        assert_eq!(md.partition, rd_partition[k.as_bytes()], "key {k}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_buffer_blocks_then_fails_after_max_block_ms() {
    let mut server = start(&[]);
    create(&server.bootstrap, "bp", 1).await;
    let cfg = config(&server.bootstrap)
        .set_all([
            ("buffer.memory", "65536"),
            ("max.block.ms", "300"),
            ("delivery.timeout.ms", "60000"),
            ("linger.ms", "0"),
        ])
        .unwrap();
    let p = Producer::new(cfg).unwrap();
    p.send_and_wait(ProducerRecord::new("bp").value("warm"))
        .await
        .unwrap();
    server.kill();
    let value = Bytes::from(vec![b'x'; 1000]);
    let mut outcome = None;
    for _ in 0..200 {
        let started = Instant::now();
        match p.send(ProducerRecord::new("bp").value(value.clone())).await {
            Ok(f) => drop(f),
            Err(e) => {
                outcome = Some((e, started.elapsed()));
                break;
            }
        }
    }
    let (err, blocked) = outcome.expect("sending 200 KB into a 64 KB buffer must hit the limit");
    assert!(matches!(err, Error::BufferExhausted(300)), "{err}");
    assert!(
        blocked >= Duration::from_millis(250),
        "send blocked only {blocked:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivery_times_out_when_the_broker_is_gone() {
    let mut server = start(&[]);
    create(&server.bootstrap, "gone", 1).await;
    let cfg = config(&server.bootstrap)
        .set_all([
            ("delivery.timeout.ms", "1500"),
            ("request.timeout.ms", "500"),
            ("retry.backoff.ms", "100"),
            ("socket.connection.setup.timeout.ms", "300"),
        ])
        .unwrap();
    let p = Producer::new(cfg).unwrap();
    p.send_and_wait(ProducerRecord::new("gone").value("warm"))
        .await
        .unwrap();
    server.kill();
    let started = Instant::now();
    let result = p
        .send(ProducerRecord::new("gone").value("lost"))
        .await
        .unwrap()
        .await;
    let waited = started.elapsed();
    assert!(result.is_err(), "delivery must fail without a broker");
    assert!(
        waited >= Duration::from_millis(1000) && waited < Duration::from_secs(10),
        "failed after {waited:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_cross_between_sluice_client_and_librdkafka() {
    let server = start(&[]);
    create(&server.bootstrap, "to-rd", 1).await;
    create(&server.bootstrap, "from-rd", 1).await;
    // sluice-client -> librdkafka
    let p = Producer::new(
        config(&server.bootstrap)
            .set("compression.type", "lz4")
            .unwrap(),
    )
    .unwrap();
    for i in 0..100i64 {
        let mut r = ProducerRecord::new("to-rd")
            .key(format!("k{i}"))
            .timestamp(1_600_000_000_000 + i)
            .header("n", Some(Bytes::from(i.to_string())));
        if i != 50 {
            r = r.value(format!("v{i}"));
        }
        p.send(r).await.unwrap();
    }
    p.flush().await;
    let c = consumer(&server.bootstrap, &[]);
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset("to-rd", 0, rdkafka::Offset::Beginning)
        .unwrap();
    c.assign(&tpl).unwrap();
    let mut got = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while got < 100 && Instant::now() < deadline {
        let Some(m) = tokio::task::block_in_place(|| c.poll(Duration::from_millis(500))) else {
            continue;
        };
        let m = m.unwrap();
        let i = m.offset();
        assert_eq!(m.key(), Some(format!("k{i}").as_bytes()));
        assert_eq!(
            m.payload().map(<[u8]>::to_vec),
            if i == 50 {
                None
            } else {
                Some(format!("v{i}").into_bytes())
            }
        );
        assert_eq!(m.timestamp().to_millis(), Some(1_600_000_000_000 + i));
        let h = m.headers().unwrap().get(0);
        assert_eq!((h.key, h.value), ("n", Some(i.to_string().as_bytes())));
        got += 1;
    }
    assert_eq!(got, 100);
    // librdkafka -> sluice-client
    let rd = producer(&server.bootstrap, &[("compression.codec", "gzip")]);
    for i in 0..100i64 {
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: "n",
                value: Some(&i.to_string()),
            })
            .insert(Header {
                key: "none",
                value: None::<&[u8]>,
            });
        let key = format!("k{i}");
        let value = format!("v{i}");
        let mut rec = BaseRecord::to("from-rd")
            .key(&key)
            .timestamp(1_600_000_000_000 + i)
            .headers(headers);
        if i != 50 {
            rec = rec.payload(&value);
        }
        rd.send(rec).map_err(|(e, _)| e).unwrap();
    }
    tokio::task::block_in_place(|| rd.flush(Duration::from_secs(30))).unwrap();
    let records = consume_n(&server.bootstrap, "from-rd", 1, 100).await;
    for r in &records {
        let i = r.offset;
        assert_eq!(r.key.as_deref(), Some(format!("k{i}").as_bytes()));
        assert_eq!(
            r.value.as_deref().map(<[u8]>::to_vec),
            if i == 50 {
                None
            } else {
                Some(format!("v{i}").into_bytes())
            }
        );
        assert_eq!(r.timestamp, 1_600_000_000_000 + i);
        assert_eq!(
            r.headers,
            vec![
                ("n".to_string(), Some(Bytes::from(i.to_string()))),
                ("none".to_string(), None)
            ]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_manages_topics_configs_offsets_and_records() {
    let server = start(&[]);
    let admin = Admin::new(config(&server.bootstrap)).unwrap();
    let res = admin
        .create_topics(
            &[
                NewTopic::new("adm", 3, 1).config("retention.ms", "100000"),
                NewTopic::new("bad topic", 1, 1),
            ],
            false,
        )
        .await
        .unwrap();
    assert!(res[0].1.is_ok());
    assert_eq!(
        res[1].1.as_ref().unwrap_err().code(),
        Some(ErrorCode::InvalidTopicException)
    );
    assert!(admin
        .list_topics(false)
        .await
        .unwrap()
        .contains(&"adm".to_string()));
    let d = admin.describe_topics(&["adm"]).await.unwrap();
    assert_eq!(d[0].partitions.len(), 3);
    assert!(d[0]
        .partitions
        .iter()
        .all(|p| p.leader == 0 && p.isr == vec![0]));
    admin.create_partitions("adm", 4, false).await.unwrap();
    assert_eq!(
        admin
            .create_partitions("adm", 2, false)
            .await
            .unwrap_err()
            .code(),
        Some(ErrorCode::InvalidPartitions)
    );
    let topic = ConfigResource::Topic("adm".into());
    admin
        .alter_configs(
            &topic,
            &[
                AlterOp::Set("retention.ms".into(), "5000".into()),
                AlterOp::Set("cleanup.policy".into(), "delete".into()),
            ],
            false,
        )
        .await
        .unwrap();
    let cfg = admin
        .describe_configs(std::slice::from_ref(&topic))
        .await
        .unwrap()
        .remove(0)
        .unwrap();
    let get = |k: &str| cfg.iter().find(|e| e.name == k).unwrap().clone();
    assert_eq!(
        (
            get("retention.ms").value.as_deref(),
            get("retention.ms").source
        ),
        (Some("5000"), 1)
    );
    admin
        .alter_configs(&topic, &[AlterOp::Delete("retention.ms".into())], false)
        .await
        .unwrap();
    let cfg = admin
        .describe_configs(std::slice::from_ref(&topic))
        .await
        .unwrap()
        .remove(0)
        .unwrap();
    assert_eq!(
        cfg.iter()
            .find(|e| e.name == "retention.ms")
            .unwrap()
            .value
            .as_deref(),
        Some("604800000")
    );
    let err = admin
        .alter_configs(
            &topic,
            &[AlterOp::Set("retention.ms".into(), "soon".into())],
            false,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::InvalidConfig));

    let p = Producer::new(config(&server.bootstrap)).unwrap();
    for i in 0..100 {
        p.send(
            ProducerRecord::new("adm")
                .partition(0)
                .value(format!("{i}")),
        )
        .await
        .unwrap();
    }
    p.flush().await;
    let tp = TopicPartition::new("adm", 0);
    let offsets = admin
        .list_offsets(&[(tp.clone(), OffsetSpec::Latest)])
        .await
        .unwrap();
    assert_eq!(offsets[0].1.as_ref().unwrap().offset, 100);
    let low = admin.delete_records(&[(tp.clone(), 40)]).await.unwrap();
    assert_eq!(*low[0].1.as_ref().unwrap(), 40);
    let earliest = admin
        .list_offsets(&[(tp.clone(), OffsetSpec::Earliest)])
        .await
        .unwrap();
    assert_eq!(earliest[0].1.as_ref().unwrap().offset, 40);
    let beyond = admin.delete_records(&[(tp, 1000)]).await.unwrap();
    assert_eq!(
        beyond[0].1.as_ref().unwrap_err().code(),
        Some(ErrorCode::OffsetOutOfRange)
    );
    let cluster = admin.describe_cluster().await.unwrap();
    assert_eq!(cluster.brokers.len(), 1);
    assert_eq!(cluster.controller_id, 0);
    let deleted = admin.delete_topics(&["adm", "nope"]).await.unwrap();
    assert!(deleted[0].1.is_ok());
    assert_eq!(
        deleted[1].1.as_ref().unwrap_err().code(),
        Some(ErrorCode::UnknownTopicOrPartition)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_positions_seeks_pauses_and_streams() {
    use futures_core::Stream;
    let server = start(&[]);
    create(&server.bootstrap, "pos", 2).await;
    let p = Producer::new(config(&server.bootstrap)).unwrap();
    let base = 1_700_000_000_000i64;
    for i in 0..200i64 {
        p.send(
            ProducerRecord::new("pos")
                .partition((i % 2) as i32)
                .value(format!("{i}"))
                .timestamp(base + i),
        )
        .await
        .unwrap();
    }
    p.flush().await;
    let tp0 = TopicPartition::new("pos", 0);
    let tp1 = TopicPartition::new("pos", 1);

    // auto.offset.reset=latest starts at the end; none refuses to guess.
    let mut c = Consumer::new(config(&server.bootstrap)).unwrap();
    c.assign(&[tp0.clone(), tp1.clone()]).unwrap();
    assert_eq!(c.position(&tp0).await.unwrap(), 100);
    let mut strict = Consumer::new(
        config(&server.bootstrap)
            .set("auto.offset.reset", "none")
            .unwrap(),
    )
    .unwrap();
    strict.assign(std::slice::from_ref(&tp0)).unwrap();
    assert_eq!(
        strict
            .poll(Duration::from_millis(100))
            .await
            .unwrap_err()
            .code(),
        Some(ErrorCode::OffsetOutOfRange)
    );

    c.seek(&tp0, 90).unwrap();
    c.pause(std::slice::from_ref(&tp1));
    c.seek_to_beginning(std::slice::from_ref(&tp1))
        .await
        .unwrap();
    let got = c.poll(Duration::from_secs(5)).await.unwrap();
    assert!(!got.is_empty() && got.iter().all(|r| r.partition == 0 && r.offset >= 90));
    assert_eq!(
        c.position(&tp0).await.unwrap(),
        got.last().unwrap().offset + 1
    );
    c.resume(std::slice::from_ref(&tp1));
    let mut from_one = Vec::new();
    while from_one.len() < 100 {
        from_one.extend(
            c.poll(Duration::from_secs(5))
                .await
                .unwrap()
                .into_iter()
                .filter(|r| r.partition == 1),
        );
    }
    assert_eq!(from_one[0].offset, 0);
    c.seek_to_end(std::slice::from_ref(&tp0)).await.unwrap();
    assert_eq!(c.position(&tp0).await.unwrap(), 100);

    let times = c
        .offsets_for_times(&[(tp0.clone(), base + 51), (tp1.clone(), base + 10_000)])
        .await
        .unwrap();
    assert_eq!(times[0].1, Some((26, base + 52)));
    assert_eq!(times[1].1, None);

    assert!(matches!(
        c.subscribe(&["pos"]).await,
        Err(Error::Config { .. })
    ));
    // Group membership and a manual assignment do not mix.
    let mut grouped =
        Consumer::new(config(&server.bootstrap).set("group.id", "g").unwrap()).unwrap();
    grouped.assign(std::slice::from_ref(&tp0)).unwrap();
    let err = grouped.subscribe(&["pos"]).await.unwrap_err();
    assert!(matches!(err, Error::Unsupported(_)), "{err}");

    // The stream yields records in order.
    let mut s = Consumer::new(
        config(&server.bootstrap)
            .set("auto.offset.reset", "earliest")
            .unwrap(),
    )
    .unwrap();
    s.assign(std::slice::from_ref(&tp0)).unwrap();
    let mut stream = Box::pin(s.into_stream());
    let mut offsets = Vec::new();
    while offsets.len() < 100 {
        let next = std::future::poll_fn(|cx| stream.as_mut().poll_next(cx)).await;
        offsets.push(next.unwrap().unwrap().offset);
    }
    assert_eq!(offsets, (0..100).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interceptors_and_partitioners_shape_the_pipeline() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use sluice_client::producer::{Interceptor, Partitioner, RecordMetadata};

    #[derive(Default)]
    struct Counting {
        sent: AtomicUsize,
        acked: AtomicUsize,
    }
    impl Interceptor for Counting {
        fn on_send(&self, record: &mut ProducerRecord) {
            self.sent.fetch_add(1, Ordering::Relaxed);
            record.headers.push(("intercepted".into(), None));
        }
        fn on_acknowledgement(&self, result: &sluice_client::error::Result<RecordMetadata>) {
            if result.is_ok() {
                self.acked.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    struct LastPartition;
    impl Partitioner for LastPartition {
        fn partition(&self, _topic: &str, _key: Option<&[u8]>, num_partitions: i32) -> i32 {
            num_partitions - 1
        }
    }
    let server = start(&[]);
    create(&server.bootstrap, "hooks", 4).await;
    let counting = Arc::new(Counting::default());
    let p = Producer::with_hooks(
        config(&server.bootstrap),
        vec![counting.clone() as Arc<dyn Interceptor>],
        Some(Arc::new(LastPartition)),
    )
    .unwrap();
    for i in 0..10 {
        let md = p
            .send_and_wait(ProducerRecord::new("hooks").key(format!("k{i}")).value("v"))
            .await
            .unwrap();
        assert_eq!(
            md.partition, 3,
            "the custom partitioner wins over the key hash"
        );
    }
    // An explicit partition wins over the custom partitioner.
    assert_eq!(
        p.send_and_wait(ProducerRecord::new("hooks").partition(1).value("v"))
            .await
            .unwrap()
            .partition,
        1
    );
    assert_eq!(counting.sent.load(Ordering::Relaxed), 11);
    assert_eq!(counting.acked.load(Ordering::Relaxed), 11);
    let records = consume_n(&server.bootstrap, "hooks", 4, 11).await;
    assert!(records
        .iter()
        .all(|r| r.headers == vec![("intercepted".to_string(), None)]));

    // Round-robin spreads keyless records over every partition.
    let rr = Producer::new(
        config(&server.bootstrap)
            .set("partitioner.class", "round-robin")
            .unwrap(),
    )
    .unwrap();
    let mut seen = std::collections::HashSet::new();
    for _ in 0..8 {
        seen.insert(
            rr.send_and_wait(ProducerRecord::new("hooks").value("v"))
                .await
                .unwrap()
                .partition,
        );
    }
    assert_eq!(seen.len(), 4);
    // The default (sticky) partitioner keeps keyless records of one batch together.
    let sticky = Producer::new(config(&server.bootstrap).set("linger.ms", "100").unwrap()).unwrap();
    let mut futures = Vec::new();
    for _ in 0..20 {
        futures.push(
            sticky
                .send(ProducerRecord::new("hooks").value("v"))
                .await
                .unwrap(),
        );
    }
    let mut parts = std::collections::HashSet::new();
    for f in futures {
        parts.insert(f.await.unwrap().partition);
    }
    assert_eq!(parts.len(), 1, "one batch, one partition");
}
