//! JoinGroup (key 11): parked by the coordinator until the rebalance completes.

use bytes::Bytes;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{ApiKey, JoinGroupRequest, JoinGroupResponse};

use sluice_metadata::acl::op;
use sluice_protocol::ErrorCode;

use crate::group::state::JoinRequest;
use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::JoinGroup,
    0,
    9,
    JoinGroup {
        access: crate::authorizer::Access,
        groups: crate::group::coordinator::GroupCoordinator
    }
);

async fn handle(
    h: &JoinGroup,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: JoinGroupRequest = ctx.decode(body)?;
    let v = ctx.api_version;
    if !h.access.check(ctx).group(op::READ, &req.group_id) {
        let mut resp = JoinGroupResponse::default();
        resp.error_code = ErrorCode::GroupAuthorizationFailed.code();
        if v >= 7 {
            resp.protocol_name = None;
        }
        return ctx.respond(&resp);
    }
    let join = JoinRequest {
        group_id: req.group_id.to_string(),
        member_id: req.member_id.to_string(),
        instance_id: req.group_instance_id.as_ref().map(|i| i.to_string()),
        protocol_type: req.protocol_type.to_string(),
        protocols: req
            .protocols
            .iter()
            .map(|p| (p.name.to_string(), p.metadata.clone()))
            .collect(),
        session_timeout_ms: req.session_timeout_ms,
        rebalance_timeout_ms: if v >= 1 {
            req.rebalance_timeout_ms
        } else {
            req.session_timeout_ms
        },
        client_id: ctx.client_id.clone().unwrap_or_default(),
        client_host: format!("/{}", ctx.peer.ip()),
        version: v,
    };
    let out = h.groups.join(join).await;
    let mut resp = JoinGroupResponse::default();
    resp.error_code = out.error.map_or(0, |c| c.code());
    resp.generation_id = out.generation;
    if v >= 7 {
        resp.protocol_type = out.protocol_type.map(str_bytes);
        resp.protocol_name = out.protocol.map(str_bytes);
    } else {
        resp.protocol_name = Some(str_bytes(out.protocol.unwrap_or_default()));
    }
    resp.leader = str_bytes(out.leader);
    resp.member_id = str_bytes(out.member_id);
    resp.skip_assignment = v >= 9 && out.skip_assignment;
    resp.members = out
        .members
        .into_iter()
        .map(|(id, instance, metadata)| {
            let mut m = JoinGroupResponseMember::default();
            m.member_id = str_bytes(id);
            if v >= 5 {
                m.group_instance_id = instance.map(str_bytes);
            }
            m.metadata = metadata;
            m
        })
        .collect();
    ctx.respond(&resp)
}
