//! EndTxn (key 26): commit or abort the producer's open transaction. Answered once the
//! coordinator's PrepareCommit/PrepareAbort is durable; the markers follow asynchronously
//! (until they are written, the next transaction's requests get CONCURRENT_TRANSACTIONS).

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, EndTxnRequest, EndTxnResponse};
use sluice_metadata::acl::op;
use sluice_protocol::ErrorCode;

use crate::request::{HandlerError, RequestContext, Response};
use crate::txn::fenced_as;

handler!(
    ApiKey::EndTxn,
    0,
    4,
    EndTxn {
        access: crate::authorizer::Access,
        txns: crate::txn::coordinator::TxnCoordinator
    }
);

async fn handle(h: &EndTxn, ctx: &RequestContext, body: Bytes) -> Result<Response, HandlerError> {
    let req: EndTxnRequest = ctx.decode(body)?;
    let mut resp = EndTxnResponse::default();
    if !h
        .access
        .check(ctx)
        .transactional_id(op::WRITE, &req.transactional_id)
    {
        resp.error_code = ErrorCode::TransactionalIdAuthorizationFailed.code();
        return ctx.respond(&resp);
    }
    if let Err(code) = h
        .txns
        .end_txn(
            req.transactional_id.to_string(),
            req.producer_id.0,
            req.producer_epoch,
            req.committed,
        )
        .await
    {
        resp.error_code = fenced_as(code, ctx.api_version, 2).code();
    }
    resp.producer_id = req.producer_id;
    resp.producer_epoch = req.producer_epoch;
    ctx.respond(&resp)
}
