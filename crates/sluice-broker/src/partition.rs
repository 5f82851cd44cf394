//! [`Partition`]: one hosted partition: its log, its replica state and the fetches waiting
//! for it to grow. Shared (`Arc`) between the replica manager and in-flight requests.
//!
//! Lock order: `state` is taken inside `log` (appends update the state while holding the
//! log's write lock, so LEO and HW change in log order); neither is held across an await.

use std::sync::{Arc, Mutex, RwLock, Weak};

use sluice_metadata::Uuid;
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;
use sluice_storage::log::FileSlice;
use sluice_storage::log_manager::SharedLog;
use sluice_storage::{LogAppendInfo, LogError};
use tokio::sync::Notify;

use crate::error_map::log_error_code;
use crate::replica_state::ReplicaState;

/// Per-partition settings that are not the log's business.
#[derive(Clone, Copy, Debug)]
pub struct PartitionSettings {
    pub min_insync_replicas: i32,
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
}

/// What a fetch read: offsets for the response plus the bytes to send.
#[derive(Debug)]
pub struct ReadResult {
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    pub slice: Option<FileSlice>,
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
    waiters: Mutex<Vec<Weak<Notify>>>,
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
        Self {
            tp,
            topic_id,
            log,
            state: Mutex::new(ReplicaState::new(node_id, leo, 0)),
            settings: RwLock::new(settings),
            waiters: Mutex::new(Vec::new()),
        }
    }

    pub fn set_settings(&self, settings: PartitionSettings) {
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

    pub fn update_registration(
        &self,
        leader: i32,
        leader_epoch: i32,
        replicas: &[i32],
        isr: &[i32],
    ) {
        let moved = lock(&self.state).update_registration(leader, leader_epoch, replicas, isr);
        if moved {
            self.wake_waiters();
        }
    }

    pub fn state(&self) -> ReplicaState {
        lock(&self.state).clone()
    }

    pub fn high_watermark(&self) -> i64 {
        lock(&self.state).high_watermark()
    }

    pub fn leader_epoch(&self) -> i32 {
        lock(&self.state).leader_epoch()
    }

    fn read_log(&self) -> std::sync::RwLockReadGuard<'_, sluice_storage::Log> {
        self.log
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn log_start_offset(&self) -> i64 {
        self.read_log().log_start_offset()
    }

    pub fn log_end_offset(&self) -> i64 {
        self.read_log().log_end_offset()
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

    /// Append a producer's batches as leader. For acks=-1 the ISR must be at least
    /// `min.insync.replicas` strong, checked before appending (Kafka's NOT_ENOUGH_REPLICAS).
    pub fn append_as_leader(
        &self,
        records: Vec<u8>,
        acks: i16,
        now_ms: i64,
    ) -> Result<LogAppendInfo, AppendError> {
        let min_isr = self.settings().min_insync_replicas;
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
            (s.leader_epoch(), s.isr().len() as i32)
        };
        if acks == -1 && isr_len < min_isr {
            return Err(AppendError::Code(
                ErrorCode::NotEnoughReplicas,
                format!(
                    "the in-sync replicas of {} are {isr_len}, below min.insync.replicas={min_isr}",
                    self.tp
                ),
            ));
        }
        let info = log
            .append_as_leader(records, epoch, now_ms)
            .map_err(AppendError::Log)?;
        let moved = lock(&self.state).on_local_append(log.log_end_offset());
        drop(log);
        if moved {
            self.wake_waiters();
        }
        Ok(info)
    }

    /// Read for a fetch. `min_one_batch` returns a whole first batch even above `max_bytes`.
    pub fn read(
        &self,
        fetch_offset: i64,
        max_bytes: u64,
        isolation: FetchIsolation,
        min_one_batch: bool,
    ) -> Result<ReadResult, LogError> {
        let log = self.read_log();
        let hw = self.high_watermark();
        let upper = match isolation {
            FetchIsolation::LogEnd => log.log_end_offset(),
            FetchIsolation::HighWatermark | FetchIsolation::TxnCommitted => hw,
        };
        let info = log.read(fetch_offset, max_bytes, upper, min_one_batch)?;
        Ok(ReadResult {
            high_watermark: hw,
            last_stable_offset: hw,
            log_start_offset: log.log_start_offset(),
            slice: info.slice,
        })
    }

    /// Register a fetch waiting for this partition to grow; woken once by the next change.
    pub fn add_waiter(&self, notify: &Arc<Notify>) {
        let mut w = lock(&self.waiters);
        w.retain(|n| n.strong_count() > 0);
        w.push(Arc::downgrade(notify));
    }

    fn wake_waiters(&self) {
        let waiters = std::mem::take(&mut *lock(&self.waiters));
        for w in waiters {
            if let Some(n) = w.upgrade() {
                n.notify_one();
            }
        }
    }
}
