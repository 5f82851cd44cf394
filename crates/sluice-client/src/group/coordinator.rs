//! Talking to a group's coordinator: finding it (FindCoordinator), and the offset calls that
//! members and the admin client share (OffsetCommit, OffsetFetch). Coordinator errors
//! (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS) and broken
//! connections are retried with a fresh lookup until the request timeout.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    ApiKey, FindCoordinatorRequest, FindCoordinatorResponse, GroupId, OffsetCommitRequest,
    OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;
use tokio::time::Instant;

use super::member::Membership;
use crate::cluster::ClusterCore;
use crate::connection::Connection;
use crate::error::{Error, Result};

/// FindCoordinator key types.
pub const KEY_TYPE_GROUP: i8 = 0;

pub(crate) fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

pub(crate) fn group_id(s: &str) -> GroupId {
    GroupId(str_bytes(s))
}

/// Errors after which the coordinator should be looked up again.
pub(crate) fn is_coordinator_error(e: &Error) -> bool {
    matches!(
        e.code(),
        Some(
            ErrorCode::NotCoordinator
                | ErrorCode::CoordinatorNotAvailable
                | ErrorCode::CoordinatorLoadInProgress
        )
    ) || matches!(e, Error::Connection { .. } | Error::Timeout(_))
}

/// The address (`host:port`) and node id of the coordinator for `key`.
pub(crate) async fn find_coordinator(
    core: &ClusterCore,
    key: &str,
    key_type: i8,
) -> Result<(i32, String)> {
    let deadline = Instant::now() + core.config.request_timeout;
    loop {
        let result = lookup_once(core, key, key_type).await;
        match result {
            Err(e) if e.is_retriable() && Instant::now() < deadline => {
                tokio::time::sleep(core.config.retry_backoff).await;
            }
            other => return other,
        }
    }
}

async fn lookup_once(core: &ClusterCore, key: &str, key_type: i8) -> Result<(i32, String)> {
    let conn = core.any_connection().await?;
    let version = conn.version_for(ApiKey::FindCoordinator)?;
    let mut req = FindCoordinatorRequest::default().with_key_type(key_type);
    if version >= 4 {
        req = req.with_coordinator_keys(vec![str_bytes(key)]);
    } else {
        req = req.with_key(str_bytes(key));
    }
    let resp: FindCoordinatorResponse = conn.call_at(&req, version).await?;
    let (code, message, node, host, port) = if version >= 4 {
        let c = resp.coordinators.into_iter().next().ok_or_else(|| {
            Error::Protocol("FindCoordinator answered without a coordinator".into())
        })?;
        (c.error_code, c.error_message, c.node_id, c.host, c.port)
    } else {
        (
            resp.error_code,
            resp.error_message,
            resp.node_id,
            resp.host,
            resp.port,
        )
    };
    crate::error::check(code, message.map(|m| m.to_string()))?;
    Ok((node.0, format!("{host}:{port}")))
}

/// Run `call` against the coordinator of `group`, looking it up again after coordinator
/// errors, until the request timeout. A group member passes its [`Membership`] so the call
/// goes over the member's own coordinator connection; others share the client's.
pub(crate) async fn with_coordinator<T, F, Fut>(
    core: &ClusterCore,
    group: &str,
    member: Option<&Membership>,
    call: F,
) -> Result<T>
where
    F: Fn(Arc<Connection>) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let deadline = Instant::now() + core.config.request_timeout;
    loop {
        let attempt = async {
            let conn = match member {
                Some(m) => m.coordinator().await?,
                None => {
                    let addr = match core.cached_coordinator(group) {
                        Some(a) => a,
                        None => {
                            let (_, addr) = find_coordinator(core, group, KEY_TYPE_GROUP).await?;
                            core.set_coordinator(group, Some(addr.clone()));
                            addr
                        }
                    };
                    core.connection_to(&addr).await?
                }
            };
            call(conn).await
        }
        .await;
        match attempt {
            Err(e) if is_coordinator_error(&e) && Instant::now() < deadline => {
                match member {
                    Some(m) => m.forget_coordinator().await,
                    None => core.set_coordinator(group, None),
                }
                tokio::time::sleep(core.config.retry_backoff).await;
            }
            // Offsets a transaction wrote but has not ended (read_committed asked for stable
            // ones, KIP-447): the marker is on its way.
            Err(e)
                if e.code() == Some(ErrorCode::UnstableOffsetCommit)
                    && Instant::now() < deadline =>
            {
                tokio::time::sleep(core.config.retry_backoff).await;
            }
            other => return other,
        }
    }
}

/// Who commits: a member of the current generation, or (generation -1, no member id) a
/// tool or an `assign()` consumer committing for a group with no active members.
#[derive(Clone, Debug)]
pub struct CommitIdentity {
    pub generation: i32,
    pub member_id: String,
    pub instance_id: Option<String>,
}

impl CommitIdentity {
    pub fn standalone() -> Self {
        Self {
            generation: -1,
            member_id: String::new(),
            instance_id: None,
        }
    }
}

/// An offset to commit: the next offset to read, with optional metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetAndMetadata {
    pub offset: i64,
    pub metadata: Option<String>,
}

impl From<i64> for OffsetAndMetadata {
    fn from(offset: i64) -> Self {
        Self {
            offset,
            metadata: None,
        }
    }
}

/// One OffsetCommit; the per-partition outcome (a whole-request error, such as the
/// coordinator moving, is the `Err`).
pub(crate) async fn commit(
    conn: &Connection,
    group: &str,
    who: &CommitIdentity,
    offsets: &[(TopicPartition, OffsetAndMetadata)],
) -> Result<Vec<(TopicPartition, Result<()>)>> {
    let version = conn.version_for(ApiKey::OffsetCommit)?;
    let mut topics: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for (tp, o) in offsets {
        topics.entry(tp.topic.as_str()).or_default().push(
            OffsetCommitRequestPartition::default()
                .with_partition_index(tp.partition.0)
                .with_committed_offset(o.offset)
                .with_committed_leader_epoch(-1)
                .with_committed_metadata(Some(str_bytes(o.metadata.as_deref().unwrap_or("")))),
        );
    }
    let req = OffsetCommitRequest::default()
        .with_group_id(group_id(group))
        .with_generation_id_or_member_epoch(who.generation)
        .with_member_id(str_bytes(&who.member_id))
        .with_group_instance_id(who.instance_id.as_deref().map(str_bytes))
        .with_retention_time_ms(-1)
        .with_topics(
            topics
                .into_iter()
                .map(|(t, parts)| {
                    OffsetCommitRequestTopic::default()
                        .with_name(TopicName(str_bytes(t)))
                        .with_partitions(parts)
                })
                .collect(),
        );
    let resp: OffsetCommitResponse = conn.call_at(&req, version).await?;
    let mut out = Vec::new();
    for t in resp.topics {
        for p in t.partitions {
            let tp = TopicPartition::new(t.name.to_string(), p.partition_index);
            match Error::kafka(p.error_code, Some(format!("committing {tp}"))) {
                // A coordinator problem concerns the whole request: retry it elsewhere.
                Some(e) if is_coordinator_error(&e) => return Err(e),
                Some(e) => out.push((tp, Err(e))),
                None => out.push((tp, Ok(()))),
            }
        }
    }
    Ok(out)
}

/// A committed offset as OffsetFetch reports it (`offset` -1: nothing committed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    pub metadata: Option<String>,
}

/// The committed offsets of `group` for `partitions` (all of the group's when None).
pub(crate) async fn fetch(
    conn: &Connection,
    group: &str,
    partitions: Option<&[TopicPartition]>,
    require_stable: bool,
) -> Result<Vec<(TopicPartition, Result<CommittedOffset>)>> {
    let version = conn.version_for(ApiKey::OffsetFetch)?;
    let by_topic: Option<BTreeMap<&str, Vec<i32>>> = partitions.map(|ps| {
        let mut m: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for tp in ps {
            m.entry(tp.topic.as_str()).or_default().push(tp.partition.0);
        }
        m
    });
    let mut req = OffsetFetchRequest::default().with_require_stable(require_stable);
    if version >= 8 {
        let topics = by_topic.map(|m| {
            m.into_iter()
                .map(|(t, parts)| {
                    OffsetFetchRequestTopics::default()
                        .with_name(TopicName(str_bytes(t)))
                        .with_partition_indexes(parts)
                })
                .collect()
        });
        req = req.with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(group_id(group))
            .with_topics(topics)]);
    } else {
        let topics = by_topic.map(|m| {
            m.into_iter()
                .map(|(t, parts)| {
                    OffsetFetchRequestTopic::default()
                        .with_name(TopicName(str_bytes(t)))
                        .with_partition_indexes(parts)
                })
                .collect()
        });
        req = req.with_group_id(group_id(group)).with_topics(topics);
    }
    let resp: OffsetFetchResponse = conn.call_at(&req, version).await?;
    let mut out = Vec::new();
    let mut row =
        |topic: &TopicName, index: i32, offset: i64, metadata: Option<StrBytes>, code: i16| {
            let tp = TopicPartition::new(topic.to_string(), index);
            let value =
                match Error::kafka(code, Some(format!("fetching the committed offset of {tp}"))) {
                    Some(e) => Err(e),
                    None => Ok(CommittedOffset {
                        offset,
                        metadata: metadata.map(|m| m.to_string()),
                    }),
                };
            out.push((tp, value));
        };
    if version >= 8 {
        let g = resp
            .groups
            .into_iter()
            .next()
            .ok_or_else(|| Error::Protocol("OffsetFetch answered without the group".into()))?;
        crate::error::check(g.error_code, Some(format!("group {group}")))?;
        for t in &g.topics {
            for p in &t.partitions {
                row(
                    &t.name,
                    p.partition_index,
                    p.committed_offset,
                    p.metadata.clone(),
                    p.error_code,
                );
            }
        }
    } else {
        crate::error::check(resp.error_code, Some(format!("group {group}")))?;
        for t in &resp.topics {
            for p in &t.partitions {
                row(
                    &t.name,
                    p.partition_index,
                    p.committed_offset,
                    p.metadata.clone(),
                    p.error_code,
                );
            }
        }
    }
    Ok(out)
}
