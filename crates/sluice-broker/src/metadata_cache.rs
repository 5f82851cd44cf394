//! The broker's view of cluster metadata and the publisher that moves it forward.

use std::sync::{Arc, Mutex, RwLock};

use sluice_metadata::MetadataImage;
use sluice_storage::LogError;

use crate::replica::manager::ReplicaManager;

/// The current metadata image; readers clone the `Arc` and never block writers for long.
pub struct MetadataCache {
    image: RwLock<Arc<MetadataImage>>,
    offset: tokio::sync::watch::Sender<i64>,
}

impl MetadataCache {
    pub fn new(image: MetadataImage) -> Self {
        let offset = image.offset;
        Self {
            image: RwLock::new(Arc::new(image)),
            offset: tokio::sync::watch::channel(offset).0,
        }
    }

    /// Wait (at most `timeout`) for the next published image.
    pub async fn changed(&self, timeout: std::time::Duration) {
        let mut rx = self.offset.subscribe();
        let _ = tokio::time::timeout(timeout, rx.changed()).await;
    }

    /// A receiver that sees every published image's metadata offset (for tasks that react to
    /// changes without missing one between waits).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<i64> {
        self.offset.subscribe()
    }

    /// Wait until the published image has reached metadata offset `offset`; false on
    /// timeout.
    pub async fn wait_for_offset(&self, offset: i64, timeout: std::time::Duration) -> bool {
        let mut rx = self.offset.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|o| *o >= offset))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    pub fn current(&self) -> Arc<MetadataImage> {
        Arc::clone(
            &self
                .image
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    fn set(&self, image: Arc<MetadataImage>) {
        let offset = image.offset;
        *self
            .image
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = image;
        // Only now: whoever waits for this offset must find the image in place.
        self.offset.send_replace(offset);
    }
}

/// Applies each new image to the replica manager (logs are created before the image that
/// names them becomes visible), then publishes it. Images are applied one at a time.
pub struct MetadataPublisher {
    cache: Arc<MetadataCache>,
    replicas: Arc<ReplicaManager>,
    serial: Mutex<()>,
}

impl MetadataPublisher {
    pub fn new(cache: Arc<MetadataCache>, replicas: Arc<ReplicaManager>) -> Self {
        Self {
            cache,
            replicas,
            serial: Mutex::new(()),
        }
    }

    pub fn publish(&self, image: MetadataImage, now_ms: i64) -> Result<(), LogError> {
        let _one_at_a_time = self
            .serial
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let old = self.cache.current();
        if image.offset <= old.offset && old.offset >= 0 {
            return Ok(());
        }
        let result = self.replicas.apply_delta(&old, &image, now_ms);
        self.cache.set(Arc::new(image));
        result
    }
}
