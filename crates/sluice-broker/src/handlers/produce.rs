//! Produce (key 0): append each partition's batches as leader. acks=0 gets no response (and a
//! closed connection on error, as Kafka does); acks=1 answers after the local append;
//! acks=-1 checks `min.insync.replicas` first and answers once the high watermark covers
//! the batch, NOT_LEADER_OR_FOLLOWER as soon as this broker stops leading the partition
//! before that, or REQUEST_TIMED_OUT after `timeout_ms`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse, TopicName};
use sluice_metadata::acl::op;
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;
use tokio::sync::Notify;

use crate::broker::Broker;
use crate::partition::{AckState, AppendError, Partition};
use crate::quota::QuotaKind;
use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(ApiKey::Produce, 3, 13, handle);

fn partition_error(
    index: i32,
    code: ErrorCode,
    message: Option<String>,
) -> PartitionProduceResponse {
    let mut p = PartitionProduceResponse::default();
    p.index = index;
    p.error_code = code.code();
    p.base_offset = -1;
    p.log_append_time_ms = -1;
    p.log_start_offset = -1;
    p.error_message = message.map(str_bytes);
    p
}

async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let request_bytes = body.len();
    let req: ProduceRequest = ctx.decode(body)?;
    let acks = req.acks;
    let by_id = ctx.api_version >= 13;
    // WRITE on each topic, and on the transactional id of a transactional batch.
    let acl = broker.acl(ctx);
    let txn_denied = req
        .transactional_id
        .as_ref()
        .is_some_and(|id| !acl.transactional_id(op::WRITE, id));
    if !by_id {
        let image = broker.metadata.current();
        let unknown: Vec<String> = req
            .topic_data
            .iter()
            .map(|t| t.name.to_string())
            .filter(|n| {
                image.topic(n).is_none()
                    && sluice_metadata::topic::validate_name(n).is_ok()
                    && acl.topic(op::WRITE, n)
                    && (acl.cluster(op::CREATE) || acl.topic(op::CREATE, n))
            })
            .collect();
        super::metadata::auto_create(broker, unknown).await;
    }
    let image = broker.metadata.current();
    let now = crate::now_ms();
    let mut resp = ProduceResponse::default();
    let mut waiting: Vec<Waiting> = Vec::new();
    let mut any_error = false;
    for topic in req.topic_data {
        let name = if by_id {
            image.topic_by_id(&topic.topic_id).map(|t| t.name.clone())
        } else {
            Some(topic.name.to_string())
        };
        let mut out = TopicProduceResponse::default();
        out.name = topic.name.clone();
        out.topic_id = topic.topic_id;
        for pd in topic.partition_data {
            let result = match &name {
                _ if !matches!(acks, -1..=1) => Err((ErrorCode::InvalidRequiredAcks, None)),
                _ if txn_denied => Err((ErrorCode::TransactionalIdAuthorizationFailed, None)),
                None => Err((ErrorCode::UnknownTopicId, None)),
                Some(name) if !acl.topic(op::WRITE, name) => {
                    Err((ErrorCode::TopicAuthorizationFailed, None))
                }
                Some(name) => {
                    let tp = TopicPartition::new(name.clone(), pd.index);
                    match broker.replicas.get(&tp) {
                        None if image
                            .topic(name)
                            .is_some_and(|t| t.partitions.contains_key(&pd.index)) =>
                        {
                            Err((ErrorCode::NotLeaderOrFollower, None))
                        }
                        None if sluice_metadata::topic::validate_name(name).is_err() => {
                            Err((ErrorCode::InvalidTopicException, None))
                        }
                        None => Err((ErrorCode::UnknownTopicOrPartition, None)),
                        Some(p) => match pd.records.as_deref() {
                            None | Some([]) => Err((
                                ErrorCode::InvalidRecord,
                                Some("the request holds no records".to_string()),
                            )),
                            Some(records) => {
                                // Read before appending: if the epoch moves in between, the
                                // answer errs on the safe side (not acknowledged).
                                let epoch = p.leader_epoch();
                                match p.append_as_leader(records.to_vec(), acks, now) {
                                    Ok(info) => {
                                        p.metrics.bytes_in.increment(records.len() as u64);
                                        p.metrics.messages_in.increment(
                                            (info.last_offset - info.first_offset + 1).max(0)
                                                as u64,
                                        );
                                        if acks == -1 {
                                            waiting.push(Waiting {
                                                partition: Arc::clone(&p),
                                                end: info.last_offset + 1,
                                                epoch,
                                                state: AckState::Waiting,
                                            });
                                        }
                                        let mut r = partition_error(
                                            pd.index,
                                            ErrorCode::UnknownServerError,
                                            None,
                                        );
                                        r.error_code = 0;
                                        r.base_offset = info.first_offset;
                                        r.log_append_time_ms = info.log_append_time_ms;
                                        r.log_start_offset = info.log_start_offset;
                                        Ok(r)
                                    }
                                    Err(e) => Err(append_error(&e)),
                                }
                            }
                        },
                    }
                }
            };
            let r = result.unwrap_or_else(|(code, message)| {
                any_error = true;
                let mut r = partition_error(pd.index, code, message.clone());
                if code == ErrorCode::InvalidRecord && ctx.api_version >= 8 {
                    let mut e = BatchIndexAndErrorMessage::default();
                    e.batch_index = 0;
                    e.batch_index_error_message = message.map(str_bytes);
                    r.record_errors = vec![e];
                }
                r
            });
            out.partition_responses.push(r);
        }
        if by_id {
            out.name = TopicName::default();
        }
        resp.responses.push(out);
    }
    // producer_byte_rate: the request's bytes; over the quota, the answer says how long to
    // back off and the connection is muted for as long (acks=0 included).
    resp.throttle_time_ms = broker.record_quota(ctx, QuotaKind::Produce, request_bytes as f64);
    if acks == 0 {
        if any_error {
            return Err(HandlerError::Malformed(
                "acks=0 produce failed; closing the connection as Kafka does".into(),
            ));
        }
        return Ok(None);
    }
    if !waiting.is_empty() {
        let timeout = Duration::from_millis(req.timeout_ms.max(0) as u64);
        let _parked = crate::Purgatory::enter("produce");
        await_high_watermark(&mut waiting, timeout).await;
        mark_uncommitted(&mut resp, &waiting);
        mark_too_few_replicas(&mut resp, &waiting);
    }
    ctx.respond(&resp)
}

/// An acks=all append waiting to be committed.
struct Waiting {
    partition: Arc<Partition>,
    /// The high watermark that commits it.
    end: i64,
    /// The leader epoch it was appended in.
    epoch: i32,
    /// Settled once Committed or Deposed.
    state: AckState,
}

impl Waiting {
    /// Whether this is partition `index` of the response's topic (by name, or id in v13+).
    fn is(&self, topic: (&str, sluice_metadata::Uuid), index: i32) -> bool {
        let p = &self.partition;
        p.tp.partition.0 == index && (*p.tp.topic == *topic.0 || p.topic_id == topic.1)
    }
}

fn append_error(e: &AppendError) -> (ErrorCode, Option<String>) {
    (e.code(), Some(e.message()))
}

/// Wait until every append is committed, or its partition has a new leader, or time is up.
async fn await_high_watermark(waiting: &mut [Waiting], timeout: Duration) {
    let deadline = tokio::time::Instant::now() + timeout;
    let notify = Arc::new(Notify::new());
    loop {
        for w in waiting.iter() {
            w.partition.add_waiter(&notify);
        }
        // A settled state is final: a deposed leader's high watermark later follows the new
        // leader's log, which may hold other records at the same offsets.
        for w in waiting.iter_mut() {
            if w.state == AckState::Waiting {
                w.state = w.partition.ack_state(w.end, w.epoch);
            }
        }
        if waiting.iter().all(|w| w.state != AckState::Waiting) {
            return;
        }
        if tokio::time::timeout_at(deadline, notify.notified())
            .await
            .is_err()
        {
            for w in waiting.iter_mut() {
                if w.state == AckState::Waiting {
                    w.state = w.partition.ack_state(w.end, w.epoch);
                }
            }
            return;
        }
    }
}

/// The records are committed, but the ISR that committed them fell below
/// `min.insync.replicas` meanwhile: Kafka's NOT_ENOUGH_REPLICAS_AFTER_APPEND (retriable; the
/// producer may write them again).
fn mark_too_few_replicas(resp: &mut ProduceResponse, waiting: &[Waiting]) {
    for topic in &mut resp.responses {
        let key: (&str, _) = (&topic.name.0, topic.topic_id);
        for p in &mut topic.partition_responses {
            let short = waiting.iter().any(|w| {
                w.is(key, p.index)
                    && (w.partition.state().isr().len() as i32)
                        < w.partition.settings().min_insync_replicas
            });
            if short && p.error_code == 0 {
                p.error_code = ErrorCode::NotEnoughReplicasAfterAppend.code();
            }
        }
    }
}

/// Appends not committed: NOT_LEADER_OR_FOLLOWER when the leader moved first, else
/// REQUEST_TIMED_OUT.
fn mark_uncommitted(resp: &mut ProduceResponse, waiting: &[Waiting]) {
    for topic in &mut resp.responses {
        let key: (&str, _) = (&topic.name.0, topic.topic_id);
        for p in &mut topic.partition_responses {
            let Some(w) = waiting.iter().find(|w| w.is(key, p.index)) else {
                continue;
            };
            let code = match w.state {
                AckState::Committed => continue,
                AckState::Deposed => ErrorCode::NotLeaderOrFollower,
                AckState::Waiting => ErrorCode::RequestTimedOut,
            };
            if p.error_code == 0 {
                p.error_code = code.code();
            }
        }
    }
}
