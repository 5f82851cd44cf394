//! `sluice dump-log` — like `kafka-dump-log.sh`: batches and records of `.log` files, entries
//! of `.index` and `.timeindex` files, and index verification against the log. Remote
//! segments of tiered storage too: a file store's objects by path, an S3 store's as
//! `s3://bucket/key` with the broker's `remote.log.storage.s3.*` settings given as
//! `--remote-property`.

use std::path::{Path, PathBuf};

use clap::Args;
use sluice_protocol::batch::{self, BatchHeader, BatchIter, RecordLimits, TimestampType};

use super::{usage, CliError, CliResult};

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sluice dump-log --files sluice-data/demo-0/00000000000000000000.log --print-data-log\n  sluice dump-log --files sluice-data/demo-0/00000000000000000000.index --verify-index-only"
)]
pub struct DumpLogArgs {
    /// Comma-separated .log, .index or .timeindex files.
    #[arg(long, value_delimiter = ',', required = true)]
    pub files: Vec<PathBuf>,
    /// Print each record's key and value (implies --deep-iteration).
    #[arg(long = "print-data-log")]
    pub print_data_log: bool,
    /// Print every record, not only batch headers.
    #[arg(long = "deep-iteration")]
    pub deep_iteration: bool,
    /// For index files: only check entries against the log and report mismatches.
    #[arg(long = "verify-index-only")]
    pub verify_index_only: bool,
    /// For `s3://bucket/key` files: a `remote.log.storage.s3.*` setting of the broker, as
    /// key=value (repeatable): endpoint, region, access.key.id, secret.access.key,
    /// path.style.access.
    #[arg(long = "remote-property", value_name = "KEY=VALUE")]
    pub remote_property: Vec<String>,
}

/// Reads files: local paths, or objects of an S3 store.
struct Files {
    s3: Vec<(String, String)>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Files {
    fn read(&self, path: &Path) -> Result<Vec<u8>, CliError> {
        let name = path.to_string_lossy();
        let Some(rest) = name.strip_prefix("s3:/") else {
            return std::fs::read(path)
                .map_err(|e| CliError::Failed(format!("cannot read {}: {e}", path.display())));
        };
        // A path keeps one slash of `s3://`.
        let rest = rest.trim_start_matches('/');
        let (bucket, key) = rest
            .split_once('/')
            .ok_or_else(|| usage(format!("{name}: expected s3://bucket/key")))?;
        let get = |k: &str| {
            self.s3
                .iter()
                .find(|(p, _)| p == &format!("remote.log.storage.s3.{k}"))
                .map(|(_, v)| v.clone())
        };
        let config = sluice_remote::StoreConfig {
            uri: format!("s3://{bucket}"),
            s3_endpoint: get("endpoint"),
            s3_region: get("region"),
            s3_access_key_id: get("access.key.id"),
            s3_secret_access_key: get("secret.access.key"),
            s3_path_style_access: get("path.style.access").is_some_and(|v| v == "true"),
            request_timeout_ms: 30_000,
            retries: 3,
        };
        let failed = |e: sluice_remote::RemoteError| CliError::Failed(format!("{name}: {e}"));
        let store = sluice_remote::RemoteStore::open(&config).map_err(failed)?;
        let runtime = self
            .runtime
            .as_ref()
            .ok_or_else(|| CliError::Failed("no runtime for the remote store".into()))?;
        runtime
            .block_on(store.get(key))
            .map_err(failed)?
            .map(|b| b.to_vec())
            .ok_or_else(|| CliError::Failed(format!("{name}: no such object")))
    }
}

pub fn run(args: DumpLogArgs) -> CliResult {
    let mut s3 = Vec::new();
    for p in &args.remote_property {
        let (k, v) = p
            .split_once('=')
            .ok_or_else(|| usage(format!("--remote-property {p}: expected key=value")))?;
        if !k.starts_with("remote.log.storage.s3.") {
            return Err(usage(format!(
                "--remote-property {k}: only remote.log.storage.s3.* settings are read"
            )));
        }
        s3.push((k.to_string(), v.to_string()));
    }
    let remote = args
        .files
        .iter()
        .any(|f| f.to_string_lossy().starts_with("s3:/"));
    let runtime = if remote {
        Some(
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| CliError::Failed(format!("cannot start a runtime: {e}")))?,
        )
    } else {
        None
    };
    let files = Files { s3, runtime };
    for file in &args.files {
        println!("Dumping {}", file.display());
        match file.extension().and_then(|e| e.to_str()) {
            Some("log") => dump_log(
                &files,
                file,
                args.deep_iteration || args.print_data_log,
                args.print_data_log,
            )?,
            Some("index") => dump_index(&files, file, args.verify_index_only)?,
            Some("timeindex") => dump_time_index(&files, file, args.verify_index_only)?,
            _ => {
                return Err(usage(format!(
                    "{}: not a .log, .index or .timeindex file",
                    file.display()
                )))
            }
        }
    }
    Ok(())
}

/// From a segment file's name: `<base offset>.log`, or a remote segment's
/// `<base offset>-<segment id>.log`.
fn base_offset(path: &Path) -> Result<i64, CliError> {
    path.file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.split('-').next()?.parse().ok())
        .ok_or_else(|| {
            usage(format!(
                "{}: file name is not a base offset",
                path.display()
            ))
        })
}

fn show(b: Option<&[u8]>) -> String {
    b.map_or("null".to_string(), |v| {
        String::from_utf8_lossy(v).into_owned()
    })
}

fn dump_log(files: &Files, path: &Path, deep: bool, print_data: bool) -> CliResult {
    let data = files.read(path)?;
    println!("Log starting offset: {}", base_offset(path)?);
    let mut iter = BatchIter::new(&data);
    let mut position = 0usize;
    while let Some(item) = iter.next() {
        let Ok((h, bytes)) = item else {
            println!(
                "Found {} invalid bytes at the end of {}",
                data.len() - position,
                path.display()
            );
            break;
        };
        print_batch(&h, bytes, position);
        if deep {
            print_records(&h, bytes, print_data);
        }
        position = iter.position();
    }
    Ok(())
}

fn print_batch(h: &BatchHeader, bytes: &[u8], position: usize) {
    let last_sequence = if h.base_sequence >= 0 {
        h.base_sequence + h.last_offset_delta
    } else {
        -1
    };
    let ts = match h.timestamp_type() {
        TimestampType::CreateTime => "CreateTime",
        TimestampType::LogAppendTime => "LogAppendTime",
    };
    let valid = batch::verify_crc(bytes).is_ok();
    println!(
        "baseOffset: {} lastOffset: {} count: {} baseSequence: {} lastSequence: {} producerId: {} producerEpoch: {} partitionLeaderEpoch: {} isTransactional: {} isControl: {} position: {} {}: {} size: {} magic: {} compresscodec: {} crc: {} isvalid: {}",
        h.base_offset,
        h.last_offset(),
        h.record_count,
        h.base_sequence,
        last_sequence,
        h.producer_id,
        h.producer_epoch,
        h.partition_leader_epoch,
        h.is_transactional(),
        h.is_control(),
        position,
        ts,
        h.max_timestamp,
        h.total_size(),
        h.magic,
        h.compression().map_or("unknown", |c| c.name()),
        h.crc,
        valid
    );
}

fn print_records(h: &BatchHeader, bytes: &[u8], print_data: bool) {
    let result = batch::for_each_record(bytes, RecordLimits::default(), |r| {
        let ts = match h.timestamp_type() {
            TimestampType::LogAppendTime => h.max_timestamp,
            TimestampType::CreateTime => h.base_timestamp.wrapping_add(r.timestamp_delta),
        };
        let sequence = if h.base_sequence >= 0 {
            h.base_sequence + r.offset_delta
        } else {
            -1
        };
        let header_keys: Vec<&str> = r.headers().map(|(k, _)| k).collect();
        let mut line = format!(
            "| offset: {} CreateTime: {} keySize: {} valueSize: {} sequence: {} headerKeys: [{}]",
            h.base_offset + i64::from(r.offset_delta),
            ts,
            r.key.map_or(-1, |k| k.len() as i64),
            r.value.map_or(-1, |v| v.len() as i64),
            sequence,
            header_keys.join(",")
        );
        if print_data {
            line.push_str(&format!(" key: {} payload: {}", show(r.key), show(r.value)));
        }
        println!("{line}");
        Ok(())
    });
    if let Err(e) = result {
        println!("| cannot read the records of this batch: {e}");
    }
}

/// (last offset, position, max timestamp) of every batch in the segment next to `index`.
fn batches_of_segment(files: &Files, index: &Path) -> Result<Vec<(i64, usize, i64)>, CliError> {
    let log = index.with_extension("log");
    let data = files.read(&log)?;
    let mut out = Vec::new();
    let mut pos = 0usize;
    for item in BatchIter::new(&data) {
        let Ok((h, _)) = item else { break };
        out.push((h.last_offset(), pos, h.max_timestamp));
        pos += h.total_size();
    }
    Ok(out)
}

fn dump_index(files: &Files, path: &Path, verify_only: bool) -> CliResult {
    let data = files.read(path)?;
    let base = base_offset(path)?;
    let batches = if verify_only {
        batches_of_segment(files, path)?
    } else {
        Vec::new()
    };
    let mut mismatches = Vec::new();
    for e in data.chunks_exact(8) {
        let offset = base + i64::from(u32::from_be_bytes([e[0], e[1], e[2], e[3]]));
        let position = u32::from_be_bytes([e[4], e[5], e[6], e[7]]) as usize;
        if e == [0u8; 8] {
            break; // zero-filled preallocated tail: Kafka never indexes position 0
        }
        if verify_only {
            match batches.iter().find(|(_, p, _)| *p == position) {
                Some((last, _, _)) if *last == offset => {}
                Some((last, _, _)) => {
                    mismatches.push(format!("  Index offset: {offset}, log offset: {last}"))
                }
                None => mismatches.push(format!(
                    "  Index position {position} (offset {offset}) is not a batch boundary"
                )),
            }
        } else {
            println!("offset: {offset} position: {position}");
        }
    }
    if !mismatches.is_empty() {
        println!("Mismatches in :{}", path.display());
        for m in mismatches {
            println!("{m}");
        }
    }
    Ok(())
}

fn dump_time_index(files: &Files, path: &Path, verify_only: bool) -> CliResult {
    let data = files.read(path)?;
    let base = base_offset(path)?;
    let batches = if verify_only {
        batches_of_segment(files, path)?
    } else {
        Vec::new()
    };
    let mut previous = i64::MIN;
    let mut problems = Vec::new();
    for e in data.chunks_exact(12) {
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&e[..8]);
        let timestamp = i64::from_be_bytes(ts);
        let offset = base + i64::from(u32::from_be_bytes([e[8], e[9], e[10], e[11]]));
        if timestamp == 0 && offset == base {
            break; // zero-filled preallocated tail
        }
        if verify_only {
            if timestamp <= previous {
                problems.push(format!(
                    "  Found timestamp mismatch: timestamp {timestamp} after {previous}"
                ));
            }
            if !batches.iter().any(|(last, _, _)| *last == offset) {
                problems.push(format!(
                    "  Indexed offset {offset} is not the last offset of a batch"
                ));
            }
            previous = timestamp;
        } else {
            println!("timestamp: {timestamp} offset: {offset}");
        }
    }
    if !problems.is_empty() {
        println!("Mismatches in :{}", path.display());
        for p in problems {
            println!("{p}");
        }
    }
    Ok(())
}
