//! AddPartitionsToTxn (key 24): a transactional producer names the partitions it is about
//! to write. v0–3 carry one transaction (from clients); v4 batches several and may only
//! verify (KIP-890, broker to coordinator). Partitions that do not exist are refused
//! (UNKNOWN_TOPIC_OR_PARTITION) and the rest of that transaction is not attempted.

use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey};
use sluice_protocol::ErrorCode;

use crate::broker::Broker;
use crate::request::{HandlerError, RequestContext, Response};

handler!(ApiKey::AddPartitionsToTxn, 0, 4, handle);

/// PRODUCER_FENCED is new in v2; older clients are told INVALID_PRODUCER_EPOCH.
pub(crate) fn fenced_as(code: ErrorCode, version: i16, fenced_since: i16) -> ErrorCode {
    if code == ErrorCode::ProducerFenced && version < fenced_since {
        ErrorCode::InvalidProducerEpoch
    } else {
        code
    }
}

/// One transaction's request: every partition's error code.
async fn add(
    broker: &Broker,
    version: i16,
    id: String,
    producer_id: i64,
    epoch: i16,
    topics: &[AddPartitionsToTxnTopic],
    verify_only: bool,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let image = broker.metadata.current();
    let mut partitions = Vec::new();
    let mut unknown = Vec::new();
    for t in topics {
        for p in &t.partitions {
            let exists = image
                .topic(&t.name)
                .is_some_and(|topic| topic.partitions.contains_key(p));
            if exists {
                partitions.push((t.name.to_string(), *p));
            } else {
                unknown.push((t.name.to_string(), *p));
            }
        }
    }
    let code_of = |tp: &(String, i32), common: Option<ErrorCode>| -> i16 {
        if !unknown.is_empty() {
            if unknown.contains(tp) {
                ErrorCode::UnknownTopicOrPartition.code()
            } else {
                ErrorCode::OperationNotAttempted.code()
            }
        } else {
            common.map_or(0, |c| fenced_as(c, version, 2).code())
        }
    };
    let common = if unknown.is_empty() {
        broker
            .txns
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
    broker: &Broker,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: AddPartitionsToTxnRequest = ctx.decode(body)?;
    let mut resp = AddPartitionsToTxnResponse::default();
    let v = ctx.api_version;
    if v <= 3 {
        resp.results_by_topic_v3_and_below = add(
            broker,
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
    for t in &req.transactions {
        let mut r = AddPartitionsToTxnResult::default();
        r.transactional_id = t.transactional_id.clone();
        r.topic_results = add(
            broker,
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
