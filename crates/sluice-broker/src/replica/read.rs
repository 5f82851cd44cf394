//! Reads for consumers and followers (Kafka's `ReplicaManager.fetchMessages` and
//! `DelayedFetch`). Each partition is read as whole batches up to the high watermark (the
//! log end for a follower, the last stable offset for read_committed), at most its own
//! `max_bytes` and the request's in all, but always a whole first batch (KIP-74). The
//! answer holds file ranges, not bytes: the connection sends them with `sendfile`.
//!
//! With fewer than `min_bytes` ready the fetch parks in the fetch purgatory; each time one of
//! its partitions changes, only the partitions that changed are read again (reading is cheap:
//! an index lookup and a few batch headers), until enough is there, a partition errs (a new
//! leader, a fenced epoch) or `max_wait` passes.
//!
//! A consumer's Fetch v11+ that names its leader epoch may be served by a follower (KIP-392):
//! it reads to the follower's high watermark (the leader's, as last heard) and its last stable
//! offset.
//!
//! Replication throttling, leader side (`leader.replication.throttled.rate` with the topic's
//! `leader.replication.throttled.replicas`): what throttled replicas are sent counts against
//! the rate, in sync or not; while it is exceeded, out-of-sync throttled followers get their
//! partition's offsets and no records (Kafka's `ReplicationQuotaManager`).

use std::sync::Arc;
use std::time::Duration;

use sluice_protocol::types::{LeaderEpoch, NodeId, Offset, TopicPartition};
use sluice_protocol::ErrorCode;
use sluice_storage::txn_index::AbortedTxn;
use sluice_storage::FileSlice;

use super::manager::ReplicaManager;
use super::partition::{FetchIsolation, Partition};
use super::purgatory::Look;
use crate::error_map::log_error_code;

/// A fetch as a whole.
#[derive(Clone, Copy, Debug)]
pub struct FetchParams {
    /// A follower's fetch: its node id. It reads to the log end, and its fetch offsets tell
    /// this leader what it has.
    pub replica: Option<NodeId>,
    /// read_committed (consumers only).
    pub read_committed: bool,
    /// A consumer's fetch that a follower may serve (Fetch v11+, KIP-392): it reads to this
    /// replica's high watermark, as it would from the leader.
    pub from_any_replica: bool,
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub max_wait: Duration,
}

impl FetchParams {
    fn isolation(&self) -> FetchIsolation {
        match (self.replica, self.read_committed) {
            (Some(_), _) => FetchIsolation::LogEnd,
            (None, true) => FetchIsolation::TxnCommitted,
            (None, false) => FetchIsolation::HighWatermark,
        }
    }
}

/// One partition of a fetch.
#[derive(Clone, Debug)]
pub struct FetchPartitionRequest {
    pub tp: TopicPartition,
    pub fetch_offset: Offset,
    /// The fetcher's view of the leader epoch (NONE: unchecked).
    pub current_leader_epoch: LeaderEpoch,
    pub max_bytes: u64,
}

/// One partition's answer.
#[derive(Clone, Debug)]
pub struct FetchedPartition {
    /// None: no error.
    pub error: Option<ErrorCode>,
    /// NONE where unknown (an error before the partition was found).
    pub high_watermark: Offset,
    pub last_stable_offset: Offset,
    pub log_start_offset: Offset,
    /// Whole batches, as a range of a segment file.
    pub records: Option<FileSlice>,
    /// read_committed: the aborted transactions in the range read.
    pub aborted: Option<Vec<AbortedTxn>>,
    /// The topic's bytes-out counter (consumers) or the replication one (followers), for
    /// the caller to count what it finally sends.
    pub bytes_out: Option<metrics::Counter>,
    /// KIP-392: the replica the consumer should read this partition from instead.
    pub preferred_read_replica: Option<i32>,
}

impl FetchedPartition {
    pub fn error(code: ErrorCode) -> Self {
        Self {
            error: Some(code),
            high_watermark: Offset::NONE,
            last_stable_offset: Offset::NONE,
            log_start_offset: Offset::NONE,
            records: None,
            aborted: None,
            bytes_out: None,
            preferred_read_replica: None,
        }
    }

    /// A leader's answer sending a consumer to replica `to`: its offsets, no records.
    pub fn redirect(p: &Partition, to: i32) -> Self {
        Self {
            preferred_read_replica: Some(to),
            ..Self::offsets_only(p, None)
        }
    }

    /// Bytes of records in the answer.
    pub fn records_len(&self) -> u64 {
        self.records.as_ref().map_or(0, |r| r.len)
    }

    /// No records, but the partition's offsets.
    pub(crate) fn offsets_only(p: &Partition, error: Option<ErrorCode>) -> Self {
        Self {
            error,
            high_watermark: Offset(p.high_watermark()),
            last_stable_offset: Offset(p.last_stable_offset()),
            log_start_offset: Offset(p.log_start_offset()),
            records: None,
            aborted: None,
            bytes_out: None,
            preferred_read_replica: None,
        }
    }
}

/// One requested partition, resolved once.
struct Target {
    request: FetchPartitionRequest,
    partition: Result<Arc<Partition>, ErrorCode>,
    /// A follower's fetch of a leader-throttled replica: what it is sent counts against the
    /// leader's replication quota.
    throttled: bool,
    /// ... and the follower is out of sync: it gets nothing while the quota is exceeded.
    holdable: bool,
}

impl ReplicaManager {
    /// Read `partitions` as `params` says; answers in request order.
    pub async fn fetch(
        &self,
        params: FetchParams,
        partitions: Vec<FetchPartitionRequest>,
    ) -> Vec<FetchedPartition> {
        if params.replica.is_none() && self.diskless().is_some() {
            let image = self.metadata().current();
            if !image.diskless_topics.is_empty()
                && partitions
                    .iter()
                    .any(|p| crate::diskless::is_diskless(&image, &p.tp.topic))
            {
                return self.fetch_with_diskless(params, partitions).await;
            }
        }
        self.fetch_local(params, partitions).await
    }

    /// Read hosted partitions.
    pub(super) async fn fetch_local(
        &self,
        params: FetchParams,
        partitions: Vec<FetchPartitionRequest>,
    ) -> Vec<FetchedPartition> {
        let now = crate::now_ms();
        let targets: Vec<Target> = partitions
            .into_iter()
            .map(|request| self.fetch_target(&params, request, now))
            .collect();
        let isolation = params.isolation();
        // Reads below the local log start are answered from the remote tier first: what is
        // there never needs waiting for.
        let fixed = self.remote_answers(&params, &targets).await;
        let quota = &self.replication_quotas().leader;
        let any_holdable = targets.iter().any(|t| t.holdable);
        let mut answers: Vec<Option<FetchedPartition>> = vec![None; targets.len()];
        let mut seen: Vec<Option<u64>> = vec![None; targets.len()];
        let deadline = tokio::time::Instant::now() + params.max_wait;
        let watched = targets
            .iter()
            .filter_map(|t| t.partition.as_ref().ok().map(|p| &p.watchers));
        let mut answers = self
            .fetch_purgatory
            .run(watched, deadline, |look| {
                let hold = any_holdable && quota.is_exceeded(crate::now_ms());
                let mut total = 0u64;
                let mut error = false;
                for (i, t) in targets.iter().enumerate() {
                    if let Some(f) = &fixed[i] {
                        total += f.records_len();
                        error |= f.error.is_some();
                        answers[i] = Some(f.clone());
                        continue;
                    }
                    let version = t.partition.as_ref().ok().map(|p| p.watchers.version());
                    // Only partitions that changed since they were last read are read again
                    // (until something is found: then the budget is settled in order).
                    // A held follower is looked at every time: the quota frees by itself.
                    if seen[i] != version || t.holdable {
                        answers[i] = None;
                    }
                    let a = answers[i].get_or_insert_with(|| {
                        seen[i] = version;
                        let budget = params.max_bytes.saturating_sub(total);
                        read_target(t, budget, isolation, hold, total == 0)
                    });
                    total += a.records_len();
                    error |= a.error.is_some();
                }
                (total >= params.min_bytes || error || look == Look::Expired)
                    .then(|| std::mem::take(&mut answers))
            })
            .await
            .into_iter()
            .map(|a| a.unwrap_or_else(|| FetchedPartition::error(ErrorCode::UnknownServerError)))
            .collect::<Vec<_>>();
        fit_budget(&targets, &mut answers, params.max_bytes);
        let sent: u64 = targets
            .iter()
            .zip(&answers)
            .filter(|(t, _)| t.throttled)
            .map(|(_, a)| a.records_len())
            .sum();
        quota.record(sent, crate::now_ms());
        answers
    }

    /// The answers of targets that read below the local log start of a tiered partition: a
    /// consumer's from the remote tier, a follower's OFFSET_MOVED_TO_TIERED_STORAGE (it then
    /// starts from the remote tier's end). None for the others.
    async fn remote_answers(
        &self,
        params: &FetchParams,
        targets: &[Target],
    ) -> Vec<Option<FetchedPartition>> {
        let mut out = vec![None; targets.len()];
        let Some(tier) = self.tier() else {
            return out;
        };
        let mut used = 0u64;
        for (i, t) in targets.iter().enumerate() {
            let Ok(p) = &t.partition else { continue };
            let offset = t.request.fetch_offset.0;
            if p.remote_segment_for(offset).is_none()
                || p.check_leader_epoch(t.request.current_leader_epoch.0)
                    .is_err()
            {
                continue;
            }
            if params.replica.is_some() {
                out[i] = Some(FetchedPartition::offsets_only(
                    p,
                    Some(ErrorCode::OffsetMovedToTieredStorage),
                ));
                continue;
            }
            let budget = t
                .request
                .max_bytes
                .min(params.max_bytes.saturating_sub(used));
            if budget == 0 && used > 0 {
                continue;
            }
            let answer = super::tier::read::fetch_remote(
                tier,
                p,
                offset,
                budget,
                params.read_committed,
                used == 0,
            )
            .await;
            used += answer.as_ref().map_or(0, FetchedPartition::records_len);
            out[i] = answer;
        }
        out
    }

    fn fetch_target(
        &self,
        params: &FetchParams,
        request: FetchPartitionRequest,
        now: i64,
    ) -> Target {
        let partition = self.hosted(&request.tp).and_then(|p| {
            match params.replica {
                // A follower's fetch offset tells the leader what it has.
                Some(replica) => {
                    p.on_follower_fetch(replica.0, request.fetch_offset.0, now)?;
                }
                // Consumers read from the leader, or from any replica with Fetch v11+ (KIP-392)
                // when they name the leader epoch they know (KIP-320), which the follower
                // checks. One that does not may have stale metadata: sent to a former leader
                // whose log is now shorter, it would read OFFSET_OUT_OF_RANGE and reset its
                // position (the simulator's seed 60 showed a group's committed offset going
                // back that way), so it is sent back to the leader instead.
                None if !(p.is_leader()
                    || (params.from_any_replica && request.current_leader_epoch.0 >= 0)) =>
                {
                    return Err(ErrorCode::NotLeaderOrFollower)
                }
                None => {}
            }
            Ok(p)
        });
        let throttled = params.replica.is_some()
            && partition
                .as_ref()
                .is_ok_and(|p| p.settings().leader_throttled);
        let holdable = throttled
            && params
                .replica
                .is_some_and(|r| partition.as_ref().is_ok_and(|p| !p.in_isr(r.0)));
        Target {
            request,
            partition,
            throttled,
            holdable,
        }
    }
}

/// Read one partition: at most `budget` bytes (and its own limit); a whole first batch when
/// it is the `first` with data.
fn read_target(
    t: &Target,
    budget: u64,
    isolation: FetchIsolation,
    hold: bool,
    first: bool,
) -> FetchedPartition {
    let p = match &t.partition {
        Ok(p) => p,
        Err(code) => return FetchedPartition::error(*code),
    };
    if let Err(code) = p.check_leader_epoch(t.request.current_leader_epoch.0) {
        return FetchedPartition::error(code);
    }
    if hold && t.holdable {
        return FetchedPartition::offsets_only(p, None);
    }
    let budget = t.request.max_bytes.min(budget);
    match p.read(t.request.fetch_offset.0, budget, isolation, first) {
        Ok(read) => FetchedPartition {
            error: None,
            high_watermark: Offset(read.high_watermark),
            last_stable_offset: Offset(read.last_stable_offset),
            log_start_offset: Offset(read.log_start_offset),
            records: read.slice,
            aborted: (isolation == FetchIsolation::TxnCommitted).then_some(read.aborted),
            bytes_out: Some(if isolation == FetchIsolation::LogEnd {
                p.metrics.replication_bytes_out.clone()
            } else {
                p.metrics.bytes_out.clone()
            }),
            preferred_read_replica: None,
        },
        // Deleted locally since the remote answers were read: the next fetch reads the
        // remote tier, which holds it.
        Err(_) if p.remote_segment_for(t.request.fetch_offset.0).is_some() => {
            FetchedPartition::offsets_only(p, None)
        }
        Err(e) => FetchedPartition::offsets_only(p, Some(log_error_code(&e))),
    }
}

/// Partitions read at different looks may together exceed the request's `max_bytes`: keep
/// them in order while they fit (the first one with data always), drop the records of the
/// rest (they come in the next fetch).
fn fit_budget(targets: &[Target], answers: &mut [FetchedPartition], max_bytes: u64) {
    let mut total = 0u64;
    for (t, a) in targets.iter().zip(answers.iter_mut()) {
        let n = a.records_len();
        if n == 0 {
            continue;
        }
        if total > 0 && total + n > max_bytes {
            if let Ok(p) = &t.partition {
                let mut offsets = FetchedPartition::offsets_only(p, None);
                offsets.high_watermark = a.high_watermark;
                offsets.last_stable_offset = a.last_stable_offset;
                offsets.log_start_offset = a.log_start_offset;
                *a = offsets;
            }
            continue;
        }
        total += n;
    }
}
