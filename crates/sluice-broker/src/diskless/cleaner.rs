//! Diskless retention and WAL garbage. One broker does it (the live one with the lowest
//! id; another takes over when it goes): it asks the controller to move each partition's
//! log start where the topic's `retention.ms` and `retention.bytes` put it (see
//! `ReplicaManager::diskless_retention`), then deletes the WAL objects no committed batch
//! refers to any more, once they are `diskless.wal.delete.delay.ms` old. The delay covers an
//! object uploaded whose commit is still on its way, and readers holding an image from
//! before the trim. Both steps are idempotent, so two brokers briefly doing them at once
//! (ownership moving) do no harm.

use std::collections::HashSet;

use sluice_metadata::{MetadataImage, Uuid};
use sluice_remote::RemoteError;
use tracing::{info, warn};

use super::{Diskless, WAL_PREFIX};
use sluice_metadata::controller_types::ApiError;
use sluice_protocol::ErrorCode;

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

    /// Delete the WAL objects no batch of `image` refers to that are old enough: how many
    /// were deleted. Nothing when this broker never opened the store and `image` has no
    /// diskless topic (a cluster that never used them).
    pub async fn collect_garbage(
        &self,
        image: &MetadataImage,
        now_ms: i64,
    ) -> Result<usize, RemoteError> {
        if image.diskless_topics.is_empty() && !self.store.is_open() {
            return Ok(0);
        }
        let store = self.store()?;
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
        if deleted > 0 {
            info!(
                deleted,
                "deleted WAL objects of diskless topics no batch refers to"
            );
        }
        Ok(deleted)
    }

    /// One round: trims (from retention), then garbage.
    pub async fn clean(&self, trims: Vec<(Uuid, i32, i64)>, now_ms: i64) {
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
        let image = self.metadata.current();
        if let Err(e) = self.collect_garbage(&image, now_ms).await {
            warn!(error = %e, "diskless WAL garbage collection failed");
        }
    }
}
