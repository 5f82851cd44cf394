//! `sluice producers` — the producer states partition leaders keep (like
//! `kafka-transactions.sh describe-producers`).

use clap::{ArgGroup, Args};
use sluice_client::{Admin, TopicPartition};

use super::{usage, CliError, CliResult, ConnArgs};

#[derive(Args, Debug)]
#[command(
    group(ArgGroup::new("action").required(true).args(["describe"])),
    after_help = "Examples:\n  sluice producers --describe --topic orders\n  sluice producers --describe --topic orders --partition 2"
)]
pub struct ProducersArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Show each partition's producers: id, epoch, last sequence and timestamp, coordinator
    /// epoch, and where an open transaction starts.
    #[arg(long)]
    pub describe: bool,
    /// The topic.
    #[arg(long)]
    pub topic: Option<String>,
    /// One partition (default: all of the topic's).
    #[arg(long)]
    pub partition: Option<i32>,
}

pub async fn run(args: ProducersArgs) -> CliResult {
    let topic = args
        .topic
        .as_deref()
        .ok_or_else(|| usage("--describe needs --topic"))?;
    let admin = Admin::new(args.conn.client_config()?)?;
    let partitions: Vec<i32> = match args.partition {
        Some(p) => vec![p],
        None => admin
            .describe_topics(&[topic])
            .await?
            .into_iter()
            .flat_map(|t| t.partitions.into_iter().map(|p| p.partition))
            .collect(),
    };
    let tps: Vec<TopicPartition> = partitions
        .iter()
        .map(|p| TopicPartition::new(topic, *p))
        .collect();
    let mut results = admin.describe_producers(&tps).await?;
    results.sort_by_key(|(tp, _)| tp.partition.0);
    println!(
        "Partition\tProducerId\tProducerEpoch\tLastSequence\tLastTimestamp\tCoordinatorEpoch\tCurrentTransactionStartOffset"
    );
    let mut failed = Vec::new();
    for (tp, r) in results {
        match r {
            Ok(producers) => {
                for p in producers {
                    println!(
                        "{}\t{}\t{}\t{}\t{}\t{}\t{}",
                        tp.partition.0,
                        p.producer_id,
                        p.epoch,
                        p.last_sequence,
                        p.last_timestamp,
                        p.coordinator_epoch,
                        p.current_txn_start_offset
                    );
                }
            }
            Err(e) => failed.push(format!("{tp}: {e}")),
        }
    }
    if !failed.is_empty() {
        return Err(CliError::Failed(failed.join("; ")));
    }
    Ok(())
}
