//! The controller: the only writer of cluster metadata, run by a Raft quorum of controller
//! nodes (KRaft's design, on `openraft`).
//!
//! # Layout
//! - [`controller`]: [`Controller`], the pure planner: request + image -> outcome + records.
//! - [`placement`], [`election`]: pure replica placement and leader election.
//! - [`diskless`]: the sequencer of diskless topics: offsets for the batches of a WAL object.
//! - [`remote_log`]: remote log metadata changes (tiered storage), checked against the
//!   partition's leader and epoch.
//! - [`quorum`]: [`QuorumController`], a controller node: Raft, the active controller's
//!   duties (writes, broker liveness), the controller listener.
//! - [`raft`]: openraft glue — storage in `__cluster_metadata-0`, snapshots, RPCs.
//! - [`rpc`]: what brokers send controllers; [`wire`]: the binary codec both use;
//!   [`transport`]: plain or TLS connections for both.
//! - [`error`]: [`ApiError`], a Kafka error code plus message for a single topic/partition.

pub mod controller;
pub mod diskless;
pub mod election;
pub mod error;
pub mod placement;
pub mod quorum;
pub mod raft;
pub mod reassign;
pub mod remote_log;
pub mod rpc;
pub mod transport;
pub mod wire;

pub use controller::{Controller, ControllerDefaults, CreateTopicSpec, CreatedTopic, TopicRef};
pub use error::{ApiError, ControllerError};
pub use quorum::{QuorumConfig, QuorumController};
pub use sluice_metadata::{MetadataImage, MetadataRecord};
