//! Fetch (key 1): decode, settle the fetch session (KIP-227: a full fetch, or only what
//! changed since the session's last answer), authorize (READ on each topic for consumers,
//! CLUSTER_ACTION for followers), read through the replica layer, apply the consumer's
//! byte-rate quota, answer with the record sets spliced into the frame as file ranges (sent
//! with `sendfile` on plaintext listeners).
//!
//! Fetching from followers (KIP-392): with `replica.selector.class` set to Kafka's
//! `RackAwareReplicaSelector`, a leader answers a consumer whose Fetch (v11+) names a
//! `client.rack` other than its own with the id of an in-sync follower in that rack that has
//! the fetch offset (`preferred_read_replica`, no records); the consumer then fetches from
//! that follower, which serves consumers' Fetch v11+ naming their leader epoch (KIP-320) up to
//! its own high watermark.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use sluice_metadata::acl::op;
use sluice_metadata::Uuid;
use sluice_protocol::fetch_frame::encode_fetch_response;
use sluice_protocol::types::{LeaderEpoch, NodeId, Offset, TopicPartition};
use sluice_protocol::ErrorCode;

use crate::fetch_session::{Answered, FetchContext, PartitionKey, PartitionParams, SessionRequest};
use crate::network::writer::Reply;
use crate::quota::QuotaKind;
use crate::replica::{FetchParams, FetchPartitionRequest, FetchedPartition};
use crate::request::{HandlerError, RequestContext, Response};

handler!(
    ApiKey::Fetch,
    4,
    18,
    Fetch {
        config: sluice_metadata::config::BrokerConfig,
        metadata: crate::metadata_cache::MetadataCache,
        replicas: crate::replica::ReplicaManager,
        access: crate::authorizer::Access,
        quotas: crate::quota::ClientQuotas,
        fetch_sessions: crate::fetch_session::FetchSessionCache
    }
);

fn partition_data(index: i32, f: &FetchedPartition) -> PartitionData {
    let mut p = PartitionData::default();
    p.partition_index = index;
    p.error_code = f.error.map_or(0, |c| c.code());
    p.high_watermark = f.high_watermark.0;
    p.last_stable_offset = f.last_stable_offset.0;
    p.log_start_offset = f.log_start_offset.0;
    p.preferred_read_replica = BrokerId(f.preferred_read_replica.unwrap_or(-1));
    p.aborted_transactions = f.aborted.as_ref().map(|a| {
        a.iter()
            .map(|t| {
                let mut x = AbortedTransaction::default();
                x.producer_id = t.producer_id.into();
                x.first_offset = t.first_offset;
                x
            })
            .collect()
    });
    if f.records.is_none() {
        p.records = Some(Bytes::new());
    }
    p
}

/// The request's partitions, keyed as its session keys them (by id from v13).
fn requested(req: &FetchRequest, by_id: bool) -> Vec<(PartitionKey, PartitionParams)> {
    req.topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                (
                    PartitionKey {
                        topic_id: if by_id { t.topic_id } else { Uuid::nil() },
                        topic: if by_id {
                            String::new()
                        } else {
                            t.topic.to_string()
                        },
                        partition: p.partition,
                    },
                    PartitionParams {
                        fetch_offset: p.fetch_offset,
                        log_start_offset: p.log_start_offset,
                        max_bytes: p.partition_max_bytes,
                        current_leader_epoch: p.current_leader_epoch,
                        last_fetched_epoch: p.last_fetched_epoch,
                    },
                )
            })
        })
        .collect()
}

fn forgotten(req: &FetchRequest, by_id: bool) -> Vec<PartitionKey> {
    req.forgotten_topics_data
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| PartitionKey {
                topic_id: if by_id { t.topic_id } else { Uuid::nil() },
                topic: if by_id {
                    String::new()
                } else {
                    t.topic.to_string()
                },
                partition: *p,
            })
        })
        .collect()
}

async fn handle(h: &Fetch, ctx: &RequestContext, body: Bytes) -> Result<Response, HandlerError> {
    let req: FetchRequest = ctx.decode(body)?;
    // Decoded: the frame is not needed while the fetch waits for data.
    ctx.release_budget();
    let replica_id = if ctx.api_version >= 15 {
        req.replica_state.replica_id.0
    } else {
        req.replica_id.0
    };
    let follower = replica_id >= 0;
    let by_id = ctx.api_version >= 13;
    let (session_id, epoch) = if ctx.api_version >= 7 {
        (req.session_id, req.session_epoch)
    } else {
        (0, -1)
    };
    let now = crate::now_ms();
    let session = SessionRequest {
        id: session_id,
        epoch,
        privileged: follower,
        uses_topic_ids: by_id,
    };
    let context = h.fetch_sessions.context(
        session,
        requested(&req, by_id),
        &forgotten(&req, by_id),
        now,
    );
    let (partitions, incremental) = match context {
        FetchContext::Error(code) => {
            let mut resp = FetchResponse::default();
            resp.error_code = code.code();
            return respond(ctx, &resp, Vec::new());
        }
        FetchContext::Full { partitions, .. } => (partitions, None),
        FetchContext::Incremental { id, partitions } => (partitions, Some(id)),
    };
    // Followers need CLUSTER_ACTION on the cluster, consumers READ on each topic.
    let image = h.metadata.current();
    let acl = h.access.check(ctx);
    let follower_denied = follower && !acl.cluster(op::CLUSTER_ACTION);
    let mut reads = Vec::new();
    // KIP-392: a consumer that names its rack, fetching from a leader with the rack-aware
    // selector, is sent to an in-sync follower in its rack (an answer with offsets and that
    // replica's id, no records).
    let client_rack = (!follower
        && ctx.api_version >= 11
        && !req.rack_id.is_empty()
        && h.config.settings().rack_aware_replica_selector)
        .then(|| req.rack_id.as_str());
    let in_rack = |id: i32, rack: &str| {
        image
            .brokers
            .get(&id)
            .is_some_and(|b| !b.fenced && b.rack.as_deref() == Some(rack))
    };
    // A diskless partition is served by any broker: one in the consumer's rack, when this
    // broker is in another and one there is live (no selector needed, no replica to wait for).
    let consumer_rack = (!follower && ctx.api_version >= 11 && !req.rack_id.is_empty())
        .then(|| req.rack_id.as_str())
        .filter(|r| {
            let own = image.brokers.get(&h.config.node_id());
            own.and_then(|b| b.rack.as_deref()) != Some(*r)
        });
    let redirect = |tp: &TopicPartition, fetch_offset: i64| -> Option<FetchedPartition> {
        if let Some(rack) =
            consumer_rack.filter(|_| crate::diskless::is_diskless(&image, &tp.topic))
        {
            let t = image
                .topic(&tp.topic)
                .filter(|t| t.partitions.contains_key(&tp.partition.0))?;
            let brokers = crate::diskless::serving_brokers(&image, Some(rack));
            let to = crate::diskless::serving_broker(&brokers, &t.id, tp.partition.0)
                .filter(|b| in_rack(*b, rack))?;
            return Some(crate::diskless::read::redirect(
                &image,
                &t.id,
                tp.partition.0,
                to,
            ));
        }
        let rack = client_rack?;
        let p = h.replicas.hosted(tp).ok()?;
        let to = p.preferred_read_replica(fetch_offset, |id| in_rack(id, rack))?;
        Some(FetchedPartition::redirect(&p, to))
    };
    // Per partition: the replica layer's answer index, or the answer without a read.
    let routes: Vec<Result<usize, FetchedPartition>> = partitions
        .iter()
        .map(|(key, params)| {
            let name = if by_id {
                image.topic_by_id(&key.topic_id).map(|t| t.name.clone())
            } else {
                Some(key.topic.clone())
            };
            let refuse = |code| Err(FetchedPartition::error(code));
            match name {
                _ if follower_denied => refuse(ErrorCode::TopicAuthorizationFailed),
                None => refuse(ErrorCode::UnknownTopicId),
                Some(n) if !follower && !acl.topic(op::READ, &n) => {
                    refuse(ErrorCode::TopicAuthorizationFailed)
                }
                Some(n) => {
                    let tp = TopicPartition::new(n, key.partition);
                    if let Some(answer) = redirect(&tp, params.fetch_offset) {
                        return Err(answer);
                    }
                    reads.push(FetchPartitionRequest {
                        tp,
                        fetch_offset: Offset(params.fetch_offset),
                        current_leader_epoch: LeaderEpoch(params.current_leader_epoch),
                        max_bytes: params.max_bytes.max(0) as u64,
                    });
                    Ok(reads.len() - 1)
                }
            }
        })
        .collect();
    // A redirected partition is answered at once, as Kafka does.
    let redirected = routes
        .iter()
        .any(|r| matches!(r, Err(a) if a.preferred_read_replica.is_some()));
    let params = FetchParams {
        replica: follower.then_some(NodeId(replica_id)),
        read_committed: req.isolation_level == 1,
        from_any_replica: !follower && ctx.api_version >= 11,
        min_bytes: if redirected {
            0
        } else {
            req.min_bytes.max(0) as u64
        },
        max_bytes: (req.max_bytes.max(0) as u64).min(h.config.fetch_max_bytes()),
        max_wait: Duration::from_millis(req.max_wait_ms.max(0) as u64),
    };
    let mut read: Vec<Option<FetchedPartition>> = if reads.is_empty() {
        Vec::new()
    } else {
        h.replicas
            .fetch(params, reads)
            .await
            .into_iter()
            .map(Some)
            .collect()
    };
    // Every partition's answer, in session (or request) order.
    let mut answers: Vec<FetchedPartition> = routes
        .into_iter()
        .map(|r| match r {
            Err(answer) => answer,
            Ok(i) => read[i]
                .take()
                .unwrap_or_else(|| FetchedPartition::error(ErrorCode::UnknownServerError)),
        })
        .collect();
    let mut resp = FetchResponse::default();
    // consumer_byte_rate: a consumer over its quota gets an empty answer that says how long to
    // back off (and what it would have read does not count), as in Kafka; a session's state
    // is left as it was.
    let bytes: u64 = answers.iter().map(FetchedPartition::records_len).sum();
    if !follower && bytes > 0 {
        let throttle = h.quotas.record(ctx, QuotaKind::Fetch, bytes as f64);
        if throttle > 0 {
            h.quotas.record(ctx, QuotaKind::Fetch, -(bytes as f64));
            resp.throttle_time_ms = throttle;
            resp.session_id = incremental.unwrap_or(0);
            return respond(ctx, &resp, Vec::new());
        }
    }
    let answered: Vec<Answered> = answers
        .iter()
        .map(|f| Answered {
            records_len: f.records_len(),
            high_watermark: f.high_watermark.0,
            log_start_offset: f.log_start_offset.0,
            // A redirect must reach the consumer even when nothing else changed.
            error: f.error.is_some() || f.preferred_read_replica.is_some(),
        })
        .collect();
    let included: Vec<bool> = match incremental {
        Some(id) => {
            resp.session_id = id;
            let keyed: Vec<(PartitionKey, Answered)> = partitions
                .iter()
                .zip(&answered)
                .map(|((k, _), a)| (k.clone(), *a))
                .collect();
            h.fetch_sessions.incremental_answer(id, &keyed)
        }
        None => {
            if matches!(epoch, 0) && ctx.api_version >= 7 {
                let keyed = partitions
                    .iter()
                    .zip(&answered)
                    .map(|((k, p), a)| (k.clone(), p.clone(), *a))
                    .collect();
                resp.session_id = h.fetch_sessions.create(follower, by_id, keyed, now);
            }
            vec![true; partitions.len()]
        }
    };
    let mut spliced = Vec::new();
    for (i, (key, _)) in partitions.iter().enumerate() {
        if !included[i] {
            continue;
        }
        let f = &mut answers[i];
        if let (Some(counter), n) = (&f.bytes_out, f.records_len()) {
            counter.increment(n);
        }
        let data = partition_data(key.partition, f);
        spliced.push(f.records.take());
        let (topic, topic_id) = if by_id {
            (TopicName::default(), key.topic_id)
        } else {
            (
                TopicName(StrBytes::from_string(key.topic.clone())),
                Uuid::nil(),
            )
        };
        let same_topic = resp
            .responses
            .last()
            .is_some_and(|t: &FetchableTopicResponse| t.topic == topic && t.topic_id == topic_id);
        if !same_topic {
            let mut t = FetchableTopicResponse::default();
            t.topic = topic;
            t.topic_id = topic_id;
            resp.responses.push(t);
        }
        if let Some(t) = resp.responses.last_mut() {
            t.partitions.push(data);
        }
    }
    respond(ctx, &resp, spliced)
}

fn respond(
    ctx: &RequestContext,
    resp: &FetchResponse,
    spliced: Vec<Option<sluice_storage::FileSlice>>,
) -> Result<Response, HandlerError> {
    let frame = encode_fetch_response(ctx.api_version, ctx.correlation_id, resp, spliced)
        .map_err(|e| HandlerError::Encode(e.to_string()))?;
    Ok(Some(Reply::Spliced(frame)))
}
