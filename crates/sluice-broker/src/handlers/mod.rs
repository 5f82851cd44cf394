//! One file per Kafka API. Each declares the versions it serves and a `handle` function;
//! [`HandlerTable::standard`] is the router, and ApiVersions answers from the same table, so
//! what is advertised is exactly what is routed.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;

use crate::request::{HandlerError, RequestContext, Response};
use crate::services::Services;

/// Declare a handler file's API: its key, the versions it serves, and the struct of the
/// services it uses, each named as in [`Services`] with its type. The file provides
/// `async fn handle(h: &Struct, ctx: &RequestContext, body: Bytes)` (or a plain `fn`, with
/// `sync`).
macro_rules! handler {
    ($key:expr, $min:expr, $max:expr, $name:ident { $($field:ident: $ty:ty),* $(,)? }) => {
        handler!(@define $key, $min, $max, $name { $($field: $ty),* });
        impl $crate::handlers::ApiHandler for $name {
            fn handle<'a>(
                &'a self,
                ctx: &'a $crate::request::RequestContext,
                body: bytes::Bytes,
            ) -> $crate::handlers::HandlerFuture<'a> {
                Box::pin(handle(self, ctx, body))
            }
        }
    };
    ($key:expr, $min:expr, $max:expr, $name:ident { $($field:ident: $ty:ty),* $(,)? }, sync) => {
        handler!(@define $key, $min, $max, $name { $($field: $ty),* });
        impl $crate::handlers::ApiHandler for $name {
            fn handle<'a>(
                &'a self,
                ctx: &'a $crate::request::RequestContext,
                body: bytes::Bytes,
            ) -> $crate::handlers::HandlerFuture<'a> {
                Box::pin(async move { handle(self, ctx, body) })
            }
        }
    };
    (@define $key:expr, $min:expr, $max:expr, $name:ident { $($field:ident: $ty:ty),* }) => {
        /// This API's handler: the services it uses.
        pub struct $name {
            $(pub(crate) $field: std::sync::Arc<$ty>,)*
        }

        pub const SPEC: $crate::handlers::Spec = $crate::handlers::Spec {
            api_key: $key,
            min_version: $min,
            max_version: $max,
            build: |_services| {
                std::sync::Arc::new($name {
                    $($field: std::sync::Arc::clone(&_services.$field),)*
                })
            },
        };
    };
}

pub mod acls;
pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod alter_configs;
pub mod alter_partition_reassignments;
pub mod alter_replica_log_dirs;
pub mod alter_user_scram_credentials;
pub mod api_versions;
pub mod client_quotas;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod create_partitions;
pub mod create_topics;
pub mod delegation_tokens;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_quorum;
pub mod describe_topic_partitions;
pub mod describe_transactions;
pub mod describe_user_scram_credentials;
pub mod elect_leaders;
pub mod end_txn;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_config_resources;
pub mod list_groups;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod raft_voters;
pub mod sasl;
pub mod share_acknowledge;
pub mod share_fetch;
pub mod share_group_describe;
pub mod share_group_heartbeat;
pub mod share_group_offsets;
pub mod share_state;
pub mod streams_group_describe;
pub mod streams_group_heartbeat;
pub mod sync_group;
pub mod telemetry;
pub mod txn_offset_commit;
pub mod unregister_broker;
pub mod update_features;
pub mod write_txn_markers;

pub type HandlerFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Response, HandlerError>> + Send + 'a>>;

/// A request handler, built once with the services it uses.
pub trait ApiHandler: Send + Sync {
    fn handle<'a>(&'a self, ctx: &'a RequestContext, body: Bytes) -> HandlerFuture<'a>;
}

/// A handler's declaration: its API, the versions it serves, how to build it.
#[derive(Clone, Copy)]
pub struct Spec {
    pub api_key: ApiKey,
    pub min_version: i16,
    pub max_version: i16,
    pub build: fn(&Services) -> Arc<dyn ApiHandler>,
}

impl Spec {
    pub fn supports(&self, version: i16) -> bool {
        (self.min_version..=self.max_version).contains(&version)
    }
}

/// Every API this broker serves, sorted by key (what ApiVersions advertises).
pub fn specs() -> Vec<Spec> {
    let mut specs = vec![
        produce::SPEC,
        fetch::SPEC,
        list_offsets::SPEC,
        elect_leaders::SPEC,
        alter_partition_reassignments::SPEC,
        list_partition_reassignments::SPEC,
        offset_for_leader_epoch::SPEC,
        metadata::SPEC,
        api_versions::SPEC,
        create_topics::SPEC,
        delete_topics::SPEC,
        describe_configs::SPEC,
        create_partitions::SPEC,
        describe_cluster::SPEC,
        describe_quorum::SPEC,
        list_config_resources::SPEC,
        telemetry::get::SPEC,
        telemetry::push::SPEC,
        describe_topic_partitions::SPEC,
        update_features::SPEC,
        unregister_broker::SPEC,
        raft_voters::SPEC,
        raft_voters::remove::SPEC,
        describe_log_dirs::SPEC,
        alter_replica_log_dirs::SPEC,
        describe_producers::SPEC,
        init_producer_id::SPEC,
        delete_records::SPEC,
        alter_configs::SPEC,
        incremental_alter_configs::SPEC,
        find_coordinator::SPEC,
        join_group::SPEC,
        sync_group::SPEC,
        heartbeat::SPEC,
        leave_group::SPEC,
        offset_commit::SPEC,
        offset_fetch::SPEC,
        list_groups::SPEC,
        describe_groups::SPEC,
        delete_groups::SPEC,
        offset_delete::SPEC,
        consumer_group_heartbeat::SPEC,
        consumer_group_describe::SPEC,
        streams_group_heartbeat::SPEC,
        streams_group_describe::SPEC,
        share_group_heartbeat::SPEC,
        share_group_describe::SPEC,
        share_fetch::SPEC,
        share_acknowledge::SPEC,
        share_group_offsets::describe::SPEC,
        share_group_offsets::alter::SPEC,
        share_group_offsets::delete::SPEC,
        share_state::initialize::SPEC,
        share_state::read::SPEC,
        share_state::write::SPEC,
        share_state::delete::SPEC,
        share_state::summary::SPEC,
        add_partitions_to_txn::SPEC,
        add_offsets_to_txn::SPEC,
        end_txn::SPEC,
        write_txn_markers::SPEC,
        txn_offset_commit::SPEC,
        describe_transactions::SPEC,
        list_transactions::SPEC,
        sasl::handshake::SPEC,
        sasl::authenticate::SPEC,
        describe_user_scram_credentials::SPEC,
        alter_user_scram_credentials::SPEC,
        delegation_tokens::create::SPEC,
        delegation_tokens::renew::SPEC,
        delegation_tokens::expire::SPEC,
        delegation_tokens::describe::SPEC,
        acls::create::SPEC,
        acls::describe::SPEC,
        acls::delete::SPEC,
        client_quotas::describe::SPEC,
        client_quotas::alter::SPEC,
    ];
    specs.sort_by_key(|h| h.api_key as i16);
    for h in &specs {
        let lib = h.api_key.valid_versions();
        assert!(
            h.min_version >= lib.min && h.max_version <= lib.max,
            "{:?} advertises versions the codec lacks",
            h.api_key
        );
    }
    specs
}

/// A routed API: its declaration and its handler.
pub struct Route {
    pub spec: Spec,
    pub handler: Arc<dyn ApiHandler>,
}

/// Routes requests by api key.
pub struct HandlerTable {
    routes: Vec<Route>,
    /// Each route's request counter and latency histogram (`/metrics`).
    meters: Vec<(metrics::Counter, metrics::Histogram)>,
}

impl HandlerTable {
    /// Every API this broker serves, each handler built with its services.
    pub fn new(services: &Services) -> Self {
        let routes: Vec<Route> = specs()
            .into_iter()
            .map(|spec| Route {
                spec,
                handler: (spec.build)(services),
            })
            .collect();
        // Resolved once per API, so counting a request is only an add.
        let meters = routes
            .iter()
            .map(|r| {
                let api = format!("{:?}", r.spec.api_key);
                (
                    metrics::counter!("sluice_requests_total", "api" => api.clone()),
                    metrics::histogram!("sluice_request_duration_seconds", "api" => api),
                )
            })
            .collect();
        Self { routes, meters }
    }

    /// Count one request of `api_key` that took `seconds`.
    pub fn record(&self, api_key: i16, seconds: f64) {
        if let Some((count, latency)) = self
            .routes
            .iter()
            .position(|r| r.spec.api_key as i16 == api_key)
            .and_then(|i| self.meters.get(i))
        {
            count.increment(1);
            latency.record(seconds);
        }
    }

    pub fn get(&self, api_key: i16) -> Option<&Route> {
        self.routes
            .iter()
            .find(|r| r.spec.api_key as i16 == api_key)
    }
}
