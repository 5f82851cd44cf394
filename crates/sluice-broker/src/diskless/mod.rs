//! Diskless topics (`diskless.enable=true`): the object store is the log. Any broker takes
//! produce and fetch for any partition of such a topic; no broker holds its data on disk.
//!
//! # Layout
//! - [`Diskless`] (here): one broker's handle: the store (the tiered-storage one, configured
//!   by the same `remote.log.storage.*` keys; a local directory by default), the WAL writer's
//!   queue, the read caches, the metrics.
//! - [`writer`]: the shared WAL writer: gathers the batches of every diskless partition
//!   produced to this broker for `diskless.append.linger.ms` (or until
//!   `diskless.append.buffer.max.bytes`), writes them as one object, asks the sequencer (the
//!   active controller) for their offsets, then answers the producers. Nothing is
//!   acknowledged before both the object and its commit are durable.
//! - [`read`]: fetches: which object and range holds an offset comes from the metadata image;
//!   objects are read once per broker (single-flight, cached) and each partition's batches
//!   are cut out with their offsets set, as a local file the connection sends with
//!   `sendfile` like any log range.
//!
//! Transactions: transactional batches open a producer's transaction in the sequencer's
//! state, markers (WriteTxnMarkers) are control batches written the same way, and the image
//! keeps each partition's open transactions (its last stable offset) and aborted ones.
//!
//! Zones: a client in a zone is served by brokers of that zone, so no record crosses one.
//! Metadata shows a broker of the client's rack as each partition's leader when the client
//! names its rack in `client.id` (`diskless_az=<rack>`, the hint Aiven's Inkless reads, as
//! Metadata requests carry no rack); a consumer's Fetch (v11+, `client.rack`) sent to a broker
//! of another rack is answered with a preferred read replica in its rack (KIP-392), which
//! librdkafka and the Java client follow.
//!
//! - [`cleaner`]: retention and DeleteRecords (the controller moves a log's start) and the
//!   deletion of WAL and segment objects nothing refers to.
//! - [`compact`]: WAL compaction: each partition's batches copied out of the shared WAL
//!   objects into segment objects in Kafka's format, which reads then get through the
//!   tiered-storage reader.

pub mod cleaner;
pub mod compact;
pub mod read;
pub mod writer;

use std::path::Path;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use sluice_metadata::config::TierSettings;
use sluice_metadata::diskless::Sequenced;
use sluice_metadata::{MetadataImage, Uuid};
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;
use sluice_remote::cache::{CacheDir, CachedRange, Lru};
use sluice_remote::reader::{ReaderConfig, RemoteReader};
use sluice_remote::{RemoteError, RemoteStore};
use sluice_storage::Marker;
use tokio::sync::{mpsc, oneshot};

use crate::controller_api::ControllerApi;
use crate::metadata_cache::MetadataCache;
use crate::replica::AppendError;

/// Produce requests' partitions waiting for the writer, at most.
const QUEUE_DEPTH: usize = 4096;
/// Where WAL objects are, under the store's prefix.
const WAL_PREFIX: &str = "diskless/wal";

/// The counters that make up the cloud bill (`/metrics`).
pub struct DisklessMetrics {
    pub puts: metrics::Counter,
    pub put_bytes: metrics::Counter,
    pub put_errors: metrics::Counter,
    pub commits: metrics::Counter,
    pub commit_errors: metrics::Counter,
    pub gets: metrics::Counter,
    pub get_bytes: metrics::Counter,
    pub get_errors: metrics::Counter,
    /// Object reads asked of the cache (each GET is one that missed).
    pub object_reads: metrics::Counter,
    pub upload_ms: metrics::Histogram,
    pub commit_ms: metrics::Histogram,
    /// The last uploads' and commits' times, for `sluice topics --describe` (through the
    /// admin API's `/api/diskless`).
    pub recent_upload_ms: Recent,
    pub recent_commit_ms: Recent,
}

/// The last [`Recent::KEPT`] samples of a time, for percentiles an operator asks for.
#[derive(Default)]
pub struct Recent(Mutex<std::collections::VecDeque<f64>>);

/// Percentiles of [`Recent`] samples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RecentSummary {
    pub count: usize,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl Recent {
    const KEPT: usize = 1024;

    pub fn record(&self, ms: f64) {
        let mut q = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if q.len() == Self::KEPT {
            q.pop_front();
        }
        q.push_back(ms);
    }

    /// None before the first sample.
    pub fn summary(&self) -> Option<RecentSummary> {
        let mut v: Vec<f64> = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .copied()
            .collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        Some(RecentSummary {
            count: v.len(),
            p50: at(0.5),
            p99: at(0.99),
            max: v[v.len() - 1],
        })
    }
}

impl DisklessMetrics {
    fn new() -> Self {
        Self {
            puts: metrics::counter!("sluice_diskless_put_requests_total"),
            put_bytes: metrics::counter!("sluice_diskless_put_bytes_total"),
            put_errors: metrics::counter!("sluice_diskless_put_errors_total"),
            commits: metrics::counter!("sluice_diskless_commits_total"),
            commit_errors: metrics::counter!("sluice_diskless_commit_errors_total"),
            gets: metrics::counter!("sluice_diskless_get_requests_total"),
            get_bytes: metrics::counter!("sluice_diskless_get_bytes_total"),
            get_errors: metrics::counter!("sluice_diskless_get_errors_total"),
            object_reads: metrics::counter!("sluice_diskless_object_reads_total"),
            upload_ms: metrics::histogram!("sluice_diskless_upload_ms"),
            commit_ms: metrics::histogram!("sluice_diskless_commit_ms"),
            recent_upload_ms: Recent::default(),
            recent_commit_ms: Recent::default(),
        }
    }
}

/// The object store, opened when first needed: a node that never serves a diskless topic
/// never creates a local store directory or reaches S3 for it.
pub struct LazyStore {
    settings: TierSettings,
    first_log_dir: std::path::PathBuf,
    store: Mutex<Option<RemoteStore>>,
}

impl LazyStore {
    pub fn new(settings: &TierSettings, first_log_dir: &Path) -> Self {
        Self {
            settings: settings.clone(),
            first_log_dir: first_log_dir.to_path_buf(),
            store: Mutex::new(None),
        }
    }

    /// Whether the store was opened.
    pub fn is_open(&self) -> bool {
        self.store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some()
    }

    /// The store; an error (a bad URI, a directory that cannot be made) is returned each time
    /// until it opens.
    pub fn get(&self) -> Result<RemoteStore, RemoteError> {
        let mut s = self
            .store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(store) = &*s {
            return Ok(store.clone());
        }
        let store = crate::replica::tier::open_store(&self.settings, &self.first_log_dir)?;
        *s = Some(store.clone());
        Ok(store)
    }
}

/// A partition's successful diskless append.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DisklessAppended {
    pub base_offset: i64,
    pub log_start_offset: i64,
}

/// The WAL writer: not started until the first append, running, or stopped.
enum WriterSlot {
    Idle(writer::WriterConfig, Arc<dyn ControllerApi>),
    Running(mpsc::Sender<writer::Pending>, tokio::task::JoinHandle<()>),
    Stopped,
}

/// One broker's handle on diskless topics. Owned by the replica manager. The writer task
/// starts with the first append (a node that serves no diskless topic runs none) and ends
/// when [`Diskless::shutdown`] closes its queue.
pub struct Diskless {
    store: Arc<LazyStore>,
    metadata: Arc<MetadataCache>,
    controller: Arc<dyn ControllerApi>,
    /// `diskless.wal.delete.delay.ms`
    delete_delay_ms: i64,
    writer: Mutex<WriterSlot>,
    /// Whole WAL objects, by key.
    objects: Lru<Bytes>,
    /// A partition's batches cut out of an object, offsets set, as local files.
    ranges: Lru<CachedRange>,
    cache_dir: CacheDir,
    /// The reader of segment objects (made when first needed, as the store is).
    segments: Mutex<Option<Arc<RemoteReader>>>,
    segment_reader_config: ReaderConfig,
    segment_cache_dir: std::path::PathBuf,
    /// The segment reader's GETs already added to `metrics.gets`.
    segment_gets_counted: std::sync::atomic::AtomicU64,
    pub metrics: Arc<DisklessMetrics>,
}

/// Whether `topic` is diskless in `image`.
pub fn is_diskless(image: &MetadataImage, topic: &str) -> bool {
    !image.diskless_topics.is_empty() && image.diskless_topics.contains(topic)
}

/// The live brokers serving a diskless topic to a client in `rack`: those in that rack when
/// any is live, else every live broker. By id.
pub fn serving_brokers(image: &MetadataImage, rack: Option<&str>) -> Vec<i32> {
    let live = || image.brokers.keys().copied().filter(|b| image.is_live(*b));
    let in_rack: Vec<i32> = match rack {
        Some(r) => live()
            .filter(|b| image.brokers[b].rack.as_deref() == Some(r))
            .collect(),
        None => Vec::new(),
    };
    if in_rack.is_empty() {
        live().collect()
    } else {
        in_rack
    }
}

/// The broker of `brokers` that serves partition `index` of topic `topic_id`: spread by
/// index, starting at a place the topic id picks, so a client's partitions spread over the
/// brokers as a classic topic's leaders do.
pub fn serving_broker(brokers: &[i32], topic_id: &Uuid, index: i32) -> Option<i32> {
    if brokers.is_empty() {
        return None;
    }
    let at = (index as usize).wrapping_add(topic_id.as_u128() as usize) % brokers.len();
    Some(brokers[at])
}

/// The rack a client names in its `client.id` (`...diskless_az=<rack>...`, up to a `,` or
/// the end).
pub fn client_id_rack(client_id: Option<&str>) -> Option<&str> {
    let (_, rest) = client_id?.split_once("diskless_az=")?;
    let rack = rest.split(',').next().unwrap_or_default().trim();
    (!rack.is_empty()).then_some(rack)
}

/// The key of WAL object `id`.
pub fn wal_key(id: &Uuid) -> String {
    format!("{WAL_PREFIX}/{id}")
}

impl Diskless {
    /// Empty the read cache directory; the store is opened and the WAL writer started when
    /// first needed.
    pub fn start(
        settings: &TierSettings,
        first_log_dir: &Path,
        controller: Arc<dyn ControllerApi>,
        metadata: Arc<MetadataCache>,
    ) -> Result<Arc<Self>, RemoteError> {
        let store = Arc::new(LazyStore::new(settings, first_log_dir));
        let cache_root = first_log_dir.join(sluice_storage::log_manager::DISKLESS_CACHE_DIR);
        // Emptied whole, then one folder per cache.
        CacheDir::create(&cache_root)?;
        let cache_dir = CacheDir::create(&cache_root.join("wal"))?;
        let metrics = Arc::new(DisklessMetrics::new());
        let config = writer::WriterConfig {
            linger: std::time::Duration::from_millis(settings.diskless_linger_ms),
            max_bytes: settings.diskless_buffer_bytes,
        };
        let cache = settings.cache_bytes.max(64 << 20);
        Ok(Arc::new(Self {
            store,
            metadata,
            controller: Arc::clone(&controller),
            delete_delay_ms: settings.diskless_delete_delay_ms,
            writer: Mutex::new(WriterSlot::Idle(config, controller)),
            objects: Lru::new(cache / 2),
            ranges: Lru::new(cache / 2),
            cache_dir,
            segments: Mutex::new(None),
            segment_reader_config: ReaderConfig {
                chunk_bytes: settings.chunk_bytes,
                cache_bytes: cache / 2,
                index_cache_bytes: settings.index_cache_bytes,
            },
            segment_cache_dir: cache_root.join("segments"),
            segment_gets_counted: std::sync::atomic::AtomicU64::new(0),
            metrics,
        }))
    }

    /// Add the GETs the segment reader made since the last call to the store's counters
    /// (each counted once, whoever calls).
    pub fn count_segment_gets(&self, reader: &RemoteReader) {
        let now = reader.fetches();
        let before = self
            .segment_gets_counted
            .fetch_max(now, std::sync::atomic::Ordering::Relaxed);
        self.metrics.gets.increment(now.saturating_sub(before));
    }

    /// The reader of segment objects; an error while the store cannot be opened.
    pub fn segment_reader(&self) -> Result<Arc<RemoteReader>, RemoteError> {
        let mut r = self
            .segments
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(reader) = &*r {
            return Ok(Arc::clone(reader));
        }
        let reader = Arc::new(RemoteReader::new(
            self.store()?,
            &self.segment_cache_dir,
            self.segment_reader_config,
        )?);
        *r = Some(Arc::clone(&reader));
        Ok(reader)
    }

    /// The writer's queue, the writer started if it was not; None once shut down.
    fn queue(&self) -> Option<mpsc::Sender<writer::Pending>> {
        let mut slot = self
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if matches!(&*slot, WriterSlot::Idle(..)) {
            if let WriterSlot::Idle(config, controller) =
                std::mem::replace(&mut *slot, WriterSlot::Stopped)
            {
                let (tx, rx) = mpsc::channel(QUEUE_DEPTH);
                let task = tokio::spawn(writer::run(
                    rx,
                    config,
                    Arc::clone(&self.store),
                    controller,
                    Arc::clone(&self.metrics),
                ));
                *slot = WriterSlot::Running(tx, task);
            }
        }
        match &*slot {
            WriterSlot::Running(tx, _) => Some(tx.clone()),
            _ => None,
        }
    }

    pub fn store(&self) -> Result<RemoteStore, RemoteError> {
        self.store.get()
    }

    /// Append each entry's batches (a partition of a produce request): answers in entry order,
    /// once the WAL object holding them is stored and its commit is in the metadata log.
    pub async fn append(
        &self,
        entries: Vec<(TopicPartition, Bytes)>,
    ) -> Vec<Result<DisklessAppended, AppendError>> {
        self.enqueue(entries, |id, partition, records| {
            writer::Pending::new(id, partition, records)
        })
        .await
    }

    /// Write a transaction marker to each partition (WriteTxnMarkers): answers in order.
    pub async fn append_markers(
        &self,
        targets: Vec<(TopicPartition, Marker)>,
    ) -> Vec<Result<DisklessAppended, AppendError>> {
        let now = crate::now_ms();
        let mut markers = std::collections::VecDeque::new();
        let entries = targets
            .into_iter()
            .map(|(tp, m)| {
                markers.push_back(m);
                (tp, Bytes::new())
            })
            .collect();
        self.enqueue(entries, move |id, partition, _| {
            let m = markers.pop_front().expect("one marker per entry");
            writer::Pending::marker(id, partition, &m, now)
        })
        .await
    }

    async fn enqueue(
        &self,
        entries: Vec<(TopicPartition, Bytes)>,
        mut pending: impl FnMut(
            Uuid,
            i32,
            Bytes,
        ) -> Result<(writer::Pending, writer::Answer), AppendError>,
    ) -> Vec<Result<DisklessAppended, AppendError>> {
        let image = self.metadata.current();
        let queue = self.queue();
        let mut waits = Vec::with_capacity(entries.len());
        for (tp, records) in entries {
            let topic_id = image
                .topic(&tp.topic)
                .filter(|t| t.partitions.contains_key(&tp.partition.0))
                .map(|t| t.id);
            let made = pending(topic_id.unwrap_or_default(), tp.partition.0, records);
            let pending = match topic_id {
                None => Err(AppendError::Code(
                    ErrorCode::UnknownTopicOrPartition,
                    String::new(),
                )),
                Some(_) => made,
            };
            let wait = match (pending, &queue) {
                (Err(e), _) => Err(e),
                (Ok(_), None) => Err(AppendError::Code(
                    ErrorCode::NotLeaderOrFollower,
                    "this broker is shutting down".into(),
                )),
                (Ok((p, rx)), Some(q)) => match q.send(p).await {
                    Ok(()) => Ok((tp, rx)),
                    Err(_) => Err(AppendError::Code(
                        ErrorCode::NotLeaderOrFollower,
                        "this broker is shutting down".into(),
                    )),
                },
            };
            waits.push(wait);
        }
        let mut out = Vec::with_capacity(waits.len());
        for w in waits {
            out.push(match w {
                Err(e) => Err(e),
                Ok((tp, rx)) => self.answer(&tp, rx).await,
            });
        }
        out
    }

    async fn answer(
        &self,
        tp: &TopicPartition,
        rx: oneshot::Receiver<Result<Vec<Sequenced>, AppendError>>,
    ) -> Result<DisklessAppended, AppendError> {
        let sequenced = rx.await.unwrap_or_else(|_| {
            Err(AppendError::Code(
                ErrorCode::RequestTimedOut,
                "the WAL writer stopped".into(),
            ))
        })?;
        let offset = |s: &Sequenced| match s {
            Sequenced::New(o) | Sequenced::Duplicate(o) => *o,
        };
        let base_offset = sequenced.first().map_or(-1, offset);
        let image = self.metadata.current();
        let log_start_offset = image
            .topic(&tp.topic)
            .and_then(|t| image.diskless_log(&t.id, tp.partition.0))
            .map_or(0, |l| l.start_offset);
        Ok(DisklessAppended {
            base_offset,
            log_start_offset,
        })
    }

    /// Stop taking appends; what is queued is written and answered first.
    pub async fn shutdown(&self) {
        let slot = std::mem::replace(
            &mut *self
                .writer
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            WriterSlot::Stopped,
        );
        if let WriterSlot::Running(tx, task) = slot {
            drop(tx);
            let _ = task.await;
        }
    }
}
