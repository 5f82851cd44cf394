//! The broker: the network layer, one request handler per Kafka API, and the replica
//! manager that serves partition logs.
//!
//! # Layout
//! - [`network`]: listeners and connection tasks: frames in, responses out, in order; bad
//!   frames close only their own connection.
//! - [`request`]: [`request::RequestContext`] and the encode/decode helpers handlers share.
//! - [`handlers`]: one file per API; [`handlers::HandlerTable`] routes by api key and is the
//!   source of the ApiVersions answer.
//! - [`replica`]: the replica layer: [`ReplicaManager`] owns every hosted partition and is
//!   the only way to append, read, follow or wait on one (purgatory, fetchers, ISR upkeep).
//! - [`metadata_cache`]: the broker's current [`sluice_metadata::MetadataImage`] and the
//!   publisher that applies image changes to the replica manager.
//! - [`diskless`]: diskless topics: the shared WAL writer, the sequencer's client, reads
//!   of WAL objects; the replica layer routes diskless partitions there.
//! - [`controller_api`]: what the broker needs from the controller (a trait; the node wires
//!   in the real controller).
//! - [`services`]: what handlers are built from (each holds only the services it uses):
//!   the controller client, topic creation, config changes; the registry that builds them.
//! - [`group`]: consumer groups: the group state machine, `__consumer_offsets` records, the
//!   coordinator task.
//! - [`txn`]: transactions: the coordinator's pure per-transactional-id state machine,
//!   `__transaction_state` records, the coordinator task and its marker writer.
//! - [`mirror`]: mirror topics: the leaders' copy of partitions of another cluster through
//!   a cluster link, with their offsets.
//! - [`registry`]: the built-in schema registry's writer and reader of `_schemas`-0.
//! - [`broker_conn`]: broker-to-broker Kafka-protocol connections.
//! - [`tls`]: SSL listeners' TLS acceptor and the principal of a TLS connection.
//! - [`sasl`]: SASL authentication of a connection (PLAIN, SCRAM-SHA-256/512).
//! - [`authorizer`]: ACL checks of each request against cluster metadata.
//! - [`quota`]: client quotas: windowed rates and throttle times.
//! - [`error_map`]: storage errors to Kafka error codes, in one place.
//! - [`fetch_session`]: incremental fetch sessions (KIP-227).

pub mod authorizer;
pub mod broker_conn;
pub mod connection_quotas;
pub mod controller_api;
pub mod diskless;
pub mod error_map;
pub mod fetch_session;
pub mod group;
pub mod handlers;
pub mod loggers;
pub mod metadata_cache;
pub mod mirror;
pub mod network;
pub mod oauthbearer;
pub mod quota;
pub mod registry;
pub mod replica;
pub mod request;
pub mod sasl;
pub mod services;
pub mod share;
pub mod telemetry;
pub mod tls;
pub mod txn;

pub use replica::ReplicaManager;

/// Milliseconds since the Unix epoch: the broker's clock, passed into the pure layers.
pub fn now_ms() -> i64 {
    sluice_rt::wall_ms()
}
