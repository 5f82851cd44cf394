//! Services: what request handlers and the network are built from. Each handler is built
//! once, at startup, holding only the services it uses (see [`crate::handlers`]); this
//! registry exists only for building them.
//!
//! # Layout
//! - [`controller`]: [`controller::ControllerClient`], calls to the controller and producer
//!   ids.
//! - [`topics`]: [`topics::TopicCreator`], auto-created and internal topics.
//! - [`config_admin`]: [`config_admin::ConfigAdmin`], topic and dynamic broker config
//!   changes.
//!
//! The others live with what they serve: [`crate::authorizer::Access`],
//! [`crate::quota::ClientQuotas`], [`crate::replica::ReplicaManager`],
//! [`crate::metadata_cache::MetadataCache`], the coordinators, the fetch session cache, the
//! mirror manager.

use std::sync::Arc;

use sluice_metadata::config::BrokerConfig;

use crate::authorizer::Access;
use crate::fetch_session::FetchSessionCache;
use crate::group::coordinator::GroupCoordinator;
use crate::metadata_cache::MetadataCache;
use crate::quota::ClientQuotas;
use crate::replica::ReplicaManager;
use crate::txn::coordinator::TxnCoordinator;

pub mod config_admin;
pub mod controller;
pub mod topics;

/// Who this broker is.
#[derive(Clone, Debug)]
pub struct Identity {
    pub node_id: i32,
    pub cluster_id: String,
}

/// Every service a handler may be built with. Field names are what handlers name them by.
pub struct Services {
    pub identity: Arc<Identity>,
    pub config: Arc<BrokerConfig>,
    pub metadata: Arc<MetadataCache>,
    pub replicas: Arc<ReplicaManager>,
    pub controller: Arc<controller::ControllerClient>,
    pub access: Arc<Access>,
    pub quotas: Arc<ClientQuotas>,
    pub topics: Arc<topics::TopicCreator>,
    /// The built-in schema registry (its HTTP API is the node's).
    pub schemas: Arc<crate::registry::SchemaRegistry>,
    pub configs: Arc<config_admin::ConfigAdmin>,
    pub groups: Arc<GroupCoordinator>,
    pub txns: Arc<TxnCoordinator>,
    pub fetch_sessions: Arc<FetchSessionCache>,
    pub mirrors: Arc<crate::mirror::MirrorManager>,
    pub telemetry: Arc<crate::telemetry::ClientTelemetry>,
    pub shares: Arc<crate::share::SharePartitionManager>,
    /// The share coordinator (the `__share_group_state` partitions led here).
    pub share_state: Arc<crate::share::coordinator::ShareCoordinator>,
    /// The way to any share coordinator, this one included.
    pub persister: Arc<crate::share::persister::Persister>,
}
