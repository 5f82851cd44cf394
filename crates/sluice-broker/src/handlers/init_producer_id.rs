//! InitProducerId (key 22). Without a transactional id: a fresh producer id with epoch 0 on
//! every call, as Kafka does. With one: the transaction coordinator of that id (this broker
//! must be it) answers with the id's producer id and its next epoch, fencing older
//! instances; an open transaction is aborted first (CONCURRENT_TRANSACTIONS: retry).

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use sluice_metadata::acl::{op, resource};
use sluice_protocol::ErrorCode;
use tracing::warn;

use crate::request::{HandlerError, RequestContext, Response};

handler!(
    ApiKey::InitProducerId,
    0,
    5,
    InitProducerId {
        controller: crate::services::controller::ControllerClient,
        access: crate::authorizer::Access,
        topics: crate::services::topics::TopicCreator,
        txns: crate::txn::coordinator::TxnCoordinator
    }
);

async fn handle(
    h: &InitProducerId,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: InitProducerIdRequest = ctx.decode(body)?;
    let mut resp = InitProducerIdResponse::default();
    resp.producer_id = ProducerId(-1);
    resp.producer_epoch = -1;
    // WRITE on the transactional id; an idempotent producer needs IDEMPOTENT_WRITE on the
    // cluster or WRITE on some topic.
    let acl = h.access.check(ctx);
    let denied = match req.transactional_id.as_ref().filter(|t| !t.is_empty()) {
        Some(id) => (!acl.transactional_id(op::WRITE, id))
            .then_some(ErrorCode::TransactionalIdAuthorizationFailed),
        None => (!acl.cluster(op::IDEMPOTENT_WRITE)
            && !acl.any_of_type(op::WRITE, resource::TOPIC))
        .then_some(ErrorCode::ClusterAuthorizationFailed),
    };
    if let Some(code) = denied {
        resp.error_code = code.code();
        return ctx.respond(&resp);
    }
    let fresh = match h.controller.next_producer_id().await {
        Ok(id) => id,
        Err(e) => {
            warn!(error = %e, "producer id allocation failed");
            resp.error_code = ErrorCode::CoordinatorNotAvailable.code();
            return ctx.respond(&resp);
        }
    };
    let transactional_id = req
        .transactional_id
        .as_ref()
        .map(|t| t.to_string())
        .filter(|t| !t.is_empty());
    let Some(id) = transactional_id else {
        resp.producer_id = ProducerId(fresh);
        resp.producer_epoch = 0;
        return ctx.respond(&resp);
    };
    if let Err(code) = h.topics.ensure_transaction_topic().await {
        resp.error_code = code.code();
        return ctx.respond(&resp);
    }
    // KIP-360: a producer that knows its id and epoch presents them.
    let expected = (req.producer_id.0 >= 0).then_some((req.producer_id.0, req.producer_epoch));
    match h
        .txns
        .init_producer_id(id, i64::from(req.transaction_timeout_ms), expected, fresh)
        .await
    {
        Ok((producer_id, epoch)) => {
            resp.producer_id = ProducerId(producer_id);
            resp.producer_epoch = epoch;
        }
        Err(code) => resp.error_code = code.code(),
    }
    ctx.respond(&resp)
}
