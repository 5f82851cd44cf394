//! `sluice-client`: a pure-Rust, async Kafka client — producer, consumer and admin — that
//! speaks the Kafka protocol to Sluice and to Apache Kafka alike.
//!
//! # Layout
//! - [`config`]: [`ClientConfig`], built typed or from Kafka property strings
//!   (`bootstrap.servers`, `acks`, `linger.ms`, …).
//! - [`connection`]: one TCP connection to one broker: version negotiation (ApiVersions),
//!   pipelined requests matched to responses in order.
//! - [`security`]: `security.protocol` SSL / SASL_PLAINTEXT / SASL_SSL: TLS (rustls) and
//!   SASL PLAIN / SCRAM before a connection's first request; also used between brokers.
//! - [`cluster`]: the shared client core: connections by broker, cached metadata, refresh.
//! - [`producer`]: [`Producer`]: serializer → partitioner → record accumulator → sender task.
//! - [`consumer`]: [`Consumer`]: group membership or manual assignment, positions,
//!   pipelined fetches, `poll`, commits, a stream.
//! - [`share_consumer`]: [`ShareConsumer`]: a share group member (KIP-932): records
//!   acquired under a lock, acknowledged one by one (implicitly or explicitly).
//! - [`group`]: consumer groups from the member's side: assignors, the embedded protocol,
//!   coordinator calls, join/heartbeat/leave.
//! - [`admin`]: [`Admin`]: topics, partitions, configs, offsets, records, cluster.
//! - [`error`]: [`Error`], with the broker's Kafka error code where there is one.

pub mod admin;
pub mod cluster;
pub mod config;
pub mod connection;
pub mod consumer;
pub mod error;
pub mod group;
pub mod producer;
pub mod security;
pub mod share_consumer;

pub use admin::{Admin, PartitionReassignment, ScramAlteration};
pub use config::ClientConfig;
pub use consumer::{Consumer, ConsumerRecord, OffsetReset};
pub use error::Error;
pub use group::{Assignor, CommittedOffset, OffsetAndMetadata, RebalanceListener};
pub use producer::{DeliveryFuture, GroupMetadata, Producer, ProducerRecord, RecordMetadata};
pub use share_consumer::{
    AcknowledgeType, AcknowledgementMode, AcknowledgementResult, ShareConsumer, ShareRecord,
};
pub use sluice_protocol::acl;
pub use sluice_protocol::compression::Compression;
pub use sluice_protocol::scram::Mechanism as ScramMechanism;
pub use sluice_protocol::types::TopicPartition;
pub use sluice_protocol::ErrorCode;
