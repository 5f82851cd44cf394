//! LeaveGroup (key 13): one member (v0-v2) or a batch of members (v3+) leave.

use bytes::Bytes;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{ApiKey, LeaveGroupRequest, LeaveGroupResponse};

use sluice_metadata::acl::op;
use sluice_protocol::ErrorCode;

use crate::request::{HandlerError, RequestContext, Response};

handler!(
    ApiKey::LeaveGroup,
    0,
    5,
    LeaveGroup {
        access: crate::authorizer::Access,
        groups: crate::group::coordinator::GroupCoordinator
    }
);

async fn handle(
    h: &LeaveGroup,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: LeaveGroupRequest = ctx.decode(body)?;
    if !h.access.check(ctx).group(op::READ, &req.group_id) {
        let mut resp = LeaveGroupResponse::default();
        resp.error_code = ErrorCode::GroupAuthorizationFailed.code();
        return ctx.respond(&resp);
    }
    let batched = ctx.api_version >= 3;
    let leaving: Vec<(String, Option<String>)> = if batched {
        req.members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(|i| i.to_string()),
                )
            })
            .collect()
    } else {
        vec![(req.member_id.to_string(), None)]
    };
    let mut resp = LeaveGroupResponse::default();
    match h.groups.leave(req.group_id.to_string(), leaving).await {
        Ok(results) if batched => {
            resp.members = req
                .members
                .iter()
                .zip(results)
                .map(|(m, r)| {
                    let mut out = MemberResponse::default();
                    out.member_id = m.member_id.clone();
                    out.group_instance_id = m.group_instance_id.clone();
                    out.error_code = r.map_or(0, |c| c.code());
                    out
                })
                .collect();
        }
        Ok(results) => resp.error_code = results.first().copied().flatten().map_or(0, |c| c.code()),
        Err(code) => resp.error_code = code.code(),
    }
    ctx.respond(&resp)
}
