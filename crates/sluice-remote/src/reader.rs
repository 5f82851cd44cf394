//! [`RemoteReader`]: whole batches of a remote segment from an offset, for fetches below the
//! local log start.
//!
//! A read looks the offset up in the segment's remote offset index (cached in memory), then
//! reads one *chunk* of the `.log` object: chunks start at offset-index entries (which are
//! batch starts), the entry at or before each multiple of `chunk_bytes`, so every chunk is
//! whole batches and every reader maps a position to the same chunk (sequential consumers,
//! and many consumers of the same range, share one GET per chunk). A chunk is checked before
//! it is cached (framing, CRC32C of every batch, offsets inside the segment and increasing),
//! written to the local cache directory, and served from there as a file range, like a local
//! segment. A corrupt object is refused, never served.
//!
//! Remote `.index` entries (8 bytes, big-endian): offset relative to the segment's base u32,
//! position u32 (Kafka's format, as the local index). `.txnindex` entries: see
//! `sluice_storage::txn_index`.

use std::sync::Arc;

use bytes::Bytes;
use sluice_protocol::batch::{
    for_each_record, verify_crc, BatchHeader, BatchIter, RecordLimits, TimestampType,
    BATCH_HEADER_LEN,
};
use sluice_storage::txn_index::AbortedTxn;
use sluice_storage::FileSlice;

use crate::cache::{CacheDir, CachedRange, Lru};
use crate::error::RemoteError;
use crate::layout::SegmentKey;
use crate::store::RemoteStore;

/// What a reader must know of a remote segment (from the remote log metadata).
#[derive(Clone, Debug)]
pub struct RemoteSegmentRef {
    pub key: SegmentKey,
    /// The segment's first and last offsets.
    pub base_offset: i64,
    pub end_offset: i64,
    /// Size of its `.log` object.
    pub size_bytes: u64,
}

/// Sizes of the caches.
#[derive(Clone, Copy, Debug)]
pub struct ReaderConfig {
    /// `remote.log.reader.chunk.bytes`
    pub chunk_bytes: u64,
    /// `remote.log.cache.bytes`: chunks on local disk.
    pub cache_bytes: u64,
    /// `remote.log.index.cache.bytes`: offset and transaction indexes in memory.
    pub index_cache_bytes: u64,
}

pub struct RemoteReader {
    store: RemoteStore,
    dir: CacheDir,
    chunks: Lru<CachedRange>,
    indexes: Lru<Bytes>,
    chunk_bytes: u64,
}

/// The bytes of one read.
#[derive(Clone, Debug)]
pub struct RemoteRead {
    pub slice: FileSlice,
    /// The offset after the last batch read.
    pub next_offset: i64,
}

impl RemoteReader {
    pub fn new(
        store: RemoteStore,
        cache_dir: &std::path::Path,
        config: ReaderConfig,
    ) -> Result<Self, RemoteError> {
        Ok(Self {
            store,
            dir: CacheDir::create(cache_dir)?,
            chunks: Lru::new(config.cache_bytes),
            indexes: Lru::new(config.index_cache_bytes),
            chunk_bytes: config.chunk_bytes.max(BATCH_HEADER_LEN as u64),
        })
    }

    pub fn store(&self) -> &RemoteStore {
        &self.store
    }

    /// GETs of the store this reader made (chunks and indexes).
    pub fn fetches(&self) -> u64 {
        self.chunks.fetches() + self.indexes.fetches()
    }

    /// Bytes of chunks cached on local disk.
    pub fn cached_bytes(&self) -> u64 {
        self.chunks.weight()
    }

    /// Drop what is cached of a deleted segment.
    pub fn forget(&self, key: &SegmentKey) {
        let prefix = key.object("");
        self.chunks.forget_prefix(&prefix);
        self.indexes.forget_prefix(&prefix);
    }

    /// Drop what is cached of one deleted object (by its key).
    pub fn forget_object(&self, key: &str) {
        self.chunks.forget_prefix(key);
        self.indexes.forget_prefix(key);
    }

    async fn index(&self, seg: &RemoteSegmentRef, suffix: &str) -> Result<Arc<Bytes>, RemoteError> {
        let key = seg.key.object(suffix);
        self.indexes
            .get_or_fill(&key, || async {
                Ok(self.store.get(&key).await?.unwrap_or_default())
            })
            .await
    }

    /// Whole batches from the one holding `offset` (at or after it), at most `max_bytes`
    /// but at least one batch when `min_one_batch`, never past `upper_bound` (exclusive).
    /// None when the segment has nothing at or after `offset` below the bound.
    pub async fn read(
        &self,
        seg: &RemoteSegmentRef,
        offset: i64,
        max_bytes: u64,
        upper_bound: i64,
        min_one_batch: bool,
    ) -> Result<Option<RemoteRead>, RemoteError> {
        if offset > seg.end_offset || offset >= upper_bound {
            return Ok(None);
        }
        let index = self.index(seg, "index").await?;
        let idx = OffsetIndexView::new(&index, seg)?;
        let mut position = idx.position_for(offset);
        let log_key = seg.key.object("log");
        loop {
            let (start, end) = idx.chunk_around(position, self.chunk_bytes);
            let chunk = self
                .chunks
                .get_or_fill(&format!("{log_key}@{start}"), || async {
                    let bytes = self.store.get_range(&log_key, start..end).await?;
                    let batches = check_chunk(&bytes, seg, end - start).map_err(|reason| {
                        RemoteError::Corrupt {
                            key: format!("{log_key} bytes {start}..{end}"),
                            reason,
                        }
                    })?;
                    self.dir.store(bytes, batches).await
                })
                .await?;
            // The index names the batch *ending* at or before the offset: the one holding
            // it may start the next chunk.
            let past_chunk = chunk.batches.last().is_none_or(|(last, _)| *last < offset);
            if past_chunk && end < seg.size_bytes {
                position = end;
                continue;
            }
            return Ok(pick_batches(
                &chunk,
                offset,
                max_bytes,
                upper_bound,
                min_one_batch,
            ));
        }
    }

    /// The first record of `seg` at or after `min_offset` whose timestamp is at least
    /// `target`: (offset, timestamp). The remote time index says where to start; batches are
    /// read from there (through the chunk cache) and their records looked at.
    pub async fn offset_for_timestamp(
        &self,
        seg: &RemoteSegmentRef,
        target: i64,
        min_offset: i64,
    ) -> Result<Option<(i64, i64)>, RemoteError> {
        let times = self.index(seg, "timeindex").await?;
        // Entries (12 bytes): the largest timestamp so far (i64) at an offset relative to the
        // base (u32). Every record up to an entry's offset is no later than its timestamp.
        let entries: Vec<(i64, i64)> = times
            .chunks_exact(12)
            .map(|e| {
                let mut ts = [0u8; 8];
                ts.copy_from_slice(&e[..8]);
                let rel = u32::from_be_bytes([e[8], e[9], e[10], e[11]]);
                (i64::from_be_bytes(ts), seg.base_offset + i64::from(rel))
            })
            .collect();
        let before = entries.partition_point(|(ts, _)| *ts < target);
        let mut offset = before
            .checked_sub(1)
            .map_or(seg.base_offset, |i| entries[i].1)
            .max(min_offset)
            .max(seg.base_offset);
        let mut buf = Vec::new();
        while offset <= seg.end_offset {
            let Some(read) = self.read(seg, offset, 1 << 20, i64::MAX, true).await? else {
                return Ok(None);
            };
            buf.clear();
            read.slice
                .read_into(&mut buf)
                .map_err(|e| RemoteError::io(std::path::Path::new("remote-cache"), e))?;
            for (h, bytes) in BatchIter::new(&buf).map_while(Result::ok) {
                if h.max_timestamp < target || h.last_offset() < min_offset {
                    continue;
                }
                let mut found = None;
                let _ = for_each_record(bytes, RecordLimits::default(), |r| {
                    let o = h.base_offset.wrapping_add(i64::from(r.offset_delta));
                    let ts = match h.timestamp_type() {
                        TimestampType::LogAppendTime => h.max_timestamp,
                        TimestampType::CreateTime => {
                            h.base_timestamp.wrapping_add(r.timestamp_delta)
                        }
                    };
                    if found.is_none() && ts >= target && o >= min_offset {
                        found = Some((o, ts));
                    }
                    Ok(())
                });
                if found.is_some() {
                    return Ok(found);
                }
            }
            offset = read.next_offset;
        }
        Ok(None)
    }

    /// The aborted transactions of `segs` (a remote segment and those after it, in order)
    /// that overlap `[start, upper)`; stops after the first segment whose entries reach past
    /// `upper`, as Kafka's collection does.
    pub async fn aborted_txns(
        &self,
        segs: &[RemoteSegmentRef],
        start: i64,
        upper: i64,
    ) -> Result<(Vec<AbortedTxn>, bool), RemoteError> {
        let mut out = Vec::new();
        for seg in segs {
            let bytes = self.index(seg, "txnindex").await?;
            let mut complete = false;
            for e in sluice_storage::txn_index::decode_entries(&bytes) {
                if e.last_offset >= start && e.first_offset < upper {
                    out.push(e);
                }
                complete |= e.last_stable_offset >= upper;
            }
            if complete {
                return Ok((out, true));
            }
        }
        Ok((out, false))
    }
}

/// A remote `.index` as read, checked for shape.
struct OffsetIndexView<'a> {
    entries: &'a [u8],
    base: i64,
    size: u64,
}

impl<'a> OffsetIndexView<'a> {
    fn new(bytes: &'a [u8], seg: &RemoteSegmentRef) -> Result<Self, RemoteError> {
        let corrupt = |reason: &str| RemoteError::Corrupt {
            key: seg.key.object("index"),
            reason: reason.into(),
        };
        if bytes.len() % 8 != 0 {
            return Err(corrupt("length is not a multiple of 8"));
        }
        let v = Self {
            entries: bytes,
            base: seg.base_offset,
            size: seg.size_bytes,
        };
        let mut last = (-1i64, 0u64);
        for i in 0..v.len() {
            let (o, p) = v.get(i);
            if o <= last.0 || p < last.1 || p >= v.size.max(1) {
                return Err(corrupt("entries out of order or past the segment"));
            }
            last = (o, p);
        }
        Ok(v)
    }

    fn len(&self) -> usize {
        self.entries.len() / 8
    }

    fn get(&self, i: usize) -> (i64, u64) {
        let e = &self.entries[i * 8..i * 8 + 8];
        let rel = u32::from_be_bytes([e[0], e[1], e[2], e[3]]);
        let pos = u32::from_be_bytes([e[4], e[5], e[6], e[7]]);
        (self.base + i64::from(rel), u64::from(pos))
    }

    /// The position of the last indexed batch starting at or before `offset` (0: none).
    fn position_for(&self, offset: i64) -> u64 {
        self.last_position_where(|(o, _)| o <= offset)
    }

    /// The last indexed position at or before `position` (0: none).
    fn floor_position(&self, position: u64) -> u64 {
        self.last_position_where(|(_, p)| p <= position)
    }

    /// The position of the last entry for which `below` holds (entries are sorted, so it
    /// holds for a prefix of them); 0 when it holds for none.
    fn last_position_where(&self, below: impl Fn((i64, u64)) -> bool) -> u64 {
        let (mut lo, mut hi) = (0usize, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if below(self.get(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo.checked_sub(1).map_or(0, |i| self.get(i).1)
    }

    /// The chunk holding the batch at `position`: chunk starts are the indexed positions at
    /// or before each multiple of `chunk`, so the same for every reader.
    fn chunk_around(&self, position: u64, chunk: u64) -> (u64, u64) {
        let k = position / chunk;
        let next = self.floor_position((k + 1) * chunk);
        let start = if next <= position {
            next
        } else {
            self.floor_position(k * chunk)
        };
        let mut j = k + 1;
        loop {
            let s = self.floor_position(j * chunk);
            if s > position {
                return (start, s);
            }
            if j * chunk >= self.size {
                return (start, self.size);
            }
            j += 1;
        }
    }
}

/// Check a chunk of a remote `.log`: whole batches exactly, each CRC-valid, offsets inside
/// the segment and increasing. Returns (last offset, position) of each batch.
fn check_chunk(
    bytes: &[u8],
    seg: &RemoteSegmentRef,
    expected_len: u64,
) -> Result<Vec<(i64, u32)>, String> {
    if bytes.len() as u64 != expected_len {
        return Err(format!(
            "{} bytes where {expected_len} were asked",
            bytes.len()
        ));
    }
    let mut batches = Vec::new();
    let mut pos = 0usize;
    let mut next = seg.base_offset;
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        if rest.len() < BATCH_HEADER_LEN {
            return Err(format!("a torn batch header at {pos}"));
        }
        let h = BatchHeader::parse(&rest[..BATCH_HEADER_LEN])
            .map_err(|e| format!("batch at {pos}: {e}"))?;
        let size = h.total_size();
        if size > rest.len() {
            return Err(format!("a batch at {pos} runs past the chunk"));
        }
        verify_crc(&rest[..size]).map_err(|e| format!("batch at {pos}: {e}"))?;
        if h.base_offset < seg.base_offset || h.last_offset() > seg.end_offset {
            return Err(format!(
                "batch at {pos} holds offsets {}..={} outside the segment {}..={}",
                h.base_offset,
                h.last_offset(),
                seg.base_offset,
                seg.end_offset
            ));
        }
        if !batches.is_empty() && h.base_offset < next {
            return Err(format!("offsets go backwards at {pos}"));
        }
        next = h.next_offset();
        batches.push((h.last_offset(), pos as u32));
        pos += size;
    }
    Ok(batches)
}

/// The batches of `chunk` to answer a read with.
fn pick_batches(
    chunk: &Arc<CachedRange>,
    offset: i64,
    max_bytes: u64,
    upper_bound: i64,
    min_one_batch: bool,
) -> Option<RemoteRead> {
    let b = &chunk.batches;
    let first = b.partition_point(|(last, _)| *last < offset);
    let end_of = |i: usize| b.get(i + 1).map_or(chunk.len, |(_, p)| u64::from(*p));
    let start_pos = u64::from(b.get(first)?.1);
    let mut end = start_pos;
    let mut next_offset = offset;
    for i in first..b.len() {
        let base_of_next = if i == first { offset } else { b[i - 1].0 + 1 };
        if base_of_next >= upper_bound {
            break;
        }
        let e = end_of(i);
        if e - start_pos > max_bytes && !(i == first && min_one_batch) {
            break;
        }
        end = e;
        next_offset = b[i].0 + 1;
    }
    (end > start_pos).then(|| RemoteRead {
        slice: FileSlice {
            file: Arc::clone(&chunk.file),
            position: start_pos,
            len: end - start_pos,
        },
        next_offset,
    })
}

#[cfg(test)]
mod tests;
