//! The broker's view of cluster metadata and the publisher that moves it forward.

use std::sync::{Arc, Mutex, RwLock};

use sluice_metadata::config::{BrokerConfig, DynamicBrokerConfigs};
use sluice_metadata::MetadataImage;
use sluice_storage::LogError;

use crate::replica::manager::ReplicaManager;

/// Endpoints of every live broker on `listener` (the one a client connected to; a broker
/// without it offers its first): (node id, host, port, rack).
pub fn brokers_for_listener(
    image: &MetadataImage,
    listener: &str,
) -> Vec<(i32, String, i32, Option<String>)> {
    image
        .live_brokers()
        .filter_map(|b| {
            let e = listener_endpoint(b, listener)?;
            Some((b.node_id, e.host.clone(), i32::from(e.port), b.rack.clone()))
        })
        .collect()
}

/// A broker's endpoint on `listener` (or its first, when it has none by that name).
pub fn listener_endpoint<'a>(
    b: &'a sluice_metadata::image::BrokerRegistration,
    listener: &str,
) -> Option<&'a sluice_metadata::record::Endpoint> {
    b.endpoints
        .iter()
        .find(|e| e.name == listener)
        .or_else(|| b.endpoints.first())
}

/// The current metadata image, and the broker configuration in effect with it (the static
/// config with the image's dynamic broker configs applied). Readers clone an `Arc`; a change
/// swaps one, so nothing is parsed or looked up again on the way.
pub struct MetadataCache {
    image: RwLock<Arc<MetadataImage>>,
    offset: tokio::sync::watch::Sender<i64>,
    node_id: i32,
    static_config: Arc<BrokerConfig>,
    /// (the dynamic configs it was built from, the effective config)
    config: RwLock<(DynamicBrokerConfigs, Arc<BrokerConfig>)>,
}

impl MetadataCache {
    pub fn new(image: MetadataImage, static_config: Arc<BrokerConfig>, node_id: i32) -> Self {
        let offset = image.offset;
        let dynamic = DynamicBrokerConfigs::from_image(&image, node_id);
        let effective = Arc::new(static_config.with_dynamic(&dynamic));
        Self {
            image: RwLock::new(Arc::new(image)),
            offset: tokio::sync::watch::channel(offset).0,
            node_id,
            static_config,
            config: RwLock::new((dynamic, effective)),
        }
    }

    /// The broker configuration in effect now (static, then dynamic values).
    pub fn config(&self) -> Arc<BrokerConfig> {
        Arc::clone(
            &self
                .config
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .1,
        )
    }

    /// The configuration in effect with `image`: the current one unless its dynamic broker
    /// configs differ.
    pub(crate) fn config_for(
        &self,
        image: &MetadataImage,
    ) -> (DynamicBrokerConfigs, Arc<BrokerConfig>) {
        let dynamic = DynamicBrokerConfigs::from_image(image, self.node_id);
        let current = self
            .config
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !current.0.differs(&dynamic) {
            return (dynamic, Arc::clone(&current.1));
        }
        drop(current);
        let effective = Arc::new(self.static_config.with_dynamic(&dynamic));
        (dynamic, effective)
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

    /// Put `image` in place as if published (unit tests of what reads the cache).
    #[cfg(test)]
    pub(crate) fn replace(&self, image: MetadataImage) {
        let config = self.config_for(&image);
        self.set(Arc::new(image), config);
    }

    fn set(&self, image: Arc<MetadataImage>, config: (DynamicBrokerConfigs, Arc<BrokerConfig>)) {
        let offset = image.offset;
        *self
            .config
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = config;
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
        let config = self.cache.config_for(&image);
        let result = self.replicas.apply_delta(&old, &image, &config.1, now_ms);
        self.cache.set(Arc::new(image), config);
        result
    }
}
