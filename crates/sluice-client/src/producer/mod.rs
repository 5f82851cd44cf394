//! [`Producer`]: the pipeline of the seed notes — serializer (the caller's, to `Bytes`) →
//! interceptors → partitioner → [`accumulator`] (per-partition batches bounded by
//! `batch.size`, `linger.ms` and `buffer.memory`) → [`sender`] task (batches grouped per
//! leader into one Produce request, at most `max.in.flight.requests.per.connection` in flight
//! per broker, retries with `retry.backoff.ms` until `delivery.timeout.ms`).
//!
//! Ordering: a partition has at most one batch in flight and a failed batch is retried ahead
//! of later ones, so records of a partition are stored in send order even with retries.

pub mod accumulator;
pub mod partitioner;
pub mod sender;
pub mod transaction;

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinHandle;

use crate::cluster::ClusterCore;
use crate::config::ClientConfig;
use crate::error::{Error, Result};
use accumulator::Accumulator;
pub use partitioner::Partitioner;
pub use transaction::GroupMetadata;

/// A record to send. Keys and values are bytes: serialize before building the record.
#[derive(Clone, Debug, Default)]
pub struct ProducerRecord {
    /// Shared, so records for one topic need not copy its name: build many records from
    /// one `Arc<str>`.
    pub topic: Arc<str>,
    pub partition: Option<i32>,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
    /// Milliseconds since the epoch; None means "now".
    pub timestamp: Option<i64>,
}

impl ProducerRecord {
    pub fn new(topic: impl Into<Arc<str>>) -> Self {
        Self {
            topic: topic.into(),
            ..Self::default()
        }
    }

    pub fn key(mut self, key: impl Into<Bytes>) -> Self {
        self.key = Some(key.into());
        self
    }

    pub fn value(mut self, value: impl Into<Bytes>) -> Self {
        self.value = Some(value.into());
        self
    }

    pub fn partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    pub fn timestamp(mut self, ms: i64) -> Self {
        self.timestamp = Some(ms);
        self
    }

    pub fn header(mut self, key: impl Into<String>, value: Option<Bytes>) -> Self {
        self.headers.push((key.into(), value));
        self
    }

    /// Bytes the record adds to a batch (an upper bound).
    pub(crate) fn size_estimate(&self) -> usize {
        let h: usize = self
            .headers
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, Bytes::len) + 10)
            .sum();
        self.key.as_ref().map_or(0, Bytes::len) + self.value.as_ref().map_or(0, Bytes::len) + h + 24
    }
}

/// Where a record landed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordMetadata {
    pub topic: String,
    pub partition: i32,
    /// -1 with acks=0 (the broker does not say).
    pub offset: i64,
    /// The record's timestamp, or the broker's append time for LogAppendTime topics.
    pub timestamp: i64,
}

/// Called on every record sent and every acknowledgement (the seed's interceptor).
pub trait Interceptor: Send + Sync {
    fn on_send(&self, _record: &mut ProducerRecord) {}
    fn on_acknowledgement(&self, _result: &Result<RecordMetadata>) {}
}

/// Converts a value to bytes before it enters the pipeline.
pub trait Serializer<T: ?Sized> {
    fn serialize(&self, topic: &str, value: &T) -> Option<Bytes>;
}

/// Strings as UTF-8, bytes as they are.
pub struct BytesSerializer;

impl Serializer<str> for BytesSerializer {
    fn serialize(&self, _: &str, value: &str) -> Option<Bytes> {
        Some(Bytes::copy_from_slice(value.as_bytes()))
    }
}

impl Serializer<[u8]> for BytesSerializer {
    fn serialize(&self, _: &str, value: &[u8]) -> Option<Bytes> {
        Some(Bytes::copy_from_slice(value))
    }
}

/// The shared result of one batch: every record's future waits on it.
pub(crate) struct BatchOutcome {
    topic: Arc<str>,
    partition: i32,
    /// (base offset, log append time or -1)
    result: OnceLock<Result<(i64, i64)>>,
    done: Notify,
}

impl BatchOutcome {
    pub(crate) fn new(topic: Arc<str>, partition: i32) -> Self {
        Self {
            topic,
            partition,
            result: OnceLock::new(),
            done: Notify::new(),
        }
    }

    pub(crate) fn complete(&self, result: Result<(i64, i64)>) {
        if self.result.set(result).is_ok() {
            self.done.notify_waiters();
        }
    }

    async fn wait(&self) -> Result<(i64, i64)> {
        loop {
            let notified = self.done.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(r) = self.result.get() {
                return r.clone();
            }
            notified.await;
        }
    }
}

/// Resolves when the broker acknowledged the record (`.await` it), or failed for good.
pub struct DeliveryFuture {
    outcome: Arc<BatchOutcome>,
    index: i64,
    timestamp: i64,
}

impl DeliveryFuture {
    /// Wait for the acknowledgement (what `.await` does, without boxing).
    pub async fn wait(self) -> Result<RecordMetadata> {
        let (base, append_time) = self.outcome.wait().await?;
        Ok(RecordMetadata {
            topic: self.outcome.topic.to_string(),
            partition: self.outcome.partition,
            offset: if base < 0 { -1 } else { base + self.index },
            timestamp: if append_time >= 0 {
                append_time
            } else {
                self.timestamp
            },
        })
    }
}

impl IntoFuture for DeliveryFuture {
    type Output = Result<RecordMetadata>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<RecordMetadata>> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.wait())
    }
}

pub(crate) struct Shared {
    pub core: Arc<ClusterCore>,
    pub config: ClientConfig,
    pub acc: Mutex<Accumulator>,
    /// Wakes the sender: a batch became ready, a flush or close was asked.
    pub wake: Notify,
    /// Signalled whenever batches complete (flush waits on it).
    pub progress: Notify,
    /// Bytes of `buffer.memory` still free.
    pub memory: Semaphore,
    pub interceptors: Vec<Arc<dyn Interceptor>>,
    pub partitioner: Option<Arc<dyn Partitioner>>,
    pub closing: AtomicBool,
    pub flushing: AtomicUsize,
    /// Set when the producer is idempotent (`enable.idempotence`, on by default with
    /// `acks=all`).
    pub idempotence: Option<tokio::sync::Mutex<Idempotence>>,
    /// A transactional producer's first failed batch in the open transaction.
    pub txn_failure: Mutex<Option<Error>>,
}

/// An idempotent producer's identity and the next sequence of each partition. With one
/// batch in flight per partition, a batch keeps its sequence across retries and the broker
/// writes it once.
#[derive(Default)]
pub(crate) struct Idempotence {
    /// (producer id, epoch), fetched with InitProducerId before the first batch.
    pub producer: Option<(i64, i16)>,
    pub next_sequence: std::collections::HashMap<sluice_protocol::types::TopicPartition, i32>,
    /// Set by `init_transactions` on a transactional producer.
    pub txn: Option<transaction::Txn>,
}

impl Shared {
    pub fn lock(&self) -> std::sync::MutexGuard<'_, Accumulator> {
        self.acc
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

pub struct Producer {
    shared: Arc<Shared>,
    sender: Mutex<Option<JoinHandle<()>>>,
}

impl Producer {
    pub fn new(config: ClientConfig) -> Result<Producer> {
        Self::with_hooks(config, Vec::new(), None)
    }

    /// A producer with interceptors and/or a custom partitioner.
    pub fn with_hooks(
        config: ClientConfig,
        interceptors: Vec<Arc<dyn Interceptor>>,
        partitioner: Option<Arc<dyn Partitioner>>,
    ) -> Result<Producer> {
        if config.enable_idempotence == Some(true) && config.acks != -1 {
            return Err(Error::Config {
                key: "enable.idempotence".into(),
                message: "an idempotent producer needs acks=all".into(),
            });
        }
        if config.transactional_id.is_some()
            && (config.enable_idempotence == Some(false) || config.acks != -1)
        {
            return Err(Error::Config {
                key: "transactional.id".into(),
                message: "a transactional producer needs enable.idempotence=true and acks=all"
                    .into(),
            });
        }
        let idempotent = config.enable_idempotence.unwrap_or(true) && config.acks == -1;
        let core = ClusterCore::new(config.clone())?;
        let shared = Arc::new(Shared {
            idempotence: idempotent.then(|| tokio::sync::Mutex::new(Idempotence::default())),
            core,
            memory: Semaphore::new(config.buffer_memory.min(Semaphore::MAX_PERMITS)),
            acc: Mutex::new(Accumulator::new(config.partitioner)),
            config,
            wake: Notify::new(),
            progress: Notify::new(),
            interceptors,
            partitioner,
            closing: AtomicBool::new(false),
            flushing: AtomicUsize::new(0),
            txn_failure: Mutex::new(None),
        });
        let sender = tokio::spawn(sender::run(Arc::clone(&shared)));
        Ok(Producer {
            shared,
            sender: Mutex::new(Some(sender)),
        })
    }

    /// Hand a record to the producer. Returns once it is buffered (waiting up to
    /// `max.block.ms` for `buffer.memory`); `.await` the returned future for the
    /// acknowledgement: `producer.send(r).await?.await?`.
    pub async fn send(&self, mut record: ProducerRecord) -> Result<DeliveryFuture> {
        let shared = &self.shared;
        if shared.closing.load(Ordering::Relaxed) {
            return Err(Error::Closed);
        }
        for i in &shared.interceptors {
            i.on_send(&mut record);
        }
        let size = record.size_estimate();
        if size > shared.config.max_request_size {
            return Err(Error::Kafka {
                code: sluice_protocol::ErrorCode::MessageTooLarge,
                message: Some(format!(
                    "the record is {size} bytes, larger than max.request.size={}",
                    shared.config.max_request_size
                )),
            });
        }
        let partitions = match shared.core.partition_count(&record.topic) {
            Some(n) => n,
            None => shared
                .core
                .topic(&record.topic, true, shared.config.max_block)
                .await?
                .partitions
                .len() as i32,
        };
        let partition = match record.partition {
            Some(p) if p < 0 || p >= partitions => {
                return Err(Error::Kafka {
                    code: sluice_protocol::ErrorCode::UnknownTopicOrPartition,
                    message: Some(format!(
                        "partition {p} of {} (which has {partitions})",
                        record.topic
                    )),
                })
            }
            Some(p) => Some(p),
            None => shared
                .partitioner
                .as_ref()
                .map(|custom| custom.partition(&record.topic, record.key.as_deref(), partitions)),
        };
        let permits = u32::try_from(size).unwrap_or(u32::MAX);
        match shared.memory.try_acquire_many(permits) {
            Ok(p) => p.forget(),
            Err(tokio::sync::TryAcquireError::Closed) => return Err(Error::Closed),
            Err(tokio::sync::TryAcquireError::NoPermits) => {
                // The buffer is full: block up to max.block.ms for the sender to free it.
                match tokio::time::timeout(
                    shared.config.max_block,
                    shared.memory.acquire_many(permits),
                )
                .await
                {
                    Ok(Ok(p)) => p.forget(),
                    Ok(Err(_)) => return Err(Error::Closed),
                    Err(_) => {
                        return Err(Error::BufferExhausted(
                            shared.config.max_block.as_millis() as u64
                        ))
                    }
                }
            }
        }
        let timestamp = record.timestamp.unwrap_or_else(now_ms);
        let (future, ready) = shared.lock().append(
            record,
            partition,
            partitions,
            timestamp,
            size,
            &shared.config,
        );
        if ready {
            shared.wake.notify_one();
        }
        Ok(future)
    }

    /// Send and wait for the acknowledgement.
    pub async fn send_and_wait(&self, record: ProducerRecord) -> Result<RecordMetadata> {
        self.send(record).await?.await
    }

    /// Send everything buffered now and wait until it is acknowledged or failed.
    pub async fn flush(&self) {
        let shared = &self.shared;
        shared.flushing.fetch_add(1, Ordering::SeqCst);
        shared.wake.notify_one();
        loop {
            let progress = shared.progress.notified();
            tokio::pin!(progress);
            progress.as_mut().enable();
            if shared.lock().is_idle() {
                break;
            }
            progress.await;
        }
        shared.flushing.fetch_sub(1, Ordering::SeqCst);
    }

    /// Flush, then stop the sender. Records still unsent after `timeout` fail with
    /// [`Error::Closed`].
    pub async fn close(&self, timeout: std::time::Duration) {
        let _ = tokio::time::timeout(timeout, self.flush()).await;
        self.shared.closing.store(true, Ordering::SeqCst);
        self.shared.wake.notify_one();
        let handle = self
            .sender
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(h) = handle {
            if tokio::time::timeout(timeout, &mut Box::pin(h))
                .await
                .is_err()
            {
                self.shared.lock().fail_all(Error::Closed);
            }
        }
        self.shared.lock().fail_all(Error::Closed);
        self.shared.memory.close();
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        self.shared.closing.store(true, Ordering::SeqCst);
        if let Some(h) = self
            .sender
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
        {
            h.abort();
        }
        self.shared.lock().fail_all(Error::Closed);
    }
}

pub(crate) fn now_ms() -> i64 {
    sluice_rt::wall_ms()
}
