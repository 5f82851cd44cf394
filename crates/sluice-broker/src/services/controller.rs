//! [`ControllerClient`]: the broker's way to the controller (calls resolve once the change
//! is committed and published here). It also hands out producer ids, reserved from the
//! controller in blocks.

use std::sync::Arc;

use sluice_metadata::MetadataImage;

use crate::controller_api::ControllerApi;

/// Ids reserved per controller round trip (Kafka's block size).
const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

pub struct ControllerClient {
    api: Arc<dyn ControllerApi>,
    node_id: i32,
    /// (next id, end of block exclusive)
    producer_ids: tokio::sync::Mutex<(i64, i64)>,
}

impl ControllerClient {
    pub fn new(api: Arc<dyn ControllerApi>, node_id: i32) -> Self {
        Self {
            api,
            node_id,
            producer_ids: tokio::sync::Mutex::new((0, 0)),
        }
    }

    /// The controller's calls.
    pub fn api(&self) -> &Arc<dyn ControllerApi> {
        &self.api
    }

    /// A producer id never handed out before, in this process or any earlier one.
    pub async fn next_producer_id(&self) -> Result<i64, String> {
        let mut block = self.producer_ids.lock().await;
        if block.0 >= block.1 {
            let first = self
                .api
                .allocate_producer_ids(PRODUCER_ID_BLOCK_SIZE)
                .await?;
            *block = (first, first + PRODUCER_ID_BLOCK_SIZE);
        }
        let id = block.0;
        block.0 += 1;
        Ok(id)
    }

    /// The controller id clients are told: the active controller when it is a live broker
    /// (combined mode), else a live broker (as Kafka's KRaft brokers answer, since clients
    /// cannot reach controller-only nodes and brokers forward their requests).
    pub fn controller_id(&self, image: &MetadataImage) -> i32 {
        match self.api.active_controller() {
            Some(id) if image.is_live(id) => id,
            _ => image
                .live_brokers()
                .map(|b| b.node_id)
                .next()
                .unwrap_or(self.node_id),
        }
    }
}
