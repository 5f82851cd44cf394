//! SyncGroup (key 14): followers wait for the leader's assignment.

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, SyncGroupRequest, SyncGroupResponse};

use sluice_metadata::acl::op;
use sluice_protocol::ErrorCode;

use crate::group::coordinator::SyncRequest;
use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::SyncGroup,
    0,
    5,
    SyncGroup {
        access: crate::authorizer::Access,
        groups: crate::group::coordinator::GroupCoordinator
    }
);

async fn handle(
    h: &SyncGroup,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: SyncGroupRequest = ctx.decode(body)?;
    if !h.access.check(ctx).group(op::READ, &req.group_id) {
        let mut resp = SyncGroupResponse::default();
        resp.error_code = ErrorCode::GroupAuthorizationFailed.code();
        return ctx.respond(&resp);
    }
    let out = h
        .groups
        .sync(SyncRequest {
            group_id: req.group_id.to_string(),
            generation: req.generation_id,
            member_id: req.member_id.to_string(),
            instance_id: req.group_instance_id.as_ref().map(|i| i.to_string()),
            protocol_type: req.protocol_type.as_ref().map(|p| p.to_string()),
            protocol_name: req.protocol_name.as_ref().map(|p| p.to_string()),
            assignments: req
                .assignments
                .iter()
                .map(|a| (a.member_id.to_string(), a.assignment.clone()))
                .collect(),
        })
        .await;
    let mut resp = SyncGroupResponse::default();
    resp.error_code = out.error.map_or(0, |c| c.code());
    if ctx.api_version >= 5 {
        resp.protocol_type = out.protocol_type.map(str_bytes);
        resp.protocol_name = out.protocol.map(str_bytes);
    }
    resp.assignment = out.assignment;
    ctx.respond(&resp)
}
