//! [`SharePartitionManager`]: the share-partition states and share sessions of this broker,
//! shared by the ShareFetch and ShareAcknowledge handlers.
//!
//! A share partition's state is loaded at the first ShareFetch or acknowledgement of its group
//! on its leader, from the share coordinator ([`Persister::read`], which also fences the
//! previous leader); a share partition with no state yet starts where the group's
//! `share.auto.offset.reset` says (latest by default), written at once. Lock expiry is applied
//! whenever a partition is touched (a fetch, an acknowledgement), which is the only time
//! anyone can observe it.
//!
//! An acknowledgement is answered once the window it changed is written to the share
//! coordinator: the whole window's state batches (acquired records as available, with their
//! delivery counts), so one write covers every change before it and concurrent
//! acknowledgements share writes. A write that fails drops the state: nothing more is
//! written from it, and the next request loads what the coordinator kept (records not yet
//! persisted as acknowledged are delivered again, never lost).
//!
//! Locks: the table and each state are behind std mutexes held only for in-memory work, never
//! across an await or a file read; each state's writes are ordered by an async mutex.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use sluice_metadata::config::group::{group_value, iso_duration_ms, RESOURCE_GROUP};
use sluice_metadata::Uuid;
use sluice_protocol::batch::BatchIter;
use sluice_protocol::types::{LeaderEpoch, Offset, TopicPartition};
use sluice_protocol::ErrorCode;

use super::coordinator::{PersistedState, StateWrite};
use super::partition_state::{
    AcquireLimits, AcquiredRange, LogBatch, MemberId, ShareLimits, SharePartitionState,
};
use super::partition_state::{RecordState, StateBatch};
use super::persister::Persister;
use super::session::ShareSessions;
use super::state_records::PersistedBatch;
use crate::metadata_cache::MetadataCache;
use crate::replica::queries::OffsetSpec;
use crate::replica::ReplicaManager;
use crate::replica::{FetchParams, FetchPartitionRequest, FetchedPartition};

/// A ShareFetch's limits.
#[derive(Clone, Copy, Debug)]
pub struct ShareFetchParams {
    pub max_wait: Duration,
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub max_records: i64,
}

/// One partition's share-fetch answer.
#[derive(Clone, Debug, Default)]
pub struct ShareFetched {
    pub error: Option<ErrorCode>,
    /// Whole batches covering the acquired records (possibly others' records beside them:
    /// the client delivers only what `acquired` names).
    pub records: Bytes,
    pub acquired: Vec<AcquiredRange>,
}

/// How a share group reads its partitions (its `share.*` group configs).
#[derive(Clone, Debug)]
struct GroupSettings {
    limits: ShareLimits,
    /// `share.auto.offset.reset`: where a new share partition starts.
    reset: String,
    read_committed: bool,
}

/// One share partition's state on its leader, as loaded at one leader epoch.
struct Shared {
    state: Mutex<Versioned>,
    topic_id: Uuid,
    /// The partition's leader epoch this state was loaded at.
    leader_epoch: i32,
    /// The persisted state's epoch (raised when the group's offsets are altered).
    state_epoch: i32,
    /// The last version written to the share coordinator; held while writing.
    persisted: tokio::sync::Mutex<u64>,
    /// A write failed: this state is dropped, nothing more is written from it.
    dead: AtomicBool,
}

/// The window, and how many changes to persist it has seen.
struct Versioned {
    window: SharePartitionState,
    version: u64,
}

impl std::ops::Deref for Versioned {
    type Target = SharePartitionState;
    fn deref(&self) -> &SharePartitionState {
        &self.window
    }
}

impl std::ops::DerefMut for Versioned {
    fn deref_mut(&mut self) -> &mut SharePartitionState {
        &mut self.window
    }
}

type StateRef = Arc<Shared>;

/// A state being loaded (or loaded) for (group, partition).
type Slot = Arc<tokio::sync::OnceCell<StateRef>>;

/// Share-group counters (`/metrics`): records handed out, and what became of them.
struct ShareMetrics {
    /// Records acquired by a ShareFetch (every delivery).
    acquired: metrics::Counter,
    /// ... of them delivered not for the first time.
    redelivered: metrics::Counter,
    /// Records acknowledged ACCEPT.
    acknowledged: metrics::Counter,
    /// Records given back with RELEASE.
    released: metrics::Counter,
    /// Records acknowledged REJECT or GAP.
    archived: metrics::Counter,
}

impl ShareMetrics {
    fn new() -> Self {
        ShareMetrics {
            acquired: metrics::counter!("sluice_share_acquired_records_total"),
            redelivered: metrics::counter!("sluice_share_redelivered_records_total"),
            acknowledged: metrics::counter!("sluice_share_acknowledged_records_total"),
            released: metrics::counter!("sluice_share_released_records_total"),
            archived: metrics::counter!("sluice_share_archived_records_total"),
        }
    }

    /// Count an applied acknowledgement batch.
    fn acknowledged(&self, first: i64, last: i64, types: &[i8]) {
        let count = |t: i8| -> u64 {
            if types.len() == 1 {
                if types[0] == t {
                    (last - first + 1).max(0) as u64
                } else {
                    0
                }
            } else {
                types.iter().filter(|x| **x == t).count() as u64
            }
        };
        self.acknowledged.increment(count(1));
        self.released.increment(count(2));
        self.archived.increment(count(3) + count(0));
    }
}

/// The share-partition states (by group and partition) and share sessions of this broker.
pub struct SharePartitionManager {
    replicas: Arc<ReplicaManager>,
    metadata: Arc<MetadataCache>,
    states: Mutex<HashMap<(String, TopicPartition), Slot>>,
    sessions: Mutex<ShareSessions>,
    metrics: ShareMetrics,
    persister: Arc<Persister>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl SharePartitionManager {
    pub fn new(
        replicas: Arc<ReplicaManager>,
        metadata: Arc<MetadataCache>,
        persister: Arc<Persister>,
    ) -> Self {
        let max_sessions = metadata
            .config()
            .value("group.share.max.share.sessions")
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(2_000);
        SharePartitionManager {
            replicas,
            metadata,
            states: Mutex::new(HashMap::new()),
            sessions: Mutex::new(ShareSessions::new(max_sessions)),
            metrics: ShareMetrics::new(),
            persister,
        }
    }

    /// The share sessions, for a handler to settle a request's session.
    pub fn sessions(&self) -> MutexGuard<'_, ShareSessions> {
        lock(&self.sessions)
    }

    fn settings(&self, group: &str) -> GroupSettings {
        let config = self.metadata.config();
        let broker = |k: &str| config.value(k);
        let image = self.metadata.current();
        let empty = BTreeMap::new();
        let own = image
            .configs
            .get(&(RESOURCE_GROUP, group.to_string()))
            .unwrap_or(&empty);
        let int = |key: &str, default: i64| {
            group_value(own, &broker, key)
                .and_then(|v| v.trim().parse::<i64>().ok())
                .unwrap_or(default)
        };
        GroupSettings {
            limits: ShareLimits {
                lock_duration_ms: int("share.record.lock.duration.ms", 30_000).max(1),
                delivery_count_limit: int("share.delivery.count.limit", 5).clamp(1, 1_000) as i16,
                max_record_locks: int("share.partition.max.record.locks", 2_000).max(1),
            },
            reset: group_value(own, &broker, "share.auto.offset.reset")
                .unwrap_or_else(|| "latest".into()),
            read_committed: group_value(own, &broker, "share.isolation.level")
                .is_some_and(|v| v.eq_ignore_ascii_case("read_committed")),
        }
    }

    /// The acquisition lock duration the group's members are told.
    pub fn lock_duration_ms(&self, group: &str) -> i64 {
        self.settings(group).limits.lock_duration_ms
    }

    /// Where a new share partition of a group with `reset` starts.
    fn initial_offset(&self, tp: &TopicPartition, reset: &str) -> Result<i64, ErrorCode> {
        let spec = match reset.split_once(':') {
            Some(("by_duration", d)) => {
                let back = iso_duration_ms(d).ok_or(ErrorCode::InvalidConfig)?;
                OffsetSpec::Timestamp(crate::now_ms().saturating_sub(back).max(0))
            }
            _ if reset.eq_ignore_ascii_case("earliest") => OffsetSpec::Earliest,
            _ => OffsetSpec::Latest,
        };
        let (found, _, _) = self
            .replicas
            .list_offset(tp, spec, LeaderEpoch::NONE, false)?;
        if found == Offset::NONE {
            // No record at or after the time: start at the end, as Kafka does.
            let (end, _, _) =
                self.replicas
                    .list_offset(tp, OffsetSpec::Latest, LeaderEpoch::NONE, false)?;
            return Ok(end.0);
        }
        Ok(found.0)
    }

    /// The state of `group` on `tp`, loaded (or started) if this broker leads `tp`; its window
    /// moved past what the log no longer has and its expired locks released.
    async fn state(
        &self,
        group: &str,
        tp: &TopicPartition,
        settings: &GroupSettings,
        now_ms: i64,
    ) -> Result<StateRef, ErrorCode> {
        let Some(epoch) = self.replicas.leading_epoch(tp) else {
            // Hosted as a follower, or not at all.
            self.replicas
                .list_offset(tp, OffsetSpec::Latest, LeaderEpoch::NONE, false)?;
            return Err(ErrorCode::NotLeaderOrFollower);
        };
        let topic_id = self
            .metadata
            .current()
            .topic(&tp.topic)
            .map(|t| t.id)
            .ok_or(ErrorCode::UnknownTopicOrPartition)?;
        let key = (group.to_string(), tp.clone());
        let state = loop {
            let slot = {
                let mut states = lock(&self.states);
                let slot = states.entry(key.clone()).or_default();
                // A state of an earlier leadership (this broker led before, then another
                // did) or of a dropped topic is stale: load again.
                let stale = slot.get().is_some_and(|s| {
                    s.leader_epoch != epoch
                        || s.topic_id != topic_id
                        || s.dead.load(Ordering::Acquire)
                });
                if stale {
                    *slot = Slot::default();
                }
                Arc::clone(slot)
            };
            let state = slot
                .get_or_try_init(|| self.load(group, tp, topic_id, epoch, settings))
                .await?;
            if state.leader_epoch == epoch && !state.dead.load(Ordering::Acquire) {
                break Arc::clone(state);
            }
        };
        let (log_start, _, _) =
            self.replicas
                .list_offset(tp, OffsetSpec::Earliest, LeaderEpoch::NONE, false)?;
        let (hw, _, _) =
            self.replicas
                .list_offset(tp, OffsetSpec::Latest, LeaderEpoch::NONE, false)?;
        {
            let mut s = lock(&state.state);
            s.limits = settings.limits;
            s.log_moved(log_start.0, hw.0);
            s.expire_locks(now_ms);
        }
        Ok(state)
    }

    /// Load the state of `group` on `tp` from its share coordinator; a share partition never
    /// written starts at the group's reset offset, written before it is used.
    async fn load(
        &self,
        group: &str,
        tp: &TopicPartition,
        topic_id: Uuid,
        epoch: i32,
        settings: &GroupSettings,
    ) -> Result<StateRef, ErrorCode> {
        let partition = tp.partition.0;
        let read = self
            .persister
            .read(group, topic_id, partition, epoch)
            .await
            .map_err(persister_error)?;
        let (window, state_epoch) = match read {
            Some(p) => (restored(&p, settings.limits), p.state_epoch),
            None => {
                let start = self.initial_offset(tp, &settings.reset)?;
                let write = StateWrite {
                    state_epoch: 0,
                    leader_epoch: epoch,
                    start_offset: start,
                    batches: Vec::new(),
                    delivery_complete_count: 0,
                };
                self.persister
                    .write(group, topic_id, partition, write)
                    .await
                    .map_err(persister_error)?;
                (SharePartitionState::new(start, settings.limits), 0)
            }
        };
        tracing::debug!(group, partition = %tp, epoch, state_epoch, start = window.start_offset(), "share partition loaded");
        Ok(Arc::new(Shared {
            state: Mutex::new(Versioned { window, version: 0 }),
            topic_id,
            leader_epoch: epoch,
            state_epoch,
            persisted: tokio::sync::Mutex::new(0),
            dead: AtomicBool::new(false),
        }))
    }

    /// Write `state` to its share coordinator unless a write already covered `version`. A
    /// failed write drops the state.
    async fn persist(
        &self,
        group: &str,
        tp: &TopicPartition,
        state: &StateRef,
        version: u64,
    ) -> Result<(), ErrorCode> {
        let mut persisted = state.persisted.lock().await;
        if *persisted >= version {
            return Ok(());
        }
        if state.dead.load(Ordering::Acquire) {
            return Err(ErrorCode::NotLeaderOrFollower);
        }
        let (current, write) = {
            let s = lock(&state.state);
            let write = StateWrite {
                state_epoch: state.state_epoch,
                leader_epoch: state.leader_epoch,
                start_offset: s.start_offset(),
                batches: s.state_batches().iter().map(persisted_batch).collect(),
                delivery_complete_count: -1,
            };
            (s.version, write)
        };
        match self
            .persister
            .write(group, state.topic_id, tp.partition.0, write)
            .await
        {
            Ok(()) => {
                *persisted = current;
                Ok(())
            }
            Err(code) => {
                state.dead.store(true, Ordering::Release);
                tracing::info!(group, partition = %tp, ?code, "share partition state not written; dropped, to be loaded again");
                Err(persister_error(code))
            }
        }
    }

    /// Apply a member's acknowledgement batches (first, last, types) on `tp`, in order, and
    /// persist them. None when all applied and written; else the first refusal (the batches
    /// before it stay applied and are written).
    pub async fn acknowledge(
        &self,
        group: &str,
        member: &str,
        tp: &TopicPartition,
        batches: &[(i64, i64, Vec<i8>)],
    ) -> Option<ErrorCode> {
        if let Some(code) = check_ack_batches(batches) {
            return Some(code);
        }
        let now = crate::now_ms();
        let settings = self.settings(group);
        let state = match self.state(group, tp, &settings, now).await {
            Ok(s) => s,
            Err(code) => {
                tracing::debug!(group, member, partition = %tp, ?code, "share acknowledgement without state");
                return Some(code);
            }
        };
        let (refused, version) = {
            let mut s = lock(&state.state);
            let mut refused = None;
            let mut applied = false;
            for (first, last, types) in batches {
                if let Err(code) = s.acknowledge(member, *first, *last, types, now) {
                    tracing::debug!(group, member, partition = %tp, first, last, ?types, ?code, "share acknowledgement refused");
                    refused = Some(code);
                    break;
                }
                applied = true;
                self.metrics.acknowledged(*first, *last, types);
            }
            if applied {
                s.version += 1;
            }
            (refused, applied.then_some(s.version))
        };
        if let Some(version) = version {
            if let Err(code) = self.persist(group, tp, &state, version).await {
                return Some(code);
            }
        }
        refused
    }

    /// Release what `member` holds on `tps` (its share session closed). A partition no
    /// session of the group reads any more, with nothing acquired, has its state dropped: it
    /// is all persisted but acquisitions, and whoever reads next loads it again (so offsets
    /// altered or deleted meanwhile are seen).
    pub fn release(&self, group: &str, member: &str, tps: &[TopicPartition]) {
        let sessions = self.sessions();
        let mut states = lock(&self.states);
        for tp in tps {
            let key = (group.to_string(), tp.clone());
            let Some(state) = states.get(&key).and_then(|s| s.get()).cloned() else {
                continue;
            };
            let idle = {
                let mut s = lock(&state.state);
                s.release_member(member);
                s.acquired_count() == 0
            };
            if idle && !sessions.group_reads(group, &(state.topic_id, tp.partition.0)) {
                states.remove(&key);
            }
        }
    }

    /// The connection that opened `member`'s share session closed: the session ends and its
    /// records go back.
    pub fn connection_closed(&self, connection: u64, group: &str, member: &str) {
        let Some(keys) = self.sessions().connection_closed(connection, group, member) else {
            return;
        };
        let image = self.metadata.current();
        let tps: Vec<TopicPartition> = keys
            .into_iter()
            .filter_map(|(id, p)| {
                let t = image.topic_by_id(&id)?;
                Some(TopicPartition::new(t.name.as_str(), p))
            })
            .collect();
        self.release(group, member, &tps);
    }

    /// Acquire records of `tps` for `member`: available records of each window, then new
    /// ones from the log, waiting up to `params.max_wait` for `params.min_bytes` when none
    /// are there. Answers in `tps` order.
    pub async fn fetch(
        &self,
        group: &str,
        member: &MemberId,
        params: ShareFetchParams,
        tps: &[TopicPartition],
    ) -> Vec<ShareFetched> {
        let now = crate::now_ms();
        let settings = self.settings(group);
        let mut out: Vec<ShareFetched> = vec![ShareFetched::default(); tps.len()];
        let mut reads: Vec<(usize, StateRef)> = Vec::new();
        let mut requests: Vec<FetchPartitionRequest> = Vec::new();
        let per_partition = params.max_bytes / (tps.len().max(1) as u64);
        for (i, tp) in tps.iter().enumerate() {
            match self.state(group, tp, &settings, now).await {
                Err(code) => out[i].error = Some(code),
                Ok(state) => {
                    let (offset, can) = {
                        let s = lock(&state.state);
                        (s.next_fetch_offset(), s.can_acquire())
                    };
                    if can {
                        requests.push(FetchPartitionRequest {
                            tp: tp.clone(),
                            fetch_offset: Offset(offset),
                            current_leader_epoch: LeaderEpoch::NONE,
                            max_bytes: per_partition.max(1),
                        });
                        reads.push((i, state));
                    }
                }
            }
        }
        if requests.is_empty() {
            // Every window is full (or errors): nothing can be handed out before a lock
            // expires or records are acknowledged, so the answer waits as a fetch would.
            if out.iter().all(|o| o.error.is_none()) && !tps.is_empty() {
                tokio::time::sleep(params.max_wait).await;
            }
            return out;
        }
        let fetched = self
            .replicas
            .fetch(
                FetchParams {
                    replica: None,
                    read_committed: settings.read_committed,
                    from_any_replica: false,
                    min_bytes: params.min_bytes,
                    max_bytes: params.max_bytes,
                    max_wait: params.max_wait,
                },
                requests,
            )
            .await;
        let now = crate::now_ms();
        let mut budget = params.max_records.max(1);
        for ((i, state), f) in reads.into_iter().zip(fetched) {
            if budget <= 0 {
                break;
            }
            match acquire_from(&state, member, &f, budget, now) {
                Ok(answer) => {
                    let size = |r: &&AcquiredRange| (r.last_offset - r.first_offset + 1) as u64;
                    let got: u64 = answer.acquired.iter().map(|r| size(&r)).sum();
                    let again: u64 = answer
                        .acquired
                        .iter()
                        .filter(|r| r.delivery_count > 1)
                        .map(|r| size(&r))
                        .sum();
                    self.metrics.acquired.increment(got);
                    self.metrics.redelivered.increment(again);
                    budget -= got as i64;
                    out[i] = answer;
                }
                // The log moved under the window (retention, a truncation): the next fetch
                // starts from where it is now.
                Err(ErrorCode::OffsetOutOfRange) => {}
                Err(code) => out[i].error = Some(code),
            }
        }
        out
    }

    /// Group ids with share-partition state on this broker, and how many records each holds
    /// acquired now (metrics, tests).
    pub fn acquired_counts(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for ((group, _), slot) in lock(&self.states).iter() {
            if let Some(state) = slot.get() {
                *out.entry(group.clone()).or_default() += lock(&state.state).acquired_count();
            }
        }
        out
    }
}

/// The error a client is answered for a share coordinator's (as Kafka's SharePartition maps
/// them): a fenced leader epoch means this broker no longer leads the partition.
fn persister_error(code: ErrorCode) -> ErrorCode {
    match code {
        ErrorCode::FencedLeaderEpoch => ErrorCode::NotLeaderOrFollower,
        ErrorCode::NotCoordinator
        | ErrorCode::CoordinatorLoadInProgress
        | ErrorCode::RequestTimedOut
        | ErrorCode::NetworkException => ErrorCode::CoordinatorNotAvailable,
        code => code,
    }
}

/// The window a persisted state describes.
fn restored(p: &PersistedState, limits: ShareLimits) -> SharePartitionState {
    let batches: Vec<StateBatch> = p
        .batches
        .iter()
        .filter_map(|b| {
            Some(StateBatch {
                first_offset: b.first_offset,
                last_offset: b.last_offset,
                state: RecordState::from_persisted(b.delivery_state)?,
                delivery_count: b.delivery_count,
            })
        })
        .collect();
    SharePartitionState::restore(p.start_offset, &batches, limits)
}

fn persisted_batch(b: &StateBatch) -> PersistedBatch {
    PersistedBatch {
        first_offset: b.first_offset,
        last_offset: b.last_offset,
        delivery_state: b.state.id(),
        delivery_count: b.delivery_count,
    }
}

/// Kafka's checks of a partition's acknowledgement batches (validateAcknowledgementBatches):
/// each batch in order after the last, first <= last, at least one type, one type or one per
/// offset, and known types (RENEW needs ShareFetch/ShareAcknowledge v2, not served).
fn check_ack_batches(batches: &[(i64, i64, Vec<i8>)]) -> Option<ErrorCode> {
    let mut previous_last: Option<i64> = None;
    for (first, last, types) in batches {
        let bad = first > last
            || previous_last.is_some_and(|p| *first <= p)
            || types.is_empty()
            || (types.len() > 1 && (types.len() as i64) != last - first + 1)
            || types.iter().any(|t| !(0..=3).contains(t));
        if bad {
            return Some(ErrorCode::InvalidRequest);
        }
        previous_last = Some(*last);
    }
    None
}

/// Acquire from what the log returned: the batches' offsets, aborted ones skipped under
/// read_committed; the answer carries the batches that hold acquired offsets.
fn acquire_from(
    state: &StateRef,
    member: &MemberId,
    f: &FetchedPartition,
    budget: i64,
    now_ms: i64,
) -> Result<ShareFetched, ErrorCode> {
    if let Some(code) = f.error {
        return Err(code);
    }
    let Some(slice) = &f.records else {
        return Ok(ShareFetched::default());
    };
    let mut bytes = Vec::new();
    slice
        .read_into(&mut bytes)
        .map_err(|_| ErrorCode::KafkaStorageError)?;
    let aborted = f.aborted.as_deref().unwrap_or(&[]);
    let mut batches: Vec<(LogBatch, std::ops::Range<usize>)> = Vec::new();
    let mut at = 0usize;
    for b in BatchIter::new(&bytes) {
        // A partial batch at the end of the read is no batch: the next fetch reads it whole.
        let Ok((h, raw)) = b else { break };
        let skip = h.is_transactional()
            && !h.is_control()
            && aborted.iter().any(|t| {
                t.producer_id == h.producer_id
                    && t.first_offset <= h.base_offset
                    && h.last_offset() <= t.last_offset
            });
        batches.push((
            LogBatch {
                base_offset: h.base_offset,
                last_offset: h.last_offset(),
                skip,
            },
            at..at + raw.len(),
        ));
        at += raw.len();
    }
    let log_batches: Vec<LogBatch> = batches.iter().map(|(b, _)| *b).collect();
    let acquired = lock(&state.state).acquire(
        member,
        &log_batches,
        AcquireLimits {
            max_records: budget,
        },
        now_ms,
    );
    let mut records = Vec::new();
    for (b, range) in &batches {
        let holds = acquired
            .iter()
            .any(|r| r.first_offset <= b.last_offset && b.base_offset <= r.last_offset);
        if holds {
            records.extend_from_slice(&bytes[range.clone()]);
        }
    }
    Ok(ShareFetched {
        error: None,
        records: Bytes::from(records),
        acquired,
    })
}

#[cfg(test)]
mod tests {
    use super::check_ack_batches;
    use sluice_protocol::ErrorCode;

    #[test]
    fn acknowledgement_batches_are_checked_as_kafka_checks_them() {
        assert_eq!(
            check_ack_batches(&[(0, 4, vec![1]), (5, 6, vec![2, 3])]),
            None
        );
        for bad in [
            vec![(5, 4, vec![1])],
            vec![(0, 4, vec![1]), (4, 6, vec![1])],
            vec![(0, 4, vec![])],
            vec![(0, 4, vec![1, 2])],
            vec![(0, 0, vec![4])],
            vec![(0, 0, vec![-1])],
        ] {
            assert_eq!(
                check_ack_batches(&bad),
                Some(ErrorCode::InvalidRequest),
                "{bad:?}"
            );
        }
    }
}
