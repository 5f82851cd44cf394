//! EndTxn (key 26): commit or abort the producer's open transaction. Answered once the
//! coordinator's PrepareCommit/PrepareAbort is durable; the markers follow asynchronously
//! (until they are written, the next transaction's requests get CONCURRENT_TRANSACTIONS).
//! From v5 the client speaks transactions v2 (KIP-890): the end bumps its epoch, and the
//! answer carries the producer id and epoch it goes on with.

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, EndTxnRequest, EndTxnResponse, ProducerId};
use sluice_metadata::acl::op;
use sluice_protocol::ErrorCode;

use crate::request::{HandlerError, RequestContext, Response};
use crate::txn::fenced_as;

handler!(
    ApiKey::EndTxn,
    0,
    5,
    EndTxn {
        controller: crate::services::controller::ControllerClient,
        access: crate::authorizer::Access,
        txns: crate::txn::coordinator::TxnCoordinator
    }
);

async fn handle(h: &EndTxn, ctx: &RequestContext, body: Bytes) -> Result<Response, HandlerError> {
    let req: EndTxnRequest = ctx.decode(body)?;
    let mut resp = EndTxnResponse::default();
    resp.producer_id = ProducerId(-1);
    resp.producer_epoch = -1;
    if !h
        .access
        .check(ctx)
        .transactional_id(op::WRITE, &req.transactional_id)
    {
        resp.error_code = ErrorCode::TransactionalIdAuthorizationFailed.code();
        return ctx.respond(&resp);
    }
    let v2 = if ctx.api_version >= 5 {
        // A new producer id, needed only when the bump would run the epoch out.
        let fresh = if req.producer_epoch >= crate::txn::state::MAX_EPOCH {
            match h.controller.next_producer_id().await {
                Ok(id) => Some(id),
                Err(e) => {
                    tracing::warn!(error = %e, "producer id allocation failed");
                    resp.error_code = ErrorCode::CoordinatorNotAvailable.code();
                    return ctx.respond(&resp);
                }
            }
        } else {
            None
        };
        Some(fresh)
    } else {
        None
    };
    match h
        .txns
        .end_txn(
            req.transactional_id.to_string(),
            req.producer_id.0,
            req.producer_epoch,
            req.committed,
            v2,
        )
        .await
    {
        Ok((producer_id, epoch)) => {
            resp.producer_id = ProducerId(producer_id);
            resp.producer_epoch = epoch;
        }
        Err(code) => resp.error_code = fenced_as(code, ctx.api_version, 2).code(),
    }
    if ctx.api_version < 5 {
        resp.producer_id = req.producer_id;
        resp.producer_epoch = req.producer_epoch;
    }
    ctx.respond(&resp)
}
