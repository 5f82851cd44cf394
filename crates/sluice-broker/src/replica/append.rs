//! Leader appends: a client's batches (Produce), a coordinator's records, transaction markers.
//! The disk work runs on a blocking thread, never on the async workers that serve other
//! connections; acks=all waits in the produce purgatory until the high watermark covers the
//! append, this replica stops leading the epoch it appended in, or time is up (Kafka's
//! `DelayedProduce`).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use sluice_protocol::types::{LeaderEpoch, Offset, TopicPartition};
use sluice_protocol::ErrorCode;
use sluice_storage::{LogAppendInfo, Marker};

use super::manager::ReplicaManager;
use super::partition::{AckState, AppendError, Partition};
use super::purgatory::Look;

/// Who is appending (Kafka's `AppendOrigin`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendOrigin {
    /// A producer: batches are validated, offsets assigned, idempotence checked.
    Client,
    /// A coordinator's own records (a transactional offset commit): only the producer's
    /// epoch is checked, not sequence numbers.
    Coordinator,
}

/// `acks` of a produce request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acks {
    /// 0: no answer at all.
    None,
    /// 1: the leader's append.
    Leader,
    /// -1: every in-sync replica; `min.insync.replicas` must be in sync before and after.
    All,
}

impl Acks {
    /// From the wire value; None for anything but 0, 1 and -1 (INVALID_REQUIRED_ACKS).
    pub fn from_wire(acks: i16) -> Option<Self> {
        match acks {
            0 => Some(Acks::None),
            1 => Some(Acks::Leader),
            -1 => Some(Acks::All),
            _ => None,
        }
    }
}

/// One partition's successful append.
#[derive(Clone)]
pub struct Appended {
    pub partition: Arc<Partition>,
    pub info: LogAppendInfo,
    /// The leader epoch it was appended in: it is committed only while that epoch leads.
    pub leader_epoch: LeaderEpoch,
}

impl Appended {
    /// The offset the high watermark must reach for the append to be committed.
    pub fn end(&self) -> Offset {
        Offset(self.info.last_offset + 1)
    }
}

impl std::fmt::Debug for Appended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Appended")
            .field("partition", &self.partition.tp)
            .field("info", &self.info)
            .field("leader_epoch", &self.leader_epoch)
            .finish()
    }
}

/// How an acks=all append ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicationOutcome {
    Committed,
    /// Committed, but the ISR that committed it is below `min.insync.replicas` now
    /// (NOT_ENOUGH_REPLICAS_AFTER_APPEND).
    CommittedShort,
    /// This replica stopped leading the epoch of the append first (NOT_LEADER_OR_FOLLOWER).
    Deposed,
    /// Not committed within the timeout (REQUEST_TIMED_OUT).
    TimedOut,
}

impl ReplicationOutcome {
    /// The produce error code, None for a plain success.
    pub fn error(self) -> Option<ErrorCode> {
        match self {
            ReplicationOutcome::Committed => None,
            ReplicationOutcome::CommittedShort => Some(ErrorCode::NotEnoughReplicasAfterAppend),
            ReplicationOutcome::Deposed => Some(ErrorCode::NotLeaderOrFollower),
            ReplicationOutcome::TimedOut => Some(ErrorCode::RequestTimedOut),
        }
    }
}

/// One partition's records to append.
pub struct AppendEntry {
    pub tp: TopicPartition,
    pub records: Bytes,
}

impl ReplicaManager {
    /// Append each entry's records as this partition's leader, on a blocking thread. With
    /// `Acks::All` the ISR must be at least `min.insync.replicas` strong first
    /// (NOT_ENOUGH_REPLICAS). Results are in entry order; follow with
    /// [`Self::await_replication`] for acks=all.
    pub async fn append(
        self: &Arc<Self>,
        origin: AppendOrigin,
        acks: Acks,
        entries: Vec<AppendEntry>,
    ) -> Vec<Result<Appended, AppendError>> {
        let targets: Vec<_> = entries
            .into_iter()
            .map(|e| (self.leader_partition(&e.tp), e.records))
            .collect();
        on_blocking_thread(targets, move |p, records, now| {
            append_one(&p, origin, acks, records, now)
        })
        .await
    }

    /// The same as [`Self::append`], on the calling thread: for callers that are already off
    /// the async workers (a coordinator's own thread).
    pub fn append_blocking(
        &self,
        origin: AppendOrigin,
        acks: Acks,
        tp: &TopicPartition,
        records: Bytes,
    ) -> Result<Appended, AppendError> {
        let p = self
            .leader_partition(tp)
            .map_err(|code| AppendError::Code(code, String::new()))?;
        append_one(&p, origin, acks, records, crate::now_ms())
    }

    /// Write transaction markers as leader (WriteTxnMarkers), on a blocking thread. Like an
    /// acks=all append each needs `min.insync.replicas` in sync.
    pub async fn append_markers(
        self: &Arc<Self>,
        markers: Vec<(TopicPartition, Marker)>,
    ) -> Vec<Result<Appended, AppendError>> {
        let targets: Vec<_> = markers
            .into_iter()
            .map(|(tp, m)| (self.leader_partition(&tp), m))
            .collect();
        on_blocking_thread(targets, |p, marker, now| {
            let (info, epoch) = p.append_marker(&marker, now)?;
            Ok(Appended {
                partition: p,
                info,
                leader_epoch: LeaderEpoch(epoch),
            })
        })
        .await
    }

    /// Wait until every append is committed, its replica is deposed, or `timeout` passes
    /// (the produce purgatory). Outcomes are in the order given.
    pub async fn await_replication(
        &self,
        appended: &[&Appended],
        timeout: Duration,
    ) -> Vec<ReplicationOutcome> {
        // A settled state is final: a deposed leader's high watermark later follows the new
        // leader's log, which may hold other records at the same offsets.
        let mut states = vec![AckState::Waiting; appended.len()];
        let deadline = tokio::time::Instant::now() + timeout;
        let watched = appended.iter().map(|a| &a.partition.watchers);
        self.produce_purgatory
            .run(watched, deadline, |look| {
                for (a, s) in appended.iter().zip(states.iter_mut()) {
                    if *s == AckState::Waiting {
                        *s = a.partition.ack_state(a.end().0, a.leader_epoch.0);
                    }
                }
                let done = states.iter().all(|s| *s != AckState::Waiting);
                (done || look == Look::Expired).then(|| {
                    appended
                        .iter()
                        .zip(&states)
                        .map(|(a, s)| outcome(&a.partition, *s))
                        .collect()
                })
            })
            .await
    }
}

impl ReplicaManager {
    /// Wait until this broker's log of `tp`, which it leads in `epoch`, is committed to its
    /// end (the high watermark at the log end). True then; false once it no longer leads
    /// `tp` in `epoch`. A coordinator loads its partition only after this: a new leader's
    /// tail past the high watermark is lost if it is deposed before its followers have it,
    /// and what a coordinator does on a loaded state (transaction markers written to other
    /// partitions) cannot be undone. Raft's leaders wait likewise for an entry of their own
    /// term before they act on their log.
    pub async fn await_committed_log(&self, tp: &TopicPartition, epoch: i32) -> bool {
        loop {
            let Some(p) = self.get(tp) else { return false };
            let s = p.state();
            if !s.is_leader() || s.leader_epoch() != epoch {
                return false;
            }
            if s.high_watermark() >= p.log_end_offset() {
                return true;
            }
            self.await_change(tp, Duration::from_millis(500)).await;
        }
    }

    /// Wait until `tp` changes (an append, a new high watermark or leader), at most
    /// `timeout`.
    pub async fn await_change(&self, tp: &TopicPartition, timeout: Duration) {
        let Some(p) = self.get(tp) else {
            return tokio::time::sleep(timeout).await;
        };
        let seen = p.watchers.version();
        let deadline = tokio::time::Instant::now() + timeout;
        self.produce_purgatory
            .run([&p.watchers], deadline, |look| {
                (look == Look::Expired || p.watchers.version() != seen).then_some(())
            })
            .await
    }
}

/// Run `write` for each partition found (in order) on one blocking thread: disk work never
/// runs on the async workers. A partition not found is answered with its error.
async fn on_blocking_thread<T: Send + 'static>(
    targets: Vec<(Result<Arc<Partition>, ErrorCode>, T)>,
    write: impl Fn(Arc<Partition>, T, i64) -> Result<Appended, AppendError> + Send + 'static,
) -> Vec<Result<Appended, AppendError>> {
    let n = targets.len();
    let work = move || {
        let now = crate::now_ms();
        targets
            .into_iter()
            .map(|(target, input)| {
                let p = target.map_err(|code| AppendError::Code(code, String::new()))?;
                write(p, input, now)
            })
            .collect()
    };
    match sluice_rt::task::spawn_blocking(work).await {
        Ok(results) => results,
        Err(e) => (0..n)
            .map(|_| {
                Err(AppendError::Code(
                    ErrorCode::UnknownServerError,
                    format!("append task failed: {e}"),
                ))
            })
            .collect(),
    }
}

fn outcome(p: &Partition, state: AckState) -> ReplicationOutcome {
    match state {
        AckState::Committed => {
            if (p.state().isr().len() as i32) < p.settings().min_insync_replicas {
                ReplicationOutcome::CommittedShort
            } else {
                ReplicationOutcome::Committed
            }
        }
        AckState::Deposed => ReplicationOutcome::Deposed,
        AckState::Waiting => ReplicationOutcome::TimedOut,
    }
}

fn append_one(
    p: &Arc<Partition>,
    origin: AppendOrigin,
    acks: Acks,
    records: Bytes,
    now_ms: i64,
) -> Result<Appended, AppendError> {
    let bytes = records.len() as u64;
    let (info, epoch) = match origin {
        AppendOrigin::Client => p.append_as_leader(records, acks == Acks::All, now_ms)?,
        AppendOrigin::Coordinator => p.append_as_coordinator(records, now_ms)?,
    };
    if !info.duplicate {
        p.metrics.bytes_in.increment(bytes);
        p.metrics
            .messages_in
            .increment((info.last_offset - info.first_offset + 1).max(0) as u64);
    }
    Ok(Appended {
        partition: Arc::clone(p),
        info,
        leader_epoch: LeaderEpoch(epoch),
    })
}
