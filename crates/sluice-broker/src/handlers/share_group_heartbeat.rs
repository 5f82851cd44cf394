//! ShareGroupHeartbeat (key 76): share groups (KIP-932). A member joins (epoch 0),
//! heartbeats and leaves (-1) through this one request; the coordinator assigns partitions
//! ([`crate::group::share_group`]); records are then acquired with ShareFetch at each
//! partition's leader.

use bytes::Bytes;
use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ApiKey, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse};
use sluice_metadata::acl::op;
use sluice_metadata::Uuid;
use sluice_protocol::ErrorCode;

use crate::group::coordinator::ShareHeartbeatRequest;
use crate::group::share_group::ShareHeartbeat;
use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::ShareGroupHeartbeat,
    1,
    1,
    ShareGroupHeartbeatHandler {
        access: crate::authorizer::Access,
        metadata: crate::metadata_cache::MetadataCache,
        groups: crate::group::coordinator::GroupCoordinator
    }
);

/// Whether the cluster has `share.version` 1 finalized (Kafka's
/// isShareGroupProtocolEnabled). Every share API checks it; ApiVersions lists them anyway.
pub fn share_groups_enabled(metadata: &crate::metadata_cache::MetadataCache) -> bool {
    sluice_metadata::features::level(
        &metadata.current(),
        sluice_metadata::features::SHARE_VERSION,
    ) >= 1
}

fn refused(code: ErrorCode, message: Option<String>) -> ShareGroupHeartbeatResponse {
    let mut resp = ShareGroupHeartbeatResponse::default();
    resp.error_code = code.code();
    resp.error_message = message.filter(|m| !m.is_empty()).map(str_bytes);
    resp
}

/// GroupCoordinatorService's checks of form (throwIfShareGroupHeartbeatRequestIsInvalid).
fn check(req: &ShareGroupHeartbeatRequest) -> Result<(), String> {
    if req.member_id.trim().is_empty() {
        return Err("MemberId can't be empty.".into());
    }
    if req.member_id.len() > 36 {
        return Err("MemberId can't be longer than 36 characters.".into());
    }
    if req.group_id.trim().is_empty() {
        return Err("GroupId can't be empty.".into());
    }
    if req.rack_id.as_ref().is_some_and(|r| r.trim().is_empty()) {
        return Err("RackId can't be empty.".into());
    }
    match req.member_epoch {
        0 if req
            .subscribed_topic_names
            .as_ref()
            .is_none_or(|t| t.is_empty()) =>
        {
            Err("SubscribedTopicNames must be set in first request.".into())
        }
        e if e < -1 => Err(format!(
            "MemberEpoch is {e}, but must be greater than or equal to -1."
        )),
        _ => Ok(()),
    }
}

async fn handle(
    h: &ShareGroupHeartbeatHandler,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: ShareGroupHeartbeatRequest = ctx.decode(body)?;
    if !share_groups_enabled(&h.metadata) {
        return ctx.respond(&refused(ErrorCode::UnsupportedVersion, None));
    }
    let acl = h.access.check(ctx);
    if !acl.group(op::READ, &req.group_id) {
        return ctx.respond(&refused(ErrorCode::GroupAuthorizationFailed, None));
    }
    if let Err(message) = check(&req) {
        return ctx.respond(&refused(ErrorCode::InvalidRequest, Some(message)));
    }
    if let Some(topics) = &req.subscribed_topic_names {
        if topics.iter().any(|t| !acl.topic(op::DESCRIBE, t)) {
            return ctx.respond(&refused(ErrorCode::TopicAuthorizationFailed, None));
        }
    }
    let hb = ShareHeartbeatRequest {
        group_id: req.group_id.to_string(),
        req: ShareHeartbeat {
            member_id: req.member_id.to_string(),
            member_epoch: req.member_epoch,
            rack_id: req.rack_id.as_ref().map(|s| s.to_string()),
            subscribed: req
                .subscribed_topic_names
                .as_ref()
                .map(|ts| ts.iter().map(|t| t.to_string()).collect()),
            client_id: ctx.client_id.clone().unwrap_or_default(),
            client_host: format!("/{}", ctx.peer.ip()),
        },
    };
    let a = match h.groups.share_heartbeat(hb).await {
        Err((code, message)) => return ctx.respond(&refused(code, Some(message))),
        Ok(a) => a,
    };
    let mut resp = ShareGroupHeartbeatResponse::default();
    resp.member_id = Some(str_bytes(a.answer.member_id));
    resp.member_epoch = a.answer.member_epoch;
    resp.heartbeat_interval_ms = a.heartbeat_interval_ms;
    resp.assignment = a.answer.assignment.map(|assigned| {
        let mut out = Assignment::default();
        out.topic_partitions = assigned
            .into_iter()
            .filter_map(|(topic, ps)| {
                let (id, _) = a.topics.get(&topic)?;
                let mut tp = TopicPartitions::default();
                tp.topic_id = Uuid::from_u128(*id);
                tp.partitions = ps.into_iter().collect();
                Some(tp)
            })
            .collect();
        out
    });
    ctx.respond(&resp)
}
