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
        groups: crate::group::coordinator::GroupCoordinator,
        metadata: crate::metadata_cache::MetadataCache
    }
);

/// Why one partition of an offset commit (OffsetCommit, TxnOffsetCommit) is refused before
/// the group coordinator sees it, as Kafka checks: no READ on its topic, or a topic or
/// partition the cluster does not have (UNKNOWN_TOPIC_OR_PARTITION; such offsets are not
/// written). One row per topic, one entry per partition.
pub(crate) fn commit_refusals<'a>(
    image: &sluice_metadata::MetadataImage,
    topics: impl Iterator<Item = (&'a str, bool, Vec<i32>)>,
) -> Vec<Vec<Option<ErrorCode>>> {
    topics
        .map(|(name, authorized, partitions)| {
            let topic = image.topic(name);
            partitions
                .into_iter()
                .map(|p| {
                    if !authorized {
                        Some(ErrorCode::TopicAuthorizationFailed)
                    } else if topic.is_some_and(|t| t.partitions.contains_key(&p)) {
                        None
                    } else {
                        Some(ErrorCode::UnknownTopicOrPartition)
                    }
                })
                .collect()
        })
        .collect()
}

async fn handle(
    h: &OffsetCommit,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: OffsetCommitRequest = ctx.decode(body)?;
    // READ on the group, and on each topic (partitions of others are not committed).
    let acl = h.access.check(ctx);
    let group_denied = !acl.group(op::READ, &req.group_id);
    let refused = commit_refusals(
        &h.metadata.current(),
        req.topics.iter().map(|t| {
            (
                t.name.as_str(),
                acl.topic(op::READ, &t.name),
                t.partitions.iter().map(|p| p.partition_index).collect(),
            )
        }),
    );
    let offsets: Vec<(String, i32, i64, i32, Option<String>)> = req
        .topics
        .iter()
        .zip(&refused)
        .flat_map(|(t, refused)| {
            t.partitions
                .iter()
                .zip(refused)
                .filter(|(_, r)| r.is_none())
                .map(move |(p, _)| {
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
    for (t, refused) in req.topics.iter().zip(&refused) {
        let mut out = OffsetCommitResponseTopic::default();
        out.name = t.name.clone();
        for (p, refusal) in t.partitions.iter().zip(refused) {
            let code = match &result {
                Err(code) => Some(*code),
                _ if refusal.is_some() => *refusal,
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
