//! `sluice consume` — like `kafka-console-consumer.sh`.

use std::io::Write;
use std::time::{Duration, Instant};

use clap::Args;
use sluice_client::admin::Admin;
use sluice_client::{Consumer, ConsumerRecord, OffsetReset, TopicPartition};

use super::{json_string, properties, usage, CliError, CliResult, ConnArgs};

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sluice consume --topic demo --from-beginning\n  sluice consume --topic demo --partition 0 --offset 42 --max-messages 10\n  sluice consume --topic demo --from-beginning --property print.key=true --property print.offset=true\n  sluice consume --topic demo --from-beginning --format json --timeout-ms 2000"
)]
pub struct ConsumeArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Topic to read.
    #[arg(long)]
    pub topic: String,
    /// Start at the earliest offset instead of the end.
    #[arg(long = "from-beginning")]
    pub from_beginning: bool,
    /// Read only this partition.
    #[arg(long)]
    pub partition: Option<i32>,
    /// Start offset: a number, earliest or latest (needs --partition).
    #[arg(long)]
    pub offset: Option<String>,
    /// Exit after this many records.
    #[arg(long = "max-messages")]
    pub max_messages: Option<usize>,
    /// Exit when no record arrives for this long.
    #[arg(long = "timeout-ms")]
    pub timeout_ms: Option<u64>,
    /// Consume as a member of this consumer group.
    #[arg(long)]
    pub group: Option<String>,
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

#[derive(Default)]
pub(super) struct Formatter {
    key: bool,
    timestamp: bool,
    offset: bool,
    partition: bool,
    headers: bool,
    separator: String,
    json: bool,
}

impl Formatter {
    pub(super) fn write(&self, out: &mut impl Write, r: &ConsumerRecord) -> std::io::Result<()> {
        let text = |b: &Option<bytes::Bytes>| {
            b.as_ref().map_or("null".to_string(), |v| {
                String::from_utf8_lossy(v).into_owned()
            })
        };
        if self.json {
            let headers: Vec<String> = r
                .headers
                .iter()
                .map(|(k, v)| {
                    format!(
                        "{}:{}",
                        json_string(k),
                        v.as_ref()
                            .map_or("null".into(), |v| json_string(&String::from_utf8_lossy(v)))
                    )
                })
                .collect();
            let opt = |b: &Option<bytes::Bytes>| {
                b.as_ref().map_or("null".to_string(), |v| {
                    json_string(&String::from_utf8_lossy(v))
                })
            };
            return writeln!(
                out,
                "{{\"topic\":{},\"partition\":{},\"offset\":{},\"timestamp\":{},\"key\":{},\"value\":{},\"headers\":{{{}}}}}",
                json_string(&r.topic),
                r.partition,
                r.offset,
                r.timestamp,
                opt(&r.key),
                opt(&r.value),
                headers.join(",")
            );
        }
        let mut fields = Vec::new();
        if self.timestamp {
            fields.push(format!("CreateTime:{}", r.timestamp));
        }
        if self.partition {
            fields.push(format!("Partition:{}", r.partition));
        }
        if self.offset {
            fields.push(format!("Offset:{}", r.offset));
        }
        if self.headers {
            let h: Vec<String> = r
                .headers
                .iter()
                .map(|(k, v)| format!("{k}:{}", text(v)))
                .collect();
            fields.push(if h.is_empty() {
                "NO_HEADERS".into()
            } else {
                h.join(",")
            });
        }
        if self.key {
            fields.push(text(&r.key));
        }
        fields.push(text(&r.value));
        writeln!(out, "{}", fields.join(&self.separator))
    }
}

/// The record printer `--format` and `--property` ask for.
pub(super) fn formatter(format: &str, props: &[String]) -> Result<Formatter, CliError> {
    let mut f = Formatter {
        separator: "\t".into(),
        json: match format {
            "json" => true,
            "text" => false,
            other => {
                return Err(usage(format!(
                    "--format must be text or json, not '{other}'"
                )))
            }
        },
        ..Formatter::default()
    };
    for (k, v) in properties(props, "--property")? {
        let on = v.eq_ignore_ascii_case("true");
        match k.as_str() {
            "print.key" => f.key = on,
            "print.timestamp" => f.timestamp = on,
            "print.offset" => f.offset = on,
            "print.partition" => f.partition = on,
            "print.headers" => f.headers = on,
            "print.value" => {}
            "key.separator" => f.separator = v,
            other => return Err(usage(format!("unknown --property {other}"))),
        }
    }
    Ok(f)
}

pub async fn run(args: ConsumeArgs) -> CliResult {
    let f = formatter(&args.format, &args.properties)?;
    if args.offset.is_some() && args.partition.is_none() {
        return Err(usage("--offset needs --partition"));
    }
    let mut config = args.conn.client_config()?;
    config.auto_offset_reset = if args.from_beginning {
        OffsetReset::Earliest
    } else {
        OffsetReset::Latest
    };
    config.group_id = args.group.clone();
    for (k, v) in properties(&args.consumer_properties, "--consumer-property")? {
        config = config.set(&k, &v).map_err(|e| usage(e.to_string()))?;
    }
    let mut consumer = Consumer::new(config.clone())?;
    if args.group.is_some() {
        consumer.subscribe(&[args.topic.as_str()]).await?;
    } else {
        let partitions: Vec<TopicPartition> = match args.partition {
            Some(p) => vec![TopicPartition::new(args.topic.clone(), p)],
            None => {
                let admin = Admin::new(config)?;
                let info = admin.describe_topics(&[args.topic.as_str()]).await?;
                info[0]
                    .partitions
                    .iter()
                    .map(|p| TopicPartition::new(args.topic.clone(), p.partition))
                    .collect()
            }
        };
        consumer.assign(&partitions)?;
        if let Some(offset) = &args.offset {
            match offset.as_str() {
                "earliest" => consumer.seek_to_beginning(&partitions).await?,
                "latest" => consumer.seek_to_end(&partitions).await?,
                n => {
                    let n: i64 = n.parse().map_err(|_| {
                        usage(format!(
                            "--offset must be a number, earliest or latest, not '{n}'"
                        ))
                    })?;
                    consumer.seek(&partitions[0], n)?;
                }
            }
        }
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut seen = 0usize;
    let idle = args.timeout_ms.map(Duration::from_millis);
    let mut last = Instant::now();
    // Ctrl-C or SIGTERM ends the run like --max-messages does: commit and leave the group.
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
        let mut unprinted: Vec<(TopicPartition, i64)> = Vec::new();
        for r in &records {
            if args.max_messages.is_some_and(|m| seen >= m) {
                let tp = TopicPartition::new(r.topic.to_string(), r.partition);
                if !unprinted.iter().any(|(t, _)| *t == tp) {
                    unprinted.push((tp, r.offset));
                }
                continue;
            }
            f.write(&mut out, r)
                .map_err(|e| CliError::Failed(format!("cannot write output: {e}")))?;
            seen += 1;
        }
        // Rewind past records fetched but not printed, so the group's commit at close
        // covers exactly what was printed.
        for (tp, offset) in unprinted {
            consumer.seek(&tp, offset)?;
        }
    }
    out.flush()?;
    // Commits the group's offsets (enable.auto.commit) and leaves the group.
    consumer.close().await?;
    eprintln!("Processed a total of {seen} messages");
    Ok(())
}
