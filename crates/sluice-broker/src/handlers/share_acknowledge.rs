//! ShareAcknowledge (key 79): a share group member acknowledges records it acquired
//! (KIP-932) without fetching: accept, release (delivered again), reject (never again) or gap.
//! It advances the member's share session like a ShareFetch; epoch -1 closes the session and
//! releases what the member still holds. A session cannot be opened with it.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::messages::share_acknowledge_response::{
    PartitionData, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::{ApiKey, ShareAcknowledgeRequest, ShareAcknowledgeResponse};
use sluice_metadata::acl::op;
use sluice_metadata::{MetadataImage, Uuid};
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;

use super::share_group_heartbeat::share_groups_enabled;
use crate::authorizer::Check;
use crate::request::{str_bytes, HandlerError, RequestContext, Response};
use crate::share::session::SharePartitionKey;

handler!(
    ApiKey::ShareAcknowledge,
    1,
    1,
    ShareAcknowledgeHandler {
        access: crate::authorizer::Access,
        metadata: crate::metadata_cache::MetadataCache,
        shares: crate::share::SharePartitionManager
    }
);

/// A share partition named by topic id, resolved against the metadata and the ACLs.
pub(super) enum Resolved {
    Ok(TopicPartition),
    Err(ErrorCode),
}

/// Resolve `key` for a member reading it: UNKNOWN_TOPIC_ID for a topic id the cluster does
/// not have, TOPIC_AUTHORIZATION_FAILED without READ on it, UNKNOWN_TOPIC_OR_PARTITION for a
/// partition it does not have.
pub(super) fn resolve(image: &MetadataImage, acl: &Check<'_>, key: SharePartitionKey) -> Resolved {
    let (topic_id, index) = key;
    let Some(t) = image.topic_by_id(&topic_id) else {
        return Resolved::Err(ErrorCode::UnknownTopicId);
    };
    if !acl.topic(op::READ, &t.name) {
        return Resolved::Err(ErrorCode::TopicAuthorizationFailed);
    }
    if !t.partitions.contains_key(&index) {
        return Resolved::Err(ErrorCode::UnknownTopicOrPartition);
    }
    Resolved::Ok(TopicPartition::new(t.name.as_str(), index))
}

fn refused(code: ErrorCode, message: Option<&str>) -> ShareAcknowledgeResponse {
    let mut resp = ShareAcknowledgeResponse::default();
    resp.error_code = code.code();
    resp.error_message = message.map(|m| str_bytes(m.to_string()));
    resp
}

async fn handle(
    h: &ShareAcknowledgeHandler,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: ShareAcknowledgeRequest = ctx.decode(body)?;
    if !share_groups_enabled(&h.metadata) {
        return ctx.respond(&refused(ErrorCode::UnsupportedVersion, None));
    }
    let Some(group) = req.group_id.as_ref().map(|g| g.to_string()) else {
        return ctx.respond(&refused(
            ErrorCode::InvalidRequest,
            Some("GroupId is null."),
        ));
    };
    let acl = h.access.check(ctx);
    if !acl.group(op::READ, &group) {
        return ctx.respond(&refused(ErrorCode::GroupAuthorizationFailed, None));
    }
    let member = req
        .member_id
        .as_ref()
        .map(|m| m.to_string())
        .unwrap_or_default();
    if member.is_empty() || member.len() > 36 {
        return ctx.respond(&refused(
            ErrorCode::InvalidRequest,
            Some("Invalid MemberId."),
        ));
    }
    let settled = h
        .shares
        .sessions()
        .acknowledge(&group, &member, req.share_session_epoch);
    tracing::debug!(group, member, epoch = req.share_session_epoch, result = ?settled.as_ref().map(|c| c.is_some()), "share acknowledge");
    let closed = match settled {
        Ok(closed) => closed,
        Err(code) => return ctx.respond(&refused(code, None)),
    };
    let image = h.metadata.current();
    let mut results: BTreeMap<Uuid, Vec<PartitionData>> = BTreeMap::new();
    for t in &req.topics {
        for p in &t.partitions {
            let code = match resolve(&image, &acl, (t.topic_id, p.partition_index)) {
                Resolved::Err(code) => Some(code),
                Resolved::Ok(_) if p.acknowledgement_batches.is_empty() => None,
                Resolved::Ok(tp) => {
                    let batches: Vec<(i64, i64, Vec<i8>)> = p
                        .acknowledgement_batches
                        .iter()
                        .map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone()))
                        .collect();
                    h.shares.acknowledge(&group, &member, &tp, &batches).await
                }
            };
            let mut out = PartitionData::default();
            out.partition_index = p.partition_index;
            out.error_code = code.map_or(0, |c| c.code());
            out.current_leader.leader_id = -1;
            out.current_leader.leader_epoch = -1;
            results.entry(t.topic_id).or_default().push(out);
        }
    }
    if let Some(partitions) = closed {
        let tps: Vec<TopicPartition> = partitions
            .into_iter()
            .filter_map(|k| match resolve(&image, &acl, k) {
                Resolved::Ok(tp) => Some(tp),
                Resolved::Err(_) => None,
            })
            .collect();
        h.shares.release(&group, &member, &tps);
    }
    let mut resp = ShareAcknowledgeResponse::default();
    resp.responses = results
        .into_iter()
        .map(|(topic_id, partitions)| {
            let mut t = ShareAcknowledgeTopicResponse::default();
            t.topic_id = topic_id;
            t.partitions = partitions;
            t
        })
        .collect();
    ctx.respond(&resp)
}
