//! `sluice produce` — like `kafka-console-producer.sh`: one record per input line.

use std::io::BufRead;

use clap::Args;
use sluice_client::{Compression, Producer, ProducerRecord};

use super::{properties, usage, CliError, CliResult, ConnArgs};

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  echo hello | sluice produce --topic demo\n  sluice produce --topic demo --property parse.key=true --property key.separator=: < lines.txt\n  sluice produce --topic demo --compression zstd --acks 1 --file data.txt"
)]
pub struct ProduceArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Topic to write to.
    #[arg(long)]
    pub topic: String,
    /// Reader properties: parse.key=true, key.separator=<sep> (default tab), ignore.error=true.
    #[arg(long = "property", value_name = "KEY=VALUE")]
    pub properties: Vec<String>,
    /// none, gzip, snappy, lz4 or zstd.
    #[arg(long, alias = "compression-codec", default_value = "none")]
    pub compression: String,
    /// 0, 1 or all (-1).
    #[arg(long, default_value = "all")]
    pub acks: String,
    /// Read lines from this file instead of standard input.
    #[arg(long)]
    pub file: Option<std::path::PathBuf>,
    /// A producer config, key=value (repeatable), e.g. linger.ms=10.
    #[arg(long = "producer-property", value_name = "KEY=VALUE")]
    pub producer_properties: Vec<String>,
}

pub async fn run(args: ProduceArgs) -> CliResult {
    let mut parse_key = false;
    let mut separator = "\t".to_string();
    let mut ignore_error = false;
    for (k, v) in properties(&args.properties, "--property")? {
        match k.as_str() {
            "parse.key" => parse_key = v.eq_ignore_ascii_case("true"),
            "key.separator" => separator = v,
            "ignore.error" => ignore_error = v.eq_ignore_ascii_case("true"),
            other => {
                return Err(usage(format!(
                    "unknown --property {other} (parse.key, key.separator, ignore.error)"
                )))
            }
        }
    }
    let codec = Compression::from_name(&args.compression).ok_or_else(|| {
        usage(format!(
            "--compression must be none, gzip, snappy, lz4 or zstd, not '{}'",
            args.compression
        ))
    })?;
    let mut config = args
        .conn
        .client_config()?
        .set("acks", &args.acks)
        .map_err(|e| usage(e.to_string()))?;
    config.compression = codec;
    for (k, v) in properties(&args.producer_properties, "--producer-property")? {
        config = config.set(&k, &v).map_err(|e| usage(e.to_string()))?;
    }
    let producer = Producer::new(config)?;
    let input: Box<dyn BufRead + Send> = match &args.file {
        Some(path) => Box::new(std::io::BufReader::new(std::fs::File::open(path).map_err(
            |e| CliError::Failed(format!("cannot open {}: {e}", path.display())),
        )?)),
        None => Box::new(std::io::BufReader::new(std::io::stdin())),
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel::<std::io::Result<String>>(1024);
    let reader = tokio::task::spawn_blocking(move || {
        for line in input.lines() {
            if tx.blocking_send(line).is_err() {
                break;
            }
        }
    });
    let mut pending = Vec::new();
    let mut failures = 0usize;
    while let Some(line) = rx.recv().await {
        let line = line?;
        let mut record = ProducerRecord::new(args.topic.clone());
        if parse_key {
            match line.split_once(separator.as_str()) {
                Some((k, v)) => record = record.key(k.to_string()).value(v.to_string()),
                None if ignore_error => record = record.value(line),
                None => {
                    return Err(CliError::Failed(format!(
                        "no key separator '{separator}' in line: {line}"
                    )))
                }
            }
        } else {
            record = record.value(line);
        }
        pending.push(producer.send(record).await?);
        if pending.len() >= 10_000 {
            for f in pending.drain(..) {
                if let Err(e) = f.await {
                    failures += 1;
                    eprintln!("sluice: record not delivered: {e}");
                }
            }
        }
    }
    let _ = reader.await;
    for f in pending {
        if let Err(e) = f.await {
            failures += 1;
            eprintln!("sluice: record not delivered: {e}");
        }
    }
    producer.close(std::time::Duration::from_secs(30)).await;
    if failures > 0 {
        return Err(CliError::Failed(format!(
            "{failures} record(s) were not delivered"
        )));
    }
    Ok(())
}
