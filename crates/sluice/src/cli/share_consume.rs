//! `sluice share-consume` — like `kafka-console-share-consumer.sh`: reads a topic as a
//! member of a share group and acknowledges what it prints (ACCEPT, or `--release` /
//! `--reject`). Records fetched beyond `--max-messages` are released for other members.

use std::io::Write;
use std::time::{Duration, Instant};

use clap::Args;
use sluice_client::{AcknowledgeType, AcknowledgementMode, ShareConsumer};

use super::consume::formatter;
use super::{properties, usage, CliError, CliResult, ConnArgs};

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sluice share-consume --topic jobs --group workers\n  sluice share-consume --topic jobs --group workers --max-messages 10 --property print.offset=true\n  sluice share-consume --topic jobs --group workers --release --timeout-ms 2000"
)]
pub struct ShareConsumeArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Topic to read.
    #[arg(long)]
    pub topic: String,
    /// The share group to read as.
    #[arg(long, default_value = "console-share-consumer")]
    pub group: String,
    /// Exit after this many records.
    #[arg(long = "max-messages")]
    pub max_messages: Option<usize>,
    /// Exit when no record arrives for this long.
    #[arg(long = "timeout-ms")]
    pub timeout_ms: Option<u64>,
    /// Release each record printed (it is delivered again) instead of accepting it.
    #[arg(long, conflicts_with = "reject")]
    pub release: bool,
    /// Reject each record printed (it is never delivered again) instead of accepting it.
    #[arg(long)]
    pub reject: bool,
    /// Formatter properties: print.key, print.timestamp, print.offset, print.partition,
    /// print.headers (true/false), key.separator.
    #[arg(long = "property", value_name = "KEY=VALUE")]
    pub properties: Vec<String>,
    /// Output format: text (default) or json (one object per line).
    #[arg(long, default_value = "text")]
    pub format: String,
    /// A consumer config, key=value (repeatable).
    #[arg(long = "consumer-property", value_name = "KEY=VALUE")]
    pub consumer_properties: Vec<String>,
}

pub async fn run(args: ShareConsumeArgs) -> CliResult {
    let f = formatter(&args.format, &args.properties)?;
    if args.group.trim().is_empty() {
        return Err(usage("--group cannot be empty"));
    }
    let mut config = args.conn.client_config()?;
    config.group_id = Some(args.group.clone());
    for (k, v) in properties(&args.consumer_properties, "--consumer-property")? {
        config = config.set(&k, &v).map_err(|e| usage(e.to_string()))?;
    }
    // Each record is acknowledged as it is printed; the rest of a poll goes back.
    config.share_acknowledgement_mode = AcknowledgementMode::Explicit;
    let how = if args.release {
        AcknowledgeType::Release
    } else if args.reject {
        AcknowledgeType::Reject
    } else {
        AcknowledgeType::Accept
    };
    let mut consumer = ShareConsumer::new(config)?;
    consumer.subscribe(&[args.topic.as_str()]).await?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut seen = 0usize;
    let idle = args.timeout_ms.map(Duration::from_millis);
    let mut last = Instant::now();
    let interrupted = crate::wait_for_signal();
    tokio::pin!(interrupted);
    loop {
        if args.max_messages.is_some_and(|m| seen >= m) {
            break;
        }
        let records = tokio::select! {
            r = consumer.poll(Duration::from_millis(200)) => r?,
            () = &mut interrupted => break,
        };
        if records.is_empty() {
            out.flush()?;
            if idle.is_some_and(|t| last.elapsed() >= t) {
                break;
            }
            continue;
        }
        last = Instant::now();
        for r in &records {
            if args.max_messages.is_some_and(|m| seen >= m) {
                consumer.acknowledge(r, AcknowledgeType::Release)?;
                continue;
            }
            f.write(&mut out, r)
                .map_err(|e| CliError::Failed(format!("cannot write output: {e}")))?;
            consumer.acknowledge(r, how)?;
            seen += 1;
        }
    }
    out.flush()?;
    let results = consumer.close().await?;
    let failed: usize = results
        .iter()
        .filter(|r| r.error.is_some())
        .map(|r| r.offsets.len())
        .sum();
    if let Some(r) = results.iter().find(|r| r.error.is_some()) {
        eprintln!(
            "{failed} acknowledgements were refused, e.g. {}: {}",
            r.partition,
            r.error
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default()
        );
    }
    eprintln!("Processed a total of {seen} messages");
    Ok(())
}
