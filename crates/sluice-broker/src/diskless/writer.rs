//! The shared WAL writer of one broker: one task, fed by produce requests through a bounded
//! queue. It gathers batches of every diskless partition for the linger time (or until the
//! buffer is full), writes them as one object (each partition's batches together, in the
//! order they came), then sends the object's batch list to the sequencer. Each produce
//! request's partition is answered with its batches' offsets only after both.
//!
//! Objects are uploaded concurrently (at most [`UPLOADS_IN_FLIGHT`]) but committed one at a
//! time, in the order they were gathered: an idempotent producer's next batch never reaches
//! the sequencer before its previous one. The linger time counts from when a batch arrived,
//! so batches that waited behind a slow upload are written at once; with every upload slot
//! taken the queue keeps filling, so a slow store makes bigger objects, not more of them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use sluice_metadata::diskless::{BatchKind, Sequenced, WalBatch};
use sluice_metadata::Uuid;
use sluice_protocol::batch::{verify_crc, BatchIter};
use sluice_protocol::ErrorCode;
use sluice_storage::Marker;
use tokio::sync::{mpsc, oneshot};
use tracing::warn;

use super::{wal_key, DisklessMetrics, LazyStore};
use crate::controller_api::ControllerApi;
use crate::replica::AppendError;

/// Objects being uploaded at once, waiting for their turn to commit.
pub const UPLOADS_IN_FLIGHT: usize = 4;

pub struct WriterConfig {
    pub linger: Duration,
    pub max_bytes: usize,
}

/// One batch of a pending entry: where it is in the entry's records, and its header facts.
struct BatchMeta {
    offset: usize,
    size: usize,
    record_count: i32,
    max_timestamp_ms: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    kind: BatchKind,
}

/// One partition's records of one produce request, waiting to be written.
pub struct Pending {
    arrived: tokio::time::Instant,
    topic_id: Uuid,
    partition: i32,
    records: Bytes,
    batches: Vec<BatchMeta>,
    reply: oneshot::Sender<Result<Vec<Sequenced>, AppendError>>,
}

fn invalid(code: ErrorCode, message: impl Into<String>) -> AppendError {
    AppendError::Code(code, message.into())
}

/// What the receiver of a pending entry's answer waits on.
pub type Answer = oneshot::Receiver<Result<Vec<Sequenced>, AppendError>>;

impl Pending {
    /// Check a producer's records as a leader would (v2 batches, CRCs, counts) before they
    /// are queued.
    pub fn new(
        topic_id: Uuid,
        partition: i32,
        records: Bytes,
    ) -> Result<(Self, Answer), AppendError> {
        let mut batches = Vec::new();
        let mut iter = BatchIter::new(&records);
        loop {
            let offset = iter.position();
            let Some(next) = iter.next() else { break };
            let (h, bytes) = next.map_err(|e| invalid(ErrorCode::CorruptMessage, e.to_string()))?;
            verify_crc(bytes).map_err(|e| invalid(ErrorCode::CorruptMessage, e.to_string()))?;
            if h.record_count <= 0 || h.last_offset_delta != h.record_count - 1 {
                return Err(invalid(
                    ErrorCode::InvalidRecord,
                    "the batch's record count does not match its last offset delta",
                ));
            }
            if h.is_control() {
                return Err(invalid(
                    ErrorCode::InvalidRecord,
                    "clients may not write control batches",
                ));
            }
            let kind = if h.is_transactional() {
                if h.producer_id < 0 {
                    return Err(invalid(
                        ErrorCode::InvalidRecord,
                        "a transactional batch needs a producer id",
                    ));
                }
                BatchKind::TxnData
            } else {
                BatchKind::Data
            };
            batches.push(BatchMeta {
                offset,
                size: bytes.len(),
                record_count: h.record_count,
                max_timestamp_ms: h.max_timestamp,
                producer_id: h.producer_id,
                producer_epoch: h.producer_epoch,
                base_sequence: h.base_sequence,
                kind,
            });
        }
        if batches.is_empty() {
            return Err(invalid(
                ErrorCode::InvalidRecord,
                "the request holds no records",
            ));
        }
        Ok(Self::queued(topic_id, partition, records, batches))
    }

    /// A transaction marker the coordinator asked for, as a control batch.
    pub fn marker(
        topic_id: Uuid,
        partition: i32,
        marker: &Marker,
        now_ms: i64,
    ) -> Result<(Self, Answer), AppendError> {
        let bytes = sluice_storage::log::control_batch(marker, now_ms).map_err(AppendError::Log)?;
        let batches = vec![BatchMeta {
            offset: 0,
            size: bytes.len(),
            record_count: 1,
            max_timestamp_ms: now_ms,
            producer_id: marker.producer_id,
            producer_epoch: marker.epoch,
            base_sequence: -1,
            kind: if marker.commit {
                BatchKind::Commit
            } else {
                BatchKind::Abort
            },
        }];
        Ok(Self::queued(
            topic_id,
            partition,
            Bytes::from(bytes),
            batches,
        ))
    }

    fn queued(
        topic_id: Uuid,
        partition: i32,
        records: Bytes,
        batches: Vec<BatchMeta>,
    ) -> (Self, Answer) {
        let (reply, rx) = oneshot::channel();
        (
            Self {
                arrived: tokio::time::Instant::now(),
                topic_id,
                partition,
                records,
                batches,
                reply,
            },
            rx,
        )
    }
}

/// An object being uploaded: its entries, its batches (with the entry each came from), and
/// the upload's outcome.
struct Upload {
    id: Uuid,
    pending: Vec<Pending>,
    batches: Vec<WalBatch>,
    owners: Vec<usize>,
    stored: tokio::task::JoinHandle<Result<(), String>>,
}

/// The writer task: until the queue closes (and is drained). Gathers and starts uploads;
/// a second stage commits them in order.
pub async fn run(
    mut rx: mpsc::Receiver<Pending>,
    config: WriterConfig,
    store: Arc<LazyStore>,
    controller: Arc<dyn ControllerApi>,
    metrics: Arc<DisklessMetrics>,
) {
    let (uploads_tx, uploads_rx) = mpsc::channel::<Upload>(UPLOADS_IN_FLIGHT);
    let committer = tokio::spawn(commit_in_order(
        uploads_rx,
        Arc::clone(&controller),
        Arc::clone(&metrics),
    ));
    loop {
        let Some(first) = rx.recv().await else { break };
        let deadline = first.arrived + config.linger;
        let mut bytes = first.records.len();
        let mut gathered = vec![first];
        while bytes < config.max_bytes {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(p)) => {
                    bytes += p.records.len();
                    gathered.push(p);
                }
                Ok(None) | Err(_) => break,
            }
        }
        let upload = start_upload(gathered, &store, &metrics);
        if uploads_tx.send(upload).await.is_err() {
            break;
        }
    }
    drop(uploads_tx);
    let _ = committer.await;
}

fn start_upload(
    pending: Vec<Pending>,
    store: &Arc<LazyStore>,
    metrics: &Arc<DisklessMetrics>,
) -> Upload {
    let (object, batches, owners) = build(&pending);
    let id = Uuid::from_u128(sluice_rt::random_u128());
    let store = Arc::clone(store);
    let metrics = Arc::clone(metrics);
    let stored = tokio::spawn(async move {
        let size = object.len() as u64;
        let started = Instant::now();
        metrics.puts.increment(1);
        let put = async { store.get()?.put(&wal_key(&id), object).await };
        match put.await {
            Ok(()) => {
                metrics.put_bytes.increment(size);
                let ms = started.elapsed().as_secs_f64() * 1000.0;
                metrics.upload_ms.record(ms);
                metrics.recent_upload_ms.record(ms);
                Ok(())
            }
            Err(e) => {
                metrics.put_errors.increment(1);
                warn!(error = %e, "cannot write a WAL object; its producers are answered REQUEST_TIMED_OUT");
                Err(format!("the object store did not take the batches: {e}"))
            }
        }
    });
    Upload {
        id,
        pending,
        batches,
        owners,
        stored,
    }
}

/// Commit uploads in the order they were started, as each is stored.
async fn commit_in_order(
    mut uploads: mpsc::Receiver<Upload>,
    controller: Arc<dyn ControllerApi>,
    metrics: Arc<DisklessMetrics>,
) {
    while let Some(u) = uploads.recv().await {
        let stored = u
            .stored
            .await
            .unwrap_or_else(|e| Err(format!("the upload task failed: {e}")));
        match stored {
            Ok(()) => {
                commit(
                    u.id,
                    u.pending,
                    &u.batches,
                    u.owners,
                    &*controller,
                    &metrics,
                )
                .await
            }
            Err(message) => {
                for p in u.pending {
                    let _ = p
                        .reply
                        .send(Err(invalid(ErrorCode::RequestTimedOut, message.clone())));
                }
            }
        }
    }
}

/// The object's bytes (each partition's entries together, in arrival order) and its batches,
/// with the entry each came from.
fn build(pending: &[Pending]) -> (Bytes, Vec<WalBatch>, Vec<usize>) {
    let mut order: Vec<(Uuid, i32)> = Vec::new();
    let mut groups: HashMap<(Uuid, i32), Vec<usize>> = HashMap::new();
    for (i, p) in pending.iter().enumerate() {
        let key = (p.topic_id, p.partition);
        groups
            .entry(key)
            .or_insert_with(|| {
                order.push(key);
                Vec::new()
            })
            .push(i);
    }
    let total = pending.iter().map(|p| p.records.len()).sum();
    let mut object = BytesMut::with_capacity(total);
    let mut batches = Vec::new();
    let mut owners = Vec::new();
    for key in order {
        for &i in &groups[&key] {
            let p = &pending[i];
            let base = object.len();
            object.extend_from_slice(&p.records);
            for b in &p.batches {
                batches.push(WalBatch {
                    topic_id: p.topic_id,
                    partition: p.partition,
                    position: (base + b.offset) as u32,
                    size: b.size as u32,
                    record_count: b.record_count,
                    max_timestamp_ms: b.max_timestamp_ms,
                    producer_id: b.producer_id,
                    producer_epoch: b.producer_epoch,
                    base_sequence: b.base_sequence,
                    kind: b.kind,
                });
                owners.push(i);
            }
        }
    }
    (object.freeze(), batches, owners)
}

/// Commit a stored object; answer every entry in it.
async fn commit(
    object_id: Uuid,
    pending: Vec<Pending>,
    batches: &[WalBatch],
    owners: Vec<usize>,
    controller: &dyn ControllerApi,
    metrics: &DisklessMetrics,
) {
    let committing = Instant::now();
    let results = controller.diskless_commit(object_id, batches).await;
    let ms = committing.elapsed().as_secs_f64() * 1000.0;
    metrics.commit_ms.record(ms);
    metrics.recent_commit_ms.record(ms);
    let results = match results {
        Ok(r) if r.len() == batches.len() => r,
        Ok(r) => {
            metrics.commit_errors.increment(1);
            warn!(
                asked = batches.len(),
                answered = r.len(),
                "the sequencer answered another number of batches"
            );
            let message = "the sequencer's answer did not match the object".to_string();
            for p in pending {
                let _ = p
                    .reply
                    .send(Err(invalid(ErrorCode::UnknownServerError, message.clone())));
            }
            return;
        }
        Err(e) => {
            // Stored but perhaps not committed: the producers retry (an idempotent one's
            // retry is found a duplicate if the commit did go through).
            metrics.commit_errors.increment(1);
            warn!(error = %e, "cannot commit a WAL object");
            let message = format!("the sequencer did not answer: {e}");
            for p in pending {
                let _ = p
                    .reply
                    .send(Err(invalid(ErrorCode::RequestTimedOut, message.clone())));
            }
            return;
        }
    };
    metrics.commits.increment(1);
    let mut per_entry: Vec<Result<Vec<Sequenced>, AppendError>> =
        (0..pending.len()).map(|_| Ok(Vec::new())).collect();
    for (owner, r) in owners.into_iter().zip(results) {
        let slot = &mut per_entry[owner];
        match (slot.as_mut(), r) {
            (Ok(v), Ok(s)) => v.push(s),
            (Ok(_), Err(e)) => *slot = Err(invalid(e.code, e.message)),
            (Err(_), _) => {}
        }
    }
    for (p, r) in pending.into_iter().zip(per_entry) {
        let _ = p.reply.send(r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_protocol::batch::BatchBuilder;
    use sluice_protocol::compression::Compression;

    fn records(n: usize, pid: i64, seq: i32) -> Bytes {
        let mut b = BatchBuilder::new(Compression::None).with_producer(pid, 0, seq);
        for i in 0..n {
            b.append(
                1_000 + i as i64,
                None,
                Some(format!("v{i}").as_bytes()),
                &[],
            );
        }
        Bytes::from(b.build(0).unwrap())
    }

    #[test]
    fn an_object_keeps_each_partitions_batches_together_in_order() {
        let t = Uuid::from_bytes([1; 16]);
        let mk = |p: i32, seq: i32| Pending::new(t, p, records(2, 9, seq)).unwrap().0;
        let pending = vec![mk(0, 0), mk(1, 0), mk(0, 2)];
        let (object, batches, owners) = build(&pending);
        assert_eq!(owners, vec![0, 2, 1]);
        assert_eq!(
            batches
                .iter()
                .map(|b| (b.partition, b.base_sequence))
                .collect::<Vec<_>>(),
            vec![(0, 0), (0, 2), (1, 0)]
        );
        let mut at = 0;
        for b in &batches {
            assert_eq!(b.position as usize, at);
            assert_eq!(b.record_count, 2);
            verify_crc(&object[at..at + b.size as usize]).unwrap();
            at += b.size as usize;
        }
        assert_eq!(at, object.len());
    }

    #[test]
    fn corrupt_records_are_refused_before_they_are_queued() {
        let t = Uuid::from_bytes([1; 16]);
        let mut bad = records(1, -1, -1).to_vec();
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        let e = Pending::new(t, 0, Bytes::from(bad)).err().unwrap();
        assert_eq!(e.code(), ErrorCode::CorruptMessage);
        let e = Pending::new(t, 0, Bytes::new()).err().unwrap();
        assert_eq!(e.code(), ErrorCode::InvalidRecord);
        let mut b = BatchBuilder::new(Compression::None).with_transactional(true);
        b.append(1, None, Some(b"x"), &[]);
        let e = Pending::new(t, 0, Bytes::from(b.build(0).unwrap()))
            .err()
            .unwrap();
        assert_eq!(e.code(), ErrorCode::InvalidRecord);
    }
}
