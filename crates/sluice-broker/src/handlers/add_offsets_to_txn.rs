//! AddOffsetsToTxn (key 25): a transactional producer will commit a group's offsets in its
//! transaction (TxnOffsetCommit): the group's `__consumer_offsets` partition joins the
//! transaction, so the commit/abort marker reaches it.

use bytes::Bytes;
use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, ApiKey};
use sluice_metadata::acl::op;
use sluice_protocol::ErrorCode;

use crate::group::coordinator::{partition_for, OFFSETS_TOPIC};
use crate::request::{HandlerError, RequestContext, Response};
use crate::txn::fenced_as;

handler!(
    ApiKey::AddOffsetsToTxn,
    0,
    4,
    AddOffsetsToTxn {
        access: crate::authorizer::Access,
        topics: crate::services::topics::TopicCreator,
        groups: crate::group::coordinator::GroupCoordinator,
        txns: crate::txn::coordinator::TxnCoordinator
    }
);

async fn handle(
    h: &AddOffsetsToTxn,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: AddOffsetsToTxnRequest = ctx.decode(body)?;
    let mut resp = AddOffsetsToTxnResponse::default();
    let acl = h.access.check(ctx);
    if !acl.transactional_id(op::WRITE, &req.transactional_id) {
        resp.error_code = ErrorCode::TransactionalIdAuthorizationFailed.code();
        return ctx.respond(&resp);
    }
    if !acl.group(op::READ, &req.group_id) {
        resp.error_code = ErrorCode::GroupAuthorizationFailed.code();
        return ctx.respond(&resp);
    }
    let result = match h.topics.ensure_offsets_topic().await {
        Ok(()) => {
            let partition = partition_for(&req.group_id, h.groups.config.offsets_partitions);
            h.txns
                .add_partitions(
                    req.transactional_id.to_string(),
                    req.producer_id.0,
                    req.producer_epoch,
                    vec![(OFFSETS_TOPIC.to_string(), partition)],
                    false,
                )
                .await
        }
        Err(code) => Err(code),
    };
    if let Err(code) = result {
        resp.error_code = fenced_as(code, ctx.api_version, 2).code();
    }
    ctx.respond(&resp)
}
