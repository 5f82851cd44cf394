//! The broker's view of cluster metadata and the publisher that moves it forward.

use std::sync::{Arc, Mutex, RwLock};

use sluice_metadata::MetadataImage;
use sluice_storage::LogError;

use crate::replica_manager::ReplicaManager;

/// The current metadata image; readers clone the `Arc` and never block writers for long.
pub struct MetadataCache {
    image: RwLock<Arc<MetadataImage>>,
}

impl MetadataCache {
    pub fn new(image: MetadataImage) -> Self {
        Self {
            image: RwLock::new(Arc::new(image)),
        }
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
        *self
            .image
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = image;
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
