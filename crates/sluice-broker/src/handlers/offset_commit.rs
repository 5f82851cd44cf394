//! OffsetCommit (key 8): members commit within their generation; "simple" consumers
//! (generation -1, no member id) commit for groups without members.

use bytes::Bytes;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ApiKey, OffsetCommitRequest, OffsetCommitResponse};

use sluice_metadata::acl::op;
use sluice_protocol::ErrorCode;

use crate::group::coordinator::CommitRequest;
use crate::request::{HandlerError, RequestContext, Response};

handler!(
    ApiKey::OffsetCommit,
    2,
    9,
    OffsetCommit {
        access: crate::authorizer::Access,
        topics: crate::services::topics::TopicCreator,
        groups: crate::group::coordinator::GroupCoordinator
    }
);

async fn handle(
    h: &OffsetCommit,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: OffsetCommitRequest = ctx.decode(body)?;
    // READ on the group, and on each topic (partitions of others are not committed).
    let acl = h.access.check(ctx);
    let group_denied = !acl.group(op::READ, &req.group_id);
    let allowed: Vec<bool> = req
        .topics
        .iter()
        .map(|t| acl.topic(op::READ, &t.name))
        .collect();
    let offsets: Vec<(String, i32, i64, i32, Option<String>)> = req
        .topics
        .iter()
        .zip(&allowed)
        .filter(|(_, ok)| **ok)
        .flat_map(|(t, _)| {
            t.partitions.iter().map(move |p| {
                (
                    t.name.to_string(),
                    p.partition_index,
                    p.committed_offset,
                    if ctx.api_version >= 6 {
                        p.committed_leader_epoch
                    } else {
                        -1
                    },
                    p.committed_metadata.as_ref().map(|m| m.to_string()),
                )
            })
        })
        .collect();
    let ensured = if group_denied {
        Err(ErrorCode::GroupAuthorizationFailed)
    } else {
        h.topics.ensure_offsets_topic().await
    };
    let result = match ensured {
        Ok(()) if offsets.is_empty() => Ok(Vec::new()),
        Ok(()) => {
            h.groups
                .commit(CommitRequest {
                    group_id: req.group_id.to_string(),
                    generation: req.generation_id_or_member_epoch,
                    member_id: req.member_id.to_string(),
                    instance_id: req.group_instance_id.as_ref().map(|i| i.to_string()),
                    version: ctx.api_version,
                    offsets,
                })
                .await
        }
        Err(code) => Err(code),
    };
    let mut resp = OffsetCommitResponse::default();
    let mut i = 0usize;
    for (t, ok) in req.topics.iter().zip(&allowed) {
        let mut out = OffsetCommitResponseTopic::default();
        out.name = t.name.clone();
        for p in &t.partitions {
            let code = match &result {
                Err(code) => Some(*code),
                _ if !ok => Some(ErrorCode::TopicAuthorizationFailed),
                Ok(per) => {
                    i += 1;
                    per.get(i - 1).copied().flatten()
                }
            };
            let mut r = OffsetCommitResponsePartition::default();
            r.partition_index = p.partition_index;
            r.error_code = code.map_or(0, |c| c.code());
            out.partitions.push(r);
        }
        resp.topics.push(out);
    }
    ctx.respond(&resp)
}
