//! One segment: `<base>.log` plus its `.index` and `.timeindex`.
//!
//! The `.log` file is a plain concatenation of v2 record batches, byte-identical to what the
//! producer sent apart from the leader-assigned base offset and epoch. It is written with
//! positioned writes at its end and read with positioned reads, so readers holding the
//! `Arc<File>` never disturb the writer (and keep a deleted segment readable until done).

use std::fs::{File, OpenOptions};

use sluice_rt::disk::{self, DiskOp};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_protocol::batch::{
    self, BatchHeader, BatchIter, RecordLimits, TimestampType, BATCH_HEADER_LEN, LOG_OVERHEAD,
};

use crate::config::LogConfig;
use crate::error::{IoContext, LogError};
use crate::index::{OffsetIndex, TimeIndex};

/// `00000000000000000042.log` and friends.
pub fn file_name(base_offset: i64, extension: &str) -> String {
    format!("{base_offset:020}.{extension}")
}

/// A contiguous byte range of a segment file holding whole batches, read outside the log's
/// lock. Readers keep the file open, so a segment deleted meanwhile stays readable.
#[derive(Clone, Debug)]
pub struct FileSlice {
    pub file: Arc<File>,
    pub position: u64,
    pub len: u64,
}

impl FileSlice {
    /// Append the slice's bytes to `out`: one copy from the page cache, into spare capacity
    /// (never zero-filled first). A file shorter than the slice (truncated since) is an
    /// `UnexpectedEof` error.
    pub fn read_into(&self, out: &mut Vec<u8>) -> std::io::Result<()> {
        let target = out.len() + self.len as usize;
        out.reserve(self.len as usize);
        let mut at = self.position;
        while out.len() < target {
            let before = out.len();
            // Spare capacity may exceed the slice: what is read past it is cut off below.
            rustix::io::pread(&*self.file, rustix::buffer::spare_capacity(out), at)?;
            let got = out.len() - before;
            if got == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the segment file is shorter than the slice read from it",
                ));
            }
            at += got as u64;
        }
        out.truncate(target);
        Ok(())
    }
}

impl sluice_protocol::fetch_frame::SplicedRecords for FileSlice {
    fn records_len(&self) -> usize {
        self.len as usize
    }
}

/// A segment's timestamp bookkeeping, rebuilt whenever batches are appended or recovered.
#[derive(Clone, Copy, Debug)]
struct TimestampStats {
    /// Largest batch max timestamp in the segment, -1 when none.
    max_timestamp: i64,
    /// Last offset of the batch holding `max_timestamp` (what the time index records).
    shallow_offset_of_max: i64,
    /// First batch's max timestamp: what `segment.ms` counts from.
    rolling_timestamp: Option<i64>,
}

impl Default for TimestampStats {
    fn default() -> Self {
        Self {
            max_timestamp: -1,
            shallow_offset_of_max: -1,
            rolling_timestamp: None,
        }
    }
}

pub struct LogSegment {
    base_offset: i64,
    log_path: PathBuf,
    log: Arc<File>,
    size: u64,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    bytes_since_last_index_entry: u64,
    stats: TimestampStats,
    created_ms: i64,
}

/// Reads batch headers sequentially from a segment file in chunks.
struct HeaderScanner<'a> {
    file: &'a File,
    pos: u64,
    end: u64,
    buf: Vec<u8>,
    buf_start: u64,
    /// Size of the batch last returned.
    last_size: usize,
}

const SCAN_CHUNK_BYTES: usize = 16 * 1024;

impl<'a> HeaderScanner<'a> {
    fn new(file: &'a File, pos: u64, end: u64) -> Self {
        Self {
            file,
            pos,
            end,
            buf: Vec::new(),
            buf_start: 0,
            last_size: 0,
        }
    }

    /// The next complete batch header and its position; None at `end` or a torn tail.
    fn next(&mut self) -> std::io::Result<Option<(u64, BatchHeader)>> {
        if self.pos + BATCH_HEADER_LEN as u64 > self.end {
            return Ok(None);
        }
        let buffered_end = self.buf_start + self.buf.len() as u64;
        if self.pos < self.buf_start || self.pos + BATCH_HEADER_LEN as u64 > buffered_end {
            // After a batch larger than a chunk the next header is all a chunk would hold
            // of use: read just the header.
            let chunk = if self.last_size > SCAN_CHUNK_BYTES {
                BATCH_HEADER_LEN
            } else {
                SCAN_CHUNK_BYTES
            };
            let len = chunk.min((self.end - self.pos) as usize);
            self.buf.resize(len, 0);
            self.file.read_exact_at(&mut self.buf, self.pos)?;
            self.buf_start = self.pos;
        }
        let at = (self.pos - self.buf_start) as usize;
        let Ok(header) = BatchHeader::parse(&self.buf[at..at + BATCH_HEADER_LEN]) else {
            return Ok(None);
        };
        let pos = self.pos;
        if pos + header.total_size() as u64 > self.end {
            return Ok(None);
        }
        self.pos += header.total_size() as u64;
        self.last_size = header.total_size();
        Ok(Some((pos, header)))
    }
}

/// `pwritev` until every part is written.
fn write_all_vectored(file: &File, parts: &[&[u8]], mut offset: u64) -> std::io::Result<()> {
    let (mut part, mut skip) = (0usize, 0usize);
    while part < parts.len() {
        let slices: Vec<std::io::IoSlice<'_>> = std::iter::once(&parts[part][skip..])
            .chain(parts[part + 1..].iter().copied())
            .map(std::io::IoSlice::new)
            .collect();
        let mut written = rustix::io::pwritev(file, &slices, offset)?;
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        offset += written as u64;
        while part < parts.len() && written >= parts[part].len() - skip {
            written -= parts[part].len() - skip;
            part += 1;
            skip = 0;
        }
        skip += written;
    }
    Ok(())
}

impl LogSegment {
    fn open_files(
        dir: &Path,
        base_offset: i64,
        now_ms: i64,
        create_new: bool,
    ) -> Result<Self, LogError> {
        let log_path = dir.join(file_name(base_offset, "log"));
        let log = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&log_path)
            .at(&log_path)?;
        let size = log.metadata().at(&log_path)?.len();
        if create_new && size > 0 {
            return Err(LogError::io(
                &log_path,
                std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "segment file already has data",
                ),
            ));
        }
        let offset_index =
            OffsetIndex::open(&dir.join(file_name(base_offset, "index")), base_offset)?;
        let time_index =
            TimeIndex::open(&dir.join(file_name(base_offset, "timeindex")), base_offset)?;
        Ok(Self {
            base_offset,
            log_path,
            log: Arc::new(log),
            size,
            offset_index,
            time_index,
            bytes_since_last_index_entry: 0,
            stats: TimestampStats::default(),
            created_ms: now_ms,
        })
    }

    /// Create a new, empty, active segment.
    pub fn create(
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        now_ms: i64,
    ) -> Result<Self, LogError> {
        let mut seg = Self::open_files(dir, base_offset, now_ms, true)?;
        // Index files may be left over from a crash between creating them and the log file.
        seg.offset_index.clear();
        seg.time_index.clear();
        seg.make_active(config)?;
        Ok(seg)
    }

    /// Open an existing segment. Its indexes are trusted only if `trust_indexes` and they
    /// pass a sanity check; otherwise they are rebuilt by [`LogSegment::recover`].
    pub fn open(dir: &Path, base_offset: i64, now_ms: i64) -> Result<Self, LogError> {
        let mut seg = Self::open_files(dir, base_offset, now_ms, false)?;
        if let Ok(meta) = seg.log.metadata() {
            if let Ok(modified) = meta.modified() {
                if let Ok(d) = modified.duration_since(std::time::UNIX_EPOCH) {
                    seg.created_ms = d.as_millis() as i64;
                }
            }
        }
        Ok(seg)
    }

    pub fn indexes_are_sane(&self) -> bool {
        self.offset_index.is_sane(self.size) && self.time_index.is_sane()
    }

    /// Restore the timestamp bookkeeping of a segment whose indexes are trusted, from the
    /// last time index entry plus the batches after it.
    pub fn load_stats(&mut self) -> Result<(), LogError> {
        self.stats = TimestampStats::default();
        let start = match self.time_index.last() {
            Some((ts, offset)) => {
                self.stats.max_timestamp = ts;
                self.stats.shallow_offset_of_max = offset;
                self.offset_index.lookup(offset).1 as u64
            }
            None => 0,
        };
        let mut scan = HeaderScanner::new(&self.log, start, self.size);
        let mut first = true;
        while let Some((_, h)) = scan.next().at(&self.log_path)? {
            if first && start == 0 {
                self.stats.rolling_timestamp = Some(h.max_timestamp);
            }
            first = false;
            if h.max_timestamp > self.stats.max_timestamp {
                self.stats.max_timestamp = h.max_timestamp;
                self.stats.shallow_offset_of_max = h.last_offset();
            }
        }
        if self.stats.rolling_timestamp.is_none() && self.size >= BATCH_HEADER_LEN as u64 {
            let mut first = HeaderScanner::new(&self.log, 0, self.size);
            if let Some((_, h)) = first.next().at(&self.log_path)? {
                self.stats.rolling_timestamp = Some(h.max_timestamp);
            }
        }
        Ok(())
    }

    /// Preallocate index space so the segment can take appends.
    pub fn make_active(&mut self, config: &LogConfig) -> Result<(), LogError> {
        self.offset_index.preallocate(config.segment_index_bytes)?;
        self.time_index.preallocate(config.segment_index_bytes)
    }

    /// Trim index files to their entries: the segment will take no more appends.
    pub fn make_inactive(&mut self) -> Result<(), LogError> {
        self.offset_index.trim()?;
        self.time_index.trim()
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// The segment's log file, for readers that work without the log's lock (the cleaner).
    pub fn file(&self) -> Arc<File> {
        Arc::clone(&self.log)
    }

    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    pub fn max_timestamp(&self) -> i64 {
        self.stats.max_timestamp
    }

    /// Largest timestamp for retention: the max record timestamp, or the file's age when the
    /// segment holds no timestamps.
    pub fn largest_timestamp(&self) -> i64 {
        if self.stats.max_timestamp >= 0 {
            self.stats.max_timestamp
        } else {
            self.created_ms
        }
    }

    /// Whether the segment must roll before appending `incoming_bytes` at `now_ms`.
    pub fn should_roll(
        &self,
        config: &LogConfig,
        incoming_bytes: u64,
        max_offset_in_append: i64,
        now_ms: i64,
    ) -> bool {
        if self.size == 0 {
            return false;
        }
        let by_size = self.size + incoming_bytes > config.segment_bytes;
        let since = self
            .stats
            .rolling_timestamp
            .filter(|t| *t >= 0)
            .unwrap_or(self.created_ms);
        let by_time = now_ms - since > config.segment_ms - config.segment_jitter_ms;
        let by_index = self.offset_index.is_full() || self.time_index.is_full();
        let by_offset = max_offset_in_append - self.base_offset > i64::from(u32::MAX >> 1);
        let by_position = self.size + incoming_bytes > u64::from(u32::MAX >> 1) * 2;
        by_size || by_time || by_index || by_offset || by_position
    }

    /// Append already validated batches (with offsets assigned) and index them.
    pub fn append(&mut self, batches: &[u8], config: &LogConfig) -> Result<(), LogError> {
        disk::check(DiskOp::Write {
            path: &self.log_path,
            len: batches.len() as u64,
        })
        .at(&self.log_path)?;
        self.log
            .write_all_at(batches, self.size)
            .at(&self.log_path)?;
        self.index_batches(batches, self.size, config);
        self.size += batches.len() as u64;
        Ok(())
    }

    /// Append one validated batch given as its (patched) header and the rest of it, with one
    /// vectored write, and index it.
    pub fn append_batch(
        &mut self,
        header_bytes: &[u8; BATCH_HEADER_LEN],
        body: &[u8],
        header: &BatchHeader,
        config: &LogConfig,
    ) -> Result<(), LogError> {
        disk::check(DiskOp::Write {
            path: &self.log_path,
            len: (BATCH_HEADER_LEN + body.len()) as u64,
        })
        .at(&self.log_path)?;
        write_all_vectored(&self.log, &[header_bytes, body], self.size).at(&self.log_path)?;
        let position = self.size;
        self.index_batch(header, position, config);
        self.size += (BATCH_HEADER_LEN + body.len()) as u64;
        Ok(())
    }

    fn index_batches(&mut self, batches: &[u8], mut position: u64, config: &LogConfig) {
        for item in BatchIter::new(batches) {
            let Ok((header, _)) = item else { break };
            self.index_batch(&header, position, config);
            position += header.total_size() as u64;
        }
    }

    fn index_batch(&mut self, header: &BatchHeader, position: u64, config: &LogConfig) {
        if self.stats.rolling_timestamp.is_none() {
            self.stats.rolling_timestamp = Some(header.max_timestamp);
        }
        if header.max_timestamp > self.stats.max_timestamp {
            self.stats.max_timestamp = header.max_timestamp;
            self.stats.shallow_offset_of_max = header.last_offset();
        }
        if self.bytes_since_last_index_entry > config.index_interval_bytes {
            if !self.offset_index.is_full() {
                self.offset_index
                    .append(header.last_offset(), position as u32);
            }
            self.time_index
                .maybe_append(self.stats.max_timestamp, self.stats.shallow_offset_of_max);
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += header.total_size() as u64;
    }

    /// Position and header of the first batch whose last offset is >= `target`, searching
    /// batches that end at or before `end_position`.
    pub fn translate_offset(
        &self,
        target: i64,
        end_position: u64,
    ) -> Result<Option<(u64, BatchHeader)>, LogError> {
        let (_, start) = self.offset_index.lookup(target);
        let mut scan = HeaderScanner::new(&self.log, u64::from(start), end_position.min(self.size));
        while let Some((pos, h)) = scan.next().at(&self.log_path)? {
            if h.last_offset() >= target {
                return Ok(Some((pos, h)));
            }
        }
        Ok(None)
    }

    /// Whole batches from the one holding `start_offset`: as many as fit in `max_bytes` (but
    /// at least that first batch when `min_one_batch`), all ending at or before
    /// `max_position`, which must be a batch boundary (the segment's size, or where a batch
    /// starts). None when no batch qualifies.
    ///
    /// Trimming to whole batches here keeps the bytes off the read path: the end is found
    /// from the offset index (positions of batch starts) and a short scan of headers past the
    /// last indexed batch that fits, and when everything up to `max_position` fits (a reader
    /// that keeps up) no header is read at all.
    pub fn read(
        &self,
        start_offset: i64,
        max_bytes: u64,
        max_position: u64,
        min_one_batch: bool,
    ) -> Result<Option<FileSlice>, LogError> {
        let limit = max_position.min(self.size);
        let Some((position, header)) = self.translate_offset(start_offset, limit)? else {
            return Ok(None);
        };
        let wanted_end = position.saturating_add(max_bytes);
        let mut end = if wanted_end >= limit {
            limit
        } else {
            self.last_batch_end_within(position, wanted_end)?
        };
        if end == position {
            if !min_one_batch {
                return Ok(None);
            }
            end = position + header.total_size() as u64;
        }
        Ok(Some(FileSlice {
            file: Arc::clone(&self.log),
            position,
            len: end - position,
        }))
    }

    /// The end of the last whole batch that starts at or after `from` (a batch start) and
    /// ends at or before `bound`; `from` when none does.
    fn last_batch_end_within(&self, from: u64, bound: u64) -> Result<u64, LogError> {
        let start = self
            .offset_index
            .floor_position(bound)
            .map_or(from, |(_, p)| u64::from(p).max(from));
        let mut scan = HeaderScanner::new(&self.log, start, bound);
        let mut end = start;
        while let Some((pos, h)) = scan.next().at(&self.log_path)? {
            end = pos + h.total_size() as u64;
        }
        Ok(end)
    }

    /// Read a whole batch at `position` (recovery, timestamp lookups).
    fn read_batch(
        &self,
        position: u64,
        header: &BatchHeader,
        buf: &mut Vec<u8>,
    ) -> Result<(), LogError> {
        buf.resize(header.total_size(), 0);
        self.log.read_exact_at(buf, position).at(&self.log_path)
    }

    /// The first record at or after `min_offset` whose timestamp is >= `target`:
    /// `(offset, timestamp)`.
    pub fn find_offset_by_timestamp(
        &self,
        target: i64,
        min_offset: i64,
    ) -> Result<Option<(i64, i64)>, LogError> {
        if self.stats.max_timestamp < target {
            return Ok(None);
        }
        let hint_offset = self
            .time_index
            .lookup(target)
            .map_or(self.base_offset, |(_, o)| o);
        let (_, start) = self.offset_index.lookup(hint_offset.max(min_offset));
        let mut scan = HeaderScanner::new(&self.log, u64::from(start), self.size);
        let mut buf = Vec::new();
        while let Some((pos, h)) = scan.next().at(&self.log_path)? {
            if h.max_timestamp < target || h.last_offset() < min_offset {
                continue;
            }
            self.read_batch(pos, &h, &mut buf)?;
            let mut found = None;
            let walk = batch::for_each_record(&buf, RecordLimits::default(), |r| {
                let offset = h.base_offset.wrapping_add(i64::from(r.offset_delta));
                let ts = match h.timestamp_type() {
                    TimestampType::LogAppendTime => h.max_timestamp,
                    TimestampType::CreateTime => h.base_timestamp.wrapping_add(r.timestamp_delta),
                };
                if found.is_none() && ts >= target && offset >= min_offset {
                    found = Some((offset, ts));
                }
                Ok(())
            });
            if walk.is_ok() {
                if let Some(hit) = found {
                    return Ok(Some(hit));
                }
            }
        }
        Ok(None)
    }

    /// The exact record holding the segment's largest timestamp: `(offset, timestamp)`.
    pub fn offset_of_max_timestamp(&self) -> Result<Option<(i64, i64)>, LogError> {
        if self.stats.max_timestamp < 0 {
            return Ok(None);
        }
        self.find_offset_by_timestamp(self.stats.max_timestamp, self.base_offset)
    }

    /// Re-validate every batch (framing, magic, CRC, increasing offsets), rebuild both
    /// indexes, and truncate a torn or corrupt tail. Returns (bytes truncated, next offset
    /// after the last valid batch if any).
    pub fn recover(&mut self, config: &LogConfig) -> Result<(u64, Option<i64>), LogError> {
        self.offset_index.clear();
        self.time_index.clear();
        self.make_active(config)?;
        self.stats = TimestampStats::default();
        self.bytes_since_last_index_entry = 0;
        let mut pos = 0u64;
        let mut next_offset: Option<i64> = None;
        let mut head = [0u8; LOG_OVERHEAD];
        let mut buf = Vec::new();
        while pos + LOG_OVERHEAD as u64 <= self.size {
            self.log.read_exact_at(&mut head, pos).at(&self.log_path)?;
            let size = match batch::peek_offset_and_size(&head) {
                Ok(Some((_, size))) => size as u64,
                _ => break,
            };
            if pos + size > self.size || size > (config.max_message_bytes as u64).max(1 << 20) * 16
            {
                break;
            }
            buf.resize(size as usize, 0);
            self.log.read_exact_at(&mut buf, pos).at(&self.log_path)?;
            if batch::verify_crc(&buf).is_err() {
                break;
            }
            let Ok(header) = BatchHeader::parse(&buf) else {
                break;
            };
            if next_offset.is_some_and(|n| header.base_offset < n)
                || header.base_offset < self.base_offset
            {
                break;
            }
            self.index_batch(&header, pos, config);
            next_offset = Some(header.next_offset());
            pos += size;
        }
        let truncated = self.size - pos;
        if truncated > 0 {
            self.log.set_len(pos).at(&self.log_path)?;
            self.size = pos;
        }
        Ok((truncated, next_offset))
    }

    /// The offset after the last batch (None when empty).
    pub fn next_offset(&self) -> Result<Option<i64>, LogError> {
        let start = self.offset_index.last().map_or(0, |(_, p)| u64::from(p));
        let mut scan = HeaderScanner::new(&self.log, start, self.size);
        let mut last = None;
        while let Some((_, h)) = scan.next().at(&self.log_path)? {
            last = Some(h.next_offset());
        }
        Ok(last)
    }

    /// Remove every batch from the one holding `offset` on. Returns bytes removed.
    pub fn truncate_to(&mut self, offset: i64, config: &LogConfig) -> Result<u64, LogError> {
        let Some((position, _)) = self.translate_offset(offset, self.size)? else {
            return Ok(0);
        };
        let removed = self.size - position;
        self.log.set_len(position).at(&self.log_path)?;
        self.size = position;
        // Rebuild the (cheap, sparse) indexes over what remains.
        self.recover(config)?;
        Ok(removed)
    }

    pub fn flush(&self) -> Result<(), LogError> {
        disk::sync_data(&self.log, &self.log_path).at(&self.log_path)?;
        self.offset_index.flush()?;
        self.time_index.flush()?;
        let txns = self.log_path.with_extension("txnindex");
        match File::open(&txns) {
            Ok(f) => disk::sync_data(&f, &txns).at(&txns),
            Err(_) => Ok(()),
        }
    }

    /// The segment's files, for an fsync without the log's lock: what [`Self::flush`] does.
    /// The `.txnindex` too, when the segment has one: its aborted transactions are what
    /// read_committed readers skip, and a recovery replays only past the recovery point.
    pub fn files_to_sync(&self) -> Vec<(PathBuf, Arc<File>)> {
        let mut files = vec![
            (self.log_path.clone(), Arc::clone(&self.log)),
            (
                self.offset_index.path().to_path_buf(),
                self.offset_index.file(),
            ),
            (self.time_index.path().to_path_buf(), self.time_index.file()),
        ];
        let txns = self.log_path.with_extension("txnindex");
        if let Ok(f) = File::open(&txns) {
            files.push((txns, Arc::new(f)));
        }
        files
    }

    /// Remove the segment's files.
    pub fn delete(self) -> Result<(), LogError> {
        let paths = [
            self.log_path.clone(),
            self.offset_index.path().to_path_buf(),
            self.time_index.path().to_path_buf(),
            self.log_path.with_extension("txnindex"),
        ];
        drop(self);
        for p in paths {
            match std::fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(LogError::io(p, e)),
            }
        }
        Ok(())
    }
}
