//! [`LocalController`]: the in-process controller behind the broker's `ControllerApi`.
//! Each call locks the controller, commits, and publishes the new image to the broker
//! before returning, so a client that created a topic can use it at once.

use std::sync::{Arc, Mutex};

use sluice_broker::controller_api::{ControllerApi, ControllerFailure};
use sluice_broker::metadata_cache::MetadataPublisher;
use sluice_controller::{Controller, ControllerError};
use sluice_metadata::controller_types::{
    ApiError, CreateTopicSpec, CreatedTopic, DeleteOutcome, TopicRef,
};

pub struct LocalController {
    controller: Mutex<Controller>,
    publisher: Arc<MetadataPublisher>,
}

impl LocalController {
    pub fn new(controller: Controller, publisher: Arc<MetadataPublisher>) -> Self {
        Self {
            controller: Mutex::new(controller),
            publisher,
        }
    }

    /// Run `f` on the controller, then publish the resulting image.
    fn run<T>(
        &self,
        f: impl FnOnce(&mut Controller, i64) -> Result<T, ControllerError>,
    ) -> Result<T, ControllerFailure> {
        let now = sluice_broker::now_ms();
        let mut c = self
            .controller
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let out = f(&mut c, now).map_err(|e| e.to_string())?;
        let image = c.image().clone();
        self.publisher
            .publish(image, now)
            .map_err(|e| e.to_string())?;
        Ok(out)
    }

    pub fn with<T>(&self, f: impl FnOnce(&mut Controller) -> T) -> T {
        let mut c = self
            .controller
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut c)
    }
}

impl ControllerApi for LocalController {
    fn create_topics(
        &self,
        specs: &[CreateTopicSpec],
        validate_only: bool,
    ) -> Result<Vec<Result<CreatedTopic, ApiError>>, ControllerFailure> {
        self.run(|c, now| c.create_topics(specs, validate_only, now))
    }

    fn delete_topics(&self, targets: &[TopicRef]) -> Result<Vec<DeleteOutcome>, ControllerFailure> {
        self.run(|c, now| c.delete_topics(targets, now))
    }

    fn create_partitions(
        &self,
        topic: &str,
        count: i32,
        assignments: Option<&[Vec<i32>]>,
        validate_only: bool,
    ) -> Result<Result<(), ApiError>, ControllerFailure> {
        self.run(|c, now| c.create_partitions(topic, count, assignments, validate_only, now))
    }

    fn allocate_producer_ids(&self, count: i64) -> Result<i64, ControllerFailure> {
        self.run(|c, now| {
            let node = c.node_id();
            c.allocate_producer_ids(node, count, now)
        })
    }

    fn alter_topic_configs(
        &self,
        topic: &str,
        changes: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Result<Result<(), ApiError>, ControllerFailure> {
        self.run(|c, now| c.alter_topic_configs(topic, changes, validate_only, now))
    }
}
