//! EndTxn (key 26): commit or abort the producer's open transaction. Answered once the
//! coordinator's PrepareCommit/PrepareAbort is durable; the markers follow asynchronously
//! (until they are written, the next transaction's requests get CONCURRENT_TRANSACTIONS).

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, EndTxnRequest, EndTxnResponse};
use sluice_metadata::acl::op;
use sluice_protocol::ErrorCode;

use crate::broker::Broker;
use crate::handlers::add_partitions_to_txn::fenced_as;
use crate::request::{HandlerError, RequestContext, Response};

handler!(ApiKey::EndTxn, 0, 4, handle);

async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: EndTxnRequest = ctx.decode(body)?;
    let mut resp = EndTxnResponse::default();
    if !broker
        .acl(ctx)
        .transactional_id(op::WRITE, &req.transactional_id)
    {
        resp.error_code = ErrorCode::TransactionalIdAuthorizationFailed.code();
        return ctx.respond(&resp);
    }
    if let Err(code) = broker
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
