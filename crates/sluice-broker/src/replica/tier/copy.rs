//! The leader's tier task, every `remote.log.manager.task.interval.ms` for each partition it
//! leads (Kafka's `RLMCopyTask` and `RLMExpirationTask` together):
//! 1. segments left `CopyStarted` (an uploader deposed or killed mid-upload, or an upload
//!    that failed) or `DeleteStarted` are deleted from the store and marked deleted: no
//!    orphan stays, and a half-copied segment is never read;
//! 2. a topic whose remote storage was turned off (with `remote.log.delete.on.disable`)
//!    loses its remote data;
//! 3. remote retention: `retention.ms` / `retention.bytes` over remote and local data
//!    together, oldest remote segments first;
//! 4. each closed segment below the last stable offset that the remote tier does not hold
//!    yet is copied: its metadata recorded `CopyStarted`, its files uploaded (`.log`, the
//!    indexes, the producer snapshot at its end, the leader epochs up to its end), then
//!    `CopyFinished`. Only then may local retention delete it (see `Log::delete_old_segments`).
//!
//! Every metadata change goes through the controller, which takes it only from the current
//! leader at its current epoch, so a deposed leader can neither finish a copy nor delete.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use sluice_metadata::controller_types::ApiError;
use sluice_metadata::remote::{RemoteSegment, RemoteSegmentState};
use sluice_metadata::Uuid;
use sluice_protocol::types::TopicPartition;
use sluice_remote::RemoteError;
use sluice_storage::log::ClosedSegment;
use sluice_storage::LogError;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::{segment_key, Tier};
use crate::controller_api::ControllerApi;
use crate::replica::manager::ReplicaManager;
use crate::replica::partition::Partition;

#[derive(Debug, thiserror::Error)]
pub enum TierError {
    #[error(transparent)]
    Remote(#[from] RemoteError),
    #[error(transparent)]
    Log(#[from] LogError),
    #[error("the controller could not be asked: {0}")]
    Controller(String),
    #[error("the controller refused: {0:?} {1}")]
    Refused(sluice_protocol::ErrorCode, String),
    #[error("{0}")]
    Changed(String),
}

impl From<ApiError> for TierError {
    fn from(e: ApiError) -> Self {
        TierError::Refused(e.code, e.message)
    }
}

async fn record(controller: &dyn ControllerApi, seg: &RemoteSegment) -> Result<(), TierError> {
    controller
        .remote_log_segment(seg)
        .await
        .map_err(TierError::Controller)??;
    Ok(())
}

/// Longest wait before a partition whose task failed is tried again (Kafka's
/// `remote.log.manager.task.retry.backoff.max.ms`).
const RETRY_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// Run the tier task until shutdown. A partition whose run failed (the store away, say) is
/// tried again after a backoff that doubles up to [`RETRY_BACKOFF_MAX`], so a store that is
/// down does not turn every run into metadata records of copies started and abandoned.
pub async fn run_tier_tasks(
    replicas: Arc<ReplicaManager>,
    controller: Arc<dyn ControllerApi>,
    tier: Arc<Tier>,
    mut shutdown: watch::Receiver<bool>,
) {
    let period = Duration::from_millis(tier.settings.task_interval_ms.max(1));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing: HashMap<TopicPartition, (Duration, tokio::time::Instant)> = HashMap::new();
    let mut reported: HashMap<String, (i64, u64)> = HashMap::new();
    let mut swept: HashMap<TopicPartition, tokio::time::Instant> = HashMap::new();
    let sweep_every = period * SWEEP_EVERY_RUNS;
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tick.tick() => {}
        }
        let pass = async {
            let led: Vec<_> = replicas
                .all()
                .into_iter()
                .filter(|p| p.is_leader())
                .collect();
            failing.retain(|tp, _| led.iter().any(|p| &p.tp == tp));
            swept.retain(|tp, _| led.iter().any(|p| &p.tp == tp));
            for p in led {
                let now = tokio::time::Instant::now();
                if failing.get(&p.tp).is_some_and(|(_, next)| now < *next) {
                    continue;
                }
                let sweep = swept
                    .get(&p.tp)
                    .is_none_or(|at| now.duration_since(*at) >= sweep_every);
                let result = match partition_pass(&replicas, &*controller, &tier, &p).await {
                    Ok(()) if sweep => sweep_orphans(&tier, &p).await,
                    other => other,
                };
                if sweep && result.is_ok() {
                    swept.insert(p.tp.clone(), now);
                }
                match result {
                    Ok(()) => {
                        failing.remove(&p.tp);
                    }
                    Err(e) => {
                        let wait = failing
                            .get(&p.tp)
                            .map_or(period, |(w, _)| (*w * 2).min(RETRY_BACKOFF_MAX));
                        warn!(partition = %p.tp, error = %e, retry_ms = wait.as_millis() as u64, "tiered storage task failed");
                        failing.insert(p.tp.clone(), (wait, now + wait));
                    }
                }
            }
            report_sizes(&replicas, &mut reported);
            tier.delete_forgotten().await;
        };
        tokio::select! {
            _ = shutdown.changed() => return,
            () = pass => {}
        }
    }
}

/// A leader lists its partition's objects once every this many runs of the task.
const SWEEP_EVERY_RUNS: u32 = 10;

/// Delete the objects of the partition's folder that no remote segment names: what an
/// upload that was in flight when its uploader died, or was deposed, stored after its
/// successor cleaned up (a store may complete a request after the client is gone).
///
/// This leader's view of the metadata may be behind (a leader cut off from the controller
/// believes it leads until it hears otherwise, yet may still reach the store), and a newer
/// leader may have copied segments this view does not name yet. So only objects of a segment
/// that starts at or below the highest offset this view knows copied go: no segment starting
/// there can ever be committed (a finished copy must continue the remote log, which only
/// grows), so an unnamed one there is an orphan whoever leads. And only objects older than a
/// request timeout: a copy of this leader's own may be under way.
async fn sweep_orphans(tier: &Tier, p: &Partition) -> Result<(), TierError> {
    let remote = p.remote_log();
    let Some(remote) = remote else {
        return Ok(());
    };
    let highest = remote.highest_offset();
    let known = |id: [u8; 16]| {
        remote
            .segments
            .iter()
            .any(|s| *s.segment_id.as_bytes() == id)
    };
    let prefix = sluice_remote::SegmentKey::partition_prefix(
        &p.tp.topic,
        p.topic_id.as_bytes(),
        p.tp.partition.0,
    );
    let older_than = crate::now_ms() - tier.settings.request_timeout_ms as i64;
    for (key, _, modified_ms) in tier.store().list_with_age(&prefix).await? {
        let (Some(id), Some(base)) = (
            sluice_remote::layout::segment_id_of(&key),
            sluice_remote::layout::base_offset_of(&key),
        ) else {
            continue;
        };
        if !known(id) && base <= highest && modified_ms < older_than {
            info!(partition = %p.tp, key, "deleting an object no remote segment names");
            tier.store().delete(&key).await?;
        }
    }
    Ok(())
}

/// Per topic, over the partitions led here: bytes in the remote tier and bytes of closed
/// segments not copied yet (Kafka's `RemoteLogSizeBytes` and `RemoteCopyLagBytes`).
fn report_sizes(replicas: &ReplicaManager, reported: &mut HashMap<String, (i64, u64)>) {
    let mut now: HashMap<String, (i64, u64)> = HashMap::new();
    for p in replicas.all().into_iter().filter(|p| p.is_leader()) {
        let remote = p.remote_log();
        let highest = remote.as_ref().map_or(-1, |r| r.highest_offset());
        let log = p.read_log();
        if !log.config().remote_storage && remote.is_none() {
            continue;
        }
        let lag: u64 = log
            .closed_segments()
            .iter()
            .filter(|c| c.next_offset - 1 > highest)
            .map(|c| c.size_bytes)
            .sum();
        let e = now.entry(p.tp.topic.clone()).or_default();
        e.0 += remote.map_or(0, |r| r.size_bytes());
        e.1 += lag;
    }
    for topic in reported.keys() {
        now.entry(topic.clone()).or_default();
    }
    for (topic, (size, lag)) in &now {
        metrics::gauge!("sluice_remote_log_size_bytes", "topic" => topic.clone()).set(*size as f64);
        metrics::gauge!("sluice_remote_copy_lag_bytes", "topic" => topic.clone()).set(*lag as f64);
    }
    now.retain(|_, (size, lag)| *size > 0 || *lag > 0);
    *reported = now;
}

/// One run of the task for one led partition.
pub async fn partition_pass(
    replicas: &ReplicaManager,
    controller: &dyn ControllerApi,
    tier: &Tier,
    p: &Partition,
) -> Result<(), TierError> {
    let config = p.read_log().config().clone();
    let epoch = p.leader_epoch();
    if let Some(remote) = p.remote_log() {
        for seg in remote.segments.iter().filter(|s| !s.is_readable()) {
            info!(partition = %p.tp, segment = %seg.segment_id, state = ?seg.state, "deleting an unfinished remote segment");
            delete_segment(controller, tier, p, seg, epoch).await?;
        }
        if !config.remote_storage {
            // Only remote.log.delete.on.disable turns remote storage off (the controller
            // checks): the remote data goes with it.
            for seg in remote.readable() {
                delete_segment(controller, tier, p, seg, epoch).await?;
            }
            return Ok(());
        }
        apply_remote_retention(controller, tier, p, epoch, &config).await?;
    }
    if config.remote_storage && !config.remote_copy_disable {
        copy_closed_segments(replicas.node_id(), controller, tier, p, epoch).await?;
    }
    Ok(())
}

/// Mark `seg` deleting, delete its objects, mark it deleted.
async fn delete_segment(
    controller: &dyn ControllerApi,
    tier: &Tier,
    p: &Partition,
    seg: &RemoteSegment,
    epoch: i32,
) -> Result<(), TierError> {
    let mut seg = seg.clone();
    seg.leader_epoch = epoch;
    if seg.state != RemoteSegmentState::DeleteStarted {
        seg.state = RemoteSegmentState::DeleteStarted;
        record(controller, &seg).await?;
    }
    let key = segment_key(&p.tp, &seg);
    if let Err(e) = tier.store().delete_segment(&key).await {
        tier.metrics.delete_errors.increment(1);
        return Err(e.into());
    }
    tier.reader().forget(&key);
    seg.state = RemoteSegmentState::DeleteFinished;
    record(controller, &seg).await?;
    tier.metrics.delete_segments.increment(1);
    Ok(())
}

/// Delete the oldest remote segments past `retention.ms` or beyond `retention.bytes` (local
/// and remote together, as Kafka counts).
async fn apply_remote_retention(
    controller: &dyn ControllerApi,
    tier: &Tier,
    p: &Partition,
    epoch: i32,
    config: &sluice_storage::LogConfig,
) -> Result<(), TierError> {
    let Some(remote) = p.remote_log() else {
        return Ok(());
    };
    if !config.cleanup_delete {
        return Ok(());
    }
    let now = crate::now_ms();
    let highest = remote.highest_offset();
    let local_only: u64 = {
        let log = p.read_log();
        let copied: u64 = log
            .closed_segments()
            .iter()
            .filter(|c| c.next_offset - 1 <= highest)
            .map(|c| c.size_bytes)
            .sum();
        log.size_bytes().saturating_sub(copied)
    };
    let mut total = local_only as i64 + remote.size_bytes();
    for seg in remote.readable() {
        let by_time = config.retention_ms >= 0
            && seg.max_timestamp_ms <= now.saturating_sub(config.retention_ms);
        let by_size =
            config.retention_bytes >= 0 && total - seg.size_bytes >= config.retention_bytes;
        if !(by_time || by_size) {
            break;
        }
        debug!(partition = %p.tp, base = seg.base_offset, end = seg.end_offset, by_time, by_size, "remote retention deletes a segment");
        delete_segment(controller, tier, p, seg, epoch).await?;
        total -= seg.size_bytes;
    }
    Ok(())
}

/// Copy every closed segment below the last stable offset that the remote tier lacks.
async fn copy_closed_segments(
    node_id: i32,
    controller: &dyn ControllerApi,
    tier: &Tier,
    p: &Partition,
    epoch: i32,
) -> Result<(), TierError> {
    let lso = p.last_stable_offset();
    let mut highest = p.remote_log().map_or(-1, |r| r.highest_offset());
    let closed = p.read_log().closed_segments();
    for c in closed {
        if c.next_offset > lso {
            break;
        }
        if c.next_offset - 1 <= highest || c.size_bytes == 0 {
            continue;
        }
        if highest >= 0 && c.base_offset > highest + 1 {
            warn!(partition = %p.tp, base = c.base_offset, remote_end = highest, "the local log does not continue the remote tier; not copying");
            return Ok(());
        }
        copy_segment(node_id, controller, tier, p, epoch, &c).await?;
        highest = c.next_offset - 1;
    }
    Ok(())
}

/// The leader epochs inside a segment (Kafka's `segmentLeaderEpochs`): the one in force at
/// its base, moved to the base, then those starting inside it.
fn segment_epochs(c: &ClosedSegment) -> Vec<(i32, i64)> {
    let mut out = Vec::new();
    for (e, start) in &c.epochs {
        if *start <= c.base_offset {
            out.clear();
            out.push((*e, c.base_offset));
        } else {
            out.push((*e, *start));
        }
    }
    out
}

/// Kafka's `leader-epoch-checkpoint` text.
fn epoch_checkpoint(epochs: &[(i32, i64)]) -> Bytes {
    let pairs: Vec<(i64, i64)> = epochs.iter().map(|(e, o)| (i64::from(*e), *o)).collect();
    Bytes::from(sluice_storage::checkpoint::format_pairs(&pairs))
}

async fn copy_segment(
    node_id: i32,
    controller: &dyn ControllerApi,
    tier: &Tier,
    p: &Partition,
    epoch: i32,
    c: &ClosedSegment,
) -> Result<(), TierError> {
    let mut seg = RemoteSegment {
        topic_id: p.topic_id,
        partition: p.tp.partition.0,
        segment_id: Uuid::from_u128(sluice_rt::random_u128()),
        base_offset: c.base_offset,
        end_offset: c.next_offset - 1,
        max_timestamp_ms: c.max_timestamp_ms,
        size_bytes: c.size_bytes as i64,
        broker_id: node_id,
        leader_epoch: epoch,
        epochs: segment_epochs(c),
        state: RemoteSegmentState::CopyStarted,
    };
    record(controller, &seg).await?;
    let key = segment_key(&p.tp, &seg);
    info!(partition = %p.tp, base = seg.base_offset, end = seg.end_offset, segment = %seg.segment_id, "copying a segment to the remote tier");
    let started = std::time::Instant::now();
    let upload = async {
        let store = tier.store();
        let sent = store.put_file(&key.object("log"), &c.log).await?;
        if sent != c.size_bytes {
            return Err(TierError::Changed(format!(
                "{} changed while it was copied ({sent} bytes, not {})",
                c.log.display(),
                c.size_bytes
            )));
        }
        store.put_file(&key.object("index"), &c.index).await?;
        store
            .put_file(&key.object("timeindex"), &c.time_index)
            .await?;
        for (suffix, path) in [
            ("txnindex", &c.txn_index),
            ("snapshot", &c.producer_snapshot),
        ] {
            if path.exists() {
                store.put_file(&key.object(suffix), path).await?;
            } else {
                store.put(&key.object(suffix), Bytes::new()).await?;
            }
        }
        store
            .put(
                &key.object("leader-epoch-checkpoint"),
                epoch_checkpoint(&c.epochs),
            )
            .await?;
        Ok::<_, TierError>(sent)
    };
    let sent = match upload.await {
        Ok(n) => n,
        Err(e) => {
            tier.metrics.copy_errors.increment(1);
            return Err(e);
        }
    };
    seg.state = RemoteSegmentState::CopyFinished;
    record(controller, &seg).await?;
    tier.metrics.copy_bytes.increment(sent);
    tier.metrics.copy_segments.increment(1);
    info!(partition = %p.tp, base = seg.base_offset, end = seg.end_offset, bytes = sent, ms = started.elapsed().as_millis() as u64, "copied a segment to the remote tier");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_s_epochs_start_at_its_base() {
        let c = ClosedSegment {
            base_offset: 100,
            next_offset: 200,
            size_bytes: 1,
            max_timestamp_ms: 0,
            log: Default::default(),
            index: Default::default(),
            time_index: Default::default(),
            txn_index: Default::default(),
            producer_snapshot: Default::default(),
            epochs: vec![(0, 0), (2, 50), (3, 150)],
        };
        assert_eq!(segment_epochs(&c), vec![(2, 100), (3, 150)]);
        assert_eq!(
            &epoch_checkpoint(&c.epochs)[..],
            b"0\n3\n0 0\n2 50\n3 150\n"
        );
    }
}
