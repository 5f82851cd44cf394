//! Produce (key 0): append each partition's batches as leader. acks=0 gets no response (and a
//! closed connection on error, as Kafka does); acks=1 answers after the local append;
//! acks=-1 checks `min.insync.replicas` first and answers once the high watermark covers
//! the batch, or REQUEST_TIMED_OUT after `timeout_ms`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse, TopicName};
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;
use tokio::sync::Notify;

use crate::broker::Broker;
use crate::partition::{AppendError, Partition};
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
    let req: ProduceRequest = ctx.decode(body)?;
    let acks = req.acks;
    let by_id = ctx.api_version >= 13;
    if !by_id {
        let image = broker.metadata.current();
        let unknown: Vec<String> = req
            .topic_data
            .iter()
            .map(|t| t.name.to_string())
            .filter(|n| {
                image.topic(n).is_none() && sluice_metadata::topic::validate_name(n).is_ok()
            })
            .collect();
        super::metadata::auto_create(broker, unknown).await;
    }
    let image = broker.metadata.current();
    let now = crate::now_ms();
    let mut resp = ProduceResponse::default();
    let mut waiting: Vec<(Arc<Partition>, i64)> = Vec::new();
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
                None => Err((ErrorCode::UnknownTopicId, None)),
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
                                match p.append_as_leader(records.to_vec(), acks, now) {
                                    Ok(info) => {
                                        if acks == -1 {
                                            waiting.push((Arc::clone(&p), info.last_offset + 1));
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
        if !await_high_watermark(&waiting, timeout).await {
            mark_timed_out(&mut resp, &waiting);
        }
        mark_too_few_replicas(&mut resp, &waiting);
    }
    ctx.respond(&resp)
}

fn append_error(e: &AppendError) -> (ErrorCode, Option<String>) {
    (e.code(), Some(e.message()))
}

/// Wait until every partition's high watermark reaches its target offset.
async fn await_high_watermark(waiting: &[(Arc<Partition>, i64)], timeout: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    let notify = Arc::new(Notify::new());
    loop {
        for (p, _) in waiting {
            p.add_waiter(&notify);
        }
        if waiting
            .iter()
            .all(|(p, target)| p.high_watermark() >= *target)
        {
            return true;
        }
        if tokio::time::timeout_at(deadline, notify.notified())
            .await
            .is_err()
        {
            return waiting
                .iter()
                .all(|(p, target)| p.high_watermark() >= *target);
        }
    }
}

/// The records are committed, but the ISR that committed them fell below
/// `min.insync.replicas` meanwhile: Kafka's NOT_ENOUGH_REPLICAS_AFTER_APPEND (retriable; the
/// producer may write them again).
fn mark_too_few_replicas(resp: &mut ProduceResponse, waiting: &[(Arc<Partition>, i64)]) {
    for topic in &mut resp.responses {
        for p in &mut topic.partition_responses {
            let short = waiting.iter().any(|(w, _)| {
                w.tp.partition.0 == p.index
                    && (*w.tp.topic == *topic.name.0 || w.topic_id == topic.topic_id)
                    && (w.state().isr().len() as i32) < w.settings().min_insync_replicas
            });
            if short && p.error_code == 0 {
                p.error_code = ErrorCode::NotEnoughReplicasAfterAppend.code();
            }
        }
    }
}

fn mark_timed_out(resp: &mut ProduceResponse, waiting: &[(Arc<Partition>, i64)]) {
    for topic in &mut resp.responses {
        for p in &mut topic.partition_responses {
            let late = waiting.iter().any(|(w, target)| {
                w.tp.partition.0 == p.index
                    && (*w.tp.topic == *topic.name.0 || w.topic_id == topic.topic_id)
                    && w.high_watermark() < *target
            });
            if late && p.error_code == 0 {
                p.error_code = ErrorCode::RequestTimedOut.code();
            }
        }
    }
}
