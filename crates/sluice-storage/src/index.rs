//! Sparse, memory-mapped indexes, byte-compatible with Kafka's.
//!
//! `.index` — 8-byte entries: `relative offset u32 BE, position u32 BE`. An entry maps the
//! *last* offset of a batch to the file position where that batch starts; entries are written
//! every `index.interval.bytes` of log. Offsets are relative to the segment's base offset.
//!
//! `.timeindex` — 12-byte entries: `timestamp i64 BE, relative offset u32 BE`, the largest
//! timestamp seen so far and the offset of the batch holding it; timestamps strictly
//! increase from entry to entry.
//!
//! The active segment's index files are preallocated to `segment.index.bytes` (sparse) and
//! trimmed to their entries when the segment stops being active or the log closes. After an
//! unclean shutdown the preallocated tail holds zeros, which is why the log rebuilds the
//! indexes of segments past the recovery point instead of trusting them.
#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::{Advice, MmapMut};

use crate::error::{IoContext, LogError};

/// A file of fixed-size entries, memory-mapped, appended in place.
struct MmapEntries<const N: usize> {
    path: PathBuf,
    /// Shared so the file can be fsynced without the log's lock (an fsync of the file also
    /// writes back the pages dirtied through the mapping).
    file: Arc<File>,
    map: Option<MmapMut>,
    entries: usize,
    capacity: usize,
}

impl<const N: usize> MmapEntries<N> {
    /// Open (or create) the file; existing entries are `len / N` rounded down.
    fn open(path: &Path) -> Result<Self, LogError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .at(path)?;
        let len = file.metadata().at(path)?.len() as usize;
        let mut this = Self {
            path: path.to_path_buf(),
            file: Arc::new(file),
            map: None,
            entries: len / N,
            capacity: len / N,
        };
        this.remap(len)?;
        Ok(this)
    }

    fn remap(&mut self, len: usize) -> Result<(), LogError> {
        self.map = None;
        self.file.set_len(len as u64).at(&self.path)?;
        self.capacity = len / N;
        if len > 0 {
            // SAFETY: the file is private to this broker's log directory and only resized
            // through this type, which drops the mapping first; nothing truncates it beneath
            // the mapping.
            let map = unsafe { MmapMut::map_mut(&self.file) }.at(&self.path)?;
            // Entries are touched a page at a time (appends) or at scattered pages (binary
            // search), never streamed. Without this hint the first touch of a preallocated,
            // still-sparse page reads ahead `read_ahead_kb` of holes — zero-filling up to
            // megabytes per fault, which at a thousand partitions was most of the broker's
            // CPU on produce.
            map.advise(Advice::Random).at(&self.path)?;
            self.map = Some(map);
        }
        Ok(())
    }

    /// Make room for `max_bytes / N` entries (the active segment's preallocation).
    fn preallocate(&mut self, max_bytes: u64) -> Result<(), LogError> {
        let len = (max_bytes as usize / N).max(self.entries) * N;
        if len != self.capacity * N {
            self.remap(len)?;
        }
        Ok(())
    }

    /// Shrink the file to exactly the entries in use.
    fn trim(&mut self) -> Result<(), LogError> {
        if self.capacity != self.entries {
            self.remap(self.entries * N)?;
        }
        Ok(())
    }

    fn is_full(&self) -> bool {
        self.entries >= self.capacity
    }

    fn entry(&self, i: usize) -> &[u8] {
        let map = self.map.as_ref().expect("entry index within a mapped file");
        &map[i * N..(i + 1) * N]
    }

    fn push(&mut self, bytes: [u8; N]) {
        debug_assert!(!self.is_full());
        let i = self.entries;
        let map = self.map.as_mut().expect("capacity implies a mapping");
        map[i * N..(i + 1) * N].copy_from_slice(&bytes);
        self.entries += 1;
    }

    fn truncate_entries(&mut self, n: usize) {
        self.entries = self.entries.min(n);
    }

    fn flush(&self) -> Result<(), LogError> {
        if let Some(map) = &self.map {
            map.flush().at(&self.path)?;
        }
        Ok(())
    }

    /// Index of the last entry whose key is <= target, by binary search on a monotonic key.
    fn floor(&self, target: i64, key: impl Fn(&[u8]) -> i64) -> Option<usize> {
        let (mut lo, mut hi) = (0usize, self.entries);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if key(self.entry(mid)) <= target {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo.checked_sub(1)
    }
}

fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn be_i64(b: &[u8]) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    i64::from_be_bytes(a)
}

/// Offset -> file position, every `index.interval.bytes`.
pub struct OffsetIndex {
    base_offset: i64,
    inner: MmapEntries<8>,
}

impl OffsetIndex {
    pub fn open(path: &Path, base_offset: i64) -> Result<Self, LogError> {
        Ok(Self {
            base_offset,
            inner: MmapEntries::open(path)?,
        })
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The index file, to fsync without the log's lock.
    pub fn file(&self) -> Arc<File> {
        Arc::clone(&self.inner.file)
    }

    pub fn entries(&self) -> usize {
        self.inner.entries
    }

    pub fn is_full(&self) -> bool {
        self.inner.is_full()
    }

    pub fn preallocate(&mut self, max_bytes: u64) -> Result<(), LogError> {
        self.inner.preallocate(max_bytes)
    }

    pub fn trim(&mut self) -> Result<(), LogError> {
        self.inner.trim()
    }

    pub fn flush(&self) -> Result<(), LogError> {
        self.inner.flush()
    }

    fn relative(&self, entry: &[u8]) -> i64 {
        self.base_offset
            .wrapping_add(i64::from(be_u32(&entry[0..4])))
    }

    /// The (offset, position) of entry `i`.
    pub fn get(&self, i: usize) -> (i64, u32) {
        let e = self.inner.entry(i);
        (self.relative(e), be_u32(&e[4..8]))
    }

    pub fn last(&self) -> Option<(i64, u32)> {
        self.entries().checked_sub(1).map(|i| self.get(i))
    }

    /// Append an entry; offsets and positions must increase.
    pub fn append(&mut self, offset: i64, position: u32) {
        debug_assert!(self.last().is_none_or(|(o, p)| o < offset && p < position));
        let rel = (offset - self.base_offset) as u32;
        let mut e = [0u8; 8];
        e[0..4].copy_from_slice(&rel.to_be_bytes());
        e[4..8].copy_from_slice(&position.to_be_bytes());
        self.inner.push(e);
    }

    /// The entry with the largest offset <= `target`, else (base offset, position 0): the
    /// place to start scanning for `target`.
    pub fn lookup(&self, target: i64) -> (i64, u32) {
        let base = self.base_offset;
        match self
            .inner
            .floor(target, |e| base + i64::from(be_u32(&e[0..4])))
        {
            Some(i) => self.get(i),
            None => (self.base_offset, 0),
        }
    }

    /// The entry with the largest position <= `position`: a batch start at or before it.
    pub fn floor_position(&self, position: u64) -> Option<(i64, u32)> {
        let target = i64::try_from(position).unwrap_or(i64::MAX);
        self.inner
            .floor(target, |e| i64::from(be_u32(&e[4..8])))
            .map(|i| self.get(i))
    }

    /// Drop entries whose offset is >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) {
        let base = self.base_offset;
        let keep = self
            .inner
            .floor(offset - 1, |e| base + i64::from(be_u32(&e[0..4])))
            .map_or(0, |i| i + 1);
        self.inner.truncate_entries(keep);
    }

    /// Drop entries whose position is >= `position`.
    pub fn truncate_to_position(&mut self, position: u32) {
        let keep = (0..self.entries())
            .take_while(|&i| self.get(i).1 < position)
            .count();
        self.inner.truncate_entries(keep);
    }

    pub fn clear(&mut self) {
        self.inner.truncate_entries(0);
    }

    /// Entries must strictly increase and stay after the base offset; a zero-filled tail
    /// left by a crash fails this.
    pub fn is_sane(&self, log_size: u64) -> bool {
        let mut prev: Option<(i64, u32)> = None;
        for i in 0..self.entries() {
            let (o, p) = self.get(i);
            if u64::from(p) >= log_size.max(1) || prev.is_some_and(|(po, pp)| po >= o || pp >= p) {
                return false;
            }
            prev = Some((o, p));
        }
        true
    }
}

/// Timestamp -> offset, monotonic in timestamp.
pub struct TimeIndex {
    base_offset: i64,
    inner: MmapEntries<12>,
}

impl TimeIndex {
    pub fn open(path: &Path, base_offset: i64) -> Result<Self, LogError> {
        Ok(Self {
            base_offset,
            inner: MmapEntries::open(path)?,
        })
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The index file, to fsync without the log's lock.
    pub fn file(&self) -> Arc<File> {
        Arc::clone(&self.inner.file)
    }

    pub fn entries(&self) -> usize {
        self.inner.entries
    }

    pub fn is_full(&self) -> bool {
        self.inner.is_full()
    }

    pub fn preallocate(&mut self, max_bytes: u64) -> Result<(), LogError> {
        self.inner.preallocate(max_bytes)
    }

    pub fn trim(&mut self) -> Result<(), LogError> {
        self.inner.trim()
    }

    pub fn flush(&self) -> Result<(), LogError> {
        self.inner.flush()
    }

    /// The (timestamp, offset) of entry `i`.
    pub fn get(&self, i: usize) -> (i64, i64) {
        let e = self.inner.entry(i);
        (
            be_i64(&e[0..8]),
            self.base_offset.wrapping_add(i64::from(be_u32(&e[8..12]))),
        )
    }

    pub fn last(&self) -> Option<(i64, i64)> {
        self.entries().checked_sub(1).map(|i| self.get(i))
    }

    /// Append if `timestamp` is larger than the last entry's (Kafka's `maybeAppend`).
    pub fn maybe_append(&mut self, timestamp: i64, offset: i64) {
        if self.is_full() || self.last().is_some_and(|(t, _)| t >= timestamp) {
            return;
        }
        let mut e = [0u8; 12];
        e[0..8].copy_from_slice(&timestamp.to_be_bytes());
        e[8..12].copy_from_slice(&((offset - self.base_offset) as u32).to_be_bytes());
        self.inner.push(e);
    }

    /// The entry with the largest timestamp <= `target`, if any.
    pub fn lookup(&self, target: i64) -> Option<(i64, i64)> {
        self.inner
            .floor(target, |e| be_i64(&e[0..8]))
            .map(|i| self.get(i))
    }

    /// Drop entries whose offset is >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) {
        let keep = (0..self.entries())
            .take_while(|&i| self.get(i).1 < offset)
            .count();
        self.inner.truncate_entries(keep);
    }

    pub fn clear(&mut self) {
        self.inner.truncate_entries(0);
    }

    pub fn is_sane(&self) -> bool {
        let mut prev: Option<(i64, i64)> = None;
        for i in 0..self.entries() {
            let (t, o) = self.get(i);
            if prev.is_some_and(|(pt, po)| pt >= t || po > o) {
                return false;
            }
            prev = Some((t, o));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_index_lookup_truncate_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000100.index");
        let mut idx = OffsetIndex::open(&path, 100).unwrap();
        idx.preallocate(80).unwrap();
        assert_eq!(idx.lookup(150), (100, 0));
        for i in 0..10 {
            idx.append(100 + i * 10 + 9, (i * 1000 + 500) as u32);
        }
        assert!(idx.is_full());
        assert_eq!(idx.lookup(105), (100, 0));
        assert_eq!(idx.lookup(109), (109, 500));
        assert_eq!(idx.lookup(125), (119, 1500));
        assert_eq!(idx.lookup(10_000), (199, 9500));
        idx.truncate_to(130);
        assert_eq!(idx.last(), Some((129, 2500)));
        idx.trim().unwrap();
        drop(idx);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 3 * 8);
        let idx = OffsetIndex::open(&path, 100).unwrap();
        assert_eq!(idx.entries(), 3);
        assert!(idx.is_sane(10_000));
        // Kafka's byte format: relative offset then position, both big-endian u32.
        let raw = std::fs::read(&path).unwrap();
        assert_eq!(&raw[0..8], &[0, 0, 0, 9, 0, 0, 0x01, 0xf4]);
    }

    #[test]
    fn zero_filled_tail_is_not_sane() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.index");
        let mut idx = OffsetIndex::open(&path, 0).unwrap();
        idx.preallocate(8 * 4).unwrap();
        idx.append(5, 100);
        drop(idx); // not trimmed: a crash leaves the preallocated zeros behind
        let idx = OffsetIndex::open(&path, 0).unwrap();
        assert_eq!(idx.entries(), 4);
        assert!(!idx.is_sane(1000));
    }

    #[test]
    fn time_index_keeps_increasing_timestamps_only() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = TimeIndex::open(&dir.path().join("0.timeindex"), 0).unwrap();
        idx.preallocate(12 * 10).unwrap();
        idx.maybe_append(1000, 9);
        idx.maybe_append(900, 19);
        idx.maybe_append(2000, 29);
        assert_eq!(idx.entries(), 2);
        assert_eq!(idx.lookup(999), None);
        assert_eq!(idx.lookup(1500), Some((1000, 9)));
        assert_eq!(idx.lookup(5000), Some((2000, 29)));
        idx.truncate_to(20);
        assert_eq!(idx.last(), Some((1000, 9)));
        assert!(idx.is_sane());
    }
}
