//! Produce (key 0): decode, authorize (WRITE on each topic and on a transactional id),
//! auto-create unknown topics, append through the replica layer, answer. acks=0 gets no
//! response (and a closed connection on error, as Kafka does); acks=1 answers after the
//! leader's append; acks=-1 answers once the high watermark covers the append
//! (NOT_LEADER_OR_FOLLOWER as soon as this broker stops leading first, REQUEST_TIMED_OUT after
//! `timeout_ms`, NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below
//! `min.insync.replicas` meanwhile).
//!
//! From v12 the client speaks transactions v2 (KIP-890): a transactional batch for a partition
//! not yet in its open transaction makes this broker add the partition to the transaction at
//! the coordinator first ([`crate::txn::adder`]).

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse, TopicName};
use sluice_metadata::acl::op;
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;

use crate::quota::QuotaKind;
use crate::replica::append::AppendEntry;
use crate::replica::AppendError;
use crate::replica::{Acks, AppendOrigin};
use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::Produce,
    3,
    13,
    Produce {
        metadata: crate::metadata_cache::MetadataCache,
        replicas: crate::replica::ReplicaManager,
        access: crate::authorizer::Access,
        quotas: crate::quota::ClientQuotas,
        topics: crate::services::topics::TopicCreator,
        txns: crate::txn::coordinator::TxnCoordinator,
        schemas: crate::registry::SchemaRegistry
    }
);

fn partition_error(index: i32, e: &AppendError, version: i16) -> PartitionProduceResponse {
    let mut p = PartitionProduceResponse::default();
    p.index = index;
    p.error_code = e.code().code();
    p.base_offset = -1;
    p.log_append_time_ms = -1;
    p.log_start_offset = -1;
    let message = e.message();
    p.error_message = (!message.is_empty()).then(|| str_bytes(message));
    if version >= 8 {
        p.record_errors = e
            .record_errors()
            .iter()
            .map(|(index, message)| {
                let mut r = BatchIndexAndErrorMessage::default();
                r.batch_index = *index;
                r.batch_index_error_message = message.clone().map(str_bytes);
                r
            })
            .collect();
    }
    p
}

fn refused(code: ErrorCode) -> AppendError {
    AppendError::Code(code, String::new())
}

fn refused_code() -> AppendError {
    refused(ErrorCode::UnknownServerError)
}

/// Transactions v2: add the partitions of `entries` whose transactional batches open the
/// producer's transaction there (none open at the batch's epoch) to the transaction of `id`.
/// Returns the entries refused, with the error to answer for them (the coordinator's, but
/// PRODUCER_FENCED as INVALID_PRODUCER_EPOCH, as Kafka's leader answers a late write of a
/// fenced or ended transaction).
async fn add_to_transaction(
    h: &Produce,
    id: &str,
    entries: &[AppendEntry],
) -> Vec<(usize, AppendError)> {
    let mut producer = None;
    let mut opening = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let Ok(header) = sluice_protocol::batch::BatchHeader::parse(&e.records) else {
            continue; // the append refuses it
        };
        if !header.is_transactional() {
            continue;
        }
        producer = Some((header.producer_id, header.producer_epoch));
        if !h
            .replicas
            .in_open_txn(&e.tp, header.producer_id, header.producer_epoch)
        {
            opening.push(i);
        }
    }
    let Some((producer_id, epoch)) = producer.filter(|_| !opening.is_empty()) else {
        return Vec::new();
    };
    let partitions = opening
        .iter()
        .map(|i| (entries[*i].tp.topic.to_string(), entries[*i].tp.partition.0))
        .collect();
    match h
        .txns
        .add_for_producer(id, producer_id, epoch, partitions, true)
        .await
    {
        Ok(()) => Vec::new(),
        Err(code) => {
            let code = match code {
                ErrorCode::ProducerFenced => ErrorCode::InvalidProducerEpoch,
                c => c,
            };
            opening
                .into_iter()
                .map(|i| {
                    (
                        i,
                        AppendError::Code(
                            code,
                            "the partition was not added to the transaction".into(),
                        ),
                    )
                })
                .collect()
        }
    }
}

/// Where a partition's answer comes from.
enum Slot {
    Done(PartitionProduceResponse),
    /// The i-th append.
    Appended(usize),
    /// The i-th append to a diskless partition.
    Diskless(usize),
}

/// The schema id a key or value in the schema registry's wire format carries (magic byte 0,
/// then the id, big-endian); None for anything else.
fn schema_id(bytes: &[u8]) -> Option<i32> {
    match bytes {
        [0, a, b, c, d, ..] => Some(i32::from_be_bytes([*a, *b, *c, *d])),
        _ => None,
    }
}

/// Schema validation of a topic's records (`confluent.*.schema.validation`): every key or
/// value checked must carry an id registered under `<topic>-key` / `<topic>-value` (null
/// ones, tombstones, pass). The error to answer: INVALID_RECORD naming each record at fault
/// (REQUEST_TIMED_OUT, which clients retry, when the registry cannot be asked).
async fn schema_errors(
    h: &Produce,
    topic: &str,
    checks: sluice_metadata::image::SchemaValidation,
    records: &Bytes,
) -> Option<AppendError> {
    use sluice_protocol::batch::{for_each_record, BatchIter, RecordLimits};
    let key_subject = format!("{topic}-key");
    let value_subject = format!("{topic}-value");
    // (record index, subject, id or None when not in the wire format)
    let mut found: Vec<(i32, &str, Option<i32>)> = Vec::new();
    let mut index = 0i32;
    for batch in BatchIter::new(records) {
        let Ok((header, bytes)) = batch else { break };
        if header.is_control() {
            continue;
        }
        let walked = for_each_record(bytes, RecordLimits::default(), |r| {
            for (on, part, subject) in [
                (checks.key, r.key, key_subject.as_str()),
                (checks.value, r.value, value_subject.as_str()),
            ] {
                if let (true, Some(b)) = (on, part) {
                    found.push((index, subject, schema_id(b)));
                }
            }
            index += 1;
            Ok(())
        });
        if walked.is_err() {
            // The log's own validation answers a malformed batch.
            return None;
        }
    }
    let mut checked: std::collections::HashMap<(&str, i32), bool> = Default::default();
    let mut errors: Vec<(i32, String)> = Vec::new();
    for (i, subject, id) in found {
        let Some(id) = id else {
            errors.push((i, format!("not in the schema registry's wire format (magic byte 0, schema id), as {subject} requires")));
            continue;
        };
        let known = match checked.get(&(subject, id)) {
            Some(k) => *k,
            None => match h.schemas.id_in_subject(subject, id).await {
                Ok(k) => {
                    checked.insert((subject, id), k);
                    k
                }
                Err(e) => {
                    return Some(AppendError::Code(
                        ErrorCode::RequestTimedOut,
                        format!(
                            "cannot check schema ids with the schema registry: {}",
                            e.message
                        ),
                    ))
                }
            },
        };
        if !known {
            errors.push((
                i,
                format!("schema id {id} is not registered under subject {subject}"),
            ));
        }
    }
    if errors.is_empty() {
        return None;
    }
    errors.dedup_by_key(|(i, _)| *i);
    Some(AppendError::Log(sluice_storage::LogError::RecordErrors {
        timestamp: false,
        errors,
    }))
}

async fn handle(h: &Produce, ctx: &RequestContext, body: Bytes) -> Result<Response, HandlerError> {
    let request_bytes = body.len();
    let req: ProduceRequest = ctx.decode(body)?;
    let acks = Acks::from_wire(req.acks);
    let by_id = ctx.api_version >= 13;
    // WRITE on each topic, and on the transactional id of a transactional batch.
    let acl = h.access.check(ctx);
    // As Kafka: transactional batches need a transactional id the client may write; without
    // one, no coordinator would ever end their transaction and the partitions' last stable
    // offset would stay behind them for good.
    let mut txn_producers: Vec<(i64, i16)> = req
        .topic_data
        .iter()
        .flat_map(|t| &t.partition_data)
        .filter_map(|p| p.records.as_ref())
        .filter_map(|r| sluice_protocol::batch::BatchHeader::parse(r).ok())
        .filter(|h| h.is_transactional())
        .map(|h| (h.producer_id, h.producer_epoch))
        .collect();
    txn_producers.sort_unstable();
    txn_producers.dedup();
    let transactional = !txn_producers.is_empty();
    // As Kafka: one request's transactional batches belong to one producer (id and epoch);
    // otherwise nothing is written and every partition is answered INVALID_PRODUCER_ID_MAPPING.
    let mixed_producers = txn_producers.len() > 1;
    let txn_denied = transactional
        && req
            .transactional_id
            .as_ref()
            .filter(|id| !id.is_empty())
            .is_none_or(|id| !acl.transactional_id(op::WRITE, id));
    if !by_id {
        let image = h.metadata.current();
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
        h.topics.auto_create(unknown).await;
    }
    let image = h.metadata.current();
    let mut entries = Vec::new();
    let mut diskless = Vec::new();
    let mut topics = Vec::with_capacity(req.topic_data.len());
    for topic in req.topic_data {
        let name = if by_id {
            image.topic_by_id(&topic.topic_id).map(|t| t.name.clone())
        } else {
            Some(topic.name.to_string())
        };
        let mut slots = Vec::with_capacity(topic.partition_data.len());
        for pd in topic.partition_data {
            let refusal = match &name {
                _ if acks.is_none() => Some(ErrorCode::InvalidRequiredAcks),
                _ if txn_denied => Some(ErrorCode::TransactionalIdAuthorizationFailed),
                _ if mixed_producers => Some(ErrorCode::InvalidProducerIdMapping),
                None => Some(ErrorCode::UnknownTopicId),
                Some(name) if !acl.topic(op::WRITE, name) => {
                    Some(ErrorCode::TopicAuthorizationFailed)
                }
                Some(_) => None,
            };
            // Topics whose records must carry registered schema ids (few: looked up in a
            // set the image keeps, no config read for the others).
            let refusal_records = match (&refusal, &name, &pd.records) {
                (None, Some(name), Some(records)) => match image.schema_validated.get(name) {
                    // Boxed: its state stays out of every produce request's future.
                    Some(v) => Box::pin(schema_errors(h, name, *v, records)).await,
                    None => None,
                },
                _ => None,
            };
            if let Some(e) = refusal_records {
                slots.push((
                    pd.index,
                    Slot::Done(partition_error(pd.index, &e, ctx.api_version)),
                ));
                continue;
            }
            let slot = match (refusal, &name, pd.records) {
                (Some(code), _, _) => {
                    Slot::Done(partition_error(pd.index, &refused(code), ctx.api_version))
                }
                (None, Some(name), Some(records))
                    if !records.is_empty() && crate::diskless::is_diskless(&image, name) =>
                {
                    diskless.push(AppendEntry {
                        tp: TopicPartition::new(name.clone(), pd.index),
                        records,
                    });
                    Slot::Diskless(diskless.len() - 1)
                }
                (None, Some(name), Some(records)) if !records.is_empty() => {
                    entries.push(AppendEntry {
                        tp: TopicPartition::new(name.clone(), pd.index),
                        records,
                    });
                    Slot::Appended(entries.len() - 1)
                }
                _ => Slot::Done(partition_error(
                    pd.index,
                    &AppendError::Code(
                        ErrorCode::InvalidRecord,
                        "the request holds no records".into(),
                    ),
                    ctx.api_version,
                )),
            };
            slots.push((pd.index, slot));
        }
        topics.push((topic.name, topic.topic_id, slots));
    }
    let acks = acks.unwrap_or(Acks::Leader);
    // Transactions v2: the partitions this request opens in the producer's transaction are
    // added to it first; those the coordinator refuses are not written.
    let mut not_added: Vec<(usize, AppendError)> = Vec::new();
    let mut diskless_not_added: Vec<(usize, AppendError)> = Vec::new();
    if ctx.api_version >= 12 {
        if let Some(id) = req.transactional_id.as_ref().filter(|_| !txn_denied) {
            not_added = add_to_transaction(h, id, &entries).await;
            diskless_not_added = add_to_transaction(h, id, &diskless).await;
        }
    }
    let results = if entries.is_empty() {
        Vec::new()
    } else if not_added.is_empty() {
        h.replicas.append(AppendOrigin::Client, acks, entries).await
    } else {
        let mut errors: std::collections::HashMap<usize, AppendError> =
            not_added.into_iter().collect();
        let n = entries.len();
        let write: Vec<AppendEntry> = entries
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !errors.contains_key(i))
            .map(|(_, e)| e)
            .collect();
        let mut written = if write.is_empty() {
            Vec::new()
        } else {
            h.replicas.append(AppendOrigin::Client, acks, write).await
        }
        .into_iter();
        (0..n)
            .map(|i| match errors.remove(&i) {
                Some(e) => Err(e),
                None => written.next().unwrap_or_else(|| Err(refused_code())),
            })
            .collect()
    };
    // Diskless partitions: durable in the object store and committed, whatever acks says.
    let diskless_results = if diskless.is_empty() {
        Vec::new()
    } else if diskless_not_added.is_empty() {
        h.replicas.append_diskless(diskless).await
    } else {
        let mut errors: std::collections::HashMap<usize, AppendError> =
            diskless_not_added.into_iter().collect();
        let n = diskless.len();
        let write: Vec<AppendEntry> = diskless
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !errors.contains_key(i))
            .map(|(_, e)| e)
            .collect();
        let mut written = h.replicas.append_diskless(write).await.into_iter();
        (0..n)
            .map(|i| match errors.remove(&i) {
                Some(e) => Err(e),
                None => written.next().unwrap_or_else(|| Err(refused_code())),
            })
            .collect()
    };
    // The records are in the log: the request's bytes are no longer held.
    ctx.release_budget();
    let mut outcomes = vec![None; results.len()];
    if acks == Acks::All {
        let waiting: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        if !waiting.is_empty() {
            let timeout = Duration::from_millis(req.timeout_ms.max(0) as u64);
            let mut settled = h
                .replicas
                .await_replication(&waiting, timeout)
                .await
                .into_iter();
            for (r, o) in results.iter().zip(outcomes.iter_mut()) {
                if r.is_ok() {
                    *o = settled.next().and_then(|s| s.error());
                }
            }
        }
    }
    let mut resp = ProduceResponse::default();
    let mut any_error = false;
    for (name, topic_id, slots) in topics {
        let mut out = TopicProduceResponse::default();
        out.name = if by_id { TopicName::default() } else { name };
        out.topic_id = topic_id;
        for (index, slot) in slots {
            let r = match slot {
                Slot::Done(r) => r,
                Slot::Appended(i) => match (&results[i], outcomes[i]) {
                    (Err(e), _) => partition_error(index, e, ctx.api_version),
                    (Ok(_), Some(code)) => partition_error(index, &refused(code), ctx.api_version),
                    (Ok(a), None) => {
                        let mut r = PartitionProduceResponse::default();
                        r.index = index;
                        r.base_offset = a.info.first_offset;
                        r.log_append_time_ms = a.info.log_append_time_ms;
                        r.log_start_offset = a.info.log_start_offset;
                        r
                    }
                },
                Slot::Diskless(i) => match &diskless_results[i] {
                    Err(e) => partition_error(index, e, ctx.api_version),
                    Ok(a) => {
                        let mut r = PartitionProduceResponse::default();
                        r.index = index;
                        r.base_offset = a.base_offset;
                        r.log_append_time_ms = -1;
                        r.log_start_offset = a.log_start_offset;
                        r
                    }
                },
            };
            any_error |= r.error_code != 0;
            out.partition_responses.push(r);
        }
        resp.responses.push(out);
    }
    // producer_byte_rate: the request's bytes; over the quota, the answer says how long to
    // back off and the connection is muted for as long (acks=0 included).
    resp.throttle_time_ms = h
        .quotas
        .record(ctx, QuotaKind::Produce, request_bytes as f64);
    if req.acks == 0 {
        if any_error {
            return Err(HandlerError::Malformed(
                "acks=0 produce failed; closing the connection as Kafka does".into(),
            ));
        }
        return Ok(None);
    }
    ctx.respond(&resp)
}
