//! [`TxnCoordinator`]: one task owning the transactions whose `__transaction_state`
//! partition this broker leads (partition `abs(hashCode(transactional.id)) % n`).
//!
//! - Leadership: the task follows the metadata image; when this broker becomes leader of a
//!   `__transaction_state` partition (or of a new leader epoch of it) it loads that
//!   partition's transactions from the log, and when it stops leading it drops them. The
//!   leader epoch is the coordinator epoch written into every marker, so markers of a
//!   deposed coordinator are refused by the partitions.
//! - Every change of a transaction is appended to its partition and answered only once the
//!   partition's in-sync replicas have it (a new coordinator must find what was answered).
//!   While a write is in flight the transaction answers CONCURRENT_TRANSACTIONS.
//! - A PrepareCommit/PrepareAbort that is durable has its markers written to every partition
//!   of the transaction by a [`markers`](super::markers) task (retried until each partition
//!   takes it); then the transaction is complete. A new coordinator resumes the markers of
//!   every prepared transaction it loads.
//! - Open transactions older than their `transaction.timeout.ms` are aborted (the producer's
//!   epoch is bumped so the hung producer is fenced).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sluice_protocol::batch::BatchBuilder;
use sluice_protocol::compression::Compression;
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::markers::{MarkerJob, MarkerWriter};
use super::records;
use super::state::{TxnMetadata, TxnState};
use crate::broker_conn::InterBroker;
use crate::group::coordinator::partition_for;
use crate::metadata_cache::MetadataCache;
use crate::replica::manager::ReplicaManager;
use crate::replica::{Acks, AppendOrigin, ReplicationOutcome};

pub const TXN_TOPIC: &str = "__transaction_state";

/// How long a transaction-log write may wait for its in-sync replicas.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest pause before writing a failed transaction completion again.
const COMPLETION_RETRY_BACKOFF: Duration = Duration::from_secs(1);

/// Tell the coordinator task that the markers of `id`'s transaction are written (its
/// completion is to be written next).
async fn markers_done(tx: &mpsc::Sender<Command>, id: String, producer_id: i64, epoch: i16) {
    let _ = tx
        .send(Command::MarkersDone {
            id,
            producer_id,
            epoch,
        })
        .await;
}

/// Coordinator settings (broker configs `transaction.*`).
#[derive(Clone, Debug)]
pub struct TxnConfig {
    pub node_id: i32,
    pub partitions: i32,
    pub max_timeout_ms: i64,
    pub abort_check_ms: u64,
    /// `transactional.id.expiration.ms`: an id idle this long is forgotten.
    pub id_expiration_ms: i64,
    /// Where and how other brokers take WriteTxnMarkers (`inter.broker.listener.name`).
    pub inter: InterBroker,
}

impl TxnConfig {
    pub fn from_broker(
        node_id: i32,
        c: &sluice_metadata::BrokerConfig,
        inter: InterBroker,
    ) -> Self {
        let t = &c.settings().txn;
        Self {
            node_id,
            partitions: t.partitions,
            max_timeout_ms: t.max_timeout_ms.max(1),
            abort_check_ms: t.abort_check_interval_ms.max(1) as u64,
            id_expiration_ms: t.id_expiration_ms.max(1),
            inter,
        }
    }
}

type Answer<T> = oneshot::Sender<Result<T, ErrorCode>>;

/// What a transaction looks like from outside (DescribeTransactions, ListTransactions).
pub type TxnView = TxnMetadata;

enum Command {
    InitProducerId {
        id: String,
        timeout_ms: i64,
        expected: Option<(i64, i16)>,
        fresh_producer_id: i64,
        reply: Answer<(i64, i16)>,
    },
    AddPartitions {
        id: String,
        producer_id: i64,
        epoch: i16,
        partitions: Vec<(String, i32)>,
        verify_only: bool,
        reply: Answer<()>,
    },
    EndTxn {
        id: String,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        /// A transactions-v2 client (EndTxn v5+), and the new producer id it moves to if its
        /// epoch runs out.
        v2: Option<Option<i64>>,
        reply: Answer<(i64, i16)>,
    },
    Describe(
        Vec<String>,
        oneshot::Sender<Vec<Result<TxnView, ErrorCode>>>,
    ),
    List(oneshot::Sender<Vec<TxnView>>),
    Loaded {
        partition: i32,
        epoch: i32,
        txns: Vec<TxnMetadata>,
    },
    Persisted {
        id: String,
        result: Result<(), ErrorCode>,
        reply: Reply,
    },
    MarkersDone {
        id: String,
        producer_id: i64,
        epoch: i16,
    },
    Stop,
}

/// Who waits for a write, and what they are told once it is durable.
enum Reply {
    Ids(Answer<(i64, i16)>, Result<(i64, i16), ErrorCode>),
    Unit(Answer<()>, Result<(), ErrorCode>),
    Nobody,
}

impl Reply {
    fn send(self, failure: Option<ErrorCode>) {
        match self {
            Reply::Ids(tx, r) => drop(tx.send(failure.map_or(r, Err))),
            Reply::Unit(tx, r) => drop(tx.send(failure.map_or(r, Err))),
            Reply::Nobody => {}
        }
    }
}

/// Handle to the coordinator task; cheap to share.
pub struct TxnCoordinator {
    tx: mpsc::Sender<Command>,
    task: std::sync::Mutex<Option<sluice_rt::task::Dedicated>>,
    pub config: TxnConfig,
    pub(super) metadata: Arc<MetadataCache>,
    pub(super) adder_conns: super::adder::AdderConns,
}

async fn ask<T>(
    tx: &mpsc::Sender<Command>,
    make: impl FnOnce(Answer<T>) -> Command,
) -> Result<T, ErrorCode> {
    let (reply, rx) = oneshot::channel();
    if tx.send(make(reply)).await.is_err() {
        return Err(ErrorCode::CoordinatorNotAvailable);
    }
    rx.await.unwrap_or(Err(ErrorCode::CoordinatorNotAvailable))
}

impl TxnCoordinator {
    pub fn start(
        config: TxnConfig,
        replicas: Arc<ReplicaManager>,
        metadata: Arc<MetadataCache>,
    ) -> Arc<TxnCoordinator> {
        let (tx, rx) = mpsc::channel(1024);
        let markers =
            MarkerWriter::new(config.node_id, Arc::clone(&metadata), config.inter.clone());
        // On a thread of its own: it appends to `__transaction_state` inline.
        let task = sluice_rt::task::spawn_dedicated(
            "txn-coordinator",
            run(
                Coordinator {
                    config: config.clone(),
                    replicas,
                    metadata: Arc::clone(&metadata),
                    owned: HashMap::new(),
                    txns: HashMap::new(),
                    tx: tx.clone(),
                    markers,
                },
                rx,
            ),
        )
        .inspect_err(|e| warn!(error = %e, "cannot start the transaction coordinator"))
        .ok();
        Arc::new(TxnCoordinator {
            tx,
            task: std::sync::Mutex::new(task),
            config,
            metadata,
            adder_conns: Default::default(),
        })
    }

    /// The `__transaction_state` partition of a transactional id.
    pub fn partition_for(&self, transactional_id: &str) -> i32 {
        partition_for(transactional_id, self.config.partitions)
    }

    pub async fn init_producer_id(
        &self,
        id: String,
        timeout_ms: i64,
        expected: Option<(i64, i16)>,
        fresh_producer_id: i64,
    ) -> Result<(i64, i16), ErrorCode> {
        if timeout_ms <= 0 || timeout_ms > self.config.max_timeout_ms {
            return Err(ErrorCode::InvalidTransactionTimeout);
        }
        ask(&self.tx, |reply| Command::InitProducerId {
            id,
            timeout_ms,
            expected,
            fresh_producer_id,
            reply,
        })
        .await
    }

    pub async fn add_partitions(
        &self,
        id: String,
        producer_id: i64,
        epoch: i16,
        partitions: Vec<(String, i32)>,
        verify_only: bool,
    ) -> Result<(), ErrorCode> {
        ask(&self.tx, |reply| Command::AddPartitions {
            id,
            producer_id,
            epoch,
            partitions,
            verify_only,
            reply,
        })
        .await
    }

    /// EndTxn: the producer id and epoch the producer goes on with (with `v2`, a
    /// transactions-v2 client's, those after the bump; `v2` holds the producer id to move to
    /// if the epoch runs out).
    pub async fn end_txn(
        &self,
        id: String,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        v2: Option<Option<i64>>,
    ) -> Result<(i64, i16), ErrorCode> {
        ask(&self.tx, |reply| Command::EndTxn {
            id,
            producer_id,
            epoch,
            commit,
            v2,
            reply,
        })
        .await
    }

    pub async fn describe(&self, ids: Vec<String>) -> Vec<Result<TxnView, ErrorCode>> {
        let n = ids.len();
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Command::Describe(ids, reply)).await.is_err() {
            return vec![Err(ErrorCode::CoordinatorNotAvailable); n];
        }
        rx.await
            .unwrap_or_else(|_| vec![Err(ErrorCode::CoordinatorNotAvailable); n])
    }

    /// Every transaction this broker coordinates.
    pub async fn list(&self) -> Vec<TxnView> {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Command::List(reply)).await.is_err() {
            return Vec::new();
        }
        rx.await.unwrap_or_default()
    }

    /// Stop the task (node shutdown); waiting callers get COORDINATOR_NOT_AVAILABLE.
    pub async fn shutdown(&self) {
        let _ = self.tx.send(Command::Stop).await;
        let handle = self
            .task
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(h) = handle {
            h.join().await;
        }
    }
}

/// A `__transaction_state` partition this broker leads.
struct Owned {
    epoch: i32,
    loaded: bool,
    /// Set when leadership of this epoch ends: its marker tasks stop.
    cancelled: Arc<AtomicBool>,
}

struct Entry {
    meta: TxnMetadata,
    /// Set while a write is in flight: the state before it (restored if the write fails;
    /// None for a new transactional id, which is then forgotten).
    before: Option<Option<TxnMetadata>>,
    /// Markers are being written.
    writing_markers: bool,
    /// The open transaction this coordinator has seen (its `txn_start_ms`) and the
    /// monotonic instant it counts as its start. The timeout runs on this clock: a
    /// transaction begun while the wall clock was stepped forward would otherwise stay
    /// open, holding back every read_committed consumer, until the wall clock caught up.
    opened: Option<(i64, Instant)>,
}

impl Entry {
    fn new(meta: TxnMetadata, before: Option<Option<TxnMetadata>>) -> Self {
        Entry {
            meta,
            before,
            writing_markers: false,
            opened: None,
        }
    }

    /// How long the open transaction has been open, by the monotonic clock. First seen
    /// here (begun, or loaded after a failover), it counts as open for as long as the
    /// wall clock says, within 0..=its timeout.
    fn open_ms(&mut self, now_ms: i64, now: Instant) -> i64 {
        let start = self.meta.txn_start_ms;
        let since = match self.opened {
            Some((seen, since)) if seen == start => since,
            _ => {
                let by_wall = (now_ms - start).clamp(0, self.meta.timeout_ms.max(0));
                let since = now
                    .checked_sub(Duration::from_millis(by_wall as u64))
                    .unwrap_or(now);
                self.opened = Some((start, since));
                since
            }
        };
        now.duration_since(since).as_millis() as i64
    }
}

struct Coordinator {
    config: TxnConfig,
    replicas: Arc<ReplicaManager>,
    metadata: Arc<MetadataCache>,
    owned: HashMap<i32, Owned>,
    txns: HashMap<String, Entry>,
    tx: mpsc::Sender<Command>,
    markers: Arc<MarkerWriter>,
}

async fn run(mut c: Coordinator, mut rx: mpsc::Receiver<Command>) {
    let mut images = c.metadata.subscribe();
    let mut timeouts = tokio::time::interval(Duration::from_millis(c.config.abort_check_ms));
    c.follow_leadership();
    loop {
        tokio::select! {
            cmd = rx.recv() => match cmd {
                Some(Command::Stop) | None => break,
                Some(cmd) => c.handle(cmd),
            },
            changed = images.changed() => {
                if changed.is_err() {
                    break;
                }
                c.follow_leadership();
            }
            _ = timeouts.tick() => {
                c.abort_timed_out();
                c.expire_ids();
            }
        }
    }
    for o in c.owned.values() {
        o.cancelled.store(true, Ordering::SeqCst);
    }
}

fn now_ms() -> i64 {
    crate::now_ms()
}

/// Read one `__transaction_state` partition: the latest state of each transactional id.
fn load(replicas: &ReplicaManager, partition: i32) -> Vec<TxnMetadata> {
    let mut latest: HashMap<String, Option<TxnMetadata>> = HashMap::new();
    replicas.scan(&TopicPartition::new(TXN_TOPIC, partition), |h, bytes| {
        if h.is_control() {
            return;
        }
        let limits = sluice_protocol::batch::RecordLimits::default();
        let _ = sluice_protocol::batch::for_each_record(bytes, limits, |r| {
            if let Some(id) = r.key.and_then(records::decode_key) {
                let value = r.value.and_then(|v| records::decode_value(&id, v));
                latest.insert(id, value);
            }
            Ok(())
        });
    });
    latest.into_values().flatten().collect()
}

impl Coordinator {
    /// Load the partitions this broker now leads, drop those it no longer leads.
    fn follow_leadership(&mut self) {
        let changes = self
            .replicas
            .leadership_changes(TXN_TOPIC, self.config.partitions, |p| {
                self.owned.get(&p).map(|o| o.epoch)
            });
        for (partition, led) in changes {
            let tp = TopicPartition::new(TXN_TOPIC, partition);
            self.unload(partition);
            if let Some(epoch) = led {
                info!(partition, epoch, "loading transactions of {tp}");
                self.owned.insert(
                    partition,
                    Owned {
                        epoch,
                        loaded: false,
                        cancelled: Arc::new(AtomicBool::new(false)),
                    },
                );
                let replicas = Arc::clone(&self.replicas);
                let tx = self.tx.clone();
                tokio::spawn(async move {
                    if !replicas.await_committed_log(&tp, epoch).await {
                        return; // deposed before its log was committed: the next leader loads
                    }
                    let txns = sluice_rt::task::spawn_blocking(move || load(&replicas, partition))
                        .await
                        .unwrap_or_default();
                    let _ = tx
                        .send(Command::Loaded {
                            partition,
                            epoch,
                            txns,
                        })
                        .await;
                });
            }
        }
    }

    fn unload(&mut self, partition: i32) {
        if let Some(o) = self.owned.remove(&partition) {
            o.cancelled.store(true, Ordering::SeqCst);
            let n = self.config.partitions;
            self.txns.retain(|id, _| partition_for(id, n) != partition);
            info!(
                partition,
                "stopped coordinating transactions of {TXN_TOPIC}-{partition}"
            );
        }
    }

    /// Whether this broker coordinates `id` now: Ok(partition) or the error to answer.
    fn route(&self, id: &str) -> Result<i32, ErrorCode> {
        let partition = partition_for(id, self.config.partitions);
        match self.owned.get(&partition) {
            None => Err(ErrorCode::NotCoordinator),
            Some(o) if !o.loaded => Err(ErrorCode::CoordinatorLoadInProgress),
            Some(_) => Ok(partition),
        }
    }

    /// The transaction's current state for a request: busy (a write or markers in flight)
    /// answers CONCURRENT_TRANSACTIONS.
    fn idle(&self, id: &str) -> Result<Option<&TxnMetadata>, ErrorCode> {
        match self.txns.get(id) {
            Some(e) if e.before.is_some() => Err(ErrorCode::ConcurrentTransactions),
            Some(e) => Ok(Some(&e.meta)),
            None => Ok(None),
        }
    }

    /// The state of a transactional id this broker coordinates, idle, and known (a request
    /// from a producer that never called InitProducerId: INVALID_PRODUCER_ID_MAPPING).
    fn known(&self, id: &str) -> Result<TxnMetadata, ErrorCode> {
        self.route(id)?;
        self.idle(id)?
            .cloned()
            .ok_or(ErrorCode::InvalidProducerIdMapping)
    }

    fn handle(&mut self, cmd: Command) {
        let now = now_ms();
        match cmd {
            Command::Loaded {
                partition,
                epoch,
                txns,
            } => {
                let Some(o) = self.owned.get_mut(&partition).filter(|o| o.epoch == epoch) else {
                    return; // leadership moved on while loading
                };
                o.loaded = true;
                info!(
                    partition,
                    epoch,
                    transactions = txns.len(),
                    "loaded {TXN_TOPIC}-{partition}"
                );
                let mut resume = Vec::new();
                for meta in txns {
                    if matches!(meta.state, TxnState::PrepareCommit | TxnState::PrepareAbort) {
                        resume.push(meta.transactional_id.clone());
                    }
                    self.txns
                        .insert(meta.transactional_id.clone(), Entry::new(meta, None));
                }
                for id in resume {
                    self.start_markers(&id);
                }
            }
            Command::InitProducerId {
                id,
                timeout_ms,
                expected,
                fresh_producer_id,
                reply,
            } => {
                let current = match self.route(&id).and_then(|_| self.idle(&id)) {
                    Ok(c) => c.cloned(),
                    Err(code) => {
                        let _ = reply.send(Err(code));
                        return;
                    }
                };
                let mut meta = current
                    .clone()
                    .unwrap_or_else(|| TxnMetadata::new(&id, fresh_producer_id, timeout_ms, now));
                let result = meta
                    .init_producer_id(timeout_ms, expected, now, || fresh_producer_id)
                    .map_err(|e| e.code());
                self.settle(id, current, meta, Reply::Ids(reply, result));
            }
            Command::AddPartitions {
                id,
                producer_id,
                epoch,
                partitions,
                verify_only,
                reply,
            } => {
                let current = match self.known(&id) {
                    Ok(c) => c,
                    Err(code) => {
                        let _ = reply.send(Err(code));
                        return;
                    }
                };
                if verify_only {
                    // KIP-890: is the producer's open transaction writing these partitions?
                    let ok = current.producer_id == producer_id
                        && current.producer_epoch == epoch
                        && current.state == TxnState::Ongoing
                        && partitions.iter().all(|p| current.partitions.contains(p));
                    let answer = if ok {
                        Ok(())
                    } else {
                        Err(ErrorCode::InvalidTxnState)
                    };
                    let _ = reply.send(answer);
                    return;
                }
                let mut meta = current.clone();
                let result = meta
                    .add_partitions(producer_id, epoch, &partitions, now)
                    .map_err(|e| e.code());
                self.settle(id, Some(current), meta, Reply::Unit(reply, result));
            }
            Command::EndTxn {
                id,
                producer_id,
                epoch,
                commit,
                v2,
                reply,
            } => {
                let current = match self.known(&id) {
                    Ok(c) => c,
                    Err(code) => {
                        let _ = reply.send(Err(code));
                        return;
                    }
                };
                let mut meta = current.clone();
                let result = match v2 {
                    Some(fresh) => meta.end_v2(producer_id, epoch, commit, now, fresh),
                    None => meta
                        .end(producer_id, epoch, commit, now)
                        .map(|()| (producer_id, epoch)),
                };
                let result = result.map_err(|e| e.code());
                self.settle(id, Some(current), meta, Reply::Ids(reply, result));
            }
            Command::Describe(ids, reply) => {
                let out = ids
                    .iter()
                    .map(|id| {
                        self.route(id)?;
                        self.txns
                            .get(id)
                            .map(|e| e.meta.clone())
                            .ok_or(ErrorCode::TransactionalIdNotFound)
                    })
                    .collect();
                let _ = reply.send(out);
            }
            Command::List(reply) => {
                let _ = reply.send(self.txns.values().map(|e| e.meta.clone()).collect());
            }
            Command::Persisted { id, result, reply } => {
                let Some(entry) = self.txns.get_mut(&id) else {
                    return reply.send(Some(ErrorCode::NotCoordinator));
                };
                let before = entry.before.take();
                match result {
                    Ok(()) => {
                        reply.send(None);
                        if matches!(
                            entry.meta.state,
                            TxnState::PrepareCommit | TxnState::PrepareAbort
                        ) {
                            self.start_markers(&id);
                        }
                    }
                    Err(code) => {
                        warn!(transactional_id = id, ?code, "transaction log write failed");
                        match before.flatten() {
                            Some(m) => entry.meta = m,
                            None => drop(self.txns.remove(&id)),
                        }
                        reply.send(Some(code));
                        self.retry_completion(&id, code);
                    }
                }
            }
            Command::MarkersDone {
                id,
                producer_id,
                epoch,
            } => {
                let Some(entry) = self.txns.get_mut(&id) else {
                    return;
                };
                entry.writing_markers = false;
                let m = &entry.meta;
                if m.producer_id != producer_id || m.producer_epoch != epoch {
                    return;
                }
                let current = m.clone();
                let mut meta = current.clone();
                if meta.complete(now).is_ok() {
                    debug!(
                        transactional_id = id,
                        state = meta.state.name(),
                        "transaction complete"
                    );
                    self.settle(id, Some(current), meta, Reply::Nobody);
                }
            }
            Command::Stop => {}
        }
    }

    /// Answer a request whose state change is `current` -> `next`: when nothing durable
    /// changed, at once; otherwise after `next` is written to the transaction log.
    fn settle(
        &mut self,
        id: String,
        current: Option<TxnMetadata>,
        next: TxnMetadata,
        reply: Reply,
    ) {
        if current
            .as_ref()
            .is_some_and(|c| same_durable_state(c, &next))
        {
            return reply.send(None);
        }
        let partition = partition_for(&id, self.config.partitions);
        if !self.owned.contains_key(&partition) {
            return reply.send(Some(ErrorCode::NotCoordinator));
        }
        let tp = TopicPartition::new(TXN_TOPIC, partition);
        let now = now_ms();
        let mut b = BatchBuilder::new(Compression::None);
        let key = records::encode_key(&id);
        let value = records::encode_value(&next);
        b.append(now, Some(&key), Some(&value), &[]);
        let appended = b
            .build(0)
            .map_err(|_| ErrorCode::UnknownServerError)
            .and_then(|bytes| {
                self.replicas
                    .append_blocking(AppendOrigin::Client, Acks::All, &tp, bytes.into())
                    .map_err(|e| match e.code() {
                        ErrorCode::NotLeaderOrFollower | ErrorCode::UnknownTopicOrPartition => {
                            ErrorCode::NotCoordinator
                        }
                        _ => ErrorCode::CoordinatorNotAvailable,
                    })
            });
        let appended = match appended {
            Ok(a) => a,
            Err(code) => {
                warn!(
                    transactional_id = id,
                    ?code,
                    "cannot append to the transaction log"
                );
                reply.send(Some(code));
                return self.retry_completion(&id, code);
            }
        };
        match self.txns.get_mut(&id) {
            Some(e) => {
                e.before = Some(Some(std::mem::replace(&mut e.meta, next)));
            }
            None => {
                self.txns.insert(id.clone(), Entry::new(next, Some(None)));
            }
        }
        let tx = self.tx.clone();
        let replicas = Arc::clone(&self.replicas);
        tokio::spawn(async move {
            let outcome = replicas
                .await_replication(&[&appended], WRITE_TIMEOUT)
                .await;
            let result = match outcome.first() {
                Some(ReplicationOutcome::Committed | ReplicationOutcome::CommittedShort) => Ok(()),
                Some(ReplicationOutcome::Deposed) => Err(ErrorCode::NotCoordinator),
                _ => Err(ErrorCode::CoordinatorNotAvailable),
            };
            let _ = tx.send(Command::Persisted { id, result, reply }).await;
        });
    }

    /// A completion (CompleteCommit/CompleteAbort after the markers) that did not reach the
    /// transaction log is written again after a backoff: nobody else would, and until then
    /// the producer's next transaction is refused (CONCURRENT_TRANSACTIONS). A broker that
    /// no longer coordinates the id leaves it to the next coordinator, which resumes it.
    fn retry_completion(&self, id: &str, code: ErrorCode) {
        let Some(e) = self.txns.get(id) else { return };
        let prepared = matches!(
            e.meta.state,
            TxnState::PrepareCommit | TxnState::PrepareAbort
        );
        if !prepared || e.writing_markers || code == ErrorCode::NotCoordinator {
            return;
        }
        let (id, producer_id, epoch) = (id.to_string(), e.meta.producer_id, e.meta.producer_epoch);
        // Try again on the partition's next change (its ISR back, an append), at the latest
        // after the backoff.
        let tp = TopicPartition::new(TXN_TOPIC, partition_for(&id, self.config.partitions));
        let tx = self.tx.clone();
        let replicas = Arc::clone(&self.replicas);
        tokio::spawn(async move {
            replicas.await_change(&tp, COMPLETION_RETRY_BACKOFF).await;
            markers_done(&tx, id, producer_id, epoch).await;
        });
    }

    /// Write the markers of a prepared transaction (unless already being written).
    fn start_markers(&mut self, id: &str) {
        let partition = partition_for(id, self.config.partitions);
        let Some(owned) = self.owned.get(&partition) else {
            return;
        };
        let Some(entry) = self.txns.get_mut(id) else {
            return;
        };
        if entry.writing_markers {
            return;
        }
        entry.writing_markers = true;
        let m = &entry.meta;
        let job = MarkerJob {
            producer_id: m.producer_id,
            epoch: m.producer_epoch,
            commit: m.state == TxnState::PrepareCommit,
            coordinator_epoch: owned.epoch,
            partitions: m.partitions.iter().cloned().collect(),
        };
        let (producer_id, epoch) = (m.producer_id, m.producer_epoch);
        let cancelled = Arc::clone(&owned.cancelled);
        let markers = Arc::clone(&self.markers);
        let tx = self.tx.clone();
        let id = id.to_string();
        tokio::spawn(async move {
            if markers.write(job, &cancelled).await {
                markers_done(&tx, id, producer_id, epoch).await;
            }
        });
    }

    fn abort_timed_out(&mut self) {
        let now = now_ms();
        let instant = Instant::now();
        let expired: Vec<(String, i64)> = self
            .txns
            .iter_mut()
            .filter(|(_, e)| e.before.is_none() && e.meta.state == TxnState::Ongoing)
            .filter_map(|(id, e)| {
                let open_ms = e.open_ms(now, instant);
                e.meta.timed_out(open_ms).then(|| (id.clone(), open_ms))
            })
            .collect();
        for (id, open_ms) in expired {
            let Some(current) = self.txns.get(&id).map(|e| e.meta.clone()) else {
                continue;
            };
            if self.route(&id).is_err() {
                continue;
            }
            let mut meta = current.clone();
            if meta.abort_timed_out(open_ms, now).is_ok() {
                info!(
                    transactional_id = id,
                    producer_id = meta.producer_id,
                    epoch = meta.producer_epoch,
                    "aborting a transaction past its timeout"
                );
                self.settle(id, Some(current), meta, Reply::Nobody);
            }
        }
    }
}

impl Coordinator {
    /// Forget transactional ids with no open transaction and no activity for
    /// `transactional.id.expiration.ms`: a tombstone in `__transaction_state`, then gone
    /// (the next InitProducerId with the id starts afresh with a new producer id).
    fn expire_ids(&mut self) {
        let now = now_ms();
        let idle: Vec<String> = self
            .txns
            .iter()
            .filter(|(_, e)| {
                e.before.is_none()
                    && matches!(
                        e.meta.state,
                        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
                    )
                    && now - e.meta.last_update_ms > self.config.id_expiration_ms
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in idle {
            if self.route(&id).is_err() {
                continue;
            }
            let tp = TopicPartition::new(TXN_TOPIC, partition_for(&id, self.config.partitions));
            let mut b = BatchBuilder::new(Compression::None);
            b.append(now, Some(&records::encode_key(&id)), None, &[]);
            let written = b.build(0).map_err(|e| e.to_string()).and_then(|bytes| {
                self.replicas
                    .append_blocking(AppendOrigin::Client, Acks::All, &tp, bytes.into())
                    .map_err(|e| e.message())
            });
            match written {
                Ok(_) => {
                    info!(transactional_id = id, "expired an idle transactional id");
                    self.txns.remove(&id);
                }
                Err(e) => {
                    warn!(transactional_id = id, error = %e, "cannot expire a transactional id")
                }
            }
        }
    }
}

/// Whether two states differ only in what need not be written (the update time).
fn same_durable_state(a: &TxnMetadata, b: &TxnMetadata) -> bool {
    a.producer_id == b.producer_id
        && a.producer_epoch == b.producer_epoch
        && a.state == b.state
        && a.partitions == b.partitions
        && a.timeout_ms == b.timeout_ms
        && a.txn_start_ms == b.txn_start_ms
        && a.previous_producer_id == b.previous_producer_id
        && a.next_producer_id == b.next_producer_id
        && a.client_version == b.client_version
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transactions_age_follows_the_monotonic_clock_not_the_wall_clock() {
        let mut meta = TxnMetadata::new("tx", 7, 60_000, 0);
        meta.init_producer_id(60_000, None, 0, || 0).unwrap();
        // Begun while this node's wall clock was stepped 242 s ahead.
        let ahead = 1_000_000 + 242_000;
        meta.add_partitions(7, 0, &[("out".to_string(), 0)], ahead)
            .unwrap();
        let mut e = Entry::new(meta, None);
        let t0 = Instant::now();
        assert_eq!(e.open_ms(ahead + 5, t0), 5);
        // The wall clock steps back: the transaction still ages, and times out on time.
        let later = t0 + Duration::from_millis(60_001);
        assert_eq!(e.open_ms(1_000_000 + 60_001, later), 60_006);
        let open_ms = e.open_ms(1_000_000, later);
        assert!(e.meta.timed_out(open_ms));
        // First seen after a failover: the wall clock's age, at most the timeout.
        let mut loaded = Entry::new(e.meta.clone(), None);
        assert_eq!(loaded.open_ms(ahead + 2_000, t0), 2_000);
        let mut far = Entry::new(e.meta.clone(), None);
        assert_eq!(far.open_ms(ahead + 900_000, later), 60_000);
        let mut behind = Entry::new(e.meta, None);
        assert_eq!(behind.open_ms(0, later), 0);
    }
}
