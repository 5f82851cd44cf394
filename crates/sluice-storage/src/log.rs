//! One partition's log: an ordered map of segments keyed by base offset, the last of which
//! (the active segment) takes appends.
//!
//! Owned by the broker's partition behind a lock; every method is synchronous file I/O and
//! takes the current time as an argument. Invariants: segment base offsets strictly increase;
//! `log_start_offset <= next_offset`; `recovery_point <= next_offset`; everything below the
//! recovery point has been fsynced.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use sluice_protocol::batch::BatchHeader;
use sluice_protocol::types::TopicPartition;
use tracing::{debug, info, warn};

use crate::checkpoint;
use crate::cleaner::{self, CompactionInput, CompactionOutput, SegmentToClean};
use crate::config::LogConfig;
use crate::epoch_cache::LeaderEpochCache;
use crate::error::{IoContext, LogError};
use crate::pending_io::PendingIo;
use crate::producer_state::{ProducerBatch, ProducerStateManager, SeqCheck};
use crate::segment;
pub use crate::segment::FileSlice;
use crate::segment::LogSegment;
use crate::txn_index::{AbortedTxn, TxnIndex};
use crate::validator;

/// What an append did, for the produce response and the replica state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogAppendInfo {
    pub first_offset: i64,
    pub last_offset: i64,
    pub record_count: u64,
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
    /// The broker's append time for LogAppendTime topics, else -1.
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
    /// A retried idempotent batch: nothing was appended, the offsets are the original's.
    pub duplicate: bool,
}

/// Where a fetch starts and the bytes to send.
#[derive(Clone, Debug)]
pub struct FetchDataInfo {
    pub slice: Option<FileSlice>,
}

/// How to open an existing log directory.
#[derive(Clone, Copy, Debug)]
pub struct OpenOptions {
    /// The previous process shut down cleanly (indexes were trimmed and flushed).
    pub clean_shutdown: bool,
    /// Offsets below this were fsynced; past it, batches are re-validated.
    pub recovery_point: i64,
    /// The checkpointed log start offset.
    pub log_start_offset: i64,
    pub now_ms: i64,
}

pub struct Log {
    dir: PathBuf,
    tp: TopicPartition,
    config: LogConfig,
    segments: BTreeMap<i64, LogSegment>,
    log_start_offset: i64,
    next_offset: i64,
    recovery_point: i64,
    unflushed_records: u64,
    last_flush_ms: i64,
    epoch_cache: LeaderEpochCache,
    topic_id: Option<[u8; 16]>,
    /// Bumped by every truncation: a compaction planned before one is not installed.
    truncations: u64,
    /// Idempotent producers' epochs and last batches.
    producers: ProducerStateManager,
    /// Aborted and not-yet-stable transactions.
    txns: TxnIndex,
    /// fsyncs owed by appends and rolls, for the caller to run without the lock.
    pending_io: PendingIo,
    /// Tiered storage: the last offset copied to the remote tier (-1: none), told by the
    /// broker from the remote log metadata. Local retention deletes only segments below it.
    remote_highest_offset: i64,
}

/// A closed segment's files, for a copy to the remote tier.
#[derive(Clone, Debug)]
pub struct ClosedSegment {
    pub base_offset: i64,
    /// The next segment's base: this one ends just before.
    pub next_offset: i64,
    pub size_bytes: u64,
    pub max_timestamp_ms: i64,
    pub log: PathBuf,
    pub index: PathBuf,
    pub time_index: PathBuf,
    /// May not exist (no aborted transaction ended in it).
    pub txn_index: PathBuf,
    /// Producer state at `next_offset`, if still kept.
    pub producer_snapshot: PathBuf,
    /// Leader epochs up to the segment's end (Kafka uploads the cache cut at the end).
    pub epochs: Vec<(i32, i64)>,
}

/// Suffixes of files a crash may leave behind mid-operation.
const LEFTOVER_SUFFIXES: [&str; 4] = [".deleted", ".cleaned", ".swap", ".tmp"];

impl Log {
    /// Create a new, empty log directory for `tp` under `parent`.
    pub fn create(
        parent: &Path,
        tp: TopicPartition,
        topic_id: [u8; 16],
        config: LogConfig,
        now_ms: i64,
    ) -> Result<Self, LogError> {
        let dir = parent.join(tp.dir_name());
        fs::create_dir_all(&dir).at(&dir)?;
        checkpoint::write_partition_metadata(&dir, topic_id)?;
        checkpoint::sync_dir(parent)?;
        Self::open(
            &dir,
            tp,
            config,
            OpenOptions {
                clean_shutdown: true,
                recovery_point: 0,
                log_start_offset: 0,
                now_ms,
            },
        )
    }

    /// Open an existing log directory, recovering it if the last shutdown was not clean.
    pub fn open(
        dir: &Path,
        tp: TopicPartition,
        config: LogConfig,
        opts: OpenOptions,
    ) -> Result<Self, LogError> {
        let bases = scan_dir(dir)?;
        let mut segments = BTreeMap::new();
        for base in bases {
            segments.insert(base, LogSegment::open(dir, base, opts.now_ms)?);
        }
        if segments.is_empty() {
            let base = opts.log_start_offset.max(0);
            segments.insert(base, LogSegment::create(dir, base, &config, opts.now_ms)?);
        }
        let bases: Vec<i64> = segments.keys().copied().collect();
        let mut truncated_at: Option<usize> = None;
        for (i, base) in bases.iter().enumerate() {
            let next_base = bases.get(i + 1).copied();
            let is_last = next_base.is_none();
            let seg = segments.get_mut(base).expect("base taken from the map");
            let past_recovery_point = next_base.is_none_or(|n| n > opts.recovery_point);
            let must_recover = (!opts.clean_shutdown && past_recovery_point)
                || (is_last && !seg.indexes_are_sane());
            if must_recover {
                let (truncated, _) = seg.recover(&config)?;
                if truncated > 0 {
                    warn!(partition = %tp, segment = base, bytes = truncated, "truncated a torn or corrupt log tail");
                    truncated_at = Some(i);
                    break;
                }
                if !is_last {
                    // Rebuilt indexes of a closed segment are trimmed as a roll leaves them
                    // (a copy to the remote tier takes the files as they are).
                    seg.make_inactive()?;
                }
            } else {
                seg.load_stats()?;
            }
        }
        if let Some(i) = truncated_at {
            for base in &bases[i + 1..] {
                if let Some(seg) = segments.remove(base) {
                    warn!(partition = %tp, segment = base, "deleting segment after a truncated one");
                    seg.delete()?;
                }
            }
        }
        let (&last_base, last) = segments
            .iter_mut()
            .next_back()
            .expect("at least one segment");
        last.make_active(&config)?;
        let mut next_offset = last.next_offset()?.unwrap_or(last_base);
        if next_offset < last_base {
            // Batches below the segment's own base offset: not what any shutdown leaves (a
            // damaged or foreign file, trusted because the shutdown looked clean). Recovery
            // keeps the valid prefix.
            warn!(partition = %tp, segment = last_base, "the active segment's offsets are below its base: recovering it");
            next_offset = last.recover(&config)?.1.unwrap_or(last_base);
        }
        let first_base = *segments.keys().next().expect("at least one segment");
        let log_start_offset = opts.log_start_offset.clamp(first_base, next_offset);
        let mut epoch_cache = LeaderEpochCache::load(dir)?;
        epoch_cache.truncate_from_end(next_offset)?;
        let topic_id = checkpoint::read_partition_metadata(dir)?;
        let log = Self {
            dir: dir.to_path_buf(),
            tp,
            config,
            segments,
            log_start_offset,
            next_offset,
            recovery_point: opts.recovery_point.clamp(0, next_offset),
            unflushed_records: 0,
            last_flush_ms: opts.now_ms,
            epoch_cache,
            topic_id,
            truncations: 0,
            producers: ProducerStateManager::new(),
            txns: TxnIndex::default(),
            pending_io: PendingIo::default(),
            remote_highest_offset: -1,
        };
        let mut log = log;
        if !opts.clean_shutdown {
            // A producer snapshot past the recovery point may stand on writes that did not
            // survive (the `.txnindex` of the segments before it, say): the state is rebuilt
            // from the one at or below it, replaying the rest, as Kafka's recovery does.
            for off in log.snapshot_offsets()? {
                if off > log.recovery_point {
                    let path = log.snapshot_path(off);
                    fs::remove_file(&path).at(&path)?;
                }
            }
        }
        log.rebuild_producer_state()?;
        if !opts.clean_shutdown {
            debug!(partition = %log.tp, log_end_offset = next_offset, "log re-validated past its recovery point");
        }
        Ok(log)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn topic_partition(&self) -> &TopicPartition {
        &self.tp
    }

    pub fn topic_id(&self) -> Option<[u8; 16]> {
        self.topic_id
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// Apply new settings (a topic config change); the active segment's index space follows.
    pub fn set_config(&mut self, config: LogConfig) -> Result<(), LogError> {
        self.config = config.clone();
        self.active_mut().make_active(&config)
    }

    /// The offset the next appended record gets (LEO).
    pub fn log_end_offset(&self) -> i64 {
        self.next_offset
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    pub fn recovery_point(&self) -> i64 {
        self.recovery_point
    }

    pub fn size_bytes(&self) -> u64 {
        self.segments.values().map(LogSegment::size).sum()
    }

    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    pub fn segment_base_offsets(&self) -> Vec<i64> {
        self.segments.keys().copied().collect()
    }

    pub fn leader_epoch_cache(&self) -> &LeaderEpochCache {
        &self.epoch_cache
    }

    /// Tiered storage: the remote tier holds everything up to `offset` (-1: nothing).
    pub fn set_remote_highest_offset(&mut self, offset: i64) {
        self.remote_highest_offset = offset;
    }

    /// Every segment but the active one, oldest first, with the files a copy to the remote
    /// tier takes.
    pub fn closed_segments(&self) -> Vec<ClosedSegment> {
        let bases: Vec<i64> = self.segments.keys().copied().collect();
        bases
            .windows(2)
            .map(|w| {
                let seg = &self.segments[&w[0]];
                let file = |ext: &str| self.dir.join(segment::file_name(w[0], ext));
                ClosedSegment {
                    base_offset: w[0],
                    next_offset: w[1],
                    size_bytes: seg.size(),
                    // For remote retention: the file's age where no record has a timestamp,
                    // as local retention counts it.
                    max_timestamp_ms: seg.largest_timestamp(),
                    log: file("log"),
                    index: file("index"),
                    time_index: file("timeindex"),
                    txn_index: file("txnindex"),
                    producer_snapshot: self.snapshot_path(w[1]),
                    epochs: self
                        .epoch_cache
                        .entries()
                        .iter()
                        .copied()
                        .filter(|(_, start)| *start < w[1])
                        .collect(),
                }
            })
            .collect()
    }

    /// A follower starting from the remote tier (Kafka's tiered-offset fetch): the log
    /// becomes empty at `offset`, with the leader epochs and the producer snapshot the
    /// remote segment before it carries, so it can lead with them later.
    pub fn start_from_remote(
        &mut self,
        offset: i64,
        epochs: &[(i32, i64)],
        producer_snapshot: Option<&[u8]>,
        now_ms: i64,
    ) -> Result<(), LogError> {
        self.truncate_fully_and_start_at(offset, now_ms)?;
        for (epoch, start) in epochs.iter().filter(|(_, s)| *s <= offset) {
            self.epoch_cache.assign(*epoch, *start)?;
        }
        if let Some(snapshot) = producer_snapshot {
            match ProducerStateManager::from_snapshot(snapshot) {
                Ok(state) => {
                    let path = self.snapshot_path(offset);
                    let tmp = path.with_extension("snapshot.tmp");
                    fs::write(&tmp, snapshot).at(&tmp)?;
                    sluice_rt::disk::rename(&tmp, &path).at(&path)?;
                    self.producers = state;
                }
                Err(e) => {
                    warn!(partition = %self.tp, error = %e, "ignoring an unreadable remote producer snapshot")
                }
            }
        }
        Ok(())
    }

    fn active(&self) -> &LogSegment {
        self.segments
            .values()
            .next_back()
            .expect("a log always has an active segment")
    }

    fn active_mut(&mut self) -> &mut LogSegment {
        active_segment(&mut self.segments)
    }

    /// Validate a producer's batch, assign its offsets and append it. A retried batch of an
    /// idempotent producer is not appended again: the answer carries its original offsets.
    /// The batch's bytes are written as they came (only its header is patched).
    pub fn append_as_leader(
        &mut self,
        records: impl Into<Bytes>,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<LogAppendInfo, LogError> {
        self.append_from(records.into(), leader_epoch, now_ms, true)
    }

    /// Append a coordinator's own batch as leader (Kafka's `AppendOrigin.COORDINATOR`): a
    /// group coordinator writing a producer's transactional offset commit. Only the
    /// producer's epoch is checked, not its sequence numbers (the coordinator has none).
    pub fn append_as_coordinator(
        &mut self,
        records: impl Into<Bytes>,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<LogAppendInfo, LogError> {
        self.append_from(records.into(), leader_epoch, now_ms, false)
    }

    fn append_from(
        &mut self,
        records: Bytes,
        leader_epoch: i32,
        now_ms: i64,
        client: bool,
    ) -> Result<LogAppendInfo, LogError> {
        let checked = validator::check(records, &self.tp, now_ms, &self.config)?;
        let h = &checked.header;
        let duplicate = if h.producer_id < 0 {
            None
        } else if client {
            match self.producers.check(&producer_batch(h))? {
                SeqCheck::Duplicate(m) => Some(m),
                _ => None,
            }
        } else {
            self.producers
                .check_epoch(h.producer_id, h.producer_epoch)?;
            None
        };
        if let Some(d) = duplicate {
            return Ok(LogAppendInfo {
                first_offset: d.first_offset,
                last_offset: d.last_offset,
                record_count: 0,
                max_timestamp: -1,
                offset_of_max_timestamp: -1,
                log_append_time_ms: -1,
                log_start_offset: self.log_start_offset,
                duplicate: true,
            });
        }
        let batch = validator::assign(
            checked,
            self.next_offset,
            leader_epoch,
            now_ms,
            &self.config,
        );
        let v = batch.info;
        self.maybe_roll(batch.len() as u64, v.last_offset, now_ms)?;
        active_segment(&mut self.segments).append_batch(
            &batch.header_bytes,
            &batch.body,
            &batch.header,
            &self.config,
        )?;
        self.epoch_cache.assign(leader_epoch, v.first_offset)?;
        self.next_offset = v.last_offset + 1;
        // Never a control batch (refused above): the header is all the producer state needs.
        record_batch(&mut self.producers, &mut self.txns, &batch.header, &[]);
        self.unflushed_records += v.record_count;
        self.maybe_plan_flush(now_ms);
        Ok(LogAppendInfo {
            first_offset: v.first_offset,
            last_offset: v.last_offset,
            record_count: v.record_count,
            max_timestamp: v.max_timestamp,
            offset_of_max_timestamp: v.offset_of_max_timestamp,
            log_append_time_ms: v.log_append_time_ms,
            log_start_offset: self.log_start_offset,
            duplicate: false,
        })
    }

    /// Append a transaction marker (a control batch) for `producer_id` as leader: the
    /// coordinator ends its transaction in this partition. Fenced when the producer's epoch
    /// or the coordinator's epoch is older than what this partition has seen.
    pub fn append_marker(
        &mut self,
        marker: &Marker,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<LogAppendInfo, LogError> {
        self.producers
            .check_marker(marker.producer_id, marker.epoch, marker.coordinator_epoch)?;
        let offset = self.next_offset;
        let mut bytes = control_batch(marker, now_ms)?;
        sluice_protocol::batch::set_base_offset(&mut bytes, offset);
        sluice_protocol::batch::set_partition_leader_epoch(&mut bytes, leader_epoch);
        self.maybe_roll(bytes.len() as u64, offset, now_ms)?;
        active_segment(&mut self.segments).append(&bytes, &self.config)?;
        self.epoch_cache.assign(leader_epoch, offset)?;
        self.next_offset = offset + 1;
        let h = BatchHeader::parse(&bytes).map_err(LogError::Corrupt)?;
        if record_batch(&mut self.producers, &mut self.txns, &h, &bytes) {
            self.write_active_txn_index()?;
        }
        self.unflushed_records += 1;
        self.maybe_plan_flush(now_ms);
        Ok(LogAppendInfo {
            first_offset: offset,
            last_offset: offset,
            record_count: 1,
            max_timestamp: now_ms,
            offset_of_max_timestamp: offset,
            log_append_time_ms: -1,
            log_start_offset: self.log_start_offset,
            duplicate: false,
        })
    }

    fn write_active_txn_index(&self) -> Result<(), LogError> {
        let base = self.active().base_offset();
        self.txns.write_segment(&self.dir, base, i64::MAX)
    }

    /// The first offset a read_committed reader may not see yet, below `hw`: the start of the
    /// oldest transaction that is open, or ended by a marker not yet below `hw`.
    pub fn last_stable_offset(&self, hw: i64) -> i64 {
        let open = self.producers.first_ongoing_offset().unwrap_or(i64::MAX);
        let unstable = self.txns.first_unstable(hw).unwrap_or(i64::MAX);
        hw.min(open).min(unstable)
    }

    /// The high watermark moved: transactions whose markers it passed are stable.
    pub fn on_high_watermark(&mut self, hw: i64) {
        self.txns.on_high_watermark(hw);
    }

    /// Aborted transactions a read_committed fetch of `[start, upper)` must be told about.
    pub fn aborted_txns(&self, start: i64, upper: i64) -> Vec<AbortedTxn> {
        self.txns.collect(start, upper)
    }

    /// The producer state as of the log end.
    pub fn producer_state(&self) -> &ProducerStateManager {
        &self.producers
    }

    fn snapshot_offsets(&self) -> Result<Vec<i64>, LogError> {
        let mut out = Vec::new();
        for entry in fs::read_dir(&self.dir).at(&self.dir)? {
            let name = entry
                .at(&self.dir)?
                .file_name()
                .to_string_lossy()
                .into_owned();
            if let Some(base) = name
                .strip_suffix(".snapshot")
                .and_then(|s| s.parse::<i64>().ok())
            {
                out.push(base);
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    fn snapshot_path(&self, offset: i64) -> PathBuf {
        self.dir.join(segment::file_name(offset, "snapshot"))
    }

    /// Write the producer state as of the log end (`<log end>.snapshot`), keep the newest
    /// two snapshots, and drop those past the log end.
    fn write_producer_snapshot(&mut self) -> Result<(), LogError> {
        let path = self.snapshot_path(self.next_offset);
        let tmp = path.with_extension("snapshot.tmp");
        let snapshot = self.producers.to_snapshot();
        sluice_rt::disk::check(sluice_rt::disk::DiskOp::Write {
            path: &tmp,
            len: snapshot.len() as u64,
        })
        .at(&tmp)?;
        fs::write(&tmp, snapshot).at(&tmp)?;
        sluice_rt::disk::rename(&tmp, &path).at(&path)?;
        let offsets = self.snapshot_offsets()?;
        let keep_from = offsets.len().saturating_sub(2);
        for (i, off) in offsets.iter().enumerate() {
            if i < keep_from || *off > self.next_offset {
                let p = self.snapshot_path(*off);
                fs::remove_file(&p).at(&p)?;
            }
        }
        Ok(())
    }

    /// Rebuild the producer state: the newest readable snapshot at or below the log end,
    /// then every batch after it (snapshots past the log end are stale and go).
    fn rebuild_producer_state(&mut self) -> Result<(), LogError> {
        let mut state = ProducerStateManager::new();
        let mut from = self.log_start_offset;
        for off in self.snapshot_offsets()?.into_iter().rev() {
            let path = self.snapshot_path(off);
            if off > self.next_offset {
                fs::remove_file(&path).at(&path)?;
                continue;
            }
            let loaded = fs::read(&path)
                .map_err(|e| e.to_string())
                .and_then(|b| ProducerStateManager::from_snapshot(&b));
            match loaded {
                Ok(s) => {
                    state = s;
                    from = off;
                    break;
                }
                Err(e) => {
                    warn!(partition = %self.tp, snapshot = %path.display(), error = %e, "ignoring an unreadable producer snapshot");
                    fs::remove_file(&path).at(&path)?;
                }
            }
        }
        let mut at = from.max(self.log_start_offset);
        // Aborted transactions before the replay start are on disk; the replay re-adds the rest.
        let mut txns = TxnIndex::load(&self.dir, self.segments.keys().copied())?;
        txns.truncate_to(at);
        let mut buf = Vec::new();
        while at < self.next_offset {
            let Some(slice) = self.read(at, 1 << 20, self.next_offset, true)?.slice else {
                break;
            };
            buf.clear();
            slice.read_into(&mut buf).at(&self.dir)?;
            let before = at;
            for (h, b) in sluice_protocol::batch::BatchIter::new(&buf).map_while(Result::ok) {
                if h.next_offset() <= at {
                    continue;
                }
                record_batch(&mut state, &mut txns, &h, b);
                at = h.next_offset();
            }
            if at == before {
                break;
            }
        }
        self.producers = state;
        self.txns = txns;
        let bases: Vec<i64> = self.segments.keys().copied().collect();
        for (i, base) in bases.iter().enumerate() {
            let next = bases.get(i + 1).copied().unwrap_or(i64::MAX);
            self.txns.write_segment(&self.dir, *base, next)?;
        }
        Ok(())
    }

    /// Append a leader's batches unchanged (a follower copying the leader): offsets, leader
    /// epochs and CRCs are the leader's. Every batch must pass its CRC and start at or after
    /// this log's end (compacted leaders leave gaps). Returns the new log end offset.
    pub fn append_as_follower(&mut self, batches: &[u8], now_ms: i64) -> Result<i64, LogError> {
        let mut at = 0usize;
        while at < batches.len() {
            let Some((_, size)) = sluice_protocol::batch::peek_offset_and_size(&batches[at..])
                .map_err(LogError::Corrupt)?
            else {
                break; // a partial batch at the end of a fetch
            };
            if at + size > batches.len() {
                break;
            }
            let batch = &batches[at..at + size];
            sluice_protocol::batch::verify_crc(batch).map_err(LogError::Corrupt)?;
            let h = BatchHeader::parse(batch).map_err(LogError::Corrupt)?;
            if h.base_offset < self.next_offset {
                return Err(LogError::InvalidRecord(format!(
                    "a replicated batch at offset {} is below the log end {}",
                    h.base_offset, self.next_offset
                )));
            }
            self.maybe_roll(size as u64, h.last_offset(), now_ms)?;
            active_segment(&mut self.segments).append(batch, &self.config)?;
            self.epoch_cache
                .assign(h.partition_leader_epoch, h.base_offset)?;
            self.next_offset = h.next_offset();
            if record_batch(&mut self.producers, &mut self.txns, &h, batch) {
                self.write_active_txn_index()?;
            }
            self.unflushed_records += h.record_count.max(0) as u64;
            at += size;
        }
        self.maybe_plan_flush(now_ms);
        Ok(self.next_offset)
    }

    fn maybe_roll(
        &mut self,
        incoming_bytes: u64,
        max_offset: i64,
        now_ms: i64,
    ) -> Result<(), LogError> {
        if self
            .active()
            .should_roll(&self.config, incoming_bytes, max_offset, now_ms)
        {
            self.roll(now_ms)?;
        }
        Ok(())
    }

    /// Start a new active segment at the log end offset. The old one is trimmed; its fsync
    /// and the directory's are left in [`Self::take_pending_io`], and the recovery point
    /// moves past the old segment once they are done.
    pub fn roll(&mut self, now_ms: i64) -> Result<(), LogError> {
        let new_base = self.next_offset;
        if self.active().base_offset() == new_base {
            return Ok(());
        }
        let old_files = {
            let old = self.active_mut();
            old.make_inactive()?;
            old.files_to_sync()
        };
        let seg = LogSegment::create(&self.dir, new_base, &self.config, now_ms)?;
        self.segments.insert(new_base, seg);
        self.producers
            .expire(now_ms, self.config.producer_id_expiration_ms);
        self.write_producer_snapshot()?;
        // The snapshot at the new recovery point is made durable with it: a recovery after
        // a power loss starts from it (see [`Self::open`]).
        let mut files = old_files;
        let snapshot = self.snapshot_path(new_base);
        if let Ok(f) = std::fs::File::open(&snapshot) {
            files.push((snapshot, std::sync::Arc::new(f)));
        }
        self.pending_io.merge(PendingIo {
            files,
            dir_sync: Some(self.dir.clone()),
            recovery_point: Some((new_base, self.truncations)),
        });
        info!(partition = %self.tp, base_offset = new_base, "rolled new log segment");
        Ok(())
    }

    /// Past `flush.messages` unflushed records: plan an fsync of everything appended so far.
    fn maybe_plan_flush(&mut self, now_ms: i64) {
        if self.unflushed_records >= self.config.flush_messages {
            self.plan_flush(now_ms);
        }
    }

    /// Plan an fsync of everything appended so far, to run without the lock (see
    /// [`Self::take_pending_io`]); the recovery point becomes the log end once it ran.
    pub fn plan_flush(&mut self, now_ms: i64) {
        let from = self
            .segments
            .range(..=self.recovery_point)
            .next_back()
            .map_or(i64::MIN, |(b, _)| *b);
        let files: Vec<_> = self
            .segments
            .range(from..)
            .flat_map(|(_, s)| s.files_to_sync())
            .collect();
        self.pending_io.merge(PendingIo {
            files,
            dir_sync: None,
            recovery_point: Some((self.next_offset, self.truncations)),
        });
        self.unflushed_records = 0;
        self.last_flush_ms = now_ms;
    }

    /// The disk work changes so far left to do ([`PendingIo::run`] it without the log's
    /// lock, then report it with [`Self::complete_io`]).
    pub fn take_pending_io(&mut self) -> PendingIo {
        std::mem::take(&mut self.pending_io)
    }

    /// `io` ran: the recovery point moves to what it made durable, unless the log was
    /// truncated since it was planned.
    pub fn complete_io(&mut self, io: &PendingIo) {
        if let Some((point, truncations)) = io.recovery_point {
            if truncations == self.truncations {
                self.recovery_point = self.recovery_point.max(point.min(self.next_offset));
            }
        }
    }

    /// fsync everything appended so far, under the lock; the recovery point becomes the log
    /// end.
    pub fn flush(&mut self, now_ms: i64) -> Result<(), LogError> {
        let pending = self.take_pending_io();
        pending.run()?;
        // Only segments that may hold data past the recovery point need an fsync.
        let from = self
            .segments
            .range(..=self.recovery_point)
            .next_back()
            .map_or(i64::MIN, |(b, _)| *b);
        for seg in self.segments.range(from..).map(|(_, s)| s) {
            seg.flush()?;
        }
        self.recovery_point = self.next_offset;
        self.unflushed_records = 0;
        self.last_flush_ms = now_ms;
        Ok(())
    }

    /// Whether `flush.ms` says unflushed data is due.
    pub fn flush_due(&self, now_ms: i64) -> bool {
        self.unflushed_records > 0 && now_ms - self.last_flush_ms >= self.config.flush_ms
    }

    /// The bytes to serve for a fetch at `start_offset`, stopping before `upper_bound`
    /// (exclusive; the high watermark for consumers).
    pub fn read(
        &self,
        start_offset: i64,
        max_bytes: u64,
        upper_bound: i64,
        min_one_batch: bool,
    ) -> Result<FetchDataInfo, LogError> {
        if start_offset < self.log_start_offset || start_offset > self.next_offset {
            return Err(LogError::OffsetOutOfRange {
                offset: start_offset,
                log_start: self.log_start_offset,
                log_end: self.next_offset,
            });
        }
        let upper_bound = upper_bound.min(self.next_offset);
        if start_offset >= upper_bound {
            return Ok(FetchDataInfo { slice: None });
        }
        let first = self
            .segments
            .range(..=start_offset)
            .next_back()
            .map_or(i64::MIN, |(b, _)| *b);
        let mut iter = self.segments.range(first..).peekable();
        while let Some((_, seg)) = iter.next() {
            let next_base = iter.peek().map(|(b, _)| **b);
            if seg.base_offset() >= upper_bound {
                break;
            }
            let max_position =
                if next_base.is_some_and(|n| n <= upper_bound) || upper_bound >= self.next_offset {
                    seg.size()
                } else {
                    match seg.translate_offset(upper_bound, seg.size())? {
                        Some((pos, _)) => pos,
                        None => seg.size(),
                    }
                };
            if let Some(slice) = seg.read(start_offset, max_bytes, max_position, min_one_batch)? {
                if slice.len > 0 {
                    return Ok(FetchDataInfo { slice: Some(slice) });
                }
            }
        }
        Ok(FetchDataInfo { slice: None })
    }

    /// The first record with timestamp >= `target` at or after the log start:
    /// `(offset, timestamp, leader epoch)`.
    pub fn offset_for_timestamp(
        &self,
        target: i64,
    ) -> Result<Option<(i64, i64, Option<i32>)>, LogError> {
        for seg in self.segments.values() {
            if seg.max_timestamp() < target {
                continue;
            }
            if let Some((offset, ts)) =
                seg.find_offset_by_timestamp(target, self.log_start_offset)?
            {
                return Ok(Some((
                    offset,
                    ts,
                    self.epoch_cache.epoch_for_offset(offset),
                )));
            }
        }
        Ok(None)
    }

    /// The record with the largest timestamp (the first such): `(offset, timestamp, epoch)`.
    pub fn offset_of_max_timestamp(&self) -> Result<Option<(i64, i64, Option<i32>)>, LogError> {
        let mut best: Option<&LogSegment> = None;
        for seg in self.segments.values() {
            if seg.max_timestamp() >= 0
                && best.is_none_or(|b| seg.max_timestamp() > b.max_timestamp())
            {
                best = Some(seg);
            }
        }
        let Some(seg) = best else { return Ok(None) };
        Ok(seg
            .offset_of_max_timestamp()?
            .map(|(o, ts)| (o, ts, self.epoch_cache.epoch_for_offset(o))))
    }

    /// Apply retention (`retention.ms`, `retention.bytes`) and the log start offset: delete
    /// whole segments from the front that lie entirely below `upper_bound` (the high
    /// watermark). Returns the number of segments deleted.
    pub fn delete_old_segments(
        &mut self,
        upper_bound: i64,
        now_ms: i64,
    ) -> Result<usize, LogError> {
        let bases: Vec<i64> = self.segments.keys().copied().collect();
        // With tiered storage local disk keeps `local.retention.*`, and only what the remote
        // tier already holds may go.
        let local = self.config.local_retention_applies();
        let (retention_ms, retention_bytes) = if local {
            (
                self.config.local_retention_ms,
                self.config.local_retention_bytes,
            )
        } else {
            (self.config.retention_ms, self.config.retention_bytes)
        };
        let mut size_excess =
            (retention_bytes >= 0).then(|| self.size_bytes() as i64 - retention_bytes);
        let mut count = 0;
        for (i, base) in bases.iter().enumerate() {
            let seg = &self.segments[base];
            let next_base = bases.get(i + 1).copied();
            let seg_end = next_base.unwrap_or(self.next_offset);
            let is_last_and_empty = next_base.is_none() && seg.size() == 0;
            if seg_end > upper_bound || is_last_and_empty {
                break;
            }
            let by_start = next_base.is_some_and(|n| n <= self.log_start_offset);
            if local && seg_end - 1 > self.remote_highest_offset && !by_start {
                break;
            }
            let by_time = self.config.cleanup_delete
                && retention_ms >= 0
                && now_ms - seg.largest_timestamp() > retention_ms;
            let by_size = self.config.cleanup_delete
                && size_excess.is_some_and(|excess| excess - seg.size() as i64 >= 0);
            if !(by_time || by_size || by_start) {
                break;
            }
            if let Some(excess) = size_excess.as_mut().filter(|_| by_size) {
                *excess -= seg.size() as i64;
            }
            count += 1;
        }
        if count == 0 {
            return Ok(0);
        }
        if count == bases.len() {
            // The active segment goes too: roll so the log keeps an (empty) active segment.
            self.roll(now_ms)?;
        }
        for base in &bases[..count] {
            if let Some(seg) = self.segments.remove(base) {
                seg.delete()?;
            }
        }
        let first = *self
            .segments
            .keys()
            .next()
            .expect("an active segment remains");
        self.log_start_offset = self.log_start_offset.max(first);
        self.txns.forget_before(first);
        info!(partition = %self.tp, segments = count, log_start_offset = self.log_start_offset, "deleted old log segments");
        Ok(count)
    }

    /// Move the log start offset forward (DeleteRecords); segments below it go at the next
    /// retention pass.
    pub fn advance_log_start_offset(&mut self, offset: i64) -> Result<(), LogError> {
        if offset > self.next_offset {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start: self.log_start_offset,
                log_end: self.next_offset,
            });
        }
        self.log_start_offset = self.log_start_offset.max(offset);
        Ok(())
    }

    /// Remove everything at and after `offset` (a follower diverging from its leader).
    pub fn truncate_to(&mut self, offset: i64, now_ms: i64) -> Result<(), LogError> {
        if offset >= self.next_offset {
            return Ok(());
        }
        self.truncations += 1;
        let first = *self
            .segments
            .keys()
            .next()
            .expect("a log always has a segment");
        if offset < first {
            return self.truncate_fully_and_start_at(offset, now_ms);
        }
        let config = self.config.clone();
        let doomed: Vec<i64> = self
            .segments
            .range(offset..)
            .map(|(b, _)| *b)
            .filter(|b| *b != first)
            .collect();
        for base in doomed {
            if let Some(seg) = self.segments.remove(&base) {
                seg.delete()?;
            }
        }
        let active = self.active_mut();
        active.truncate_to(offset, &config)?;
        active.make_active(&config)?;
        self.next_offset = active.next_offset()?.unwrap_or(active.base_offset());
        self.recovery_point = self.recovery_point.min(self.next_offset);
        self.log_start_offset = self.log_start_offset.min(self.next_offset);
        self.epoch_cache.truncate_from_end(self.next_offset)?;
        self.rebuild_producer_state()
    }

    /// Drop every segment and start empty at `offset`.
    pub fn truncate_fully_and_start_at(
        &mut self,
        offset: i64,
        now_ms: i64,
    ) -> Result<(), LogError> {
        for (_, seg) in std::mem::take(&mut self.segments) {
            seg.delete()?;
        }
        let seg = LogSegment::create(&self.dir, offset, &self.config, now_ms)?;
        self.segments.insert(offset, seg);
        self.next_offset = offset;
        self.log_start_offset = offset;
        self.recovery_point = offset;
        self.epoch_cache.truncate_from_end(offset)?;
        for off in self.snapshot_offsets()? {
            let p = self.snapshot_path(off);
            fs::remove_file(&p).at(&p)?;
        }
        self.producers = ProducerStateManager::new();
        self.txns.clear();
        Ok(())
    }

    /// The segments compaction may rewrite: everything below the active segment, stopping at
    /// the first segment with records younger than `min.compaction.lag.ms`. None if there is
    /// nothing dirty to clean.
    pub fn compaction_input(
        &self,
        first_dirty_offset: i64,
        now_ms: i64,
    ) -> Option<CompactionInput> {
        let active_base = self.active().base_offset();
        // Never past an open transaction: whether its records count is not known yet.
        let first_open = self.producers.first_ongoing_offset().unwrap_or(i64::MAX);
        let mut segments = Vec::new();
        let mut end = active_base;
        let bases: Vec<i64> = self.segments.keys().copied().collect();
        for (i, seg) in self
            .segments
            .values()
            .enumerate()
            .filter(|(_, s)| s.base_offset() < active_base)
        {
            let seg_end = bases.get(i + 1).copied().unwrap_or(self.next_offset);
            if seg.max_timestamp() > now_ms.saturating_sub(self.config.min_compaction_lag_ms)
                || seg_end > first_open
            {
                end = seg.base_offset();
                break;
            }
            segments.push(SegmentToClean {
                base_offset: seg.base_offset(),
                file: seg.file(),
                size: seg.size(),
            });
        }
        let first_dirty_offset = first_dirty_offset.max(self.log_start_offset);
        if segments.is_empty() || first_dirty_offset >= end {
            return None;
        }
        Some(CompactionInput {
            dir: self.dir.clone(),
            segments,
            first_dirty_offset,
            end_offset: end,
            delete_retention_ms: self.config.delete_retention_ms,
            index_interval_bytes: self.config.index_interval_bytes,
            truncations: self.truncations,
            aborted: self.txns.collect(self.log_start_offset, end),
        })
    }

    /// Share of the non-active bytes at or after `first_dirty_offset` (what
    /// `min.cleanable.dirty.ratio` is compared with).
    pub fn dirty_ratio(&self, first_dirty_offset: i64) -> f64 {
        let active_base = self.active().base_offset();
        let (mut dirty, mut total) = (0u64, 0u64);
        let bases: Vec<i64> = self.segments.keys().copied().collect();
        for (i, base) in bases.iter().enumerate() {
            if *base >= active_base {
                break;
            }
            let size = self.segments[base].size();
            total += size;
            let end = bases.get(i + 1).copied().unwrap_or(active_base);
            if end > first_dirty_offset {
                dirty += size;
            }
        }
        if total == 0 {
            0.0
        } else {
            dirty as f64 / total as f64
        }
    }

    /// Swap in segments rewritten by [`crate::cleaner::compact`]. Segments deleted or
    /// truncated since the input was taken are skipped (their cleaned copies removed).
    pub fn install_compacted(
        &mut self,
        input: &CompactionInput,
        output: &CompactionOutput,
        now_ms: i64,
    ) -> Result<(), LogError> {
        let stale = input.truncations != self.truncations;
        for (base, _, _) in &output.segments {
            let cleaned = |ext: &str| cleaner::cleaned_path(&self.dir, *base, ext);
            if stale || !self.segments.contains_key(base) || *base >= self.active().base_offset() {
                for ext in ["log", "index", "timeindex"] {
                    let _ = fs::remove_file(cleaned(ext));
                }
                continue;
            }
            for ext in ["index", "timeindex"] {
                let old = self.dir.join(segment::file_name(*base, ext));
                match fs::remove_file(&old) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(LogError::io(old, e)),
                }
            }
            for ext in ["log", "index", "timeindex"] {
                let to = self.dir.join(segment::file_name(*base, ext));
                sluice_rt::disk::rename(&cleaned(ext), &to).at(&to)?;
            }
            checkpoint::sync_dir(&self.dir)?;
            let mut seg = LogSegment::open(&self.dir, *base, now_ms)?;
            seg.load_stats()?;
            self.segments.insert(*base, seg);
        }
        Ok(())
    }

    /// Flush and trim the active segment's indexes: the clean-shutdown state.
    pub fn close(&mut self, now_ms: i64) -> Result<(), LogError> {
        self.flush(now_ms)?;
        self.write_producer_snapshot()?;
        let active = self.active_mut();
        active.make_inactive()?;
        active.flush()
    }

    /// Remove the log directory and everything in it.
    pub fn delete(self) -> Result<(), LogError> {
        let dir = self.dir.clone();
        drop(self);
        fs::remove_dir_all(&dir).at(&dir)
    }
}

/// The last segment: the one taking appends (a free function, so the log's other fields stay
/// borrowable beside it).
fn active_segment(segments: &mut BTreeMap<i64, LogSegment>) -> &mut LogSegment {
    segments
        .values_mut()
        .next_back()
        .expect("a log always has an active segment")
}

/// The producer fields of a batch header (the last sequence wraps as Kafka's does).
fn producer_batch(h: &BatchHeader) -> ProducerBatch {
    let last = i64::from(h.base_sequence) + i64::from(h.last_offset_delta);
    ProducerBatch {
        producer_id: h.producer_id,
        epoch: h.producer_epoch,
        first_seq: h.base_sequence,
        last_seq: if last > i64::from(i32::MAX) {
            (last - i64::from(i32::MAX) - 1) as i32
        } else {
            last as i32
        },
        transactional: h.is_transactional(),
    }
}

/// A transaction marker: which producer's transaction ends, how, and by which coordinator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marker {
    pub producer_id: i64,
    pub epoch: i16,
    pub commit: bool,
    pub coordinator_epoch: i32,
}

/// Kafka's control batch for a marker: transactional + control attributes, no sequence, one
/// record whose key is (version 0, type 0 abort / 1 commit) and value (version 0,
/// coordinator epoch).
pub fn control_batch(m: &Marker, now_ms: i64) -> Result<Vec<u8>, LogError> {
    let key = control_key(m.commit);
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&m.coordinator_epoch.to_be_bytes());
    let mut b =
        sluice_protocol::batch::BatchBuilder::new(sluice_protocol::compression::Compression::None)
            .with_producer(m.producer_id, m.epoch, sluice_protocol::batch::NO_SEQUENCE)
            .with_transactional(true)
            .with_control(true);
    b.append(now_ms, Some(&key), Some(&value), &[]);
    b.build(0)
        .map_err(|e| LogError::InvalidRecord(format!("cannot build a marker: {e}")))
}

fn control_key(commit: bool) -> [u8; 4] {
    let mut key = [0u8; 4];
    key[2..].copy_from_slice(&i16::from(commit).to_be_bytes());
    key
}

/// The marker in a control batch, if it is one: (commit, coordinator epoch).
fn read_marker(bytes: &[u8]) -> Option<(bool, i32)> {
    let mut found = None;
    let _ = sluice_protocol::batch::for_each_record(
        bytes,
        sluice_protocol::batch::RecordLimits::default(),
        |r| {
            let key = r.key.filter(|k| k.len() >= 4 && found.is_none());
            if let Some(key) = key {
                let kind = i16::from_be_bytes([key[2], key[3]]);
                let epoch = r
                    .value
                    .filter(|v| v.len() >= 6)
                    .map_or(-1, |v| i32::from_be_bytes([v[2], v[3], v[4], v[5]]));
                if kind == 0 || kind == 1 {
                    found = Some((kind == 1, epoch));
                }
            }
            Ok(())
        },
    );
    found
}

/// Record an appended (offset-assigned) batch in the producer state: an idempotent or
/// transactional producer's data, or a transaction marker (which may end a transaction, and
/// if it aborted one, adds it to the txn index: returns true then).
fn record_batch(
    state: &mut ProducerStateManager,
    txns: &mut TxnIndex,
    h: &BatchHeader,
    bytes: &[u8],
) -> bool {
    if h.producer_id < 0 {
        return false;
    }
    if !h.is_control() {
        state.record(
            &producer_batch(h),
            h.base_offset,
            h.last_offset(),
            h.max_timestamp,
        );
        return false;
    }
    let Some((commit, coordinator_epoch)) = read_marker(bytes) else {
        return false;
    };
    let done = state.record_marker(
        h.producer_id,
        h.producer_epoch,
        coordinator_epoch,
        commit,
        h.base_offset,
        h.max_timestamp,
    );
    match done {
        Some(t) => txns.complete(&t, state.first_ongoing_offset()),
        None => false,
    }
}

/// Base offsets of the segments in `dir`, after removing files a crash left behind.
fn scan_dir(dir: &Path) -> Result<Vec<i64>, LogError> {
    let mut logs = Vec::new();
    let mut indexes = Vec::new();
    for entry in fs::read_dir(dir).at(dir)? {
        let entry = entry.at(dir)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if LEFTOVER_SUFFIXES.iter().any(|s| name.ends_with(s)) {
            fs::remove_file(entry.path()).at(&entry.path())?;
            continue;
        }
        let Some((stem, ext)) = name.split_once('.') else {
            continue;
        };
        let Ok(base) = stem.parse::<i64>() else {
            continue;
        };
        match ext {
            "log" => logs.push(base),
            "index" | "timeindex" => indexes.push((base, entry.path())),
            _ => {}
        }
    }
    for (base, path) in indexes {
        if !logs.contains(&base) {
            fs::remove_file(&path).at(&path)?;
        }
    }
    logs.sort_unstable();
    Ok(logs)
}
