//! Pure data: cluster metadata records, the [`MetadataImage`] they build, and the catalogue
//! of configuration keys (broker and topic) with Kafka's names, types and defaults.
//!
//! # Layout
//! - [`config`]: config definitions, value parsing/validation, the typed [`BrokerConfig`],
//!   topic config resolution with synonyms and sources (what DescribeConfigs reports).
//! - [`record`]: [`MetadataRecord`], each change the controller makes, and its byte codec.
//! - [`image`]: [`MetadataImage`], the state after applying records, and the diff a broker
//!   reacts to.
//! - [`topic`]: topic name rules and the internal topic names.
//! - [`controller_types`]: requests to and answers from the controller.
//! - [`features`]: feature flags (`metadata.version`): supported and finalized levels.
//! - [`diskless`]: diskless topics: the committed batches of each partition (which WAL
//!   object holds which offsets) and the sequencer's rules.
//! - [`remote`]: remote log metadata (tiered storage): the segments copied to the object
//!   store, per partition.

pub mod config;
pub mod controller_types;
pub mod diskless;
pub mod features;
pub mod image;
pub mod record;
pub mod remote;
pub mod topic;

pub use config::BrokerConfig;
pub use image::MetadataImage;
pub use record::MetadataRecord;
/// ACL bindings live in the metadata; their codes and semantics are Kafka's wire ones.
pub use sluice_protocol::acl;
pub use uuid::Uuid;
