//! The controller: the only writer of cluster metadata. It validates requests that change
//! metadata (create/delete topics, add partitions, register brokers, alter configs), turns
//! them into [`MetadataRecord`]s, appends them to the metadata log `__cluster_metadata-0`
//! and applies them to its [`MetadataImage`].
//!
//! # Layout
//! - [`controller`]: [`Controller`], single-voter quorum: append = commit. The metadata log
//!   uses the same segment format as partitions (one batch per controller write, so each
//!   write is atomic); replay at startup rebuilds the image.
//! - [`placement`]: replica placement for new partitions.
//! - [`error`]: [`ApiError`], a Kafka error code plus message for a single topic/partition.

pub mod controller;
pub mod error;
pub mod placement;

pub use controller::{Controller, ControllerDefaults, CreateTopicSpec, CreatedTopic, TopicRef};
pub use error::{ApiError, ControllerError};
pub use sluice_metadata::{MetadataImage, MetadataRecord};
