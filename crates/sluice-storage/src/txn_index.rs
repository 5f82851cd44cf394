//! Transactions as a partition sees them: the aborted ones (kept in memory, and on disk as
//! each segment's `.txnindex`, Kafka's format) that read_committed fetches must be told about,
//! and the ones a marker ended that are not yet stable (the marker is not below the high
//! watermark), which hold the last stable offset back as an open transaction does.
//!
//! `.txnindex` entry (34 bytes, big-endian): version i16 (0), producer id i64, first offset
//! i64, last offset i64 (the abort marker), last stable offset i64. An entry lives in the
//! segment that holds its marker.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use crate::error::{IoContext, LogError};
use crate::producer_state::CompletedTxn;
use crate::segment;

const ENTRY_BYTES: usize = 34;
const VERSION: i16 = 0;

/// One aborted transaction in a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    /// The last stable offset when it was aborted: a fetch up to here needs no later entry.
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&VERSION.to_be_bytes());
        out.extend_from_slice(&self.producer_id.to_be_bytes());
        out.extend_from_slice(&self.first_offset.to_be_bytes());
        out.extend_from_slice(&self.last_offset.to_be_bytes());
        out.extend_from_slice(&self.last_stable_offset.to_be_bytes());
    }

    fn decode(b: &[u8]) -> Option<Self> {
        let at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            i64::from_be_bytes(a)
        };
        (b.len() == ENTRY_BYTES && i16::from_be_bytes([b[0], b[1]]) == VERSION).then(|| Self {
            producer_id: at(2),
            first_offset: at(10),
            last_offset: at(18),
            last_stable_offset: at(26),
        })
    }
}

/// The entries of a `.txnindex` file's bytes (a remote copy's); unreadable ones skipped.
pub fn decode_entries(bytes: &[u8]) -> impl Iterator<Item = AbortedTxn> + '_ {
    bytes
        .chunks_exact(ENTRY_BYTES)
        .filter_map(AbortedTxn::decode)
}

#[derive(Debug, Default)]
pub struct TxnIndex {
    /// Aborted transactions by marker offset.
    aborted: BTreeMap<i64, AbortedTxn>,
    /// Transactions ended by a marker not yet known to be replicated: first offset -> marker.
    unstable: BTreeMap<i64, i64>,
}

impl TxnIndex {
    /// Read the `.txnindex` files of these segments (unreadable entries are skipped: the
    /// replay after the producer snapshot restores what matters).
    pub fn load(dir: &Path, bases: impl Iterator<Item = i64>) -> Result<Self, LogError> {
        let mut index = Self::default();
        for base in bases {
            let path = dir.join(segment::file_name(base, "txnindex"));
            let bytes = match fs::read(&path) {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(LogError::io(path, e)),
            };
            for a in bytes
                .chunks_exact(ENTRY_BYTES)
                .filter_map(AbortedTxn::decode)
            {
                index.aborted.insert(a.last_offset, a);
            }
        }
        Ok(index)
    }

    /// A marker ended a transaction; `first_ongoing` is the oldest transaction still open.
    /// Returns true when an aborted entry was added (the caller rewrites that segment's file).
    pub fn complete(&mut self, t: &CompletedTxn, first_ongoing: Option<i64>) -> bool {
        self.unstable.insert(t.first_offset, t.last_offset);
        if !t.aborted {
            return false;
        }
        let last_stable_offset = first_ongoing
            .unwrap_or(t.last_offset + 1)
            .min(t.last_offset + 1);
        self.aborted.insert(
            t.last_offset,
            AbortedTxn {
                producer_id: t.producer_id,
                first_offset: t.first_offset,
                last_offset: t.last_offset,
                last_stable_offset,
            },
        );
        true
    }

    /// The high watermark passed these markers: their transactions are stable.
    pub fn on_high_watermark(&mut self, hw: i64) {
        self.unstable.retain(|_, marker| *marker >= hw);
    }

    /// The first offset of the oldest ended-but-unstable transaction whose marker is at or
    /// above `hw`.
    pub fn first_unstable(&self, hw: i64) -> Option<i64> {
        self.unstable
            .iter()
            .find(|(_, marker)| **marker >= hw)
            .map(|(first, _)| *first)
    }

    /// Aborted transactions a fetch of `[start, upper)` must report (Kafka's rule: the marker
    /// at or after `start`, the data before `upper`; stop once an entry's last stable offset
    /// reaches `upper`).
    pub fn collect(&self, start: i64, upper: i64) -> Vec<AbortedTxn> {
        let mut out = Vec::new();
        for a in self.aborted.range(start..).map(|(_, a)| a) {
            if a.first_offset < upper {
                out.push(*a);
            }
            if a.last_stable_offset >= upper {
                break;
            }
        }
        out
    }

    /// Everything at and past `offset` is gone (truncation).
    pub fn truncate_to(&mut self, offset: i64) {
        self.aborted.retain(|last, _| *last < offset);
        self.unstable.retain(|first, _| *first < offset);
    }

    /// Segments below `base` were deleted.
    pub fn forget_before(&mut self, base: i64) {
        self.aborted.retain(|last, _| *last >= base);
    }

    pub fn clear(&mut self) {
        self.aborted.clear();
        self.unstable.clear();
    }

    /// Write the `.txnindex` of the segment covering `[base, next_base)` from memory (or
    /// remove it when it has no entry).
    pub fn write_segment(&self, dir: &Path, base: i64, next_base: i64) -> Result<(), LogError> {
        let path = dir.join(segment::file_name(base, "txnindex"));
        let mut bytes = Vec::new();
        for a in self.aborted.range(base..next_base).map(|(_, a)| a) {
            a.encode(&mut bytes);
        }
        if bytes.is_empty() {
            return match fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(LogError::io(path, e)),
                _ => Ok(()),
            };
        }
        // Unchanged: left alone, so a rewrite never puts an unsynced copy in place of a
        // durable one (a recovery rewrites every segment's).
        if fs::read(&path).is_ok_and(|old| old == bytes) {
            return Ok(());
        }
        let tmp = path.with_extension("txnindex.tmp");
        sluice_rt::disk::check(sluice_rt::disk::DiskOp::Write {
            path: &tmp,
            len: bytes.len() as u64,
        })
        .at(&tmp)?;
        fs::write(&tmp, &bytes).at(&tmp)?;
        sluice_rt::disk::rename(&tmp, &path).at(&path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(pid: i64, first: i64, last: i64, aborted: bool) -> CompletedTxn {
        CompletedTxn {
            producer_id: pid,
            first_offset: first,
            last_offset: last,
            aborted,
        }
    }

    #[test]
    fn aborted_entries_round_trip_and_are_collected_for_a_range() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = TxnIndex::default();
        assert!(t.complete(&done(1, 0, 5, true), None));
        assert!(!t.complete(&done(2, 6, 9, false), None));
        // Producer 3's transaction (from 10) is still open when 4's, from 12, aborts at 20.
        assert!(t.complete(&done(4, 12, 20, true), Some(10)));
        assert_eq!(t.collect(0, 30).len(), 2);
        assert_eq!(t.collect(6, 30), vec![t.aborted[&20]]);
        assert_eq!(t.aborted[&20].last_stable_offset, 10);
        // Data of the second aborted transaction starts at 12: a fetch up to 12 skips it.
        assert_eq!(t.collect(0, 12).len(), 1);
        // Unstable until the high watermark passes the marker.
        assert_eq!(t.first_unstable(5), Some(0));
        t.on_high_watermark(10);
        assert_eq!(t.first_unstable(10), Some(12));
        t.on_high_watermark(21);
        assert_eq!(t.first_unstable(21), None);
        t.write_segment(dir.path(), 0, 15).unwrap();
        t.write_segment(dir.path(), 15, i64::MAX).unwrap();
        let back = TxnIndex::load(dir.path(), [0, 15].into_iter()).unwrap();
        assert_eq!(back.aborted, t.aborted);
        let file = dir.path().join(segment::file_name(15, "txnindex"));
        assert_eq!(fs::metadata(&file).unwrap().len(), ENTRY_BYTES as u64);
        t.truncate_to(20);
        assert_eq!(t.collect(0, 30).len(), 1);
        t.write_segment(dir.path(), 15, i64::MAX).unwrap();
        assert!(!file.exists());
    }
}
