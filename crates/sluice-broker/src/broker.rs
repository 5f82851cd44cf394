//! [`Broker`]: the state every request handler receives. Built once by the node and shared
//! (`Arc`) by all connection tasks; it owns no tasks itself.

use std::sync::Arc;

use sluice_metadata::config::BrokerConfig;

use crate::authorizer::{Authorizer, Check};
use crate::controller_api::ControllerApi;
use crate::group::coordinator::GroupCoordinator;
use crate::handlers::HandlerTable;
use crate::metadata_cache::MetadataCache;
use crate::replica::manager::ReplicaManager;
use crate::txn::coordinator::TxnCoordinator;

pub struct Broker {
    pub node_id: i32,
    pub cluster_id: String,
    pub config: Arc<BrokerConfig>,
    pub metadata: Arc<MetadataCache>,
    pub replicas: Arc<ReplicaManager>,
    pub controller: Arc<dyn ControllerApi>,
    pub handlers: HandlerTable,
    pub producer_ids: ProducerIdBlock,
    pub groups: Arc<GroupCoordinator>,
    pub txns: Arc<TxnCoordinator>,
    pub authorizer: Authorizer,
    pub quotas: crate::quota::QuotaManager,
    /// `max.connections` and `max.connections.per.ip`, over every listener.
    pub connections: Arc<crate::connection_quotas::ConnectionQuotas>,
    /// Incremental fetch sessions (KIP-227).
    pub fetch_sessions: crate::fetch_session::FetchSessionCache,
    /// `queued.max.requests` / `queued.max.request.bytes`, over every connection.
    pub budget: Arc<crate::network::budget::RequestBudget>,
    /// The TLS of each SSL / SASL_SSL client listener (its stores can change at runtime).
    pub listener_tls: Vec<Arc<crate::tls::ListenerTls>>,
}

/// Producer ids reserved from the controller in blocks, handed out one by one.
#[derive(Default)]
pub struct ProducerIdBlock {
    /// (next id, end of block exclusive)
    block: tokio::sync::Mutex<(i64, i64)>,
}

/// Ids reserved per controller round trip (Kafka's block size).
const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

impl Broker {
    /// The controller id clients are told: the active controller when it is a live broker
    /// (combined mode), else a live broker (as Kafka's KRaft brokers answer, since clients
    /// cannot reach controller-only nodes and brokers forward their requests).
    pub fn controller_id(&self, image: &sluice_metadata::MetadataImage) -> i32 {
        match self.controller.active_controller() {
            Some(id) if image.is_live(id) => id,
            _ => image
                .live_brokers()
                .map(|b| b.node_id)
                .next()
                .unwrap_or(self.node_id),
        }
    }

    /// The ACL checks of one request.
    pub fn acl<'a>(&'a self, ctx: &'a crate::request::RequestContext) -> Check<'a> {
        self.authorizer.check(&self.metadata, ctx)
    }

    /// Record `value` against the requester's quota of `kind`; the throttle time (ms) is
    /// put in the request context (the connection is muted for it) and returned for the
    /// response's `throttle_time_ms`.
    pub fn record_quota(
        &self,
        ctx: &crate::request::RequestContext,
        kind: crate::quota::QuotaKind,
        value: f64,
    ) -> i32 {
        let image = self.metadata.current();
        if image.client_quotas.is_empty() {
            return 0;
        }
        let user = crate::quota::quota_user(&ctx.principal);
        let client_id = ctx.client_id.as_deref().unwrap_or("");
        let ms = self
            .quotas
            .record(&image, kind, user, client_id, value, crate::now_ms());
        ctx.throttle(ms);
        if ms > 0 {
            metrics::counter!("sluice_throttle_time_ms_total", "quota" => kind.key())
                .increment(ms as u64);
        }
        ms
    }

    /// `controller_mutation_rate`: may this request create or delete `partitions` more
    /// partitions (see [`crate::quota::QuotaManager::record_mutations`])? A throttle is put
    /// in the request context (the connection is muted for it); the caller reports the
    /// largest in the response's `throttle_time_ms`.
    pub fn record_mutations(
        &self,
        ctx: &crate::request::RequestContext,
        partitions: i32,
        strict: bool,
    ) -> crate::quota::MutationVerdict {
        let image = self.metadata.current();
        let verdict = self.quotas.record_mutations(
            &image,
            crate::quota::quota_user(&ctx.principal),
            ctx.client_id.as_deref().unwrap_or(""),
            f64::from(partitions.max(0)),
            strict,
            crate::now_ms(),
        );
        ctx.throttle(verdict.throttle_ms);
        if verdict.throttle_ms > 0 {
            metrics::counter!("sluice_throttle_time_ms_total", "quota" => "controller_mutation_rate")
                .increment(verdict.throttle_ms as u64);
        }
        verdict
    }

    /// [`Self::record_mutations`] for each topic of a request: `charged[i]` partitions for
    /// topic i (0: not charged). Returns which topics the quota refuses and which go ahead
    /// (`authorized` and not refused).
    pub fn gate_mutations(
        &self,
        ctx: &crate::request::RequestContext,
        charged: &[i32],
        authorized: &[bool],
        strict: bool,
    ) -> (Vec<bool>, Vec<bool>) {
        let refused: Vec<bool> = charged
            .iter()
            .map(|n| *n > 0 && !self.record_mutations(ctx, *n, strict).accepted)
            .collect();
        let allowed = authorized
            .iter()
            .zip(&refused)
            .map(|(a, r)| *a && !r)
            .collect();
        (refused, allowed)
    }

    /// Whether a `controller_mutation_rate` quota applies to this request's client.
    pub fn mutation_quota_applies(&self, ctx: &crate::request::RequestContext) -> bool {
        let image = self.metadata.current();
        !image.client_quotas.is_empty()
            && crate::quota::resolve(
                &image,
                crate::quota::QuotaKind::ControllerMutation,
                crate::quota::quota_user(&ctx.principal),
                ctx.client_id.as_deref().unwrap_or(""),
            )
            .is_some()
    }

    /// Give back what [`Self::record_mutations`] took for mutations that did not happen.
    pub fn refund_mutations(&self, ctx: &crate::request::RequestContext, partitions: i32) {
        if partitions > 0 {
            self.quotas.refund_mutations(
                &self.metadata.current(),
                crate::quota::quota_user(&ctx.principal),
                ctx.client_id.as_deref().unwrap_or(""),
                f64::from(partitions),
            );
        }
    }

    /// A producer id never handed out before, in this process or any earlier one.
    pub async fn next_producer_id(&self) -> Result<i64, String> {
        let mut block = self.producer_ids.block.lock().await;
        if block.0 >= block.1 {
            let first = self
                .call_controller(|c| c.allocate_producer_ids(PRODUCER_ID_BLOCK_SIZE))
                .await?;
            *block = (first, first + PRODUCER_ID_BLOCK_SIZE);
        }
        let id = block.0;
        block.0 += 1;
        Ok(id)
    }

    /// Run a controller call on the blocking pool (it appends to the metadata log).
    pub async fn call_controller<T, F>(&self, f: F) -> Result<T, String>
    where
        T: Send + 'static,
        F: FnOnce(&dyn ControllerApi) -> Result<T, String> + Send + 'static,
    {
        let controller = Arc::clone(&self.controller);
        match tokio::task::spawn_blocking(move || f(controller.as_ref())).await {
            Ok(r) => r,
            Err(e) => Err(format!("controller call failed: {e}")),
        }
    }
}
