//! Log compaction (`cleanup.policy=compact`): keep the latest record of every key, drop
//! tombstones (null values) once they are older than `delete.retention.ms`, never touch the
//! active segment (nor anything from an open transaction on), drop the records of aborted
//! transactions (they never supersede a committed value), keep transaction markers, and keep
//! every retained record at its original offset (gaps allowed).
//!
//! Three steps so appends and reads are not blocked while cleaning:
//! 1. [`Log::compaction_input`] (under the log's lock, quick): the segments to clean and
//!    their open files.
//! 2. [`compact`] (no lock): build the key → latest offset map over the dirty part, rewrite
//!    each segment to `<base>.log.cleaned` (+ `.index.cleaned`, `.timeindex.cleaned`).
//! 3. [`Log::install_compacted`] (under the lock, quick): swap the files in. The old index
//!    files go first, then the log is renamed over the old one, then the new indexes: a
//!    crash at any point leaves either the old segment or the new one, never a stale index
//!    (a missing index is rebuilt empty, which only slows lookups).

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_protocol::batch::{
    self, BatchBuilder, BatchHeader, BatchIter, RecordLimits, TimestampType,
};

use crate::error::{IoContext, LogError};
use crate::segment::file_name;

/// A segment as the cleaner sees it.
#[derive(Clone, Debug)]
pub struct SegmentToClean {
    pub base_offset: i64,
    pub file: Arc<File>,
    pub size: u64,
}

/// What [`compact`] needs: the segments below the active one (or below the min compaction
/// lag), and where the dirty part starts.
#[derive(Clone, Debug)]
pub struct CompactionInput {
    pub dir: PathBuf,
    pub segments: Vec<SegmentToClean>,
    /// Offsets at or after this were never cleaned.
    pub first_dirty_offset: i64,
    /// The end of the cleanable range (exclusive).
    pub end_offset: i64,
    pub delete_retention_ms: i64,
    pub index_interval_bytes: u64,
    /// The log's truncation count when this was taken.
    pub truncations: u64,
    /// Aborted transactions in the range: their records are dropped and never supersede.
    pub aborted: Vec<crate::txn_index::AbortedTxn>,
}

impl CompactionInput {
    /// Whether a batch belongs to an aborted transaction.
    fn is_aborted(&self, h: &BatchHeader) -> bool {
        h.is_transactional()
            && !h.is_control()
            && self.aborted.iter().any(|a| {
                a.producer_id == h.producer_id
                    && h.base_offset >= a.first_offset
                    && h.base_offset < a.last_offset
            })
    }
}

/// Cleaned copies of segments, waiting to be installed.
#[derive(Debug)]
pub struct CompactionOutput {
    /// (base offset, size before, size after) per rewritten segment.
    pub segments: Vec<(i64, u64, u64)>,
    /// Everything below this offset is now clean.
    pub cleaned_up_to: i64,
    pub records_removed: u64,
}

pub fn cleaned_path(dir: &Path, base: i64, ext: &str) -> PathBuf {
    dir.join(format!("{}.cleaned", file_name(base, ext)))
}

fn read_segment(seg: &SegmentToClean) -> Result<Vec<u8>, LogError> {
    let mut buf = vec![0u8; seg.size as usize];
    seg.file
        .read_exact_at(&mut buf, 0)
        .map_err(|e| LogError::io(format!("segment {}", seg.base_offset), e))?;
    Ok(buf)
}

/// The latest offset of every key in `[first_dirty, end)`.
fn build_offset_map(input: &CompactionInput) -> Result<HashMap<Vec<u8>, i64>, LogError> {
    let mut map = HashMap::new();
    for seg in &input.segments {
        let next_base = input
            .segments
            .iter()
            .map(|s| s.base_offset)
            .find(|b| *b > seg.base_offset)
            .unwrap_or(input.end_offset);
        if next_base <= input.first_dirty_offset {
            continue;
        }
        let data = read_segment(seg)?;
        for item in BatchIter::new(&data) {
            let Ok((h, bytes)) = item else { break };
            if h.is_control()
                || h.last_offset() < input.first_dirty_offset
                || h.base_offset >= input.end_offset
                || input.is_aborted(&h)
            {
                continue;
            }
            batch::for_each_record(bytes, RecordLimits::default(), |r| {
                let offset = h.base_offset.wrapping_add(i64::from(r.offset_delta));
                if offset >= input.first_dirty_offset && offset < input.end_offset {
                    if let Some(k) = r.key {
                        map.insert(k.to_vec(), offset);
                    }
                }
                Ok(())
            })
            .map_err(LogError::Corrupt)?;
        }
    }
    Ok(map)
}

/// Rewrite one batch keeping only the records `keep` accepts; None if none remain.
fn rewrite_batch(
    h: &BatchHeader,
    bytes: &[u8],
    keep: &mut impl FnMut(i64, Option<&[u8]>, bool, i64) -> bool,
    removed: &mut u64,
) -> Result<Option<Vec<u8>>, LogError> {
    let mut builder = BatchBuilder::new(h.compression().map_err(|e| LogError::Corrupt(e.into()))?)
        .with_producer(h.producer_id, h.producer_epoch, h.base_sequence)
        .with_transactional(h.is_transactional())
        .with_timestamp_type(h.timestamp_type());
    let mut dropped = 0u64;
    batch::for_each_record(bytes, RecordLimits::default(), |r| {
        let offset = h.base_offset.wrapping_add(i64::from(r.offset_delta));
        let ts = match h.timestamp_type() {
            TimestampType::LogAppendTime => h.max_timestamp,
            TimestampType::CreateTime => h.base_timestamp.wrapping_add(r.timestamp_delta),
        };
        if keep(offset, r.key, r.value.is_none(), ts) {
            let headers: Vec<(&str, Option<&[u8]>)> = r.headers().collect();
            builder.append_at(r.offset_delta, ts, r.key, r.value, &headers);
        } else {
            dropped += 1;
        }
        Ok(())
    })
    .map_err(LogError::Corrupt)?;
    *removed += dropped;
    if dropped == 0 {
        return Ok(Some(bytes.to_vec()));
    }
    if builder.is_empty() {
        return Ok(None);
    }
    builder.extend_last_offset_delta(h.last_offset_delta);
    let mut out = builder
        .build(h.base_offset)
        .map_err(|e| LogError::io(format!("batch {}", h.base_offset), e))?;
    batch::set_partition_leader_epoch(&mut out, h.partition_leader_epoch);
    Ok(Some(out))
}

/// Write the cleaned copies of the input's segments next to them.
pub fn compact(input: &CompactionInput, now_ms: i64) -> Result<CompactionOutput, LogError> {
    let latest = build_offset_map(input)?;
    let mut out = CompactionOutput {
        segments: Vec::new(),
        cleaned_up_to: input.end_offset,
        records_removed: 0,
    };
    for seg in &input.segments {
        let data = read_segment(seg)?;
        let mut cleaned = Vec::with_capacity(data.len());
        let mut index = Vec::new();
        let mut time_index: Vec<u8> = Vec::new();
        let mut since_index = 0u64;
        let mut max_ts = -1i64;
        let mut keep = |offset: i64, key: Option<&[u8]>, tombstone: bool, ts: i64| -> bool {
            if offset >= input.end_offset {
                return true;
            }
            let latest_for_key = key.and_then(|k| latest.get(k)).copied();
            if latest_for_key.is_some_and(|l| l > offset) {
                return false; // superseded by a newer record of the same key
            }
            !(tombstone && ts < now_ms.saturating_sub(input.delete_retention_ms))
        };
        for item in BatchIter::new(&data) {
            let Ok((h, bytes)) = item else { break };
            let rewritten = if h.is_control() {
                Some(bytes.to_vec())
            } else if h.base_offset < input.end_offset && input.is_aborted(&h) {
                out.records_removed += h.record_count.max(0) as u64;
                None
            } else {
                rewrite_batch(&h, bytes, &mut keep, &mut out.records_removed)?
            };
            let Some(b) = rewritten else { continue };
            let position = cleaned.len() as u32;
            let header = BatchHeader::parse(&b).map_err(LogError::Corrupt)?;
            if since_index > input.index_interval_bytes {
                index.extend_from_slice(
                    &((header.last_offset() - seg.base_offset) as u32).to_be_bytes(),
                );
                index.extend_from_slice(&position.to_be_bytes());
                if header.max_timestamp > max_ts {
                    time_index.extend_from_slice(&header.max_timestamp.to_be_bytes());
                    time_index.extend_from_slice(
                        &((header.last_offset() - seg.base_offset) as u32).to_be_bytes(),
                    );
                }
                since_index = 0;
            }
            max_ts = max_ts.max(header.max_timestamp);
            since_index += b.len() as u64;
            cleaned.extend_from_slice(&b);
        }
        let write = |ext: &str, bytes: &[u8]| -> Result<(), LogError> {
            let path = cleaned_path(&input.dir, seg.base_offset, ext);
            sluice_rt::disk::check(sluice_rt::disk::DiskOp::Write {
                path: &path,
                len: bytes.len() as u64,
            })
            .at(&path)?;
            let f = File::create(&path).at(&path)?;
            f.write_all_at(bytes, 0).at(&path)?;
            sluice_rt::disk::sync_all(&f, &path).at(&path)
        };
        write("log", &cleaned)?;
        write("index", &index)?;
        write("timeindex", &time_index)?;
        out.segments
            .push((seg.base_offset, seg.size, cleaned.len() as u64));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Log, LogConfig};
    use sluice_protocol::compression::Compression;
    use sluice_protocol::types::TopicPartition;

    fn batch(records: &[(&str, Option<&str>)], ts: i64) -> Vec<u8> {
        let mut b = BatchBuilder::new(Compression::Gzip);
        for (k, v) in records {
            b.append(ts, Some(k.as_bytes()), v.map(str::as_bytes), &[]);
        }
        b.build(0).unwrap()
    }

    fn live(log: &Log) -> Vec<(i64, String, Option<String>)> {
        let mut out = Vec::new();
        let mut next = log.log_start_offset();
        while next < log.log_end_offset() {
            let Some(slice) = log
                .read(next, 1 << 20, log.log_end_offset(), true)
                .unwrap()
                .slice
            else {
                break;
            };
            let mut buf = Vec::new();
            slice.read_into(&mut buf).unwrap();
            for item in BatchIter::new(&buf) {
                let Ok((h, b)) = item else { break };
                for r in batch::decode_records(b, RecordLimits::default()).unwrap() {
                    if r.offset >= next {
                        out.push((
                            r.offset,
                            String::from_utf8(r.key.unwrap().to_vec()).unwrap(),
                            r.value.map(|v| String::from_utf8(v.to_vec()).unwrap()),
                        ));
                    }
                }
                next = h.next_offset();
            }
        }
        out
    }

    #[test]
    fn aborted_records_never_supersede_and_open_transactions_stop_the_cleaner() {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            segment_bytes: 300,
            cleanup_compact: true,
            cleanup_delete: false,
            ..LogConfig::default()
        };
        let now = 1_700_000_000_000;
        let mut log = Log::create(
            dir.path(),
            TopicPartition::new("c", 0),
            [0; 16],
            config,
            now,
        )
        .unwrap();
        let txn = |pid: i64, seq: i32, value: &str| {
            let mut b = BatchBuilder::new(sluice_protocol::compression::Compression::None)
                .with_producer(pid, 0, seq)
                .with_transactional(true);
            b.append(now, Some(b"k"), Some(value.as_bytes()), &[]);
            b.build(0).unwrap()
        };
        log.append_as_leader(batch(&[("k", Some("committed"))], now), 0, now)
            .unwrap();
        // Producer 9 writes k in a transaction that aborts: the committed value must stay.
        log.append_as_leader(txn(9, 0, "aborted"), 0, now).unwrap();
        let marker = crate::Marker {
            producer_id: 9,
            epoch: 0,
            commit: false,
            coordinator_epoch: 0,
        };
        log.append_marker(&marker, 0, now).unwrap();
        for i in 0..6 {
            log.append_as_leader(batch(&[("filler", Some(&format!("{i}")))], now), 0, now)
                .unwrap();
        }
        log.roll(now).unwrap();
        // Producer 10's transaction is still open: nothing from its segment on is cleaned.
        let open = log.append_as_leader(txn(10, 0, "open"), 0, now).unwrap();
        log.roll(now).unwrap();
        log.append_as_leader(batch(&[("k", Some("later"))], now), 0, now)
            .unwrap();
        log.roll(now).unwrap();
        let input = log.compaction_input(0, now).unwrap();
        assert!(input.end_offset <= open.first_offset, "{input:?}");
        let output = compact(&input, now).unwrap();
        log.install_compacted(&input, &output, now).unwrap();
        let records = live(&log);
        let values: Vec<&str> = records
            .iter()
            .filter(|(_, k, _)| k == "k")
            .filter_map(|(_, _, v)| v.as_deref())
            .collect();
        assert_eq!(values, vec!["committed", "open", "later"], "{records:?}");
    }

    #[test]
    fn keeps_the_latest_value_per_key_at_its_offset() {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            segment_bytes: 300,
            cleanup_compact: true,
            cleanup_delete: false,
            ..LogConfig::default()
        };
        let now = 1_700_000_000_000;
        let mut log = Log::create(
            dir.path(),
            TopicPartition::new("c", 0),
            [0; 16],
            config,
            now,
        )
        .unwrap();
        for round in 0..10 {
            let v = format!("v{round}");
            log.append_as_leader(
                batch(&[("a", Some(&v)), ("b", Some(&v)), ("c", Some(&v))], now),
                0,
                now,
            )
            .unwrap();
        }
        // A tombstone for "b", old enough to be removed, and a fresh one for "c".
        log.append_as_leader(batch(&[("b", None)], now - 200_000_000), 0, now)
            .unwrap();
        log.append_as_leader(batch(&[("c", None)], now), 0, now)
            .unwrap();
        log.roll(now).unwrap();
        log.append_as_leader(batch(&[("a", Some("active"))], now), 0, now)
            .unwrap();
        let end = log.log_end_offset();
        let input = log.compaction_input(0, now).unwrap();
        let output = compact(&input, now).unwrap();
        assert!(output.records_removed > 20);
        log.install_compacted(&input, &output, now).unwrap();
        let records = live(&log);
        // a's last pre-active value, then c's fresh tombstone, then the active segment.
        assert_eq!(
            records,
            vec![
                (27, "a".into(), Some("v9".into())),
                (31, "c".into(), None),
                (32, "a".into(), Some("active".into())),
            ]
        );
        assert_eq!(log.log_end_offset(), end);
        // Offsets survive a reopen, indexes included.
        drop(log);
        let log = Log::open(
            &dir.path().join("c-0"),
            TopicPartition::new("c", 0),
            LogConfig::default(),
            crate::log::OpenOptions {
                clean_shutdown: false,
                recovery_point: 0,
                log_start_offset: 0,
                now_ms: now,
            },
        )
        .unwrap();
        assert_eq!(live(&log).len(), 3);
        assert!(std::fs::read_dir(dir.path().join("c-0"))
            .unwrap()
            .all(|e| !e
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".cleaned")));
    }
}
