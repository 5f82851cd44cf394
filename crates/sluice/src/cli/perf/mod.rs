//! `sluice perf` — like `kafka-producer-perf-test.sh`, `kafka-consumer-perf-test.sh` and
//! `kafka-e2e-latency.sh`: throughput and HDR-histogram latency percentiles; and consumer
//! group timings (rebalances, offset commits).

mod groups;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::{Args, Subcommand};
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use sluice_client::admin::Admin;
use sluice_client::{Consumer, OffsetReset, Producer, ProducerRecord, TopicPartition};
use tokio::sync::mpsc;

use super::{properties, usage, CliError, CliResult, ConnArgs};

#[derive(Subcommand, Debug)]
pub enum PerfCommand {
    /// Producer throughput and acknowledgement latency.
    #[command(
        after_help = "Example:\n  sluice perf produce --topic perf --records 1000000 --record-size 100 --throughput -1 --producer-props acks=1 linger.ms=5"
    )]
    Produce(ProduceArgs),
    /// Consumer throughput.
    #[command(after_help = "Example:\n  sluice perf consume --topic perf --messages 1000000")]
    Consume(ConsumeArgs),
    /// Produce-to-consume latency.
    #[command(
        after_help = "Example:\n  sluice perf e2e --topic perf-e2e --records 10000 --record-size 100"
    )]
    E2e(E2eArgs),
    /// Consumer-group rebalance time and OffsetCommit throughput.
    #[command(
        after_help = "Example:\n  sluice perf groups --topic perf --members 3 --rounds 5 --commits 50000"
    )]
    Groups(groups::GroupsArgs),
}

#[derive(Args, Debug)]
pub struct ProduceArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    #[arg(long)]
    pub topic: String,
    /// Records to send.
    #[arg(long = "records", alias = "num-records")]
    pub records: u64,
    /// Bytes per record value.
    #[arg(long = "record-size", default_value_t = 100)]
    pub record_size: usize,
    /// Records per second to aim for; -1 means as fast as possible.
    #[arg(long, default_value_t = -1, allow_hyphen_values = true)]
    pub throughput: i64,
    /// Producer configs: key=value ...
    #[arg(long = "producer-props", num_args = 1.., value_name = "KEY=VALUE")]
    pub producer_props: Vec<String>,
    /// Send inside transactions with this transactional.id (as Kafka's perf tool).
    #[arg(long = "transactional-id")]
    pub transactional_id: Option<String>,
    /// With --transactional-id: commit a transaction this often.
    #[arg(long = "transaction-duration-ms", default_value_t = 3000)]
    pub transaction_duration_ms: u64,
    /// Print the result as one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ConsumeArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    #[arg(long)]
    pub topic: String,
    /// Records to read (from the beginning).
    #[arg(long = "messages", alias = "records")]
    pub messages: u64,
    /// Consumer configs: key=value ...
    #[arg(long = "consumer-props", num_args = 1.., value_name = "KEY=VALUE")]
    pub consumer_props: Vec<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct E2eArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    #[arg(long)]
    pub topic: String,
    #[arg(long = "records", alias = "num-records")]
    pub records: u64,
    #[arg(long = "record-size", default_value_t = 100)]
    pub record_size: usize,
    #[arg(long = "producer-props", num_args = 1.., value_name = "KEY=VALUE")]
    pub producer_props: Vec<String>,
    #[arg(long)]
    pub json: bool,
}

pub async fn run(cmd: PerfCommand) -> CliResult {
    match cmd {
        PerfCommand::Produce(a) => produce(a).await,
        PerfCommand::Consume(a) => consume(a).await,
        PerfCommand::E2e(a) => e2e(a).await,
        PerfCommand::Groups(a) => groups::run(a).await,
    }
}

fn progress(total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    if let Ok(style) =
        ProgressStyle::with_template("{bar:40} {pos}/{len} records {per_sec} eta {eta}")
    {
        bar.set_style(style);
    }
    bar
}

pub(super) fn histogram() -> Histogram<u64> {
    // Microseconds, 1 µs .. 1 h, 3 significant digits.
    Histogram::new_with_bounds(1, 3_600_000_000, 3)
        .unwrap_or_else(|_| Histogram::new(3).expect("3 significant digits is valid"))
}

/// The summary line and its JSON form.
struct Summary {
    records: u64,
    bytes: u64,
    elapsed: Duration,
    latency: Option<Histogram<u64>>,
}

impl Summary {
    fn print(&self, json: bool) {
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        let rps = self.records as f64 / secs;
        let mbps = self.bytes as f64 / secs / (1024.0 * 1024.0);
        let ms = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        if json {
            let mut s = format!(
                "{{\"records\":{},\"bytes\":{},\"seconds\":{:.3},\"records_per_sec\":{:.1},\"mb_per_sec\":{:.2}",
                self.records, self.bytes, secs, rps, mbps
            );
            if let Some(h) = &self.latency {
                s.push_str(&format!(
                    ",\"latency_ms\":{{\"avg\":{:.3},\"p50\":{:.3},\"p95\":{:.3},\"p99\":{:.3},\"p99_9\":{:.3},\"max\":{:.3}}}",
                    h.mean() / 1000.0,
                    ms(h, 0.5),
                    ms(h, 0.95),
                    ms(h, 0.99),
                    ms(h, 0.999),
                    h.max() as f64 / 1000.0
                ));
            }
            println!("{s}}}");
            return;
        }
        let mut line = format!(
            "{} records, {:.1} records/sec ({:.2} MB/sec)",
            self.records, rps, mbps
        );
        if let Some(h) = &self.latency {
            line.push_str(&format!(
                ", {:.2} ms avg latency, {:.2} ms p50, {:.2} ms p95, {:.2} ms p99, {:.2} ms p99.9, {:.2} ms max latency",
                h.mean() / 1000.0,
                ms(h, 0.5),
                ms(h, 0.95),
                ms(h, 0.99),
                ms(h, 0.999),
                h.max() as f64 / 1000.0
            ));
        }
        println!("{line}.");
    }
}

fn producer_config(
    conn: &ConnArgs,
    props: &[String],
) -> Result<sluice_client::ClientConfig, CliError> {
    let mut config = conn.client_config()?;
    config.max_block = Duration::from_secs(60);
    config.request_timeout = Duration::from_secs(30);
    for p in props {
        // --producer-props takes space-separated k=v items; also accept k=v,k=v.
        for item in p.split(',').filter(|s| !s.is_empty()) {
            let (k, v) = super::key_value(item, "--producer-props")?;
            config = config.set(&k, &v).map_err(|e| usage(e.to_string()))?;
        }
    }
    Ok(config)
}

async fn produce(args: ProduceArgs) -> CliResult {
    let mut config = producer_config(&args.conn, &args.producer_props)?;
    if let Some(id) = &args.transactional_id {
        config = config
            .set("transactional.id", id)
            .map_err(|e| usage(e.to_string()))?;
    }
    let producer = Producer::new(config)?;
    let transactional = args.transactional_id.is_some();
    let txn_duration = Duration::from_millis(args.transaction_duration_ms.max(1));
    if transactional {
        producer.init_transactions().await?;
        producer.begin_transaction().await?;
    }
    let mut txn_started = Instant::now();
    let mut transactions = 0u64;
    let value = Bytes::from(vec![b'x'; args.record_size]);
    let bar = progress(args.records);
    // Acknowledgements are awaited in send order by a collector, which times each one;
    // futures travel to it in chunks to keep the hand-off cheap.
    type Chunk = Vec<(Instant, sluice_client::DeliveryFuture)>;
    const CHUNK: usize = 1024;
    let (tx, mut rx) = mpsc::channel::<Chunk>(256);
    let collector = tokio::spawn(async move {
        let mut h = histogram();
        let mut failed = 0u64;
        let mut first_error = None;
        while let Some(chunk) = rx.recv().await {
            for (sent, fut) in chunk {
                match fut.wait().await {
                    Ok(_) => {
                        let _ = h.record(sent.elapsed().as_micros().max(1) as u64);
                    }
                    Err(e) => {
                        failed += 1;
                        first_error.get_or_insert(e.to_string());
                    }
                }
            }
        }
        (h, failed, first_error)
    });
    let topic: Arc<str> = args.topic.as_str().into();
    let started = Instant::now();
    let mut chunk: Chunk = Vec::with_capacity(CHUNK);
    for i in 0..args.records {
        if args.throughput > 0 {
            let due = started + Duration::from_secs_f64(i as f64 / args.throughput as f64);
            if due > Instant::now() {
                tokio::time::sleep_until(due.into()).await;
            }
        }
        if transactional && txn_started.elapsed() >= txn_duration {
            producer.commit_transaction().await?;
            transactions += 1;
            producer.begin_transaction().await?;
            txn_started = Instant::now();
        }
        let sent = Instant::now();
        let fut = producer
            .send(ProducerRecord::new(Arc::clone(&topic)).value(value.clone()))
            .await?;
        chunk.push((sent, fut));
        if chunk.len() == CHUNK {
            if tx
                .send(std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK)))
                .await
                .is_err()
            {
                break;
            }
            bar.set_position(i);
        }
    }
    if !chunk.is_empty() {
        let _ = tx.send(chunk).await;
    }
    drop(tx);
    if transactional {
        producer.commit_transaction().await?;
        transactions += 1;
    } else {
        producer.flush().await;
    }
    let (latency, failed, first_error) = collector
        .await
        .map_err(|e| CliError::Failed(e.to_string()))?;
    let elapsed = started.elapsed();
    bar.finish_and_clear();
    producer.close(Duration::from_secs(10)).await;
    if failed > 0 {
        return Err(CliError::Failed(format!(
            "{failed} records failed, first error: {}",
            first_error.unwrap_or_default()
        )));
    }
    Summary {
        records: args.records,
        bytes: args.records * args.record_size as u64,
        elapsed,
        latency: Some(latency),
    }
    .print(args.json);
    if transactional && !args.json {
        println!("{transactions} transactions committed.");
    }
    Ok(())
}

pub(super) async fn all_partitions(
    conn: &ConnArgs,
    topic: &str,
) -> Result<Vec<TopicPartition>, CliError> {
    let admin = Admin::new(conn.client_config()?)?;
    let info = admin.describe_topics(&[topic]).await?;
    Ok(info[0]
        .partitions
        .iter()
        .map(|p| TopicPartition::new(topic.to_string(), p.partition))
        .collect())
}

async fn consume(args: ConsumeArgs) -> CliResult {
    let mut config = args.conn.client_config()?;
    config.auto_offset_reset = OffsetReset::Earliest;
    config.max_poll_records = 10_000;
    config.max_partition_fetch_bytes = 10 * 1024 * 1024;
    for (k, v) in properties(&args.consumer_props, "--consumer-props")? {
        config = config.set(&k, &v).map_err(|e| usage(e.to_string()))?;
    }
    let mut consumer = Consumer::new(config)?;
    consumer.assign(&all_partitions(&args.conn, &args.topic).await?)?;
    let bar = progress(args.messages);
    let started = Instant::now();
    let (mut n, mut bytes) = (0u64, 0u64);
    let mut last_data = Instant::now();
    while n < args.messages {
        let records = consumer.poll(Duration::from_millis(500)).await?;
        if records.is_empty() && last_data.elapsed() > Duration::from_secs(10) {
            return Err(CliError::Failed(format!(
                "no records for 10 s after {n} of {}",
                args.messages
            )));
        }
        if !records.is_empty() {
            last_data = Instant::now();
        }
        for r in &records {
            bytes += r.value.as_ref().map_or(0, |v| v.len() as u64);
        }
        n += records.len() as u64;
        bar.set_position(n);
    }
    bar.finish_and_clear();
    Summary {
        records: n,
        bytes,
        elapsed: started.elapsed(),
        latency: None,
    }
    .print(args.json);
    Ok(())
}

async fn e2e(args: E2eArgs) -> CliResult {
    if args.record_size < 8 {
        return Err(usage(
            "--record-size must be at least 8 (the send time is in the value)",
        ));
    }
    let config = producer_config(&args.conn, &args.producer_props)?;
    let producer = Producer::new(config.clone())?;
    // Make sure the topic exists before the consumer looks at its end.
    producer
        .send_and_wait(
            ProducerRecord::new(args.topic.clone()).value(Bytes::from_static(b"warm-up!")),
        )
        .await?;
    let partitions = all_partitions(&args.conn, &args.topic).await?;
    let mut cconf = args.conn.client_config()?;
    cconf.fetch_max_wait = Duration::from_millis(100);
    let mut consumer = Consumer::new(cconf)?;
    consumer.assign(&partitions)?;
    consumer.seek_to_end(&partitions).await?;
    for tp in &partitions {
        consumer.position(tp).await?;
    }
    let origin = Arc::new(Instant::now());
    let total = args.records;
    let reader_origin = Arc::clone(&origin);
    let reader = tokio::spawn(async move {
        let mut h = histogram();
        let mut n = 0u64;
        let deadline = Instant::now() + Duration::from_secs(120);
        while n < total {
            if Instant::now() > deadline {
                return Err(CliError::Failed(format!(
                    "only {n} of {total} records came back within 120 s"
                )));
            }
            for r in consumer.poll(Duration::from_millis(200)).await? {
                let Some(v) = r.value.as_ref().filter(|v| v.len() >= 8) else {
                    continue;
                };
                let mut b = [0u8; 8];
                b.copy_from_slice(&v[..8]);
                let sent = u64::from_be_bytes(b);
                let now = reader_origin.elapsed().as_micros() as u64;
                let _ = h.record(now.saturating_sub(sent).max(1));
                n += 1;
            }
        }
        Ok::<_, CliError>(h)
    });
    let started = Instant::now();
    for _ in 0..total {
        let mut value = vec![b'x'; args.record_size];
        value[..8].copy_from_slice(&(origin.elapsed().as_micros() as u64).to_be_bytes());
        producer
            .send(ProducerRecord::new(args.topic.clone()).value(value))
            .await?;
    }
    producer.flush().await;
    let latency = reader
        .await
        .map_err(|e| CliError::Failed(e.to_string()))??;
    producer.close(Duration::from_secs(10)).await;
    Summary {
        records: total,
        bytes: total * args.record_size as u64,
        elapsed: started.elapsed(),
        latency: Some(latency),
    }
    .print(args.json);
    Ok(())
}
