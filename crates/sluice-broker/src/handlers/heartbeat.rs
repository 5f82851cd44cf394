//! Heartbeat (key 12): keeps a member's session alive and tells it when to rejoin.

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, HeartbeatRequest, HeartbeatResponse};

use sluice_metadata::acl::op;
use sluice_protocol::ErrorCode;

use crate::request::{HandlerError, RequestContext, Response};

handler!(
    ApiKey::Heartbeat,
    0,
    4,
    Heartbeat {
        access: crate::authorizer::Access,
        groups: crate::group::coordinator::GroupCoordinator
    }
);

async fn handle(
    h: &Heartbeat,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: HeartbeatRequest = ctx.decode(body)?;
    if !h.access.check(ctx).group(op::READ, &req.group_id) {
        let mut resp = HeartbeatResponse::default();
        resp.error_code = ErrorCode::GroupAuthorizationFailed.code();
        return ctx.respond(&resp);
    }
    let error = h
        .groups
        .heartbeat(
            req.group_id.to_string(),
            req.generation_id,
            req.member_id.to_string(),
            req.group_instance_id.as_ref().map(|i| i.to_string()),
        )
        .await;
    let mut resp = HeartbeatResponse::default();
    resp.error_code = error.map_or(0, |c| c.code());
    ctx.respond(&resp)
}
