//! OffsetFetch (key 9): committed offsets of one group (v1-v7) or several (v8+); -1 where
//! nothing was committed, UNSTABLE_OFFSET_COMMIT on a partition whose transactional offset is
//! pending when the request requires stable offsets (v7+).

use bytes::Bytes;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{ApiKey, OffsetFetchRequest, OffsetFetchResponse, TopicName};
use sluice_metadata::acl::op;
use sluice_protocol::ErrorCode;

use crate::authorizer::Check;
use crate::group::coordinator::CommittedRow;
use crate::group::records::OffsetValue;
use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::OffsetFetch,
    1,
    9,
    OffsetFetch {
        access: crate::authorizer::Access,
        groups: crate::group::coordinator::GroupCoordinator
    }
);

type Fetched = Result<Vec<CommittedRow>, ErrorCode>;
type PartitionValues = Vec<(i32, Result<Option<OffsetValue>, ErrorCode>)>;

/// Group the flat answer by topic, in first-seen order.
fn by_topic(rows: Vec<CommittedRow>) -> Vec<(String, PartitionValues)> {
    let mut out: Vec<(String, PartitionValues)> = Vec::new();
    for (t, p, v) in rows {
        match out.iter_mut().find(|(name, _)| *name == t) {
            Some((_, parts)) => parts.push((p, v)),
            None => out.push((t, vec![(p, v)])),
        }
    }
    out
}

/// A partition's value and error code (an erroneous partition shows no offset).
fn split(value: Result<Option<OffsetValue>, ErrorCode>) -> (Option<OffsetValue>, i16) {
    match value {
        Ok(v) => (v, 0),
        Err(code) => (None, code.code()),
    }
}

/// The group's committed offsets as this principal may see them: DESCRIBE on the group
/// (else GROUP_AUTHORIZATION_FAILED) and on each topic — other topics are left out of an
/// "all topics" answer and marked TOPIC_AUTHORIZATION_FAILED when named (`denied`).
async fn fetch(
    h: &OffsetFetch,
    acl: &Check<'_>,
    group: String,
    topics: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
    member: (Option<String>, i32),
) -> Result<(Vec<CommittedRow>, Vec<(String, i32)>), ErrorCode> {
    if !acl.group(op::DESCRIBE, &group) {
        return Err(ErrorCode::GroupAuthorizationFailed);
    }
    let mut denied = Vec::new();
    let topics = topics.map(|ts| {
        ts.into_iter()
            .filter(|(t, parts)| {
                let ok = acl.topic(op::DESCRIBE, t);
                if !ok {
                    denied.extend(parts.iter().map(|p| (t.clone(), *p)));
                }
                ok
            })
            .collect::<Vec<_>>()
    });
    let rows = match topics {
        Some(ts) if ts.is_empty() => Vec::new(),
        topics => {
            let all = topics.is_none();
            let rows: Fetched = h.groups.fetch(group, topics, require_stable, member).await;
            let mut rows = rows?;
            if all {
                rows.retain(|(t, _, _)| acl.topic(op::DESCRIBE, t));
            }
            rows
        }
    };
    Ok((rows, denied))
}

async fn handle(
    h: &OffsetFetch,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: OffsetFetchRequest = ctx.decode(body)?;
    let v = ctx.api_version;
    let acl = h.access.check(ctx);
    let mut resp = OffsetFetchResponse::default();
    if v >= 8 {
        for g in &req.groups {
            let topics = g.topics.as_ref().map(|ts| {
                ts.iter()
                    .map(|t| (t.name.to_string(), t.partition_indexes.clone()))
                    .collect()
            });
            let mut out = OffsetFetchResponseGroup::default();
            out.group_id = g.group_id.clone();
            // v9+: a member of a consumer group says who it is (checked as Kafka does).
            let member = (g.member_id.as_ref().map(|m| m.to_string()), g.member_epoch);
            let group = g.group_id.to_string();
            match fetch(h, &acl, group, topics, req.require_stable, member).await {
                Ok((rows, denied)) => {
                    for (t, parts) in by_topic(rows) {
                        let mut topic = OffsetFetchResponseTopics::default();
                        topic.name = TopicName(str_bytes(t));
                        for (p, value) in parts {
                            let mut r = OffsetFetchResponsePartitions::default();
                            r.partition_index = p;
                            let (value, error) = split(value);
                            r.committed_offset = value.as_ref().map_or(-1, |x| x.offset);
                            r.committed_leader_epoch =
                                value.as_ref().map_or(-1, |x| x.leader_epoch);
                            r.metadata =
                                Some(str_bytes(value.map(|x| x.metadata).unwrap_or_default()));
                            r.error_code = error;
                            topic.partitions.push(r);
                        }
                        out.topics.push(topic);
                    }
                    for (t, parts) in
                        by_topic(denied.into_iter().map(|(t, p)| (t, p, Ok(None))).collect())
                    {
                        let mut topic = OffsetFetchResponseTopics::default();
                        topic.name = TopicName(str_bytes(t));
                        for (p, _) in parts {
                            let mut r = OffsetFetchResponsePartitions::default();
                            r.partition_index = p;
                            r.committed_offset = -1;
                            r.metadata = Some(str_bytes(""));
                            r.error_code = ErrorCode::TopicAuthorizationFailed.code();
                            topic.partitions.push(r);
                        }
                        out.topics.push(topic);
                    }
                }
                Err(code) => out.error_code = code.code(),
            }
            resp.groups.push(out);
        }
        return ctx.respond(&resp);
    }
    let topics = req.topics.as_ref().map(|ts| {
        ts.iter()
            .map(|t| (t.name.to_string(), t.partition_indexes.clone()))
            .collect()
    });
    match fetch(
        h,
        &acl,
        req.group_id.to_string(),
        topics,
        req.require_stable,
        (None, -1),
    )
    .await
    {
        Ok((rows, denied)) => {
            for (t, parts) in by_topic(denied.into_iter().map(|(t, p)| (t, p, Ok(None))).collect())
            {
                let mut topic = OffsetFetchResponseTopic::default();
                topic.name = TopicName(str_bytes(t));
                for (p, _) in parts {
                    let mut r = OffsetFetchResponsePartition::default();
                    r.partition_index = p;
                    r.committed_offset = -1;
                    r.metadata = Some(str_bytes(""));
                    r.error_code = ErrorCode::TopicAuthorizationFailed.code();
                    topic.partitions.push(r);
                }
                resp.topics.push(topic);
            }
            for (t, parts) in by_topic(rows) {
                let mut topic = OffsetFetchResponseTopic::default();
                topic.name = TopicName(str_bytes(t));
                for (p, value) in parts {
                    let mut r = OffsetFetchResponsePartition::default();
                    r.partition_index = p;
                    let (value, error) = split(value);
                    r.error_code = error;
                    r.committed_offset = value.as_ref().map_or(-1, |x| x.offset);
                    if v >= 5 {
                        r.committed_leader_epoch = value.as_ref().map_or(-1, |x| x.leader_epoch);
                    }
                    r.metadata = Some(str_bytes(value.map(|x| x.metadata).unwrap_or_default()));
                    topic.partitions.push(r);
                }
                resp.topics.push(topic);
            }
        }
        Err(code) if v >= 2 => resp.error_code = code.code(),
        Err(code) => {
            // v1 has no top-level error: report it on every requested partition.
            for t in req.topics.unwrap_or_default() {
                let mut topic = OffsetFetchResponseTopic::default();
                topic.name = t.name.clone();
                for p in t.partition_indexes {
                    let mut r = OffsetFetchResponsePartition::default();
                    r.partition_index = p;
                    r.committed_offset = -1;
                    r.metadata = Some(str_bytes(""));
                    r.error_code = code.code();
                    topic.partitions.push(r);
                }
                resp.topics.push(topic);
            }
        }
    }
    ctx.respond(&resp)
}
