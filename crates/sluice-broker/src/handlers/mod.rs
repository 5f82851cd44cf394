//! One file per Kafka API. Each declares the versions it serves and a `handle` function;
//! [`HandlerTable::standard`] is the router, and ApiVersions answers from the same table, so
//! what is advertised is exactly what is routed.

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;

use crate::broker::Broker;
use crate::request::{HandlerError, RequestContext, Response};

/// Declare a handler file's `HANDLER`: its api key, served versions and entry point
/// (`async fn handle(&Broker, &RequestContext, Bytes)`, or a plain `fn` marked `sync`).
macro_rules! handler {
    ($key:expr, $min:expr, $max:expr, $handle:ident) => {
        pub const HANDLER: $crate::handlers::Handler = $crate::handlers::Handler {
            api_key: $key,
            min_version: $min,
            max_version: $max,
            handle: |broker, ctx, body| Box::pin($handle(broker, ctx, body)),
        };
    };
    ($key:expr, $min:expr, $max:expr, sync $handle:ident) => {
        pub const HANDLER: $crate::handlers::Handler = $crate::handlers::Handler {
            api_key: $key,
            min_version: $min,
            max_version: $max,
            handle: |broker, ctx, body| Box::pin(async move { $handle(broker, ctx, body) }),
        };
    };
}

pub mod acls;
pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod alter_configs;
pub mod alter_partition_reassignments;
pub mod alter_user_scram_credentials;
pub mod api_versions;
pub mod client_quotas;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
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
pub mod sasl;
pub mod sync_group;
pub mod txn_offset_commit;
pub mod write_txn_markers;

/// Per-partition outcomes grouped by topic, topics in first-seen order (how per-partition
/// responses are laid out on the wire).
pub(crate) fn by_topic<R>(outcomes: Vec<(String, i32, R)>) -> Vec<(String, Vec<(i32, R)>)> {
    let mut out: Vec<(String, Vec<(i32, R)>)> = Vec::new();
    for (topic, partition, r) in outcomes {
        match out.iter_mut().find(|(t, _)| *t == topic) {
            Some((_, ps)) => ps.push((partition, r)),
            None => out.push((topic, vec![(partition, r)])),
        }
    }
    out
}

pub type HandlerFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Response, HandlerError>> + Send + 'a>>;
pub type HandlerFn = for<'a> fn(&'a Broker, &'a RequestContext, Bytes) -> HandlerFuture<'a>;

/// A registered API: its key, the versions served and the entry point.
#[derive(Clone, Copy)]
pub struct Handler {
    pub api_key: ApiKey,
    pub min_version: i16,
    pub max_version: i16,
    pub handle: HandlerFn,
}

impl Handler {
    pub fn supports(&self, version: i16) -> bool {
        (self.min_version..=self.max_version).contains(&version)
    }
}

/// Routes requests by api key.
#[derive(Clone)]
pub struct HandlerTable {
    handlers: Vec<Handler>,
    /// Each handler's request counter and latency histogram (`/metrics`).
    meters: Vec<(metrics::Counter, metrics::Histogram)>,
}

impl HandlerTable {
    /// Every API this broker serves.
    pub fn standard() -> Self {
        let mut handlers = vec![
            produce::HANDLER,
            fetch::HANDLER,
            list_offsets::HANDLER,
            elect_leaders::HANDLER,
            alter_partition_reassignments::HANDLER,
            list_partition_reassignments::HANDLER,
            offset_for_leader_epoch::HANDLER,
            metadata::HANDLER,
            api_versions::HANDLER,
            create_topics::HANDLER,
            delete_topics::HANDLER,
            describe_configs::HANDLER,
            create_partitions::HANDLER,
            describe_cluster::HANDLER,
            describe_log_dirs::HANDLER,
            describe_producers::HANDLER,
            init_producer_id::HANDLER,
            delete_records::HANDLER,
            alter_configs::HANDLER,
            incremental_alter_configs::HANDLER,
            find_coordinator::HANDLER,
            join_group::HANDLER,
            sync_group::HANDLER,
            heartbeat::HANDLER,
            leave_group::HANDLER,
            offset_commit::HANDLER,
            offset_fetch::HANDLER,
            list_groups::HANDLER,
            describe_groups::HANDLER,
            delete_groups::HANDLER,
            offset_delete::HANDLER,
            add_partitions_to_txn::HANDLER,
            add_offsets_to_txn::HANDLER,
            end_txn::HANDLER,
            write_txn_markers::HANDLER,
            txn_offset_commit::HANDLER,
            describe_transactions::HANDLER,
            list_transactions::HANDLER,
            sasl::handshake::HANDLER,
            sasl::authenticate::HANDLER,
            describe_user_scram_credentials::HANDLER,
            alter_user_scram_credentials::HANDLER,
            acls::create::HANDLER,
            acls::describe::HANDLER,
            acls::delete::HANDLER,
            client_quotas::describe::HANDLER,
            client_quotas::alter::HANDLER,
        ];
        handlers.sort_by_key(|h| h.api_key as i16);
        for h in &handlers {
            let lib = h.api_key.valid_versions();
            assert!(
                h.min_version >= lib.min && h.max_version <= lib.max,
                "{:?} advertises versions the codec lacks",
                h.api_key
            );
        }
        // Resolved once per API, so counting a request is only an add.
        let meters = handlers
            .iter()
            .map(|h| {
                let api = format!("{:?}", h.api_key);
                (
                    metrics::counter!("sluice_requests_total", "api" => api.clone()),
                    metrics::histogram!("sluice_request_duration_seconds", "api" => api),
                )
            })
            .collect();
        Self { handlers, meters }
    }

    /// Count one request of `api_key` that took `seconds`.
    pub fn record(&self, api_key: i16, seconds: f64) {
        if let Some((count, latency)) = self
            .handlers
            .iter()
            .position(|h| h.api_key as i16 == api_key)
            .and_then(|i| self.meters.get(i))
        {
            count.increment(1);
            latency.record(seconds);
        }
    }

    pub fn get(&self, api_key: i16) -> Option<&Handler> {
        self.handlers.iter().find(|h| h.api_key as i16 == api_key)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Handler> {
        self.handlers.iter()
    }
}
