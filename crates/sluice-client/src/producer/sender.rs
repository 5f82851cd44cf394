//! The sender task: drains ready batches, groups them by partition leader into Produce
//! requests, keeps at most `max.in.flight.requests.per.connection` requests in flight per
//! broker, and settles every batch: acknowledged, retried, or failed.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{
    ApiKey, ProduceRequest, ProduceResponse, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use sluice_protocol::ErrorCode;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::accumulator::ProducerBatch;
use super::{Idempotence, RecordMetadata, Shared};
use crate::connection::decode_response;
use crate::error::{check, Error, Result};

pub(crate) async fn run(shared: Arc<Shared>) {
    let mut requests: JoinSet<()> = JoinSet::new();
    let mut in_flight: HashMap<i32, Arc<Semaphore>> = HashMap::new();
    let config = shared.config.clone();
    loop {
        let now = Instant::now();
        let send_all =
            shared.flushing.load(Ordering::SeqCst) > 0 || shared.closing.load(Ordering::SeqCst);
        let (ready, next, expired) = shared.lock().drain_ready(
            now,
            config.linger,
            config.delivery_timeout,
            send_all,
            config.batch_size,
        );
        for b in expired {
            let err = Error::Timeout(format!(
                "{} record(s) for {} not acknowledged within delivery.timeout.ms={}",
                b.builder.record_count(),
                b.tp,
                config.delivery_timeout.as_millis()
            ));
            settle(&shared, b, Err(err), false);
        }
        if !ready.is_empty() {
            dispatch(&shared, ready, &mut in_flight, &mut requests).await;
        }
        if shared.closing.load(Ordering::SeqCst) && requests.is_empty() && shared.lock().is_idle() {
            break;
        }
        let sleep = tokio::time::sleep_until(next.map_or_else(
            || tokio::time::Instant::now() + Duration::from_secs(3600),
            Into::into,
        ));
        tokio::select! {
            _ = shared.wake.notified() => {}
            Some(_) = requests.join_next(), if !requests.is_empty() => {}
            _ = sleep => {}
        }
    }
}

/// Group batches by leader and start one request per leader (more if over
/// `max.request.size`), each holding an in-flight permit of its broker.
async fn dispatch(
    shared: &Arc<Shared>,
    ready: Vec<ProducerBatch>,
    in_flight: &mut HashMap<i32, Arc<Semaphore>>,
    requests: &mut JoinSet<()>,
) {
    let mut by_leader: BTreeMap<i32, Vec<ProducerBatch>> = BTreeMap::new();
    let mut leaderless = Vec::new();
    for b in ready {
        match shared.core.leader(&b.tp) {
            Some(l) => by_leader.entry(l).or_default().push(b),
            None => leaderless.push(b),
        }
    }
    if !leaderless.is_empty() {
        let mut topics: Vec<String> = leaderless.iter().map(|b| b.tp.topic.clone()).collect();
        topics.sort();
        topics.dedup();
        let _ = shared.core.refresh_with(&topics, true).await;
        for b in leaderless {
            match shared.core.leader(&b.tp) {
                Some(l) => by_leader.entry(l).or_default().push(b),
                None => retry(
                    shared,
                    b,
                    Error::Kafka {
                        code: ErrorCode::LeaderNotAvailable,
                        message: None,
                    },
                ),
            }
        }
    }
    for (leader, batches) in by_leader {
        let sem = Arc::clone(
            in_flight
                .entry(leader)
                .or_insert_with(|| Arc::new(Semaphore::new(shared.config.max_in_flight))),
        );
        let mut group: Vec<(ProducerBatch, Bytes)> = Vec::new();
        let mut group_bytes = 0usize;
        for mut b in batches {
            if let (Some(idem), None) = (&shared.idempotence, b.sequence) {
                match assign_sequence(shared, idem, &b).await {
                    Ok(s) => {
                        b.builder.set_producer(s.0, s.1, s.2);
                        b.builder
                            .set_transactional(shared.config.transactional_id.is_some());
                        b.sequence = Some(s);
                    }
                    Err(e) => {
                        retry(shared, b, e);
                        continue;
                    }
                }
            }
            let encoded = match b.builder.build(0) {
                Ok(e) => Bytes::from(e),
                Err(e) => {
                    finish(
                        shared,
                        b,
                        Err(Error::Protocol(format!("cannot encode batch: {e}"))),
                    );
                    continue;
                }
            };
            if !group.is_empty() && group_bytes + encoded.len() > shared.config.max_request_size {
                let permit = acquire(&sem).await;
                requests.spawn(send(
                    Arc::clone(shared),
                    leader,
                    std::mem::take(&mut group),
                    permit,
                ));
                group_bytes = 0;
            }
            group_bytes += encoded.len();
            group.push((b, encoded));
        }
        if !group.is_empty() {
            let permit = acquire(&sem).await;
            requests.spawn(send(Arc::clone(shared), leader, group, permit));
        }
    }
}

/// The producer id, epoch and first sequence for a batch's first send (asking for a producer
/// id first if there is none).
async fn assign_sequence(
    shared: &Shared,
    idem: &tokio::sync::Mutex<Idempotence>,
    b: &ProducerBatch,
) -> Result<(i64, i16, i32)> {
    let mut state = idem.lock().await;
    if shared.config.transactional_id.is_some() {
        // The producer id comes from init_transactions; the partition joins the transaction.
        super::transaction::add_partition(shared, &mut state, &b.tp).await?;
    }
    let (id, epoch) = match state.producer {
        Some(p) => p,
        None => {
            let conn = shared.core.any_connection().await?;
            let req = InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(-1)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1);
            let resp: InitProducerIdResponse = conn.call(&req).await?;
            check(resp.error_code, None)?;
            let p = (resp.producer_id.0, resp.producer_epoch);
            tracing::debug!(producer_id = p.0, epoch = p.1, "idempotent producer id");
            state.producer = Some(p);
            state.next_sequence.clear();
            p
        }
    };
    let seq = state.next_sequence.get(&b.tp).copied().unwrap_or(0);
    // Sequences wrap at i32::MAX, as the broker expects.
    let next = (i64::from(seq) + i64::from(b.builder.record_count())) % (i64::from(i32::MAX) + 1);
    state.next_sequence.insert(b.tp.clone(), next as i32);
    Ok((id, epoch, seq))
}

/// The broker lost track of this producer's sequence (its state expired, or a batch before
/// this one failed for good): start over under a new producer id. The batch was not written,
/// so sending it again under the new id cannot duplicate it.
async fn restart_sequences(shared: &Shared, b: &mut ProducerBatch) {
    if let Some(idem) = &shared.idempotence {
        let mut state = idem.lock().await;
        if state.producer.map(|(id, _)| id) == b.sequence.map(|(id, _, _)| id) {
            state.producer = None;
            state.next_sequence.clear();
        }
    }
    b.sequence = None;
    b.builder.set_producer(-1, -1, -1);
}

async fn acquire(sem: &Arc<Semaphore>) -> Option<OwnedSemaphorePermit> {
    Arc::clone(sem).acquire_owned().await.ok()
}

/// One Produce request to `leader` and the settling of its batches.
async fn send(
    shared: Arc<Shared>,
    leader: i32,
    group: Vec<(ProducerBatch, Bytes)>,
    _permit: Option<OwnedSemaphorePermit>,
) {
    let conn = match shared.core.connection_to_node(leader).await {
        Ok(c) => c,
        Err(e) => {
            for (b, _) in group {
                retry(&shared, b, e.clone());
            }
            return;
        }
    };
    let version = match conn.version_for(ApiKey::Produce) {
        Ok(v) => v,
        Err(e) => {
            for (b, _) in group {
                finish(&shared, b, Err(e.clone()));
            }
            return;
        }
    };
    let mut topics: BTreeMap<&str, Vec<PartitionProduceData>> = BTreeMap::new();
    for (b, bytes) in &group {
        topics.entry(b.tp.topic.as_str()).or_default().push(
            PartitionProduceData::default()
                .with_index(b.tp.partition.0)
                .with_records(Some(bytes.clone())),
        );
    }
    let req = ProduceRequest::default()
        .with_transactional_id(
            shared
                .config
                .transactional_id
                .as_ref()
                .map(|id| TransactionalId(StrBytes::from_string(id.clone()))),
        )
        .with_acks(shared.config.acks)
        .with_timeout_ms(
            shared
                .config
                .request_timeout
                .as_millis()
                .min(i32::MAX as u128) as i32,
        )
        .with_topic_data(
            topics
                .into_iter()
                .map(|(t, p)| {
                    TopicProduceData::default()
                        .with_name(TopicName(StrBytes::from_string(t.to_string())))
                        .with_partition_data(p)
                })
                .collect(),
        );
    if shared.config.acks == 0 {
        let result = conn.send_no_response(&req, version).await;
        for (b, _) in group {
            match &result {
                Ok(()) => finish(&shared, b, Ok((-1, -1))),
                Err(e) => retry(&shared, b, e.clone()),
            }
        }
        return;
    }
    let response = async {
        let rx = conn.send_at(&req, version).await?;
        let body = tokio::time::timeout(shared.config.request_timeout, rx)
            .await
            .map_err(|_| Error::Timeout(format!("Produce to broker {leader}")))?
            .map_err(|_| Error::Connection {
                addr: conn.addr().to_string(),
                reason: "connection closed".into(),
            })??;
        decode_response::<ProduceResponse>(body, version)
    }
    .await;
    let resp = match response {
        Ok(r) => r,
        Err(e) => {
            for (b, _) in group {
                retry(&shared, b, e.clone());
            }
            return;
        }
    };
    let mut results: HashMap<(String, i32), PartitionProduceResponse> = HashMap::new();
    for t in resp.responses {
        for p in t.partition_responses {
            results.insert((t.name.to_string(), p.index), p);
        }
    }
    for (mut b, _) in group {
        match results.remove(&(b.tp.topic.clone(), b.tp.partition.0)) {
            Some(p) if p.error_code == 0 => {
                finish(&shared, b, Ok((p.base_offset, p.log_append_time_ms)))
            }
            Some(p)
                if b.sequence.is_some()
                    && shared.config.transactional_id.is_none()
                    && matches!(
                        ErrorCode::try_from_code(p.error_code),
                        Some(
                            ErrorCode::OutOfOrderSequenceNumber
                                | ErrorCode::UnknownProducerId
                                | ErrorCode::InvalidProducerEpoch
                        )
                    ) =>
            {
                restart_sequences(&shared, &mut b).await;
                let e = Error::kafka(p.error_code, p.error_message.map(|m| m.to_string()))
                    .unwrap_or(Error::Protocol("bad error code".into()));
                retry_with(&shared, b, e, true);
            }
            Some(p) => {
                let message = p.error_message.map(|m| m.to_string());
                let e = Error::kafka(p.error_code, message)
                    .unwrap_or(Error::Protocol("bad error code".into()));
                if e.is_retriable() {
                    retry(&shared, b, e);
                } else {
                    finish(&shared, b, Err(e));
                }
            }
            None => {
                let e = Error::Protocol(format!("no answer for {}", b.tp));
                retry(&shared, b, e);
            }
        }
    }
}

/// Retry a batch after `retry.backoff.ms`, unless retries or the delivery timeout ran out.
fn retry(shared: &Shared, b: ProducerBatch, error: Error) {
    let retriable = error.is_retriable();
    retry_with(shared, b, error, retriable);
}

fn retry_with(shared: &Shared, mut b: ProducerBatch, error: Error, retriable: bool) {
    let now = Instant::now();
    let config = &shared.config;
    if !retriable
        || b.attempts >= config.retries
        || now + config.retry_backoff >= b.created + config.delivery_timeout
    {
        finish(shared, b, Err(error));
        return;
    }
    if matches!(
        error.code(),
        Some(
            ErrorCode::NotLeaderOrFollower
                | ErrorCode::UnknownTopicOrPartition
                | ErrorCode::LeaderNotAvailable
        )
    ) || matches!(error, Error::Connection { .. })
    {
        shared.core.invalidate(&b.tp.topic);
    }
    tracing::debug!(partition = %b.tp, attempt = b.attempts + 1, error = %error, "retrying batch");
    b.attempts += 1;
    b.retry_at = Some(now + config.retry_backoff);
    shared.lock().requeue(b);
    shared.wake.notify_one();
}

/// Settle a batch that was sent, for good.
fn finish(shared: &Shared, b: ProducerBatch, result: Result<(i64, i64)>) {
    settle(shared, b, result, true);
}

/// Settle a batch for good: wake its records' futures, run interceptors, free its memory.
/// `in_flight`: it was its partition's batch in flight (else it expired in the queue).
fn settle(shared: &Shared, b: ProducerBatch, result: Result<(i64, i64)>, in_flight: bool) {
    if let (Err(e), Some(_)) = (&result, &shared.config.transactional_id) {
        let mut failure = shared
            .txn_failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        failure.get_or_insert_with(|| e.clone());
    }
    if !shared.interceptors.is_empty() {
        for (i, ts) in b.timestamps.iter().enumerate() {
            let r = result.clone().map(|(base, append)| RecordMetadata {
                topic: b.tp.topic.clone(),
                partition: b.tp.partition.0,
                offset: if base < 0 { -1 } else { base + i as i64 },
                timestamp: if append >= 0 { append } else { *ts },
            });
            for i in &shared.interceptors {
                i.on_acknowledgement(&r);
            }
        }
    }
    // Interceptors see the acknowledgement before the record's future resolves, as in Kafka.
    b.complete(result);
    shared.memory.add_permits(b.reserved_bytes);
    shared.lock().done(&b.tp, in_flight);
    shared.progress.notify_waiters();
}
