//! FindCoordinator (key 10): the coordinator of a consumer group is the leader of the
//! group's `__consumer_offsets` partition, that of a transactional id the leader of its
//! `__transaction_state` partition; both topics are created on first use.

use bytes::Bytes;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{ApiKey, BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use sluice_metadata::acl::op;
use sluice_protocol::ErrorCode;

use crate::group::coordinator::{partition_for, OFFSETS_TOPIC};
use crate::metadata_cache::brokers_for_listener;
use crate::request::{str_bytes, HandlerError, RequestContext, Response};
use crate::txn::coordinator::TXN_TOPIC;

handler!(
    ApiKey::FindCoordinator,
    0,
    6,
    FindCoordinator {
        metadata: crate::metadata_cache::MetadataCache,
        access: crate::authorizer::Access,
        topics: crate::services::topics::TopicCreator,
        groups: crate::group::coordinator::GroupCoordinator,
        txns: crate::txn::coordinator::TxnCoordinator,
        share_state: crate::share::coordinator::ShareCoordinator
    }
);

const KEY_GROUP: i8 = 0;
const KEY_TRANSACTION: i8 = 1;
/// A share partition's state (`group:topicId:partition`), asked by brokers.
const KEY_SHARE: i8 = 2;

/// Whether `key` is a share coordinator key: `group:topicId:partition`, the topic id in
/// base64 and the partition a number.
fn is_share_key(key: &str) -> bool {
    let mut parts = key.rsplitn(3, ':');
    let (Some(partition), Some(topic), Some(group)) = (parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    !group.is_empty()
        && partition.parse::<u32>().is_ok()
        && sluice_protocol::base64::decode(topic).is_some_and(|b| b.len() == 16)
}

/// Where the coordinator for `key` lives: (node id, host, port) or an error.
async fn locate(
    h: &FindCoordinator,
    ctx: &RequestContext,
    key: &str,
    key_type: i8,
) -> Result<(i32, String, i32), ErrorCode> {
    if key.is_empty() {
        return Err(ErrorCode::InvalidRequest);
    }
    let acl = h.access.check(ctx);
    match key_type {
        KEY_GROUP if !acl.group(op::DESCRIBE, key) => {
            return Err(ErrorCode::GroupAuthorizationFailed)
        }
        KEY_TRANSACTION if !acl.transactional_id(op::DESCRIBE, key) => {
            return Err(ErrorCode::TransactionalIdAuthorizationFailed)
        }
        KEY_SHARE if !acl.cluster(op::CLUSTER_ACTION) => {
            return Err(ErrorCode::ClusterAuthorizationFailed)
        }
        _ => {}
    }
    let (topic, partition) = match key_type {
        KEY_GROUP => {
            h.topics.ensure_offsets_topic().await?;
            (
                OFFSETS_TOPIC,
                partition_for(key, h.groups.config.offsets_partitions),
            )
        }
        KEY_TRANSACTION => {
            h.topics.ensure_transaction_topic().await?;
            (TXN_TOPIC, h.txns.partition_for(key))
        }
        KEY_SHARE if ctx.api_version >= 6 && is_share_key(key) => {
            h.topics.ensure_share_state_topic().await?;
            (
                crate::share::coordinator::STATE_TOPIC,
                partition_for(key, h.share_state.partitions),
            )
        }
        _ => return Err(ErrorCode::InvalidRequest),
    };
    let image = h.metadata.current();
    let leader = image
        .topic(topic)
        .and_then(|t| t.partitions.get(&partition))
        .map(|p| p.leader)
        .filter(|l| *l >= 0)
        .ok_or(ErrorCode::CoordinatorNotAvailable)?;
    brokers_for_listener(&image, &ctx.listener)
        .into_iter()
        .find(|(id, ..)| *id == leader)
        .map(|(id, host, port, _)| (id, host, port))
        .ok_or(ErrorCode::CoordinatorNotAvailable)
}

async fn handle(
    h: &FindCoordinator,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: FindCoordinatorRequest = ctx.decode(body)?;
    let mut resp = FindCoordinatorResponse::default();
    if ctx.api_version >= 4 {
        for key in &req.coordinator_keys {
            let mut c = Coordinator::default();
            c.key = key.clone();
            match locate(h, ctx, key, req.key_type).await {
                Ok((id, host, port)) => {
                    c.node_id = BrokerId(id);
                    c.host = str_bytes(host);
                    c.port = port;
                }
                Err(code) => {
                    c.node_id = BrokerId(-1);
                    c.port = -1;
                    c.error_code = code.code();
                    c.error_message = Some(str_bytes(format!("{code:?}")));
                }
            }
            resp.coordinators.push(c);
        }
        return ctx.respond(&resp);
    }
    match locate(h, ctx, &req.key, req.key_type).await {
        Ok((id, host, port)) => {
            resp.node_id = BrokerId(id);
            resp.host = str_bytes(host);
            resp.port = port;
        }
        Err(code) => {
            resp.node_id = BrokerId(-1);
            resp.port = -1;
            resp.error_code = code.code();
            if ctx.api_version >= 1 {
                resp.error_message = Some(str_bytes(format!("{code:?}")));
            }
        }
    }
    ctx.respond(&resp)
}
