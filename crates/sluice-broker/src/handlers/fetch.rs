//! Fetch (key 1): read from each requested partition up to the high watermark (the log end
//! for a follower; the last stable offset for read_committed, with the aborted transactions
//! of the range read), at most `partition_max_bytes` each and `max_bytes` in all, but always the
//! whole first batch found (KIP-74). If fewer than `min_bytes` are ready the request parks
//! on the partitions' wake-ups until data arrives or `max_wait_ms` passes: no polling.
//! Sessions (KIP-227) are not kept: every response is a full, sessionless one (session id
//! 0), which clients accept.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{ApiKey, FetchRequest, FetchResponse, TopicName};
use sluice_metadata::acl::op;
use sluice_metadata::Uuid;
use sluice_protocol::batch::BatchIter;
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;
use tokio::sync::Notify;

use crate::broker::Broker;
use crate::error_map::log_error_code;
use crate::partition::{FetchIsolation, Partition};
use crate::quota::QuotaKind;
use crate::request::{HandlerError, RequestContext, Response};

handler!(ApiKey::Fetch, 4, 17, handle);

/// One requested partition, resolved once.
struct Wanted {
    topic: TopicName,
    topic_id: Uuid,
    request: FetchPartition,
    target: Result<Arc<Partition>, ErrorCode>,
    /// A follower's fetch of a replica under `leader.replication.throttled.replicas`: what
    /// it is sent counts against the leader's replication quota (in sync or not, as Kafka).
    throttled: bool,
    /// ... and the follower is out of sync: it gets nothing while the quota is exceeded.
    holdable: bool,
}

fn empty_partition(index: i32, code: ErrorCode) -> PartitionData {
    let mut p = PartitionData::default();
    p.partition_index = index;
    p.error_code = code.code();
    p.high_watermark = -1;
    p.last_stable_offset = -1;
    p.log_start_offset = -1;
    p.records = Some(Bytes::new());
    p
}

/// No records, but the partition's offsets; `code` 0 for no error.
fn offsets_only(index: i32, code: i16, p: &Partition) -> PartitionData {
    let mut data = empty_partition(index, ErrorCode::UnknownServerError);
    data.error_code = code;
    data.high_watermark = p.high_watermark();
    data.last_stable_offset = p.last_stable_offset();
    data.log_start_offset = p.log_start_offset();
    data
}

/// Keep only whole batches (a slice may end inside one).
fn whole_batches(mut buf: Vec<u8>) -> Vec<u8> {
    let mut end = 0;
    for item in BatchIter::new(&buf) {
        match item {
            Ok((h, _)) => end += h.total_size(),
            Err(_) => break,
        }
    }
    buf.truncate(end);
    buf
}

async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: FetchRequest = ctx.decode(body)?;
    let replica_id = if ctx.api_version >= 15 {
        req.replica_state.replica_id.0
    } else {
        req.replica_id.0
    };
    let isolation = if replica_id >= 0 {
        FetchIsolation::LogEnd
    } else if req.isolation_level == 1 {
        FetchIsolation::TxnCommitted
    } else {
        FetchIsolation::HighWatermark
    };
    let by_id = ctx.api_version >= 13;
    let image = broker.metadata.current();
    // Followers need CLUSTER_ACTION on the cluster, consumers READ on each topic.
    let acl = broker.acl(ctx);
    let follower_denied = replica_id >= 0 && !acl.cluster(op::CLUSTER_ACTION);
    let mut wanted = Vec::new();
    for topic in req.topics {
        let name = if by_id {
            image.topic_by_id(&topic.topic_id).map(|t| t.name.clone())
        } else {
            Some(topic.topic.to_string())
        };
        for request in topic.partitions {
            let target = match &name {
                _ if follower_denied => Err(ErrorCode::TopicAuthorizationFailed),
                None => Err(ErrorCode::UnknownTopicId),
                Some(n) if replica_id < 0 && !acl.topic(op::READ, n) => {
                    Err(ErrorCode::TopicAuthorizationFailed)
                }
                Some(n) => broker
                    .replicas
                    .get(&TopicPartition::new(n.clone(), request.partition))
                    .ok_or_else(|| {
                        if image
                            .topic(n)
                            .is_some_and(|t| t.partitions.contains_key(&request.partition))
                        {
                            ErrorCode::NotLeaderOrFollower
                        } else {
                            ErrorCode::UnknownTopicOrPartition
                        }
                    }),
            };
            // Only the leader serves fetches (no KIP-392 follower fetching yet); a follower's
            // fetch offset tells the leader what it has.
            let target = target.and_then(|p| {
                if replica_id >= 0 {
                    p.on_follower_fetch(replica_id, request.fetch_offset, crate::now_ms())?;
                } else if !p.is_leader() {
                    return Err(ErrorCode::NotLeaderOrFollower);
                }
                Ok(p)
            });
            let throttled =
                replica_id >= 0 && target.as_ref().is_ok_and(|p| p.settings().leader_throttled);
            let holdable = throttled && target.as_ref().is_ok_and(|p| !p.in_isr(replica_id));
            wanted.push(Wanted {
                topic: topic.topic.clone(),
                topic_id: topic.topic_id,
                request,
                target,
                throttled,
                holdable,
            });
        }
    }
    let max_bytes = i64::from(req.max_bytes.max(0)).min(broker.config.fetch_max_bytes()) as u64;
    let min_bytes = req.min_bytes.max(0) as u64;
    let deadline =
        tokio::time::Instant::now() + Duration::from_millis(req.max_wait_ms.max(0) as u64);
    let notify = Arc::new(Notify::new());
    let leader_quota = &broker.replicas.replication_quotas().leader;
    let any_throttled = wanted.iter().any(|w| w.throttled);
    let any_holdable = wanted.iter().any(|w| w.holdable);
    let read = || {
        let hold = any_holdable && leader_quota.is_exceeded(crate::now_ms());
        read_all(&wanted, max_bytes, isolation, hold)
    };
    let (partitions, bytes, errors) = loop {
        for w in &wanted {
            if let Ok(p) = &w.target {
                p.add_waiter(&notify);
            }
        }
        let (partitions, bytes, errors) = read();
        if bytes >= min_bytes || errors || tokio::time::Instant::now() >= deadline {
            break (partitions, bytes, errors);
        }
        let parked = crate::Purgatory::enter("fetch");
        let woken = tokio::time::timeout_at(deadline, notify.notified()).await;
        drop(parked);
        if woken.is_err() {
            break read();
        }
    };
    let _ = errors;
    if any_throttled {
        let sent: usize = wanted
            .iter()
            .zip(&partitions)
            .filter(|(w, _)| w.throttled)
            .map(|(_, d)| d.records.as_ref().map_or(0, Bytes::len))
            .sum();
        leader_quota.record(sent as u64, crate::now_ms());
    }
    let mut resp = FetchResponse::default();
    // consumer_byte_rate: a consumer over its quota gets an empty answer that says how
    // long to back off (and what it would have read does not count), as in Kafka.
    let mut partitions = partitions;
    if replica_id < 0 && bytes > 0 {
        let throttle = broker.record_quota(ctx, QuotaKind::Fetch, bytes as f64);
        if throttle > 0 {
            broker.record_quota(ctx, QuotaKind::Fetch, -(bytes as f64));
            resp.throttle_time_ms = throttle;
            for p in &mut partitions {
                p.records = Some(Bytes::new());
                p.aborted_transactions = None;
            }
        }
    }
    for (w, data) in wanted.iter().zip(&partitions) {
        let n = data.records.as_ref().map_or(0, Bytes::len) as u64;
        if let (Ok(p), true) = (&w.target, n > 0) {
            if replica_id >= 0 {
                p.metrics.replication_bytes_out.increment(n);
            } else {
                p.metrics.bytes_out.increment(n);
            }
        }
    }
    for (w, data) in wanted.iter().zip(partitions) {
        let same_topic = resp
            .responses
            .last()
            .is_some_and(|t: &FetchableTopicResponse| {
                t.topic == w.topic && t.topic_id == w.topic_id
            });
        if !same_topic {
            let mut t = FetchableTopicResponse::default();
            t.topic = w.topic.clone();
            t.topic_id = w.topic_id;
            resp.responses.push(t);
        }
        if let Some(t) = resp.responses.last_mut() {
            t.partitions.push(data);
        }
    }
    ctx.respond(&resp)
}

/// Read every wanted partition once: (responses, bytes read, whether any had an error).
/// With `hold_throttled` (the leader's replication quota is exceeded) throttled replicas
/// get their partition's offsets but no records.
fn read_all(
    wanted: &[Wanted],
    max_bytes: u64,
    isolation: FetchIsolation,
    hold_throttled: bool,
) -> (Vec<PartitionData>, u64, bool) {
    let mut total = 0u64;
    let mut errors = false;
    let out = wanted
        .iter()
        .map(|w| {
            let index = w.request.partition;
            let p = match &w.target {
                Ok(p) => p,
                Err(code) => {
                    errors = true;
                    return empty_partition(index, *code);
                }
            };
            if let Err(code) = p.check_leader_epoch(w.request.current_leader_epoch) {
                errors = true;
                return empty_partition(index, code);
            }
            if hold_throttled && w.holdable {
                return offsets_only(index, 0, p);
            }
            let budget =
                (w.request.partition_max_bytes.max(0) as u64).min(max_bytes.saturating_sub(total));
            match p.read(w.request.fetch_offset, budget, isolation, total == 0) {
                Ok(read) => {
                    let mut data = empty_partition(index, ErrorCode::UnknownServerError);
                    data.error_code = 0;
                    data.high_watermark = read.high_watermark;
                    data.last_stable_offset = read.last_stable_offset;
                    data.log_start_offset = read.log_start_offset;
                    if isolation == FetchIsolation::TxnCommitted {
                        data.aborted_transactions = Some(
                            read.aborted
                                .iter()
                                .map(|a| {
                                    let mut t = AbortedTransaction::default();
                                    t.producer_id = a.producer_id.into();
                                    t.first_offset = a.first_offset;
                                    t
                                })
                                .collect(),
                        );
                    }
                    if let Some(slice) = read.slice {
                        let mut buf = Vec::new();
                        match slice.read_into(&mut buf) {
                            Ok(()) => {
                                let buf = whole_batches(buf);
                                total += buf.len() as u64;
                                data.records = Some(Bytes::from(buf));
                            }
                            Err(_) => {
                                errors = true;
                                return empty_partition(index, ErrorCode::KafkaStorageError);
                            }
                        }
                    }
                    data
                }
                Err(e) => {
                    errors = true;
                    offsets_only(index, log_error_code(&e).code(), p)
                }
            }
        })
        .collect();
    (out, total, errors)
}
