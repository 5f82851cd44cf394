//! Tiered storage (KIP-405) in the replica layer: the leader copies each closed segment to
//! the object store ([`copy`]), the remote log metadata in the metadata image says which
//! segments the remote tier holds, local retention then frees local disk, and reads below
//! the local log start are served from the remote tier ([`read`]).
//!
//! # Layout
//! - [`Tier`] (here): the store, the remote reader with its caches, and the tier's metrics;
//!   one per broker, built when `remote.log.storage.system.enable` is on.
//! - [`copy`]: the leader's periodic task: clean up after deposed or crashed uploaders,
//!   remote retention, and copying closed segments (Kafka's `RLMCopyTask` and
//!   `RLMExpirationTask`).
//! - [`read`]: consumer fetches and ListOffsets below the local log start, and a follower
//!   that starts from the remote tier instead of copying the whole history.

pub mod copy;
pub mod read;

use std::path::Path;

use sluice_metadata::config::TierSettings;
use sluice_metadata::remote::RemoteSegment;
use sluice_protocol::types::TopicPartition;
use sluice_remote::reader::{ReaderConfig, RemoteReader, RemoteSegmentRef};
use sluice_remote::{RemoteError, RemoteStore, SegmentKey, StoreConfig};

/// The tier's counters (`/metrics`), named after Kafka's `RemoteCopyBytesPerSec` & co.
pub struct TierMetrics {
    pub copy_bytes: metrics::Counter,
    pub copy_segments: metrics::Counter,
    pub copy_errors: metrics::Counter,
    pub fetch_bytes: metrics::Counter,
    pub fetch_requests: metrics::Counter,
    pub fetch_errors: metrics::Counter,
    pub delete_segments: metrics::Counter,
    pub delete_errors: metrics::Counter,
}

impl TierMetrics {
    fn new() -> Self {
        Self {
            copy_bytes: metrics::counter!("sluice_remote_copy_bytes_total"),
            copy_segments: metrics::counter!("sluice_remote_copy_segments_total"),
            copy_errors: metrics::counter!("sluice_remote_copy_errors_total"),
            fetch_bytes: metrics::counter!("sluice_remote_fetch_bytes_total"),
            fetch_requests: metrics::counter!("sluice_remote_fetch_requests_total"),
            fetch_errors: metrics::counter!("sluice_remote_fetch_errors_total"),
            delete_segments: metrics::counter!("sluice_remote_delete_segments_total"),
            delete_errors: metrics::counter!("sluice_remote_delete_errors_total"),
        }
    }
}

/// The object store `settings` name (a `remote/` directory beside the first log dir by
/// default): tiered storage and diskless topics share it.
pub fn open_store(
    settings: &TierSettings,
    first_log_dir: &Path,
) -> Result<RemoteStore, RemoteError> {
    let uri = match &settings.uri {
        Some(u) => u.clone(),
        None => {
            let abs = std::path::absolute(first_log_dir)
                .map_err(|e| RemoteError::Config(format!("{}: {e}", first_log_dir.display())))?;
            let beside = abs.parent().unwrap_or(&abs).join("remote");
            format!("file://{}", beside.display())
        }
    };
    RemoteStore::open(&StoreConfig {
        uri,
        s3_endpoint: settings.s3_endpoint.clone(),
        s3_region: settings.s3_region.clone(),
        s3_access_key_id: settings.s3_access_key_id.clone(),
        s3_secret_access_key: settings.s3_secret_access_key.clone(),
        s3_path_style_access: settings.s3_path_style_access,
        request_timeout_ms: settings.request_timeout_ms,
        retries: settings.retries,
    })
}

/// One broker's handle on the remote tier.
pub struct Tier {
    pub settings: TierSettings,
    reader: RemoteReader,
    pub metrics: TierMetrics,
    /// Partitions of deleted topics whose remote data is still to be deleted: (topic, topic
    /// id, partition). Every node that hosted one deletes it (deleting is idempotent), so it
    /// goes even when the last leader is down.
    deleted: std::sync::Mutex<Vec<(String, [u8; 16], i32)>>,
}

impl Tier {
    /// Open the store `settings` name (a `remote/` directory beside the first log dir by
    /// default) and a read cache in `<first log dir>/remote-cache`.
    pub fn open(settings: &TierSettings, first_log_dir: &Path) -> Result<Self, RemoteError> {
        let store = open_store(settings, first_log_dir)?;
        let reader = RemoteReader::new(
            store,
            &first_log_dir.join(sluice_storage::log_manager::REMOTE_CACHE_DIR),
            ReaderConfig {
                chunk_bytes: settings.chunk_bytes,
                cache_bytes: settings.cache_bytes,
                index_cache_bytes: settings.index_cache_bytes,
            },
        )?;
        Ok(Self {
            settings: settings.clone(),
            reader,
            metrics: TierMetrics::new(),
            deleted: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// A topic was deleted: its partition's remote data goes at the tier task's next run.
    pub fn forget_partition(&self, topic: &str, topic_id: [u8; 16], partition: i32) {
        self.deleted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((topic.to_string(), topic_id, partition));
    }

    /// Delete the remote data of deleted topics' partitions; what fails is kept for later.
    pub async fn delete_forgotten(&self) {
        let queued = std::mem::take(
            &mut *self
                .deleted
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let mut failed = Vec::new();
        for (topic, id, partition) in queued {
            let prefix = SegmentKey::partition_prefix(&topic, &id, partition);
            let result = async {
                for (key, _) in self.store().list(&prefix).await? {
                    self.store().delete(&key).await?;
                }
                Ok::<_, RemoteError>(())
            }
            .await;
            match result {
                Ok(()) => tracing::info!(
                    topic,
                    partition,
                    "deleted the remote data of a deleted topic"
                ),
                Err(e) => {
                    tracing::warn!(topic, partition, error = %e, "cannot delete the remote data of a deleted topic yet");
                    failed.push((topic, id, partition));
                }
            }
        }
        self.deleted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend(failed);
    }

    pub fn store(&self) -> &RemoteStore {
        self.reader.store()
    }

    pub fn reader(&self) -> &RemoteReader {
        &self.reader
    }
}

/// Where a remote segment's objects are.
pub fn segment_key(tp: &TopicPartition, seg: &RemoteSegment) -> SegmentKey {
    SegmentKey {
        topic: tp.topic.clone(),
        topic_id: *seg.topic_id.as_bytes(),
        partition: seg.partition,
        base_offset: seg.base_offset,
        segment_id: *seg.segment_id.as_bytes(),
    }
}

/// What the reader needs of a remote segment.
pub fn segment_ref(tp: &TopicPartition, seg: &RemoteSegment) -> RemoteSegmentRef {
    RemoteSegmentRef {
        key: segment_key(tp, seg),
        base_offset: seg.base_offset,
        end_offset: seg.end_offset,
        size_bytes: seg.size_bytes.max(0) as u64,
    }
}
