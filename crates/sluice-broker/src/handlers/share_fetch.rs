//! ShareFetch (key 78): a share group member acquires records at the partition leader
//! (KIP-932), acknowledging earlier ones in the same request. Order: settle the share
//! session (epochs, partitions added and forgotten), apply the acknowledgements, then acquire
//! over every partition of the session ([`crate::share::SharePartitionManager`]). A session
//! closed with epoch -1 acknowledges, releases what the member still holds and fetches
//! nothing.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, PartitionData, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::{ApiKey, ShareFetchRequest, ShareFetchResponse};
use sluice_metadata::acl::op;
use sluice_metadata::Uuid;
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;

use super::share_acknowledge::{resolve, Resolved};
use super::share_group_heartbeat::share_groups_enabled;
use crate::request::{str_bytes, HandlerError, RequestContext, Response};
use crate::share::manager::ShareFetchParams;
use crate::share::partition_state::MemberId;
use crate::share::session::SharePartitionKey;

handler!(
    ApiKey::ShareFetch,
    1,
    1,
    ShareFetchHandler {
        access: crate::authorizer::Access,
        config: sluice_metadata::BrokerConfig,
        metadata: crate::metadata_cache::MetadataCache,
        shares: crate::share::SharePartitionManager
    }
);

fn refused(code: ErrorCode, message: Option<&str>) -> ShareFetchResponse {
    let mut resp = ShareFetchResponse::default();
    resp.error_code = code.code();
    resp.error_message = message.map(|m| str_bytes(m.to_string()));
    resp
}

/// One partition's answer being built.
#[derive(Default)]
struct Answer {
    error: Option<ErrorCode>,
    ack_error: Option<ErrorCode>,
    acked: bool,
    records: Bytes,
    acquired: Vec<AcquiredRecords>,
}

async fn handle(
    h: &ShareFetchHandler,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: ShareFetchRequest = ctx.decode(body)?;
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
    let added: Vec<SharePartitionKey> = req
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.topic_id, p.partition_index)))
        .collect();
    let forgotten: Vec<SharePartitionKey> = req
        .forgotten_topics_data
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.topic_id, *p)))
        .collect();
    let has_acks = req.topics.iter().any(|t| {
        t.partitions
            .iter()
            .any(|p| !p.acknowledgement_batches.is_empty())
    });
    let connection = ctx.connection.id();
    let session = h.shares.sessions().fetch(
        connection,
        &group,
        &member,
        req.share_session_epoch,
        &added,
        &forgotten,
        has_acks,
    );
    tracing::debug!(
        group,
        member,
        epoch = req.share_session_epoch,
        has_acks,
        added = added.len(),
        forgotten = forgotten.len(),
        result = ?session.as_ref().map(|s| s.partitions.len()),
        "share fetch"
    );
    let session = match session {
        Ok(s) => s,
        Err(code) => {
            if code == ErrorCode::ShareSessionLimitReached {
                tokio::time::sleep(Duration::from_millis(req.max_wait_ms.max(0) as u64)).await;
            }
            return ctx.respond(&refused(code, None));
        }
    };
    if session.opened {
        // The member's records go back when the connection that holds its session closes.
        let shares = std::sync::Arc::clone(&h.shares);
        let (g, m) = (group.clone(), member.clone());
        let key = (u128::from(connection) << 64) | u128::from(crate::share::session_hash(&g, &m));
        ctx.connection
            .on_close(key, move || shares.connection_closed(connection, &g, &m));
    }
    let image = h.metadata.current();
    let mut answers: BTreeMap<SharePartitionKey, Answer> = BTreeMap::new();
    // Acknowledgements first: what they release may be acquired again by this very fetch.
    for t in &req.topics {
        for p in &t.partitions {
            if p.acknowledgement_batches.is_empty() {
                continue;
            }
            let key = (t.topic_id, p.partition_index);
            let a = answers.entry(key).or_default();
            a.acked = true;
            a.ack_error = match resolve(&image, &acl, key) {
                Resolved::Err(code) => Some(code),
                Resolved::Ok(tp) => {
                    let batches: Vec<(i64, i64, Vec<i8>)> = p
                        .acknowledgement_batches
                        .iter()
                        .map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone()))
                        .collect();
                    h.shares.acknowledge(&group, &member, &tp, &batches).await
                }
            };
        }
    }
    if session.closed {
        let tps: Vec<TopicPartition> = session
            .partitions
            .iter()
            .filter_map(|k| match resolve(&image, &acl, *k) {
                Resolved::Ok(tp) => Some(tp),
                Resolved::Err(_) => None,
            })
            .collect();
        h.shares.release(&group, &member, &tps);
    } else {
        let mut readable: Vec<(SharePartitionKey, TopicPartition)> = Vec::new();
        for key in &session.partitions {
            match resolve(&image, &acl, *key) {
                Resolved::Err(code) => answers.entry(*key).or_default().error = Some(code),
                Resolved::Ok(tp) => readable.push((*key, tp)),
            }
        }
        let broker_max = h
            .config
            .value("fetch.max.bytes")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(57_671_680);
        let max_bytes = (req.max_bytes.max(0) as u64).min(broker_max);
        let params = ShareFetchParams {
            max_wait: Duration::from_millis(req.max_wait_ms.max(0) as u64),
            min_bytes: (req.min_bytes.max(0) as u64).min(max_bytes),
            max_bytes,
            max_records: i64::from(req.max_records),
        };
        if !readable.is_empty() && req.max_records > 0 && max_bytes > 0 {
            let member: MemberId = Arc::from(member.as_str());
            let tps: Vec<TopicPartition> = readable.iter().map(|(_, tp)| tp.clone()).collect();
            let fetched = h.shares.fetch(&group, &member, params, &tps).await;
            for ((key, _), f) in readable.iter().zip(fetched) {
                let a = answers.entry(*key).or_default();
                a.error = f.error;
                a.records = f.records;
                a.acquired = f
                    .acquired
                    .iter()
                    .map(|r| {
                        let mut x = AcquiredRecords::default();
                        x.first_offset = r.first_offset;
                        x.last_offset = r.last_offset;
                        x.delivery_count = r.delivery_count;
                        x
                    })
                    .collect();
            }
        }
    }
    let mut resp = ShareFetchResponse::default();
    resp.acquisition_lock_timeout_ms = h
        .shares
        .lock_duration_ms(&group)
        .clamp(0, i64::from(i32::MAX)) as i32;
    if session.opened {
        for key in &session.partitions {
            answers.entry(*key).or_default();
        }
    }
    let mut topics: BTreeMap<Uuid, ShareFetchableTopicResponse> = BTreeMap::new();
    for ((topic_id, index), a) in answers {
        // After the first answer of a session, a partition with nothing to say is left out.
        let says = session.opened || a.acked || a.error.is_some() || !a.acquired.is_empty();
        if !says {
            continue;
        }
        let mut p = PartitionData::default();
        p.partition_index = index;
        p.error_code = a.error.map_or(0, |c| c.code());
        p.acknowledge_error_code = a.ack_error.map_or(0, |c| c.code());
        p.current_leader.leader_id = -1;
        p.current_leader.leader_epoch = -1;
        // v1+: never null, an empty record set when nothing was acquired.
        p.records = Some(a.records);
        p.acquired_records = a.acquired;
        let t = topics.entry(topic_id).or_insert_with(|| {
            let mut t = ShareFetchableTopicResponse::default();
            t.topic_id = topic_id;
            t
        });
        t.partitions.push(p);
    }
    resp.responses = topics.into_values().collect();
    ctx.respond(&resp)
}
