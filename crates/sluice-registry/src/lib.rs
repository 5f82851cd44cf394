//! # sluice-registry: the schema registry's state, without I/O
//!
//! Sluice serves Confluent's Schema Registry REST API from every node. This crate is its
//! pure core; the broker's registry coordinator (the leader of `_schemas`-0) drives it and
//! the node's HTTP listener answers with it.
//!
//! # Layout
//! - [`records`]: the `_schemas` topic's keys and values, in Confluent's format.
//! - [`state`]: [`RegistryState`], built by applying those records; answers reads and plans
//!   the records each change writes (ids, versions, soft and permanent deletes, config, mode).
//! - [`schema`]: schema types, references, compatibility levels, parse and check dispatch.
//! - [`avro`], [`json_schema`], [`protobuf`]: the per-format parsers and compatibility rules.
//! - [`error`]: [`RegistryError`], Confluent's error codes and HTTP statuses.

pub mod avro;
pub mod error;
pub mod json_schema;
pub mod protobuf;
pub mod records;
pub mod schema;
pub mod state;

pub use error::RegistryError;
pub use state::RegistryState;

/// The topic the registry keeps its records in (Confluent's `kafkastore.topic` default).
pub const SCHEMAS_TOPIC: &str = "_schemas";

#[cfg(test)]
mod state_tests;
