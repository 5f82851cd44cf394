//! Diskless retention and WAL garbage. One broker does it (the live one with the lowest
//! id; another takes over when it goes): it asks the controller to move each partition's
//! log start where the topic's `retention.ms` and `retention.bytes` put it (see
//! `ReplicaManager::diskless_retention`), then deletes the WAL objects no committed batch
//! refers to any more, and the segment objects ([`super::compact`]) no log refers to, once
//! they are `diskless.wal.delete.delay.ms` old. It trusts its image to name every object in
//! use only after a barrier: the active controller, confirmed by a quorum, names the metadata
//! offset that holds every commit so far, and the image must reach it (a broker cut off from
//! the quorum, or a deposed controller, would otherwise delete what it has not heard of yet:
//! seen in the simulator, seed 2 of the first build with compaction). Ages are measured on
//! the store's clock, not the broker's: each round writes a small object and takes its
//! modification time as "now" (a broker whose clock jumped ahead would otherwise find an
//! object uploaded a moment ago old enough: seed 3, a clock 481 s ahead). The delay covers an
//! object uploaded whose commit is still on its way, and readers holding an image from
//! before the trim. Both steps are idempotent, so two brokers briefly doing them at once
//! (ownership moving) do no harm.

use std::collections::HashSet;

use sluice_metadata::{MetadataImage, Uuid};
use sluice_remote::RemoteError;
use tracing::{info, warn};

use sluice_metadata::controller_types::ApiError;
use sluice_protocol::ErrorCode;

use super::compact::SEGMENT_PREFIX;
use super::{Diskless, WAL_PREFIX};

/// The object whose modification time tells the store's clock, alone under its prefix (a
/// local store lists folders, not single files).
const CLOCK_PREFIX: &str = "diskless/clock";
const CLOCK_KEY: &str = "diskless/clock/now";

impl Diskless {
    /// Whether this broker (`node_id`) is the one that cleans: the live broker with the
    /// lowest id.
    pub fn cleans(image: &MetadataImage, node_id: i32) -> bool {
        image
            .brokers
            .keys()
            .copied()
            .filter(|b| image.is_live(*b))
            .min()
            == Some(node_id)
    }

    /// Move partitions' log starts (the controller's answer per trim).
    pub async fn trim(&self, trims: &[(Uuid, i32, i64)]) -> Vec<Result<(), ApiError>> {
        match self.controller.diskless_trim(trims).await {
            Ok(out) => out,
            // No controller answered (moving, down): asked again next round.
            Err(e) => vec![Err(ApiError::new(ErrorCode::RequestTimedOut, e)); trims.len()],
        }
    }

    /// Delete the WAL objects no committed batch refers to, and the segment objects no log
    /// refers to, that are old enough (after the barrier, by the store's clock): how many
    /// were deleted. Nothing when this broker never opened the store and there is no
    /// diskless topic (a cluster that never used them).
    pub async fn collect_garbage(&self) -> Result<usize, RemoteError> {
        if self.metadata.current().diskless_topics.is_empty() && !self.store.is_open() {
            return Ok(0);
        }
        let store = self.store()?;
        store.put(CLOCK_KEY, bytes::Bytes::new()).await?;
        let now_ms = store
            .list_with_age(CLOCK_PREFIX)
            .await?
            .iter()
            .filter(|(k, _, _)| k == CLOCK_KEY)
            .map(|(_, _, modified)| *modified)
            .max()
            .ok_or_else(|| RemoteError::Unavailable("the clock object is not listed".into()))?;
        let offset = self
            .controller
            .diskless_barrier()
            .await
            .map_err(|e| RemoteError::Unavailable(format!("no metadata barrier: {e}")))?;
        if !self
            .metadata
            .wait_for_offset(offset, std::time::Duration::from_secs(5))
            .await
        {
            return Err(RemoteError::Unavailable(format!(
                "the metadata did not reach offset {offset} in time"
            )));
        }
        let image = self.metadata.current();
        let referenced: HashSet<Uuid> = image
            .diskless
            .values()
            .flat_map(|l| l.batches().map(|b| b.object_id))
            .collect();
        let mut deleted = 0;
        for (key, _, modified_ms) in store.list_with_age(WAL_PREFIX).await? {
            let Some(id) = key.rsplit('/').next().and_then(|s| Uuid::parse_str(s).ok()) else {
                continue;
            };
            if referenced.contains(&id) || now_ms - modified_ms < self.delete_delay_ms {
                continue;
            }
            store.delete(&key).await?;
            self.objects.forget_prefix(&key);
            deleted += 1;
        }
        let segments: HashSet<Uuid> = image
            .diskless
            .values()
            .flat_map(|l| l.segments.iter().map(|s| s.segment_id))
            .collect();
        for (key, _, modified_ms) in store.list_with_age(SEGMENT_PREFIX).await? {
            let Some(id) = sluice_remote::layout::segment_id_of(&key).map(Uuid::from_bytes) else {
                continue;
            };
            if segments.contains(&id) || now_ms - modified_ms < self.delete_delay_ms {
                continue;
            }
            store.delete(&key).await?;
            if let Ok(r) = self.segment_reader() {
                r.forget_object(&key);
            }
            deleted += 1;
        }
        if deleted > 0 {
            info!(
                deleted,
                "deleted objects of diskless topics nothing refers to"
            );
        }
        Ok(deleted)
    }

    /// One round: trims (from retention), then garbage.
    pub async fn clean(&self, trims: Vec<(Uuid, i32, i64)>) {
        if !trims.is_empty() {
            for (r, (topic_id, partition, start)) in self.trim(&trims).await.iter().zip(&trims) {
                match r {
                    Ok(()) => {
                        info!(%topic_id, partition, start, "diskless retention moved the log start")
                    }
                    Err(e) => {
                        warn!(%topic_id, partition, start, error = ?e, "diskless retention: trim refused")
                    }
                }
            }
        }
        if let Err(e) = self.collect_garbage().await {
            warn!(error = %e, "diskless WAL garbage collection failed");
        }
    }
}
