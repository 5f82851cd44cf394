//! [`Partition`]: one hosted partition: its log, its replica state and the delayed operations
//! watching it. Shared (`Arc`) between the replica manager and in-flight requests.
//!
//! Lock order: `state` is taken inside `log` (appends update the state while holding the
//! log's write lock, so LEO and HW change in log order); neither is held across an await.
//! Methods that write to the log do blocking file I/O, and fsyncs (`flush.messages`, a
//! segment roll) after releasing the log's lock: call them from a blocking thread (the
//! replica manager does), never from an async worker.

use std::sync::{Arc, Mutex, RwLock};

use sluice_metadata::remote::RemoteLog;
use sluice_metadata::Uuid;
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;
use sluice_storage::log::FileSlice;
use sluice_storage::log_manager::SharedLog;
use sluice_storage::txn_index::AbortedTxn;
use sluice_storage::{LogAppendInfo, LogError, Marker};

use crate::error_map::log_error_code;
use crate::replica::purgatory::Watchers;
use crate::replica::state::ReplicaState;

/// Per-partition settings that are not the log's business.
#[derive(Clone, Copy, Debug)]
pub struct PartitionSettings {
    pub min_insync_replicas: i32,
    /// `leader.replication.throttled.replicas` names this replica: as leader, what it
    /// sends out-of-sync followers counts against `leader.replication.throttled.rate`.
    pub leader_throttled: bool,
    /// `follower.replication.throttled.replicas` names this replica: while out of sync,
    /// what it fetches counts against `follower.replication.throttled.rate`.
    pub follower_throttled: bool,
    /// A mirror topic not yet promoted: only the copy from the source cluster appends.
    pub read_only_mirror: bool,
    /// A promoted mirror's promotion epoch (0 otherwise): local writes are taken only in
    /// this leader epoch or later, so that they are told from the copied batches below it.
    pub writable_from_epoch: i32,
}

/// Why an append was refused.
#[derive(Debug)]
pub enum AppendError {
    Code(ErrorCode, String),
    Log(LogError),
}

impl AppendError {
    pub fn code(&self) -> ErrorCode {
        match self {
            AppendError::Code(c, _) => *c,
            AppendError::Log(e) => log_error_code(e),
        }
    }

    pub fn message(&self) -> String {
        match self {
            AppendError::Code(_, m) => m.clone(),
            AppendError::Log(e) => e.to_string(),
        }
    }

    /// The records at fault (KIP-467): (index in the batch, message).
    pub fn record_errors(&self) -> Vec<(i32, Option<String>)> {
        match self {
            AppendError::Log(LogError::RecordErrors { errors, .. }) => {
                errors.iter().map(|(i, m)| (*i, Some(m.clone()))).collect()
            }
            _ => Vec::new(),
        }
    }
}

/// What a fetch read: offsets for the response plus the bytes to send.
#[derive(Debug)]
pub struct ReadResult {
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    pub slice: Option<FileSlice>,
    /// read_committed: the aborted transactions in the range read.
    pub aborted: Vec<AbortedTxn>,
}

/// Which offsets a reader may see.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FetchIsolation {
    /// A follower: everything up to the log end.
    LogEnd,
    /// read_uncommitted consumers: below the high watermark.
    HighWatermark,
    /// read_committed consumers: below the last stable offset.
    TxnCommitted,
}

pub struct Partition {
    pub tp: TopicPartition,
    pub topic_id: Uuid,
    pub log: SharedLog,
    state: Mutex<ReplicaState>,
    settings: RwLock<PartitionSettings>,
    /// Delayed operations parked on this partition; fired on every change of its log end,
    /// high watermark, leadership or log start.
    pub watchers: Watchers,
    /// Per-topic traffic counters (`/metrics`), resolved once so the hot paths only add.
    pub metrics: PartitionMetrics,
    /// Told of the log's I/O errors: its directory goes offline (see `LogManager::fail_on`).
    disk: Option<Arc<sluice_storage::LogManager>>,
    /// Tiered storage: the segments the remote tier holds, from the metadata image.
    remote: RwLock<Option<Arc<RemoteLog>>>,
    /// The first offset the remote tier holds (-1: none), read on every fetch without a lock.
    remote_start: std::sync::atomic::AtomicI64,
}

/// A partition's handles on its topic's traffic counters.
pub struct PartitionMetrics {
    pub bytes_in: metrics::Counter,
    pub messages_in: metrics::Counter,
    pub bytes_out: metrics::Counter,
    pub replication_bytes_out: metrics::Counter,
}

impl PartitionMetrics {
    fn new(topic: &str) -> Self {
        let counter = |name: &'static str| metrics::counter!(name, "topic" => topic.to_string());
        Self {
            bytes_in: counter("sluice_topic_bytes_in_total"),
            messages_in: counter("sluice_topic_messages_in_total"),
            bytes_out: counter("sluice_topic_bytes_out_total"),
            replication_bytes_out: counter("sluice_replication_bytes_out_total"),
        }
    }
}

/// See [`Partition::ack_state`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckState {
    Waiting,
    Committed,
    Deposed,
}

/// Where and as of what a follower's fetch was sent: the leader, its epoch and the fetch
/// offset (this replica's log end then).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchedFrom {
    pub leader: i32,
    pub leader_epoch: i32,
    pub offset: i64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Partition {
    pub fn new(
        tp: TopicPartition,
        topic_id: Uuid,
        log: SharedLog,
        node_id: i32,
        settings: PartitionSettings,
    ) -> Self {
        let leo = log
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .log_end_offset();
        let mut state = ReplicaState::new(node_id, leo, 0);
        state.set_min_isr(settings.min_insync_replicas);
        Self {
            topic_id,
            log,
            state: Mutex::new(state),
            settings: RwLock::new(settings),
            watchers: Watchers::default(),
            metrics: PartitionMetrics::new(&tp.topic),
            disk: None,
            remote: RwLock::new(None),
            remote_start: std::sync::atomic::AtomicI64::new(-1),
            tp,
        }
    }

    /// Report the log's I/O errors to `logs`, which takes the failed directory offline.
    pub fn reporting_to(mut self, logs: Arc<sluice_storage::LogManager>) -> Self {
        self.disk = Some(logs);
        self
    }

    /// `result`, after reporting it if it is an I/O error.
    fn seen<T>(&self, result: Result<T, LogError>) -> Result<T, LogError> {
        if let (Err(e), Some(logs)) = (&result, &self.disk) {
            logs.fail_on(e);
        }
        result
    }

    pub fn set_settings(&self, settings: PartitionSettings) {
        lock(&self.state).set_min_isr(settings.min_insync_replicas);
        *self
            .settings
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = settings;
    }

    pub fn settings(&self) -> PartitionSettings {
        *self
            .settings
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn update_registration(&self, reg: &sluice_metadata::image::PartitionRegistration) {
        let moved = {
            let mut s = lock(&self.state);
            let epoch_changed = s.leader_epoch() != reg.leader_epoch || s.leader_id() != reg.leader;
            s.set_partition_epoch(reg.partition_epoch);
            // Waiters learn of a new HW, and of a new leader (acks=all answers at once).
            let isr_changed = s.isr() != reg.isr.as_slice();
            if epoch_changed || isr_changed {
                tracing::debug!(partition = %self.tp, leader = reg.leader, leader_epoch = reg.leader_epoch, isr = ?reg.isr, "partition registration changed");
            }
            s.update_registration(reg.leader, reg.leader_epoch, &reg.replicas, &reg.isr)
                || epoch_changed
        };
        if moved {
            self.watchers.fire();
        }
    }

    /// Its log's directory failed: it neither leads nor follows any more, and what waits on
    /// it (acks=all producers, parked fetches) is answered now.
    pub fn go_offline(&self) {
        {
            let mut s = lock(&self.state);
            let (epoch, replicas, isr) =
                (s.leader_epoch(), s.replicas().to_vec(), s.isr().to_vec());
            s.update_registration(-1, epoch, &replicas, &isr);
        }
        self.watchers.fire();
    }

    /// Whether `replica` is in this partition's ISR as last registered.
    pub fn in_isr(&self, replica: i32) -> bool {
        lock(&self.state).isr().contains(&replica)
    }

    pub fn state(&self) -> ReplicaState {
        lock(&self.state).clone()
    }

    pub fn high_watermark(&self) -> i64 {
        lock(&self.state).high_watermark()
    }

    /// The HW, and whether it is known to cover what earlier leaders acknowledged (false on
    /// a leader whose HW has not yet reached its log end at election).
    pub fn high_watermark_known(&self) -> (i64, bool) {
        let s = lock(&self.state);
        (
            s.high_watermark(),
            !s.is_leader() || s.high_watermark_caught_up(),
        )
    }

    pub fn leader_epoch(&self) -> i32 {
        lock(&self.state).leader_epoch()
    }

    pub(super) fn read_log(&self) -> std::sync::RwLockReadGuard<'_, sluice_storage::Log> {
        self.log
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The log start: the first offset of the remote tier where it holds older records than
    /// local disk (tiered storage), else the local log start.
    pub fn log_start_offset(&self) -> i64 {
        let local = self.local_log_start_offset();
        match self.remote_start() {
            Some(remote) => remote.min(local),
            None => local,
        }
    }

    fn remote_start(&self) -> Option<i64> {
        let start = self.remote_start.load(std::sync::atomic::Ordering::Acquire);
        (start >= 0).then_some(start)
    }

    /// The first offset on local disk.
    pub fn local_log_start_offset(&self) -> i64 {
        self.read_log().log_start_offset()
    }

    /// The remote tier's segments of this partition (tiered storage), if it has any.
    pub fn remote_log(&self) -> Option<Arc<RemoteLog>> {
        self.remote
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The remote log metadata changed: local retention may delete what is now copied.
    pub fn set_remote_log(&self, remote: Option<Arc<RemoteLog>>) {
        let highest = remote.as_ref().map_or(-1, |r| r.highest_offset());
        let start = remote.as_ref().and_then(|r| r.start_offset()).unwrap_or(-1);
        *self
            .remote
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = remote;
        self.remote_start
            .store(start, std::sync::atomic::Ordering::Release);
        self.log
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .set_remote_highest_offset(highest);
        self.watchers.fire();
    }

    /// The remote segment to read `offset` from: one below the local log start that holds it.
    pub fn remote_segment_for(&self, offset: i64) -> Option<(Arc<RemoteLog>, usize)> {
        if self.remote_start().is_none_or(|s| offset < s) || offset >= self.local_log_start_offset()
        {
            return None;
        }
        let remote = self.remote_log()?;
        let seg = remote.segment_for(offset)?;
        let i = remote
            .segments
            .iter()
            .position(|s| s.segment_id == seg.segment_id)?;
        Some((remote, i))
    }

    pub fn log_end_offset(&self) -> i64 {
        self.read_log().log_end_offset()
    }

    /// The idempotent producers this replica knows: (id, epoch, last sequence, last
    /// timestamp).
    pub fn producers(&self) -> Vec<(i64, sluice_storage::producer_state::ProducerEntry)> {
        self.read_log()
            .producer_state()
            .iter()
            .map(|(id, e)| (*id, e.clone()))
            .collect()
    }

    /// Bytes of every segment of the replica's log.
    pub fn size_bytes(&self) -> u64 {
        self.read_log().size_bytes()
    }

    /// Check the client's view of the leader epoch (-1 means "not checked").
    pub fn check_leader_epoch(&self, current_leader_epoch: i32) -> Result<(), ErrorCode> {
        let ours = self.leader_epoch();
        if current_leader_epoch < 0 || current_leader_epoch == ours {
            Ok(())
        } else if current_leader_epoch > ours {
            Err(ErrorCode::UnknownLeaderEpoch)
        } else {
            Err(ErrorCode::FencedLeaderEpoch)
        }
    }

    /// Append a producer's batches as leader; with `acks_all` the ISR must be at least
    /// `min.insync.replicas` strong, checked before appending (Kafka's NOT_ENOUGH_REPLICAS).
    /// Returns what was appended and the leader epoch it was appended in.
    pub fn append_as_leader(
        &self,
        records: bytes::Bytes,
        acks_all: bool,
        now_ms: i64,
    ) -> Result<(LogAppendInfo, i32), AppendError> {
        self.leader_append(acks_all, |log, epoch| {
            log.append_as_leader(records, epoch, now_ms)
        })
    }

    /// Append a coordinator's own batches (see `Log::append_as_coordinator`); acks=all rules.
    pub fn append_as_coordinator(
        &self,
        records: bytes::Bytes,
        now_ms: i64,
    ) -> Result<(LogAppendInfo, i32), AppendError> {
        self.leader_append(true, |log, epoch| {
            log.append_as_coordinator(records, epoch, now_ms)
        })
    }

    /// Write a transaction marker as leader (the coordinator's WriteTxnMarkers). Like an
    /// acks=all append, it needs `min.insync.replicas` in sync. Returns the marker's append
    /// and the leader epoch it was written in (for [`Partition::ack_state`]).
    pub fn append_marker(
        &self,
        marker: &Marker,
        now_ms: i64,
    ) -> Result<(LogAppendInfo, i32), AppendError> {
        self.leader_append(true, |log, epoch| log.append_marker(marker, epoch, now_ms))
    }

    /// Append as leader under the log lock: refused unless this replica leads (and, for
    /// acks=all, has `min.insync.replicas` in sync); then the LEO/HW and waiters follow.
    /// Returns what `append` returned and the leader epoch it appended in.
    fn leader_append<T>(
        &self,
        acks_all: bool,
        append: impl FnOnce(&mut sluice_storage::Log, i32) -> Result<T, LogError>,
    ) -> Result<(T, i32), AppendError> {
        let settings = self.settings();
        if settings.read_only_mirror {
            return Err(AppendError::Code(
                ErrorCode::InvalidRequest,
                format!(
                    "Cannot append records to read-only mirror topic '{}'",
                    self.tp.topic
                ),
            ));
        }
        self.leader_append_unchecked(
            acks_all,
            settings.min_insync_replicas,
            settings.writable_from_epoch,
            append,
        )
    }

    /// Mirror leader: append batches copied from the source cluster's partition, keeping
    /// their offsets (stamped with this leader's epoch, outside the CRC, as any leader's
    /// append is, so that this cluster's replicas and truncation follow its own epochs).
    /// `expected_end` is the offset they were fetched from: if the log no longer ends
    /// there (a truncation, another leader), the answer is stale and nothing is appended
    /// (None), as when the topic was promoted meanwhile. Returns the new log end offset.
    pub fn append_as_mirror(
        &self,
        mut batches: bytes::BytesMut,
        expected_end: i64,
        now_ms: i64,
    ) -> Result<Option<i64>, AppendError> {
        self.leader_append_unchecked(false, 0, 0, |log, epoch| {
            // Promoted since the fetch: the source's records no longer come in.
            if !self.settings().read_only_mirror || log.log_end_offset() != expected_end {
                return Ok(None);
            }
            sluice_protocol::batch::set_leader_epochs(&mut batches, epoch);
            let end = log.append_as_follower(&batches, now_ms)?;
            Ok(Some(end))
        })
        .map(|(leo, _)| leo)
    }

    /// A mirror promoted in leader epoch `promoted_epoch`: abort the source's transactions
    /// still open in it (their markers will never be copied), so its last stable offset
    /// moves on and read_committed readers see past them, as if their coordinator had
    /// aborted them. Only transactions that began in the copied records: those below the
    /// first batch of `promoted_epoch` or later (every copied batch is stamped below it,
    /// every local write at or above it), or below the log end when there is none yet.
    /// Returns how many; none is left to abort afterwards, so it may be called again.
    pub fn abort_copied_transactions(
        &self,
        promoted_epoch: i32,
        now_ms: i64,
    ) -> Result<usize, AppendError> {
        let boundary = {
            let log = self
                .log
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            log.leader_epoch_cache()
                .entries()
                .iter()
                .find(|(epoch, _)| *epoch >= promoted_epoch)
                .map_or(log.log_end_offset(), |(_, start)| *start)
        };
        let mut aborted = 0;
        for (producer_id, entry) in self.producers() {
            if entry.txn_first_offset.is_some_and(|first| first < boundary) {
                let marker = Marker {
                    producer_id,
                    epoch: entry.epoch,
                    commit: false,
                    coordinator_epoch: entry.coordinator_epoch.max(0),
                };
                self.append_marker(&marker, now_ms)?;
                aborted += 1;
            }
        }
        Ok(aborted)
    }

    fn leader_append_unchecked<T>(
        &self,
        acks_all: bool,
        min_isr: i32,
        min_epoch: i32,
        append: impl FnOnce(&mut sluice_storage::Log, i32) -> Result<T, LogError>,
    ) -> Result<(T, i32), AppendError> {
        let mut log = self
            .log
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (epoch, isr_len) = {
            let s = lock(&self.state);
            if !s.is_leader() {
                return Err(AppendError::Code(
                    ErrorCode::NotLeaderOrFollower,
                    format!("this broker is not the leader of {}", self.tp),
                ));
            }
            if s.leader_epoch() < min_epoch {
                // A promoted mirror whose new epoch has not reached this broker yet.
                return Err(AppendError::Code(
                    ErrorCode::NotLeaderOrFollower,
                    format!(
                        "{} takes writes from leader epoch {min_epoch} (this broker is in {})",
                        self.tp,
                        s.leader_epoch()
                    ),
                ));
            }
            (s.leader_epoch(), s.isr().len() as i32)
        };
        if acks_all && isr_len < min_isr {
            return Err(AppendError::Code(
                ErrorCode::NotEnoughReplicas,
                format!(
                    "the in-sync replicas of {} are {isr_len}, below min.insync.replicas={min_isr}",
                    self.tp
                ),
            ));
        }
        let out = self
            .seen(append(&mut log, epoch))
            .map_err(AppendError::Log)?;
        let hw = {
            let mut s = lock(&self.state);
            s.on_local_append(log.log_end_offset());
            s.high_watermark()
        };
        log.on_high_watermark(hw);
        let io = log.take_pending_io();
        drop(log);
        // Followers wait on the log end, consumers on the HW: both are looked at again.
        self.watchers.fire();
        // fsyncs owed (flush.messages, a roll) before the append is answered.
        self.seen(sluice_storage::log_manager::run_pending_io(&self.log, io))
            .map_err(AppendError::Log)?;
        Ok((out, epoch))
    }

    /// Leader: a follower fetched from `fetch_offset`, so it has everything below it. The
    /// HW may move (waking acks=all producers and consumers). Not the leader: refused.
    pub fn on_follower_fetch(
        &self,
        follower: i32,
        fetch_offset: i64,
        now_ms: i64,
    ) -> Result<(), ErrorCode> {
        let moved = {
            let mut s = lock(&self.state);
            if !s.is_leader() {
                return Err(ErrorCode::NotLeaderOrFollower);
            }
            if !s.replicas().contains(&follower) {
                return Err(ErrorCode::NotLeaderOrFollower);
            }
            s.on_follower_fetch_at(follower, fetch_offset, now_ms)
        };
        if moved {
            self.watchers.fire();
        }
        Ok(())
    }

    pub fn is_leader(&self) -> bool {
        lock(&self.state).is_leader()
    }

    /// Leader: the replica a consumer reading from `fetch_offset` should read from instead
    /// (KIP-392, Kafka's `RackAwareReplicaSelector`), given which replicas are in the
    /// consumer's rack. None when this leader is in that rack itself or no in-sync follower
    /// there has the offset yet; otherwise the one with the most data (then the lowest id).
    pub fn preferred_read_replica(
        &self,
        fetch_offset: i64,
        in_rack: impl Fn(i32) -> bool,
    ) -> Option<i32> {
        let s = lock(&self.state);
        if !s.is_leader() || in_rack(s.node_id()) {
            return None;
        }
        s.isr()
            .iter()
            .copied()
            .filter(|r| *r != s.node_id() && in_rack(*r))
            .filter_map(|r| {
                s.follower_leo(r)
                    .filter(|leo| *leo >= fetch_offset)
                    .map(|leo| (leo, r))
            })
            .max_by_key(|(leo, r)| (*leo, -r))
            .map(|(_, r)| r)
    }

    /// Where an acks=all append that ends at `end` (exclusive), made as leader in
    /// `leader_epoch`, stands. Committed only while this replica still leads in that epoch:
    /// once deposed, its high watermark follows another leader, whose records at those
    /// offsets may be different ones.
    pub fn ack_state(&self, end: i64, leader_epoch: i32) -> AckState {
        let s = lock(&self.state);
        if !s.is_leader() || s.leader_epoch() != leader_epoch {
            AckState::Deposed
        } else if s.high_watermark() >= end {
            AckState::Committed
        } else {
            AckState::Waiting
        }
    }

    /// Follower: append what the leader sent, unchanged, and take the leader's HW (never
    /// beyond what this replica has). Returns the new log end offset, or None when the
    /// answer is stale: it came from `fetched.leader` under `fetched.leader_epoch` for
    /// `fetched.offset`, and since then the leader or epoch changed or the log moved (a
    /// delayed answer from a deposed leader must not land on top of what the new leader
    /// sent, or after this replica truncated for it). Checked under the log lock, which
    /// truncation for a new leader also takes, so a check that passes stays true.
    pub fn append_as_follower(
        &self,
        batches: &[u8],
        leader_hw: i64,
        fetched: FetchedFrom,
        now_ms: i64,
    ) -> Result<Option<i64>, LogError> {
        let mut log = self
            .log
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        {
            let s = lock(&self.state);
            if s.leader_id() != fetched.leader
                || s.leader_epoch() != fetched.leader_epoch
                || log.log_end_offset() != fetched.offset
            {
                return Ok(None);
            }
        }
        let leo = if batches.is_empty() {
            log.log_end_offset()
        } else {
            self.seen(log.append_as_follower(batches, now_ms))?
        };
        let mut s = lock(&self.state);
        s.on_local_append(leo);
        s.on_leader_high_watermark(leader_hw);
        let hw = s.high_watermark();
        drop(s);
        log.on_high_watermark(hw);
        let io = log.take_pending_io();
        drop(log);
        self.watchers.fire();
        self.seen(sluice_storage::log_manager::run_pending_io(&self.log, io))?;
        Ok(Some(leo))
    }

    /// Follower: drop everything at and above `offset` (diverged from the leader).
    pub fn truncate_to(&self, offset: i64, now_ms: i64) -> Result<i64, LogError> {
        let mut log = self
            .log
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.seen(log.truncate_to(offset, now_ms))?;
        let (leo, start) = (log.log_end_offset(), log.log_start_offset());
        lock(&self.state).on_local_reset(leo, start);
        drop(log);
        self.watchers.fire();
        Ok(leo)
    }

    /// Follower: the leader no longer has what this replica misses; restart empty at the
    /// leader's log start.
    pub fn truncate_fully_and_start_at(&self, offset: i64, now_ms: i64) -> Result<(), LogError> {
        let mut log = self
            .log
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.seen(log.truncate_fully_and_start_at(offset, now_ms))?;
        lock(&self.state).on_local_reset(offset, offset);
        drop(log);
        self.watchers.fire();
        Ok(())
    }

    /// Start empty at `offset`, the end of the remote tier (a follower that starts from it).
    pub fn start_from_remote(
        &self,
        offset: i64,
        epochs: &[(i32, i64)],
        producer_snapshot: Option<&[u8]>,
        now_ms: i64,
    ) -> Result<(), LogError> {
        let mut log = self
            .log
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.seen(log.start_from_remote(offset, epochs, producer_snapshot, now_ms))?;
        lock(&self.state).on_local_reset(offset, offset);
        drop(log);
        self.watchers.fire();
        Ok(())
    }

    /// DeleteRecords as leader: move the log start offset to `offset` (-1: the high
    /// watermark), no further than the high watermark, and delete the whole segments below
    /// it. Returns the new log start offset.
    pub fn delete_records_below(&self, offset: i64) -> Result<i64, ErrorCode> {
        let hw = self.high_watermark();
        let target = if offset == -1 { hw } else { offset };
        if target < 0 || target > hw {
            return Err(ErrorCode::OffsetOutOfRange);
        }
        let mut log = self
            .log
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.seen(log.advance_log_start_offset(target))
            .map_err(|e| log_error_code(&e))?;
        self.seen(log.delete_old_segments(hw, crate::now_ms()))
            .map_err(|e| log_error_code(&e))?;
        let start = log.log_start_offset();
        let io = log.take_pending_io();
        drop(log);
        self.watchers.fire();
        self.seen(sluice_storage::log_manager::run_pending_io(&self.log, io))
            .map_err(|e| log_error_code(&e))?;
        Ok(start)
    }

    /// fsync everything this replica holds. A leader does this before its ISR shrinks to
    /// itself alone, and again when the controller's metadata says it has: from then on its
    /// disk holds the only copy of what acks=all acknowledged, and a power loss must not
    /// take that copy's unsynced tail with it (the replica would come back as the last
    /// member of the ISR, so the leader, and the others would truncate to it). Kafka closes
    /// the same hole with KIP-966's eligible leader replicas.
    pub fn flush_log(&self, now_ms: i64) -> Result<(), LogError> {
        let flushed = self
            .log
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .flush(now_ms);
        self.seen(flushed)
    }

    /// Leader: the ISR change this partition needs now, as a request for the controller.
    pub fn isr_proposal(
        &self,
        now_ms: i64,
        lag_max_ms: i64,
        live: impl Fn(i32) -> bool,
    ) -> Option<sluice_metadata::controller_types::IsrChange> {
        let mut s = lock(&self.state);
        let isr = s.isr_proposal(now_ms, lag_max_ms, live)?;
        Some(sluice_metadata::controller_types::IsrChange {
            leader: s.leader_id(),
            topic_id: self.topic_id,
            partition: self.tp.partition.0,
            leader_epoch: s.leader_epoch(),
            partition_epoch: s.partition_epoch(),
            isr,
        })
    }

    /// The latest leader epoch in this replica's log.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.read_log().leader_epoch_cache().latest_epoch()
    }

    /// This replica's own (epoch, end offset) for `epoch`, as a follower deciding where to
    /// truncate compares it with the leader's answer.
    pub fn own_end_offset_for(&self, epoch: i32) -> Option<(i32, i64)> {
        let log = self.read_log();
        log.leader_epoch_cache()
            .end_offset_for(epoch, log.log_end_offset(), None)
    }

    /// OffsetForLeaderEpoch on the leader: (epoch, end offset) for a follower or consumer
    /// at `epoch`.
    pub fn end_offset_for(&self, epoch: i32) -> Option<(i32, i64)> {
        let log = self.read_log();
        log.leader_epoch_cache().end_offset_for(
            epoch,
            log.log_end_offset(),
            Some(self.leader_epoch()),
        )
    }

    /// Read for a fetch. `min_one_batch` returns a whole first batch even above `max_bytes`.
    pub fn read(
        &self,
        fetch_offset: i64,
        max_bytes: u64,
        isolation: FetchIsolation,
        min_one_batch: bool,
    ) -> Result<ReadResult, LogError> {
        let remote_start = self.remote_start();
        let log = self.read_log();
        let hw = self.high_watermark();
        let lso = log.last_stable_offset(hw);
        let upper = match isolation {
            FetchIsolation::LogEnd => log.log_end_offset(),
            FetchIsolation::HighWatermark => hw,
            FetchIsolation::TxnCommitted => lso,
        };
        let info = self.seen(log.read(fetch_offset, max_bytes, upper, min_one_batch))?;
        let aborted = match (&info.slice, isolation) {
            (Some(_), FetchIsolation::TxnCommitted) => log.aborted_txns(fetch_offset, upper),
            _ => Vec::new(),
        };
        Ok(ReadResult {
            high_watermark: hw,
            last_stable_offset: lso,
            log_start_offset: remote_start
                .map_or(log.log_start_offset(), |r| r.min(log.log_start_offset())),
            slice: info.slice,
            aborted,
        })
    }

    /// The last stable offset (read_committed consumers' end).
    pub fn last_stable_offset(&self) -> i64 {
        let log = self.read_log();
        log.last_stable_offset(self.high_watermark())
    }

    /// Every batch from the log start to the log end, with its bytes (coordinators loading
    /// their state). Stops at the first unreadable chunk.
    pub fn scan(&self, visit: impl FnMut(&sluice_protocol::batch::BatchHeader, &[u8])) {
        self.scan_from(self.log_start_offset(), FetchIsolation::LogEnd, visit);
    }

    /// Every batch from `from` up to `isolation`'s end, with its bytes; returns the offset
    /// after the last batch visited (`from` when none). Stops at the first unreadable chunk.
    pub fn scan_from(
        &self,
        from: i64,
        isolation: FetchIsolation,
        mut visit: impl FnMut(&sluice_protocol::batch::BatchHeader, &[u8]),
    ) -> i64 {
        let mut next = from;
        let mut buf = Vec::new();
        loop {
            let read = match self.read(next, 1 << 20, isolation, true) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(partition = %self.tp, error = %e, "cannot read to load state");
                    return next;
                }
            };
            let Some(slice) = read.slice else { return next };
            buf.clear();
            if slice.read_into(&mut buf).is_err() {
                return next;
            }
            let before = next;
            for (h, bytes) in sluice_protocol::batch::BatchIter::new(&buf).map_while(Result::ok) {
                if h.next_offset() > next {
                    next = h.next_offset();
                    visit(&h, bytes);
                }
            }
            if next == before {
                return next;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_metadata::image::PartitionRegistration;
    use sluice_protocol::batch::BatchBuilder;
    use sluice_protocol::compression::Compression;
    use sluice_storage::{LogConfig, LogManager};

    fn batch(base: i64, n: usize) -> Vec<u8> {
        let mut b = BatchBuilder::new(Compression::None);
        for i in 0..n {
            b.append(0, None, Some(format!("v{i}").as_bytes()), &[]);
        }
        b.build(base).unwrap()
    }

    /// Partition t-0 as node 3 holds it, with an empty log under `dir`.
    fn replica_on_node_3(dir: &std::path::Path) -> Partition {
        let logs = LogManager::open(dir).unwrap();
        let tp = TopicPartition::new("t", 0);
        let log = logs
            .get_or_create(&tp, [1; 16], LogConfig::default(), 0)
            .unwrap();
        let settings = PartitionSettings {
            min_insync_replicas: 1,
            leader_throttled: false,
            follower_throttled: false,
            read_only_mirror: false,
            writable_from_epoch: 0,
        };
        Partition::new(tp, Uuid::nil(), log, 3, settings)
    }

    #[test]
    fn an_append_is_committed_only_while_its_leader_still_leads() {
        let dir = tempfile::tempdir().unwrap();
        let p = replica_on_node_3(dir.path());
        let reg = |leader, leader_epoch| PartitionRegistration {
            replicas: vec![3, 1],
            isr: vec![3, 1],
            leader,
            leader_epoch,
            partition_epoch: leader_epoch,
            adding: vec![],
            removing: vec![],
            elr: Default::default(),
        };
        p.update_registration(&reg(3, 1));
        let (info, _) = p.append_as_leader(batch(0, 2).into(), true, 0).unwrap();
        let end = info.last_offset + 1;
        assert_eq!(p.ack_state(end, 1), AckState::Waiting);
        // Node 1 takes over; this replica truncates and copies node 1's log, whose HW covers
        // the same offsets with other records: still not committed.
        p.update_registration(&reg(1, 2));
        p.truncate_to(0, 0).unwrap();
        let fetched = FetchedFrom {
            leader: 1,
            leader_epoch: 2,
            offset: 0,
        };
        p.append_as_follower(&batch(0, 3), 3, fetched, 0).unwrap();
        assert!(p.high_watermark() >= end);
        assert_eq!(p.ack_state(end, 1), AckState::Deposed);
    }

    fn txn_batch(base: i64, producer_id: i64, sequence: i32) -> Vec<u8> {
        let mut b = BatchBuilder::new(Compression::None)
            .with_producer(producer_id, 0, sequence)
            .with_transactional(true);
        b.append(0, None, Some(b"t".as_slice()), &[]);
        b.build(base).unwrap()
    }

    #[test]
    fn a_promoted_mirror_aborts_only_the_copied_open_transactions() {
        let dir = tempfile::tempdir().unwrap();
        let p = replica_on_node_3(dir.path());
        let lead = |leader_epoch| PartitionRegistration {
            replicas: vec![3],
            isr: vec![3],
            leader: 3,
            leader_epoch,
            partition_epoch: leader_epoch,
            adding: vec![],
            removing: vec![],
            elr: Default::default(),
        };
        let mirror = |read_only_mirror, writable_from_epoch| PartitionSettings {
            min_insync_replicas: 1,
            leader_throttled: false,
            follower_throttled: false,
            read_only_mirror,
            writable_from_epoch,
        };
        // Copying in epoch 2: a plain batch and a transaction of the source's producer 7 left
        // open (its marker never comes).
        p.set_settings(mirror(true, 0));
        p.update_registration(&lead(2));
        assert_eq!(
            p.append_as_mirror(batch(0, 2).as_slice().into(), 0, 0)
                .unwrap(),
            Some(2)
        );
        assert_eq!(
            p.append_as_mirror(txn_batch(2, 7, 0).as_slice().into(), 2, 0)
                .unwrap(),
            Some(3)
        );
        assert!(p.append_as_leader(batch(0, 1).into(), true, 0).is_err());
        // Promoted in epoch 5: the settings arrive first, and local writes wait for the epoch.
        p.set_settings(mirror(false, 5));
        let early = p.append_as_leader(batch(0, 1).into(), true, 0).unwrap_err();
        assert!(
            matches!(early, AppendError::Code(ErrorCode::NotLeaderOrFollower, _)),
            "{early:?}"
        );
        assert_eq!(
            p.append_as_mirror(batch(3, 1).as_slice().into(), 3, 0)
                .unwrap(),
            None,
            "nothing is copied once promoted"
        );
        p.update_registration(&lead(5));
        // A local transaction begins before the copied one is aborted.
        p.append_as_leader(txn_batch(0, 9, 0).into(), true, 0)
            .unwrap();
        assert_eq!(p.abort_copied_transactions(5, 0).unwrap(), 1);
        let open: Vec<i64> = p
            .producers()
            .into_iter()
            .filter(|(_, e)| e.txn_first_offset.is_some())
            .map(|(id, _)| id)
            .collect();
        assert_eq!(open, vec![9], "the local transaction stays open");
        // Again, as after a restart or a new leadership: nothing more to abort.
        p.update_registration(&lead(6));
        assert_eq!(p.abort_copied_transactions(5, 0).unwrap(), 0);
    }

    #[test]
    fn a_stale_fetch_answer_is_not_appended() {
        let dir = tempfile::tempdir().unwrap();
        let p = replica_on_node_3(dir.path());
        let follow = |leader, leader_epoch| PartitionRegistration {
            replicas: vec![1, 2, 3],
            isr: vec![1, 2, 3],
            leader,
            leader_epoch,
            partition_epoch: leader_epoch,
            adding: vec![],
            removing: vec![],
            elr: Default::default(),
        };
        p.update_registration(&follow(1, 4));
        let from = |leader, leader_epoch, offset| FetchedFrom {
            leader,
            leader_epoch,
            offset,
        };
        assert_eq!(
            p.append_as_follower(&batch(0, 3), 0, from(1, 4, 0), 0)
                .unwrap(),
            Some(3)
        );
        // An answer to a fetch sent at another offset, under an older epoch or to another
        // leader changes nothing.
        for stale in [from(1, 4, 0), from(1, 3, 3), from(2, 4, 3)] {
            assert_eq!(
                p.append_as_follower(&batch(3, 2), 0, stale, 0).unwrap(),
                None
            );
            assert_eq!(p.log_end_offset(), 3);
        }
        // Leadership moved to 2 (epoch 5) while a fetch to 1 was in flight: its answer is
        // dropped, the new leader's is taken.
        p.update_registration(&follow(2, 5));
        assert_eq!(
            p.append_as_follower(&batch(3, 2), 0, from(1, 4, 3), 0)
                .unwrap(),
            None
        );
        assert_eq!(
            p.append_as_follower(&batch(3, 2), 0, from(2, 5, 3), 0)
                .unwrap(),
            Some(5)
        );
    }
}
