//! Reads below the local log start, from the remote tier:
//! - a consumer's fetch at such an offset reads whole batches of the remote segment holding
//!   it (through the local chunk cache, as a file range like a local read), with the aborted
//!   transactions of the remote transaction indexes for read_committed;
//! - a follower's fetch there is answered OFFSET_MOVED_TO_TIERED_STORAGE, and the follower
//!   starts its log at the end of the remote tier, with the leader epochs and producer
//!   snapshot of the last remote segment (Kafka's `TierStateMachine`), instead of copying
//!   the whole history;
//! - ListOffsets by timestamp looks in the remote segments' time indexes first.

use std::sync::Arc;

use sluice_protocol::types::Offset;
use sluice_protocol::ErrorCode;
use sluice_remote::RemoteError;
use tracing::{info, warn};

use super::{segment_key, segment_ref, Tier};
use crate::replica::manager::ReplicaManager;
use crate::replica::partition::Partition;
use crate::replica::read::FetchedPartition;

/// A consumer's read at `offset`, below the local log start, from the remote tier; None when
/// the remote tier does not hold it.
pub async fn fetch_remote(
    tier: &Tier,
    p: &Partition,
    offset: i64,
    max_bytes: u64,
    read_committed: bool,
    min_one_batch: bool,
) -> Option<FetchedPartition> {
    let (remote, i) = p.remote_segment_for(offset)?;
    let seg = &remote.segments[i];
    let hw = p.high_watermark();
    let lso = p.last_stable_offset();
    let upper = if read_committed { lso } else { hw };
    tier.metrics.fetch_requests.increment(1);
    let r = segment_ref(&p.tp, seg);
    let read = match tier
        .reader()
        .read(&r, offset, max_bytes, upper, min_one_batch)
        .await
    {
        Ok(read) => read,
        Err(e) => {
            tier.metrics.fetch_errors.increment(1);
            warn!(partition = %p.tp, offset, error = %e, "remote read failed");
            let mut answer = FetchedPartition::offsets_only(p, Some(ErrorCode::KafkaStorageError));
            if !e.is_corrupt() {
                // The store is away for a moment: the consumer just retries.
                answer.error = None;
            }
            return Some(answer);
        }
    };
    let mut answer = FetchedPartition::offsets_only(p, None);
    let Some(read) = read else {
        return Some(answer);
    };
    if read_committed {
        let later: Vec<_> = remote.segments[i..]
            .iter()
            .filter(|s| s.is_readable())
            .map(|s| segment_ref(&p.tp, s))
            .collect();
        match tier
            .reader()
            .aborted_txns(&later, offset, read.next_offset)
            .await
        {
            Ok((mut aborted, complete)) => {
                if !complete {
                    aborted.extend(p.read_log().aborted_txns(offset, read.next_offset));
                }
                answer.aborted = Some(aborted);
            }
            Err(e) => {
                tier.metrics.fetch_errors.increment(1);
                warn!(partition = %p.tp, offset, error = %e, "cannot read remote transaction indexes");
                return Some(answer);
            }
        }
    }
    tier.metrics.fetch_bytes.increment(read.slice.len);
    answer.high_watermark = Offset(hw);
    answer.last_stable_offset = Offset(lso);
    answer.records = Some(read.slice);
    answer.bytes_out = Some(p.metrics.bytes_out.clone());
    Some(answer)
}

/// ListOffsets by timestamp in the remote tier: the first record at or after `target` among
/// the remote segments below the local log start, with its leader epoch.
pub async fn offset_for_timestamp(
    tier: &Tier,
    p: &Partition,
    target: i64,
) -> Result<Option<(i64, i64, i32)>, RemoteError> {
    let Some(remote) = p.remote_log() else {
        return Ok(None);
    };
    let local_start = p.local_log_start_offset();
    let start = p.log_start_offset();
    for seg in remote.readable() {
        if seg.base_offset >= local_start || seg.max_timestamp_ms < target || seg.end_offset < start
        {
            continue;
        }
        let r = segment_ref(&p.tp, seg);
        if let Some((offset, ts)) = tier
            .reader()
            .offset_for_timestamp(&r, target, start)
            .await?
        {
            let epoch = seg
                .epochs
                .iter()
                .rev()
                .find(|(_, s)| *s <= offset)
                .map_or(-1, |(e, _)| *e);
            return Ok(Some((offset, ts, epoch)));
        }
    }
    Ok(None)
}

impl ReplicaManager {
    /// ListOffsets by timestamp in the remote tier of a partition this broker leads:
    /// (offset, timestamp, leader epoch) of the first record at or after `target` there.
    pub async fn remote_offset_for_timestamp(
        &self,
        tp: &sluice_protocol::types::TopicPartition,
        target: i64,
        read_committed: bool,
    ) -> Option<(i64, i64, i32)> {
        if let Some(found) = self
            .diskless_offset_for_timestamp(tp, target, read_committed)
            .await
        {
            return found;
        }
        let tier = self.tier()?;
        let p = self.hosted(tp).ok()?;
        match offset_for_timestamp(tier, &p, target).await {
            Ok(found) => found,
            Err(e) => {
                tier.metrics.fetch_errors.increment(1);
                warn!(partition = %tp, target, error = %e, "cannot search the remote tier by time");
                None
            }
        }
    }

    /// A follower whose leader answered OFFSET_MOVED_TO_TIERED_STORAGE: start its log after
    /// the last remote segment, with that segment's leader epochs and producer snapshot.
    pub async fn start_follower_from_remote(
        &self,
        p: &Arc<Partition>,
        now_ms: i64,
    ) -> Result<i64, String> {
        let tier = self.tier().ok_or("tiered storage is off on this broker")?;
        let remote = p.remote_log().ok_or("no remote segments known yet")?;
        let last = remote
            .readable()
            .max_by_key(|s| s.end_offset)
            .ok_or("no remote segments known yet")?;
        let key = segment_key(&p.tp, last);
        let store = tier.store();
        let text = store
            .get(&key.object("leader-epoch-checkpoint"))
            .await
            .map_err(|e| e.to_string())?
            .unwrap_or_default();
        let epochs = sluice_storage::checkpoint::parse_pairs(&String::from_utf8_lossy(&text))
            .map_err(|e| format!("remote leader epoch checkpoint: {e}"))?
            .into_iter()
            .filter_map(|(e, o)| Some((i32::try_from(e).ok()?, o)))
            .collect::<Vec<_>>();
        let snapshot = store
            .get(&key.object("snapshot"))
            .await
            .map_err(|e| e.to_string())?
            .filter(|b| !b.is_empty());
        let start = last.end_offset + 1;
        let part = Arc::clone(p);
        sluice_rt::task::spawn_blocking(move || {
            part.start_from_remote(start, &epochs, snapshot.as_deref(), now_ms)
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
        info!(partition = %p.tp, offset = start, "follower starts from the remote tier");
        Ok(start)
    }
}
