//! Load generator for the throughput targets, driving librdkafka (the `rdkafka`
//! crate) against a running broker: N records of S bytes to one partition with acks=1, then
//! read them all back. A benchmark, not a test: it prints numbers.
//!
//! cargo run --release --example rdkafka_perf -- 127.0.0.1:9092 [records] [record-size]

use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bootstrap = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "127.0.0.1:9092".into());
    let records: usize = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5_000_000);
    let size: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(100);
    let topic = format!("perf-{}", std::process::id());
    let payload = vec![b'x'; size];

    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("acks", "1")
        .set("linger.ms", "5")
        .set("batch.size", "1000000")
        .set("batch.num.messages", "100000")
        .set("queue.buffering.max.messages", "2000000")
        .set("queue.buffering.max.kbytes", "1048576")
        .create()
        .expect("producer");
    let started = Instant::now();
    for _ in 0..records {
        let mut rec = BaseRecord::<(), [u8]>::to(&topic)
            .payload(&payload)
            .partition(0);
        loop {
            match producer.send(rec) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    producer.poll(Duration::from_millis(1));
                    rec = r;
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::UnknownPartition), r)) => {
                    producer.poll(Duration::from_millis(50));
                    rec = r;
                }
                Err((e, _)) => panic!("send: {e}"),
            }
        }
    }
    producer.flush(Duration::from_secs(300)).expect("flush");
    let secs = started.elapsed().as_secs_f64();
    println!(
        "produce: {records} records of {size} B in {secs:.2} s = {:.0} records/s, {:.1} MB/s",
        records as f64 / secs,
        (records * size) as f64 / secs / 1e6
    );

    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "perf")
        .set("enable.auto.commit", "false")
        .set("fetch.max.bytes", "52428800")
        .set("max.partition.fetch.bytes", "10485760")
        .set("queued.min.messages", "1000000")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&topic, 0, Offset::Beginning)
        .unwrap();
    consumer.assign(&tpl).unwrap();
    let started = Instant::now();
    let mut n = 0usize;
    let mut bytes = 0usize;
    while n < records {
        if let Some(m) = consumer.poll(Duration::from_secs(10)) {
            let m = m.expect("consume");
            bytes += m.payload().map_or(0, <[u8]>::len);
            n += 1;
        } else {
            panic!("consume stalled after {n} records");
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "consume: {n} records in {secs:.2} s = {:.0} records/s, {:.1} MB/s",
        n as f64 / secs,
        bytes as f64 / secs / 1e6
    );
}
