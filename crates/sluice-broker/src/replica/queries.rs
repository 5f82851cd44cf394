//! What the admin and offset APIs ask of hosted partitions: offsets by time (ListOffsets),
//! where an epoch ends (OffsetForLeaderEpoch), active producers (DescribeProducers), moving
//! the log start (DeleteRecords) and the log directory's contents (DescribeLogDirs). Each
//! answers with Kafka's error for a partition not hosted, not led, or asked about under a
//! stale leader epoch.

use std::sync::Arc;

use sluice_protocol::types::{LeaderEpoch, Offset, TopicPartition};
use sluice_protocol::ErrorCode;
use sluice_storage::producer_state::ProducerEntry;

use super::manager::ReplicaManager;
use super::partition::Partition;
use crate::error_map::log_error_code;

/// Which offset ListOffsets asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetSpec {
    /// -1: the high watermark (the last stable offset for read_committed).
    Latest,
    /// -2: the log start (the remote tier's, with tiered storage).
    Earliest,
    /// -4: the first offset on local disk (the log start without tiered storage).
    EarliestLocal,
    /// -3: the record with the largest timestamp.
    MaxTimestamp,
    /// -5: the last offset the remote tier holds (-1: none, or not a tiered topic).
    LatestTiered,
    /// The first record whose timestamp is at or after this one.
    Timestamp(i64),
}

impl OffsetSpec {
    /// From ListOffsets' `timestamp` field; None for an unknown negative value.
    pub fn from_wire(timestamp: i64) -> Option<Self> {
        Some(match timestamp {
            -1 => OffsetSpec::Latest,
            -2 => OffsetSpec::Earliest,
            -4 => OffsetSpec::EarliestLocal,
            -3 => OffsetSpec::MaxTimestamp,
            -5 => OffsetSpec::LatestTiered,
            t if t >= 0 => OffsetSpec::Timestamp(t),
            _ => return None,
        })
    }
}

/// A ListOffsets answer: offset, timestamp, leader epoch (-1 where none).
pub type FoundOffset = (Offset, i64, LeaderEpoch);

/// One hosted partition as DescribeLogDirs lists it.
#[derive(Clone, Debug)]
pub struct HostedReplica {
    pub tp: TopicPartition,
    /// The log directory it is in.
    pub dir: std::path::PathBuf,
    pub size_bytes: u64,
    /// How far this replica's log end is from the high watermark.
    pub offset_lag: i64,
    /// A copy being made in another directory (AlterReplicaLogDirs), not yet the replica.
    pub is_future: bool,
}

impl ReplicaManager {
    fn led(&self, tp: &TopicPartition) -> Result<Arc<Partition>, ErrorCode> {
        let p = self.hosted(tp)?;
        if p.is_leader() {
            Ok(p)
        } else {
            Err(ErrorCode::NotLeaderOrFollower)
        }
    }

    /// ListOffsets for one partition.
    pub fn list_offset(
        &self,
        tp: &TopicPartition,
        spec: OffsetSpec,
        current_leader_epoch: LeaderEpoch,
        read_committed: bool,
    ) -> Result<FoundOffset, ErrorCode> {
        if let Some(found) = self.list_diskless_offset(tp, spec, read_committed) {
            return found;
        }
        let p = self.hosted(tp)?;
        p.check_leader_epoch(current_leader_epoch.0)?;
        let epoch = p.leader_epoch();
        let none = (Offset::NONE, -1, LeaderEpoch::NONE);
        let start = p.log_start_offset();
        let remote = p.remote_log();
        let log = p.read_log();
        let tiered = log.config().remote_storage;
        // What a reader of this isolation level may see.
        let (hw, known) = p.high_watermark_known();
        // A leader whose HW has not reached its log end at election cannot tell the latest
        // offset or find a timestamp yet: as Kafka, OFFSET_NOT_AVAILABLE (clients retry).
        if !known
            && matches!(
                spec,
                OffsetSpec::Latest | OffsetSpec::Timestamp(_) | OffsetSpec::MaxTimestamp
            )
        {
            return Err(ErrorCode::OffsetNotAvailable);
        }
        let visible = if read_committed {
            log.last_stable_offset(hw)
        } else {
            hw
        };
        let epoch_of = |offset: i64| {
            LeaderEpoch(
                log.leader_epoch_cache()
                    .epoch_for_offset(offset)
                    .unwrap_or(epoch),
            )
        };
        let found = |hit: Option<(i64, i64, Option<i32>)>, below: i64| match hit {
            Some((offset, ts, e)) if offset < below => {
                (Offset(offset), ts, LeaderEpoch(e.unwrap_or(epoch)))
            }
            _ => none,
        };
        Ok(match spec {
            OffsetSpec::Latest => (Offset(visible), -1, LeaderEpoch(epoch)),
            OffsetSpec::Earliest => (Offset(start), -1, epoch_of(start)),
            OffsetSpec::EarliestLocal => {
                let local = log.log_start_offset();
                (Offset(local), -1, epoch_of(local))
            }
            OffsetSpec::LatestTiered => match remote.map_or(-1, |r| r.highest_offset()) {
                highest if tiered && highest >= 0 => (Offset(highest), -1, epoch_of(highest)),
                _ => none,
            },
            OffsetSpec::MaxTimestamp => found(
                log.offset_of_max_timestamp()
                    .map_err(|e| log_error_code(&e))?,
                i64::MAX,
            ),
            OffsetSpec::Timestamp(t) => found(
                log.offset_for_timestamp(t)
                    .map_err(|e| log_error_code(&e))?,
                visible,
            ),
        })
    }

    /// OffsetForLeaderEpoch on the leader: (epoch, end offset) for a follower or consumer at
    /// `epoch`; None when this log knows no such epoch.
    pub fn end_offset_for_epoch(
        &self,
        tp: &TopicPartition,
        current_leader_epoch: LeaderEpoch,
        epoch: LeaderEpoch,
    ) -> Result<Option<(LeaderEpoch, Offset)>, ErrorCode> {
        if let Some(answer) = self.diskless_epoch_end(tp, current_leader_epoch, epoch) {
            return answer;
        }
        let p = match self.get(tp) {
            Some(p) => p,
            None => return Err(ErrorCode::UnknownTopicOrPartition),
        };
        if !p.is_leader() {
            return Err(ErrorCode::NotLeaderOrFollower);
        }
        p.check_leader_epoch(current_leader_epoch.0)?;
        Ok(p.end_offset_for(epoch.0)
            .map(|(e, end)| (LeaderEpoch(e), Offset(end))))
    }

    /// DescribeProducers: the idempotent producers the leader knows, by id.
    pub fn producers(&self, tp: &TopicPartition) -> Result<Vec<(i64, ProducerEntry)>, ErrorCode> {
        if let Some(answer) = self.diskless_producers(tp) {
            return answer;
        }
        let mut producers = self.led(tp)?.producers();
        producers.sort_by_key(|(id, _)| *id);
        Ok(producers)
    }

    /// Whether `producer_id` has a transaction open in `tp` at `epoch` (transactions v2: such a
    /// partition is already part of the producer's transaction). False when not the leader.
    pub fn in_open_txn(&self, tp: &TopicPartition, producer_id: i64, epoch: i16) -> bool {
        if let Some(open) = self.diskless_in_open_txn(tp, producer_id, epoch) {
            return open;
        }
        self.led(tp).is_ok_and(|p| {
            p.read_log()
                .producer_state()
                .get(producer_id)
                .is_some_and(|e| e.epoch == epoch && e.txn_first_offset.is_some())
        })
    }

    /// DeleteRecords: move the log start offset to `offset` (-1: the high watermark) and
    /// delete the whole segments below it, on a blocking thread. Returns the new log start.
    pub async fn delete_records(
        &self,
        tp: &TopicPartition,
        offset: i64,
    ) -> Result<Offset, ErrorCode> {
        if let Some(answer) = self.diskless_delete_records(tp, offset).await {
            return answer;
        }
        let p = self.led(tp)?;
        match sluice_rt::task::spawn_blocking(move || p.delete_records_below(offset)).await {
            Ok(r) => r.map(Offset),
            Err(_) => Err(ErrorCode::UnknownServerError),
        }
    }

    /// Every hosted replica, by topic and partition.
    pub fn hosted_replicas(&self) -> Vec<HostedReplica> {
        let logs = self.log_manager();
        let mut out: Vec<HostedReplica> = self
            .all()
            .into_iter()
            .map(|p| HostedReplica {
                dir: logs
                    .dir_of(&p.tp)
                    .map(std::path::Path::to_path_buf)
                    .unwrap_or_default(),
                tp: p.tp.clone(),
                size_bytes: p.size_bytes(),
                offset_lag: (p.high_watermark() - p.log_end_offset()).max(0),
                is_future: false,
            })
            .collect();
        // A move in progress: its copy, as Kafka shows a future replica.
        for (tp, dir) in logs.moving() {
            if let Some(current) = out.iter().find(|r| r.tp == tp) {
                let mut future = current.clone();
                future.dir = dir.to_path_buf();
                future.is_future = true;
                out.push(future);
            }
        }
        out.sort_by(|a, b| a.tp.cmp(&b.tp));
        out
    }

    /// AlterReplicaLogDirs for one partition: move its log to directory `path` in the
    /// background, as Kafka does (the answer comes at once). A directory this node does not
    /// have is LOG_DIR_NOT_FOUND; a partition it does not hold yet is REPLICA_NOT_AVAILABLE,
    /// and is created in that directory when it comes.
    pub fn alter_log_dir(&self, tp: &TopicPartition, path: &str) -> Result<(), ErrorCode> {
        let logs = self.log_manager();
        let to = logs
            .dir_index(std::path::Path::new(path))
            .ok_or(ErrorCode::LogDirNotFound)?;
        if logs.is_offline(to) || self.is_offline(tp) {
            return Err(ErrorCode::KafkaStorageError);
        }
        if self.get(tp).is_none() {
            logs.prefer(tp, to);
            return Err(ErrorCode::ReplicaNotAvailable);
        }
        if logs.begin_move(tp, to) {
            let logs = Arc::clone(logs);
            let tp = tp.clone();
            drop(sluice_rt::task::spawn_blocking(move || {
                if let Err(e) = logs.move_log(&tp, sluice_rt::wall_ms()) {
                    tracing::warn!(partition = %tp, error = %e, "moving the log to another directory failed");
                }
            }));
        }
        Ok(())
    }

    /// The high watermark of a partition this broker leads.
    pub fn led_high_watermark(&self, tp: &TopicPartition) -> Option<Offset> {
        self.led(tp).ok().map(|p| Offset(p.high_watermark()))
    }

    /// This replica's own high watermark of `tp` (leader or follower), if it hosts `tp`.
    pub fn high_watermark(&self, tp: &TopicPartition) -> Option<Offset> {
        self.get(tp).map(|p| Offset(p.high_watermark()))
    }

    /// Where this replica's local log of `tp` starts, if it hosts `tp`.
    pub fn local_log_start(&self, tp: &TopicPartition) -> Option<i64> {
        self.get(tp).map(|p| p.local_log_start_offset())
    }

    /// The leader epoch under which this broker leads `tp`, if it believes it does.
    pub fn leading_epoch(&self, tp: &TopicPartition) -> Option<i32> {
        let s = self.get(tp)?.state();
        s.is_leader().then(|| s.leader_epoch())
    }

    /// Every batch of `tp` from its log start to its log end, with its bytes (coordinators
    /// loading their state), on the calling thread (a blocking one). Stops at the first
    /// unreadable chunk; nothing when the partition is not hosted.
    /// The committed batches of `tp` (below its high watermark) from `from` on, if this
    /// broker leads `tp` in `epoch`: the offset after the last one visited, or None when it
    /// does not lead it in that epoch or `from` is before the log start (read it again from
    /// [`Self::led_here`]'s start).
    pub fn scan_committed_from(
        &self,
        tp: &TopicPartition,
        epoch: i32,
        from: i64,
        visit: impl FnMut(&sluice_protocol::batch::BatchHeader, &[u8]),
    ) -> Option<i64> {
        let p = self.get(tp)?;
        let s = p.state();
        if !s.is_leader() || s.leader_epoch() != epoch || from < p.log_start_offset() {
            return None;
        }
        Some(p.scan_from(from, super::partition::FetchIsolation::HighWatermark, visit))
    }

    /// Where this broker leads `tp`: its leader epoch and log start offset.
    pub fn led_here(&self, tp: &TopicPartition) -> Option<(i32, i64)> {
        let p = self.get(tp)?;
        let s = p.state();
        s.is_leader()
            .then(|| (s.leader_epoch(), p.log_start_offset()))
    }

    pub fn scan(
        &self,
        tp: &TopicPartition,
        visit: impl FnMut(&sluice_protocol::batch::BatchHeader, &[u8]),
    ) {
        if let Some(p) = self.get(tp) {
            p.scan(visit);
        }
    }

    /// (partitions led here, those of them whose ISR is short of their replicas).
    pub fn leadership_counts(&self) -> (usize, usize) {
        let mut leaders = 0;
        let mut under_replicated = 0;
        for p in self.all() {
            if p.is_leader() {
                leaders += 1;
                let state = p.state();
                if state.isr().len() < state.replicas().len() {
                    under_replicated += 1;
                }
            }
        }
        (leaders, under_replicated)
    }

    /// The log directory.
    /// This broker's log directories, in `log.dirs` order (absolute).
    pub fn log_dirs(&self) -> Vec<&std::path::Path> {
        self.log_manager().dirs()
    }
}
