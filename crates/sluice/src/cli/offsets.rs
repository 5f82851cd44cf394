//! `sluice offsets` — like `kafka-get-offsets.sh`: `topic:partition:offset` per line.

use clap::Args;
use sluice_client::admin::OffsetSpec;
use sluice_client::{Admin, TopicPartition};

use super::{usage, CliResult, ConnArgs};

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sluice offsets --topic demo                 # latest offsets\n  sluice offsets --topic demo --time -2       # earliest\n  sluice offsets --topic demo --time 1700000000000 --partitions 0,1"
)]
pub struct OffsetsArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// The topic.
    #[arg(long)]
    pub topic: String,
    /// Comma-separated partitions (default: all).
    #[arg(long)]
    pub partitions: Option<String>,
    /// -1 or latest, -2 or earliest, -3 or max-timestamp, -4 or earliest-local, -5 or
    /// latest-tiered (tiered storage), or a timestamp in ms.
    #[arg(long, default_value = "-1", allow_hyphen_values = true)]
    pub time: String,
}

pub async fn run(args: OffsetsArgs) -> CliResult {
    let spec = match args.time.as_str() {
        "-1" | "latest" => OffsetSpec::Latest,
        "-2" | "earliest" => OffsetSpec::Earliest,
        "-3" | "max-timestamp" => OffsetSpec::MaxTimestamp,
        "-4" | "earliest-local" => OffsetSpec::EarliestLocal,
        "-5" | "latest-tiered" => OffsetSpec::LatestTiered,
        t => OffsetSpec::Timestamp(t.parse().ok().filter(|t| *t >= 0).ok_or_else(|| {
            usage(format!(
                "--time must be -1 to -5, latest, earliest, max-timestamp, earliest-local, \
                 latest-tiered or a timestamp, not '{t}'"
            ))
        })?),
    };
    let admin = Admin::new(args.conn.client_config()?)?;
    let info = admin.describe_topics(&[args.topic.as_str()]).await?;
    let wanted: Vec<i32> = match &args.partitions {
        Some(list) => list
            .split(',')
            .map(|p| {
                p.trim()
                    .parse::<i32>()
                    .map_err(|_| usage(format!("bad partition '{p}' in --partitions")))
            })
            .collect::<Result<_, _>>()?,
        None => info[0].partitions.iter().map(|p| p.partition).collect(),
    };
    let query: Vec<(TopicPartition, OffsetSpec)> = wanted
        .iter()
        .map(|p| (TopicPartition::new(args.topic.clone(), *p), spec))
        .collect();
    let mut results = admin.list_offsets(&query).await?;
    results.sort_by_key(|(tp, _)| tp.partition);
    for (tp, r) in results {
        match r {
            Ok(o) if o.offset >= 0 => println!("{}:{}:{}", tp.topic, tp.partition.0, o.offset),
            Ok(_) => println!("{}:{}:", tp.topic, tp.partition.0),
            Err(e) => eprintln!("sluice: {tp}: {e}"),
        }
    }
    Ok(())
}
