//! Configuration: Kafka's keys, types, defaults and validators; the broker's configuration
//! built from a properties file, `SLUICE_*` environment variables and `--override` flags;
//! topic config resolution (override > broker synonym > default); dynamic broker configs;
//! and what DescribeConfigs reports.
//!
//! # Layout
//! - [`defs`]: [`ConfigDef`], types, sources, validators, [`validate`].
//! - [`topic_defs`], [`broker_defs`]: the tables of every topic and broker key.
//! - [`broker`]: [`BrokerConfig`], the static configuration.
//! - [`settings`]: [`BrokerSettings`], what the broker reads while serving, parsed once.
//! - [`listeners`]: listeners, security protocols, inter-broker client settings.
//! - [`topic`]: topic overrides validated and resolved.
//! - [`dynamic`]: [`DynamicBrokerConfigs`] and the keys that may change at runtime.
//! - [`describe`]: [`DescribedConfig`] rows for DescribeConfigs.
//! - [`mirror`]: cluster links and mirror topics as configs.
//! - [`client_metrics`]: client-metrics subscriptions (KIP-714) as configs.
//! - [`group`]: group configs (GROUP resources).

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

pub mod broker;
pub mod broker_defs;
pub mod client_metrics;
pub mod defs;
pub mod describe;
pub mod dynamic;
pub mod group;
pub mod kafka_catalogue;
pub mod listeners;
pub mod mirror;
pub mod settings;
pub mod topic;
pub mod topic_defs;

pub use broker::*;
pub use broker_defs::*;
pub use client_metrics::{describe_client_metrics, RESOURCE_CLIENT_METRICS};
pub use defs::*;
pub use describe::*;
pub use dynamic::*;
pub use group::{describe_group, RESOURCE_GROUP};
pub use kafka_catalogue::*;
pub use listeners::*;
pub use mirror::*;
pub use settings::*;
pub use topic::*;
pub use topic_defs::*;

#[cfg(test)]
mod tests;
