//! AddPartitionsToTxn (key 24): a transactional producer names the partitions it is about
//! to write. v0–3 carry one transaction (from clients); v4–5 batch several and may only
//! verify (KIP-890, broker to coordinator; v5 only adds TRANSACTION_ABORTABLE, which Sluice
//! does not send). Partitions that do not exist are refused
//! (UNKNOWN_TOPIC_OR_PARTITION) and the rest of that transaction is not attempted.

use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey};
use sluice_metadata::acl::op;
use sluice_protocol::ErrorCode;

use crate::authorizer::Check;
use crate::request::{HandlerError, RequestContext, Response};
use crate::txn::fenced_as;

handler!(
    ApiKey::AddPartitionsToTxn,
    0,
    5,
    AddPartitionsToTxn {
        metadata: crate::metadata_cache::MetadataCache,
        access: crate::authorizer::Access,
        txns: crate::txn::coordinator::TxnCoordinator
    }
);

/// One transaction's request: every partition's error code. WRITE on the transactional
/// id and on each topic is required; partitions of other topics (TOPIC_AUTHORIZATION_FAILED)
/// or that do not exist (UNKNOWN_TOPIC_OR_PARTITION) fail the request, the rest
/// OPERATION_NOT_ATTEMPTED.
#[allow(clippy::too_many_arguments)]
async fn add(
    h: &AddPartitionsToTxn,
    acl: &Check<'_>,
    version: i16,
    id: String,
    producer_id: i64,
    epoch: i16,
    topics: &[AddPartitionsToTxnTopic],
    verify_only: bool,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let image = h.metadata.current();
    // v4+ comes from a broker acting for the producer (checked for CLUSTER_ACTION): only
    // v0-3 need WRITE on the id and the topics, as in Kafka.
    let broker = version >= 4;
    let id_denied = !broker && !acl.transactional_id(op::WRITE, &id);
    let mut partitions = Vec::new();
    let mut refused: Vec<((String, i32), ErrorCode)> = Vec::new();
    for t in topics {
        let allowed = broker || acl.topic(op::WRITE, &t.name);
        for p in &t.partitions {
            let tp = (t.name.to_string(), *p);
            let exists = image
                .topic(&t.name)
                .is_some_and(|topic| topic.partitions.contains_key(p));
            if id_denied {
                refused.push((tp, ErrorCode::TransactionalIdAuthorizationFailed));
            } else if !allowed {
                refused.push((tp, ErrorCode::TopicAuthorizationFailed));
            } else if exists {
                partitions.push(tp);
            } else {
                refused.push((tp, ErrorCode::UnknownTopicOrPartition));
            }
        }
    }
    let code_of = |tp: &(String, i32), common: Option<ErrorCode>| -> i16 {
        if !refused.is_empty() {
            refused
                .iter()
                .find(|(r, _)| r == tp)
                .map_or(ErrorCode::OperationNotAttempted, |(_, c)| *c)
                .code()
        } else {
            common.map_or(0, |c| fenced_as(c, version, 2).code())
        }
    };
    let common = if refused.is_empty() {
        h.txns
            .add_partitions(id, producer_id, epoch, partitions, verify_only)
            .await
            .err()
    } else {
        None
    };
    topics
        .iter()
        .map(|t| {
            let mut r = AddPartitionsToTxnTopicResult::default();
            r.name = t.name.clone();
            r.results_by_partition = t
                .partitions
                .iter()
                .map(|p| {
                    let mut pr = AddPartitionsToTxnPartitionResult::default();
                    pr.partition_index = *p;
                    pr.partition_error_code = code_of(&(t.name.to_string(), *p), common);
                    pr
                })
                .collect();
            r
        })
        .collect()
}

async fn handle(
    h: &AddPartitionsToTxn,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: AddPartitionsToTxnRequest = ctx.decode(body)?;
    let mut resp = AddPartitionsToTxnResponse::default();
    let v = ctx.api_version;
    let acl = h.access.check(ctx);
    if v <= 3 {
        resp.results_by_topic_v3_and_below = add(
            h,
            &acl,
            v,
            req.v3_and_below_transactional_id.to_string(),
            req.v3_and_below_producer_id.0,
            req.v3_and_below_producer_epoch,
            &req.v3_and_below_topics,
            false,
        )
        .await;
        return ctx.respond(&resp);
    }
    // v4 comes from brokers: CLUSTER_ACTION on the cluster.
    if !acl.cluster(op::CLUSTER_ACTION) {
        resp.error_code = ErrorCode::ClusterAuthorizationFailed.code();
        return ctx.respond(&resp);
    }
    for t in &req.transactions {
        let mut r = AddPartitionsToTxnResult::default();
        r.transactional_id = t.transactional_id.clone();
        r.topic_results = add(
            h,
            &acl,
            v,
            t.transactional_id.to_string(),
            t.producer_id.0,
            t.producer_epoch,
            &t.topics,
            t.verify_only,
        )
        .await;
        resp.results_by_transaction.push(r);
    }
    ctx.respond(&resp)
}
