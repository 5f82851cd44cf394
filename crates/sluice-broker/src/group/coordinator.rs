//! [`GroupCoordinator`]: one task owning the group state machine and the committed-offset
//! cache, in front of the `__consumer_offsets` partitions this broker leads.
//!
//! Requests arrive on a bounded channel; JoinGroup and SyncGroup answers may be parked for a
//! whole rebalance, so they carry a oneshot that the state machine's effects complete later.
//! Offsets and group metadata are appended to the group's partition of `__consumer_offsets`
//! (Kafka's record formats) before the request is answered, and reloaded from it when the
//! coordinator starts: until that load finishes, requests get COORDINATOR_LOAD_IN_PROGRESS.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use sluice_protocol::batch::{decode_records, BatchBuilder, RecordLimits};
use sluice_protocol::compression::Compression;
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;
use tokio::sync::{mpsc, oneshot};
use tracing::{info, warn};

use super::consumer_group::{self, ConsumerGroup};
use super::consumer_records::ConsumerGroupKey;
use super::records::{GroupValue, OffsetValue, OffsetsKey};
use super::share_group::ShareGroup;
pub use super::state::SyncRequest;
use super::state::{
    Effect, GroupConfig, GroupMachine, GroupState, JoinOutcome, JoinRequest, SyncOutcome, Token,
};
use super::streams_group::{self, StreamsGroup};
use super::streams_records::StreamsGroupKey;
use crate::metadata_cache::MetadataCache;
use crate::replica::append::Appended;
use crate::replica::manager::ReplicaManager;
use crate::replica::{Acks, AppendOrigin};
use sluice_metadata::Uuid;

mod consumer;
mod migration;
mod share;
mod streams;
pub use consumer::{
    offered_assignors, ConsumerGroupView, ConsumerHeartbeat, ConsumerHeartbeatAnswer,
    ConsumerHeartbeatResult,
};
pub use share::{ShareHeartbeatAnswer, ShareHeartbeatRequest, ShareHeartbeatResult};
pub use streams::{StreamsHeartbeatAnswer, StreamsHeartbeatRequest, StreamsHeartbeatResult};

pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Java's `String.hashCode`, over UTF-16 code units.
pub fn java_hash_code(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// The `__consumer_offsets` partition that owns `group` (Kafka's `Utils.abs(hash) % n`).
pub fn partition_for(group: &str, partitions: i32) -> i32 {
    let h = java_hash_code(group);
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % partitions.max(1)
}

/// Coordinator settings (broker configs `group.*`, `offsets.*`).
#[derive(Clone, Debug)]
pub struct CoordinatorConfig {
    pub group: GroupConfig,
    pub offsets_partitions: i32,
    pub offsets_retention_ms: i64,
    pub offsets_retention_check_ms: u64,
    pub offset_metadata_max_bytes: usize,
}

impl CoordinatorConfig {
    pub fn from_broker(c: &sluice_metadata::BrokerConfig) -> Self {
        let g = &c.settings().group;
        Self {
            group: GroupConfig {
                min_session_timeout_ms: g.min_session_timeout_ms,
                max_session_timeout_ms: g.max_session_timeout_ms,
                initial_rebalance_delay_ms: g.initial_rebalance_delay_ms,
                max_size: g.max_size,
            },
            offsets_partitions: g.offsets_partitions,
            offsets_retention_ms: g.offsets_retention_ms,
            offsets_retention_check_ms: g.offsets_retention_check_ms,
            offset_metadata_max_bytes: g.offset_metadata_max_bytes,
        }
    }
}

/// An OffsetCommit request, decoded.
#[derive(Clone, Debug)]
pub struct CommitRequest {
    pub group_id: String,
    pub generation: i32,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub version: i16,
    /// (topic, partition, offset, leader epoch, metadata)
    pub offsets: Vec<(String, i32, i64, i32, Option<String>)>,
}

/// A TxnOffsetCommit request, decoded.
#[derive(Clone, Debug)]
pub struct TxnCommitRequest {
    pub group_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub generation: i32,
    pub member_id: String,
    pub instance_id: Option<String>,
    /// (topic, partition, offset, leader epoch, metadata)
    pub offsets: Vec<(String, i32, i64, i32, Option<String>)>,
}

/// A described group.
#[derive(Clone, Debug)]
pub struct GroupDescription {
    pub group_id: String,
    pub state: &'static str,
    pub protocol_type: String,
    pub protocol: String,
    /// (member id, instance id, client id, client host, metadata, assignment)
    pub members: Vec<(String, Option<String>, String, String, Bytes, Bytes)>,
    /// A consumer (KIP-848) or streams (KIP-1071) group: DescribeGroups reports it as not a
    /// classic group.
    pub consumer: bool,
}

type Committed = BTreeMap<(String, i32), OffsetValue>;

/// Records for `__consumer_offsets`: key, value (None: a tombstone).
type Records = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// One committed offset as OffsetFetch reports it: topic, partition, value (None: nothing;
/// Err: this partition's answer is an error, UNSTABLE_OFFSET_COMMIT while a transaction's
/// offset for it is pending and the fetch requires stable offsets).
pub type CommittedRow = (String, i32, Result<Option<OffsetValue>, ErrorCode>);
/// One group as ListGroups reports it: id, protocol type, state name, group type.
pub type GroupListing = (String, String, &'static str, &'static str);

enum Command {
    Join(JoinRequest, oneshot::Sender<JoinOutcome>),
    Sync(SyncRequest, oneshot::Sender<SyncOutcome>),
    Heartbeat(
        String,
        i32,
        String,
        Option<String>,
        oneshot::Sender<Option<ErrorCode>>,
    ),
    Leave(
        String,
        Vec<(String, Option<String>)>,
        oneshot::Sender<Result<Vec<Option<ErrorCode>>, ErrorCode>>,
    ),
    Commit(
        CommitRequest,
        oneshot::Sender<Result<Vec<Option<ErrorCode>>, ErrorCode>>,
    ),
    Fetch(
        String,
        Option<Vec<(String, Vec<i32>)>>,
        bool,
        (Option<String>, i32),
        oneshot::Sender<Result<Vec<CommittedRow>, ErrorCode>>,
    ),
    ConsumerHeartbeat(
        Box<ConsumerHeartbeat>,
        oneshot::Sender<ConsumerHeartbeatResult>,
    ),
    ConsumerDescribe(
        Vec<String>,
        oneshot::Sender<Vec<Result<ConsumerGroupView, consumer_group::Refusal>>>,
    ),
    StreamsHeartbeat(
        Box<StreamsHeartbeatRequest>,
        oneshot::Sender<StreamsHeartbeatResult>,
    ),
    StreamsDescribe(
        Vec<String>,
        oneshot::Sender<Vec<Result<StreamsGroup, consumer_group::Refusal>>>,
    ),
    ShareHeartbeat(
        Box<ShareHeartbeatRequest>,
        oneshot::Sender<ShareHeartbeatResult>,
    ),
    ShareDescribe(
        Vec<String>,
        oneshot::Sender<Vec<Result<ShareGroup, consumer_group::Refusal>>>,
    ),
    TxnCommit(
        TxnCommitRequest,
        oneshot::Sender<Result<Vec<Option<ErrorCode>>, ErrorCode>>,
    ),
    /// A transaction marker reached `__consumer_offsets` partition .1 (at offset .3) for
    /// producer .0: commit (.2) or drop its pending offsets there.
    CompleteTxn(i64, i32, bool, i64, oneshot::Sender<()>),
    List(oneshot::Sender<Result<Vec<GroupListing>, ErrorCode>>),
    Describe(
        Vec<String>,
        oneshot::Sender<Result<Vec<Option<GroupDescription>>, ErrorCode>>,
    ),
    Delete(
        Vec<String>,
        oneshot::Sender<Result<Vec<Option<ErrorCode>>, ErrorCode>>,
    ),
    DeleteOffsets(
        String,
        Vec<(String, i32)>,
        oneshot::Sender<Result<Vec<Option<ErrorCode>>, ErrorCode>>,
    ),
    Loaded {
        partition: i32,
        epoch: i32,
        result: Box<LoadResult>,
    },
    /// Answer everything parked with NOT_COORDINATOR and stop (node shutdown).
    Stop,
}

#[derive(Default)]
struct LoadResult {
    offsets: HashMap<String, Committed>,
    groups: Vec<(String, Option<GroupValue>)>,
    /// Consumer groups (KIP-848), rebuilt from their records.
    consumer_groups: BTreeMap<String, ConsumerGroup<Uuid>>,
    /// Streams groups (KIP-1071), rebuilt from their records.
    streams_groups: BTreeMap<String, StreamsGroup>,
    /// Offsets committed in transactions not yet ended: by producer id, then group.
    pending: HashMap<i64, HashMap<String, Committed>>,
    /// The offset the load read up to (exclusive).
    end: i64,
}

/// Handle to the coordinator task; cheap to share.
pub struct GroupCoordinator {
    tx: mpsc::Sender<Command>,
    task: std::sync::Mutex<Option<sluice_rt::task::Dedicated>>,
    pub config: CoordinatorConfig,
}

/// Answer for requests that cannot reach the task (it stopped).
fn gone<T>(r: Result<T, oneshot::error::RecvError>, fallback: T) -> T {
    r.unwrap_or(fallback)
}

impl GroupCoordinator {
    /// Start the coordinator task; it loads each `__consumer_offsets` partition this broker
    /// comes to lead, in the background.
    pub fn start(
        config: CoordinatorConfig,
        replicas: Arc<ReplicaManager>,
        metadata: Arc<MetadataCache>,
    ) -> Arc<GroupCoordinator> {
        let (tx, rx) = mpsc::channel(1024);
        // On a thread of its own: it appends to `__consumer_offsets` inline.
        let task = sluice_rt::task::spawn_dedicated(
            "group-coordinator",
            run(config.clone(), replicas, metadata, rx, tx.clone()),
        )
        .inspect_err(|e| warn!(error = %e, "cannot start the group coordinator"))
        .ok();
        Arc::new(GroupCoordinator {
            tx,
            task: std::sync::Mutex::new(task),
            config,
        })
    }

    pub async fn join(&self, req: JoinRequest) -> JoinOutcome {
        let member = req.member_id.clone();
        let (tx, rx) = oneshot::channel();
        let _ = self.tx.send(Command::Join(req, tx)).await;
        gone(
            rx.await,
            join_error(ErrorCode::CoordinatorNotAvailable, &member),
        )
    }

    pub async fn sync(&self, req: SyncRequest) -> SyncOutcome {
        let (tx, rx) = oneshot::channel();
        let _ = self.tx.send(Command::Sync(req, tx)).await;
        gone(rx.await, sync_error(ErrorCode::CoordinatorNotAvailable))
    }

    pub async fn heartbeat(
        &self,
        group: String,
        generation: i32,
        member: String,
        instance: Option<String>,
    ) -> Option<ErrorCode> {
        let (tx, rx) = oneshot::channel();
        let _ = self
            .tx
            .send(Command::Heartbeat(group, generation, member, instance, tx))
            .await;
        gone(rx.await, Some(ErrorCode::CoordinatorNotAvailable))
    }

    pub async fn leave(
        &self,
        group: String,
        members: Vec<(String, Option<String>)>,
    ) -> Result<Vec<Option<ErrorCode>>, ErrorCode> {
        let (tx, rx) = oneshot::channel();
        let _ = self.tx.send(Command::Leave(group, members, tx)).await;
        gone(rx.await, Err(ErrorCode::CoordinatorNotAvailable))
    }

    pub async fn commit(&self, req: CommitRequest) -> Result<Vec<Option<ErrorCode>>, ErrorCode> {
        let (tx, rx) = oneshot::channel();
        let _ = self.tx.send(Command::Commit(req, tx)).await;
        gone(rx.await, Err(ErrorCode::CoordinatorNotAvailable))
    }

    /// Committed offsets of a group: the named partitions, or all when `topics` is None.
    /// With `require_stable`, a partition whose offset a transaction has committed but not
    /// yet ended is answered UNSTABLE_OFFSET_COMMIT on its own (KIP-447, as Kafka 4.4: the
    /// group's other partitions are answered normally and the client retries that one).
    /// `member` (id, epoch) is who asks (OffsetFetch v9+; (None, -1): no one).
    pub async fn fetch(
        &self,
        group: String,
        topics: Option<Vec<(String, Vec<i32>)>>,
        require_stable: bool,
        member: (Option<String>, i32),
    ) -> Result<Vec<CommittedRow>, ErrorCode> {
        let (tx, rx) = oneshot::channel();
        let _ = self
            .tx
            .send(Command::Fetch(group, topics, require_stable, member, tx))
            .await;
        gone(rx.await, Err(ErrorCode::CoordinatorNotAvailable))
    }

    /// ConsumerGroupHeartbeat (KIP-848): answered once the group's change is replicated.
    pub async fn consumer_heartbeat(&self, hb: ConsumerHeartbeat) -> ConsumerHeartbeatResult {
        let (tx, rx) = oneshot::channel();
        let _ = self
            .tx
            .send(Command::ConsumerHeartbeat(Box::new(hb), tx))
            .await;
        gone(
            rx.await,
            Err((ErrorCode::CoordinatorNotAvailable, String::new())),
        )
    }

    /// ConsumerGroupDescribe: each group, or why not.
    pub async fn consumer_describe(
        &self,
        groups: Vec<String>,
    ) -> Vec<Result<ConsumerGroupView, consumer_group::Refusal>> {
        let n = groups.len();
        let (tx, rx) = oneshot::channel();
        let _ = self.tx.send(Command::ConsumerDescribe(groups, tx)).await;
        gone(
            rx.await,
            vec![Err((ErrorCode::CoordinatorNotAvailable, String::new())); n],
        )
    }

    /// StreamsGroupHeartbeat (KIP-1071).
    pub async fn streams_heartbeat(&self, hb: StreamsHeartbeatRequest) -> StreamsHeartbeatResult {
        let (tx, rx) = oneshot::channel();
        let _ = self
            .tx
            .send(Command::StreamsHeartbeat(Box::new(hb), tx))
            .await;
        gone(
            rx.await,
            Err((ErrorCode::CoordinatorNotAvailable, String::new())),
        )
    }

    /// StreamsGroupDescribe: each group, or why not.
    pub async fn streams_describe(
        &self,
        groups: Vec<String>,
    ) -> Vec<Result<StreamsGroup, consumer_group::Refusal>> {
        let n = groups.len();
        let (tx, rx) = oneshot::channel();
        let _ = self.tx.send(Command::StreamsDescribe(groups, tx)).await;
        gone(
            rx.await,
            vec![Err((ErrorCode::CoordinatorNotAvailable, String::new())); n],
        )
    }

    /// ShareGroupHeartbeat (KIP-932).
    pub async fn share_heartbeat(&self, hb: ShareHeartbeatRequest) -> ShareHeartbeatResult {
        let (tx, rx) = oneshot::channel();
        let _ = self
            .tx
            .send(Command::ShareHeartbeat(Box::new(hb), tx))
            .await;
        gone(
            rx.await,
            Err((ErrorCode::CoordinatorNotAvailable, String::new())),
        )
    }

    /// ShareGroupDescribe: each group, or why not.
    pub async fn share_describe(
        &self,
        groups: Vec<String>,
    ) -> Vec<Result<ShareGroup, consumer_group::Refusal>> {
        let n = groups.len();
        let (tx, rx) = oneshot::channel();
        let _ = self.tx.send(Command::ShareDescribe(groups, tx)).await;
        gone(
            rx.await,
            vec![Err((ErrorCode::CoordinatorNotAvailable, String::new())); n],
        )
    }

    /// TxnOffsetCommit: offsets written in the producer's transaction, applied when its
    /// commit marker arrives.
    pub async fn txn_commit(
        &self,
        req: TxnCommitRequest,
    ) -> Result<Vec<Option<ErrorCode>>, ErrorCode> {
        let (tx, rx) = oneshot::channel();
        let _ = self.tx.send(Command::TxnCommit(req, tx)).await;
        gone(rx.await, Err(ErrorCode::CoordinatorNotAvailable))
    }

    /// A marker for `producer_id` was written to `__consumer_offsets` partition `partition`
    /// at `marker_offset`.
    pub async fn complete_txn(
        &self,
        producer_id: i64,
        partition: i32,
        commit: bool,
        marker_offset: i64,
    ) {
        let (tx, rx) = oneshot::channel();
        let _ = self
            .tx
            .send(Command::CompleteTxn(
                producer_id,
                partition,
                commit,
                marker_offset,
                tx,
            ))
            .await;
        let _ = rx.await;
    }

    /// (group id, protocol type, state) of every group.
    pub async fn list(&self) -> Result<Vec<GroupListing>, ErrorCode> {
        let (tx, rx) = oneshot::channel();
        let _ = self.tx.send(Command::List(tx)).await;
        gone(rx.await, Err(ErrorCode::CoordinatorNotAvailable))
    }

    pub async fn describe(
        &self,
        groups: Vec<String>,
    ) -> Result<Vec<Option<GroupDescription>>, ErrorCode> {
        let (tx, rx) = oneshot::channel();
        let _ = self.tx.send(Command::Describe(groups, tx)).await;
        gone(rx.await, Err(ErrorCode::CoordinatorNotAvailable))
    }

    pub async fn delete(&self, groups: Vec<String>) -> Result<Vec<Option<ErrorCode>>, ErrorCode> {
        let (tx, rx) = oneshot::channel();
        let _ = self.tx.send(Command::Delete(groups, tx)).await;
        gone(rx.await, Err(ErrorCode::CoordinatorNotAvailable))
    }

    pub async fn delete_offsets(
        &self,
        group: String,
        partitions: Vec<(String, i32)>,
    ) -> Result<Vec<Option<ErrorCode>>, ErrorCode> {
        let (tx, rx) = oneshot::channel();
        let _ = self
            .tx
            .send(Command::DeleteOffsets(group, partitions, tx))
            .await;
        gone(rx.await, Err(ErrorCode::CoordinatorNotAvailable))
    }

    /// Stop the task (at node shutdown): parked JoinGroup/SyncGroup requests are answered
    /// NOT_COORDINATOR so their connections can finish.
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

fn join_error(code: ErrorCode, member: &str) -> JoinOutcome {
    JoinOutcome {
        error: Some(code),
        generation: -1,
        protocol_type: None,
        protocol: None,
        leader: String::new(),
        member_id: member.to_string(),
        skip_assignment: false,
        members: Vec::new(),
    }
}

fn sync_error(code: ErrorCode) -> SyncOutcome {
    SyncOutcome {
        error: Some(code),
        protocol_type: None,
        protocol: None,
        assignment: Bytes::new(),
    }
}

/// The task's state.
struct Coordinator {
    config: CoordinatorConfig,
    replicas: Arc<ReplicaManager>,
    machine: GroupMachine,
    offsets: HashMap<String, Committed>,
    /// Offsets of open transactions: producer id -> group -> offsets.
    pending: HashMap<i64, HashMap<String, Committed>>,
    next_token: Token,
    /// Parked JoinGroup/SyncGroup answers, with their group.
    joins: HashMap<Token, (String, oneshot::Sender<JoinOutcome>)>,
    syncs: HashMap<Token, (String, oneshot::Sender<SyncOutcome>)>,
    /// `__consumer_offsets` partitions led here: leader epoch, loaded yet.
    owned: HashMap<i32, (i32, bool)>,
    /// Markers that arrived while their partition was loading: (producer, commit, offset).
    early_markers: HashMap<i32, Vec<(i64, bool, i64)>>,
    tx: mpsc::Sender<Command>,
    metadata: Arc<MetadataCache>,
    /// Consumer groups (KIP-848), beside the classic groups of `machine`.
    consumer: HashMap<String, ConsumerGroup<Uuid>>,
    /// Their members' timers, by (group, member).
    consumer_timers: HashMap<(String, String), consumer::MemberTimers>,
    /// Regular expressions of consumer groups: the metadata image offset they were matched
    /// at and the topic names they matched.
    regex_cache: HashMap<String, (i64, BTreeSet<String>)>,
    /// Streams groups (KIP-1071), kept in `__consumer_offsets` as Kafka's records.
    streams: HashMap<String, StreamsGroup>,
    /// Their members' timers, by (group, member).
    streams_timers: HashMap<(String, String), consumer::MemberTimers>,
    /// New streams groups whose first assignment waits: when it is due.
    streams_delays: HashMap<String, i64>,
    /// Share groups (KIP-932), in memory only (see `share`).
    share: HashMap<String, ShareGroup>,
}

fn now_ms() -> i64 {
    crate::now_ms()
}

async fn run(
    config: CoordinatorConfig,
    replicas: Arc<ReplicaManager>,
    metadata: Arc<MetadataCache>,
    mut rx: mpsc::Receiver<Command>,
    tx: mpsc::Sender<Command>,
) {
    let mut c = Coordinator {
        machine: GroupMachine::new(config.group.clone()),
        config,
        replicas,
        offsets: HashMap::new(),
        pending: HashMap::new(),
        next_token: 1,
        joins: HashMap::new(),
        syncs: HashMap::new(),
        owned: HashMap::new(),
        early_markers: HashMap::new(),
        tx,
        metadata: Arc::clone(&metadata),
        consumer: HashMap::new(),
        consumer_timers: HashMap::new(),
        regex_cache: HashMap::new(),
        streams: HashMap::new(),
        streams_timers: HashMap::new(),
        streams_delays: HashMap::new(),
        share: HashMap::new(),
    };
    let mut images = metadata.subscribe();
    c.follow_leadership();
    let mut expiry =
        tokio::time::interval(Duration::from_millis(c.config.offsets_retention_check_ms));
    loop {
        let deadline = [
            c.machine.next_deadline(),
            c.consumer_deadline(),
            c.streams_deadline(),
        ]
        .into_iter()
        .flatten()
        .min();
        let sleep = async {
            match deadline {
                Some(d) => {
                    tokio::time::sleep(Duration::from_millis((d - now_ms()).max(0) as u64)).await
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            cmd = rx.recv() => match cmd {
                Some(Command::Stop) | None => {
                    c.unload_all();
                    break;
                }
                Some(cmd) => c.handle(cmd),
            },
            changed = images.changed() => {
                if changed.is_err() {
                    c.unload_all();
                    break;
                }
                c.follow_leadership();
            }
            _ = sleep => {
                // Requests that arrived before the timer fired go first (as in Kafka, whose
                // timer queues its event behind them): a join already waiting makes it into
                // the rebalance the timer completes.
                let mut stop = false;
                for _ in 0..rx.len() {
                    match rx.try_recv() {
                        Ok(Command::Stop) | Err(mpsc::error::TryRecvError::Disconnected) => {
                            stop = true;
                            break;
                        }
                        Ok(cmd) => c.handle(cmd),
                        Err(mpsc::error::TryRecvError::Empty) => break,
                    }
                }
                if stop {
                    c.unload_all();
                    break;
                }
                let fx = c.machine.tick(now_ms());
                tracing::debug!(effects = fx.len(), "group timers fired");
                c.apply(fx);
                c.consumer_tick(now_ms());
                c.streams_tick(now_ms());
            }
            _ = expiry.tick() => c.expire_offsets(now_ms()),
        }
    }
}

/// Read one `__consumer_offsets` partition: offsets, group metadata, and the offsets of
/// transactions that no marker has ended yet.
fn load(replicas: &ReplicaManager, partition: i32) -> LoadResult {
    let mut out = LoadResult::default();
    let mut groups: BTreeMap<String, Option<GroupValue>> = BTreeMap::new();
    replicas.scan(
        &TopicPartition::new(OFFSETS_TOPIC, partition),
        |h, bytes| {
            out.end = out.end.max(h.next_offset());
            if h.is_control() {
                // A marker: the producer's pending offsets are applied (commit) or dropped.
                let commit = decode_records(bytes, RecordLimits::default())
                    .ok()
                    .and_then(|r| r.into_iter().next())
                    .and_then(|r| r.key)
                    .is_some_and(|k| k.len() >= 4 && k[2..4] == [0, 1]);
                if let Some(by_group) = out.pending.remove(&h.producer_id) {
                    if commit {
                        for (group, committed) in by_group {
                            out.offsets.entry(group).or_default().extend(committed);
                        }
                    }
                }
                return;
            }
            let Ok(records) = decode_records(bytes, RecordLimits::default()) else {
                return;
            };
            for r in records {
                let Some(key) = r.key.as_deref().and_then(OffsetsKey::decode) else {
                    let key = r.key.as_deref();
                    if let Some(key) = key.and_then(ConsumerGroupKey::decode) {
                        consumer_group::records::replay(
                            &mut out.consumer_groups,
                            &key,
                            r.value.as_deref(),
                        );
                    } else if let Some(key) = key.and_then(StreamsGroupKey::decode) {
                        streams_group::records::replay(
                            &mut out.streams_groups,
                            &key,
                            r.value.as_deref(),
                        );
                    }
                    continue;
                };
                match key {
                    OffsetsKey::Offset {
                        group,
                        topic,
                        partition,
                    } => {
                        let value = r.value.as_deref().and_then(OffsetValue::decode);
                        if h.is_transactional() {
                            if let Some(v) = value {
                                out.pending
                                    .entry(h.producer_id)
                                    .or_default()
                                    .entry(group)
                                    .or_default()
                                    .insert((topic, partition), v);
                            }
                            continue;
                        }
                        let entry = out.offsets.entry(group).or_default();
                        match value {
                            Some(v) => {
                                entry.insert((topic, partition), v);
                            }
                            None => {
                                entry.remove(&(topic, partition));
                            }
                        }
                    }
                    OffsetsKey::Group { group } => {
                        groups.insert(group, r.value.as_deref().and_then(GroupValue::decode));
                    }
                }
            }
        },
    );
    out.offsets.retain(|_, o| !o.is_empty());
    out.groups = groups.into_iter().collect();
    out
}

impl Coordinator {
    fn token(&mut self) -> Token {
        self.next_token += 1;
        self.next_token
    }

    fn handle(&mut self, cmd: Command) {
        let now = now_ms();
        if let Command::Loaded {
            partition,
            epoch,
            result,
        } = cmd
        {
            return self.loaded(partition, epoch, *result, now);
        }
        let group = match &cmd {
            Command::Join(r, _) => Some(r.group_id.as_str()),
            Command::Sync(r, _) => Some(r.group_id.as_str()),
            Command::ConsumerHeartbeat(hb, _) => Some(hb.group_id.as_str()),
            Command::StreamsHeartbeat(hb, _) => Some(hb.group_id.as_str()),
            Command::ShareHeartbeat(hb, _) => Some(hb.group_id.as_str()),
            Command::Heartbeat(g, ..)
            | Command::Leave(g, ..)
            | Command::Fetch(g, ..)
            | Command::DeleteOffsets(g, ..) => Some(g.as_str()),
            Command::Commit(r, _) => Some(r.group_id.as_str()),
            Command::TxnCommit(r, _) => Some(r.group_id.as_str()),
            _ => None,
        };
        if let Some(Err(code)) = group.map(|g| self.route(g)) {
            match cmd {
                Command::Join(r, tx) => drop(tx.send(join_error(code, &r.member_id))),
                Command::Sync(_, tx) => drop(tx.send(sync_error(code))),
                // Kafka answers heartbeats NONE while loading.
                Command::Heartbeat(.., tx) => {
                    let _ =
                        tx.send(Some(code).filter(|c| *c != ErrorCode::CoordinatorLoadInProgress));
                }
                Command::Leave(.., tx) | Command::DeleteOffsets(.., tx) => drop(tx.send(Err(code))),
                Command::Commit(_, tx) | Command::TxnCommit(_, tx) => drop(tx.send(Err(code))),
                Command::Fetch(.., tx) => drop(tx.send(Err(code))),
                Command::ConsumerHeartbeat(_, tx) => drop(tx.send(Err((code, String::new())))),
                Command::StreamsHeartbeat(_, tx) => drop(tx.send(Err((code, String::new())))),
                Command::ShareHeartbeat(_, tx) => drop(tx.send(Err((code, String::new())))),
                _ => {}
            }
            return;
        }
        match cmd {
            Command::Join(req, tx) if self.streams.contains_key(&req.group_id) => {
                // A streams group: an empty one becomes a classic group, as in Kafka.
                match self.streams_make_way(&req.group_id) {
                    Ok(()) => self.handle(Command::Join(req, tx)),
                    Err(code) => drop(tx.send(join_error(code, ""))),
                }
            }
            Command::StreamsHeartbeat(hb, tx) => self.streams_heartbeat(*hb, tx, now),
            Command::ShareHeartbeat(hb, tx) => drop(tx.send(self.share_heartbeat(*hb, now))),
            Command::ShareDescribe(groups, tx) => {
                let out = groups.iter().map(|g| self.share_describe(g, now)).collect();
                let _ = tx.send(out);
            }
            Command::StreamsDescribe(groups, tx) => {
                let out = groups
                    .iter()
                    .map(|g| match self.route(g) {
                        Ok(()) => self.streams_describe(g),
                        Err(code) => Err((code, String::new())),
                    })
                    .collect();
                let _ = tx.send(out);
            }
            Command::Join(req, tx) if self.consumer.contains_key(&req.group_id) => {
                // A consumer group: an empty one becomes a classic group, as in Kafka; one
                // with members takes the classic member in.
                if self
                    .consumer
                    .get(&req.group_id)
                    .is_some_and(|g| g.members.is_empty())
                {
                    match self.consumer_delete_for_classic(&req.group_id) {
                        Ok(()) => self.handle(Command::Join(req, tx)),
                        Err(code) => drop(tx.send(join_error(code, &req.member_id))),
                    }
                } else {
                    self.consumer_classic_join(req, tx, now);
                }
            }
            Command::Sync(req, tx) if self.consumer.contains_key(&req.group_id) => {
                self.consumer_classic_sync(req, tx, now);
            }
            Command::Leave(group, members, tx) if self.consumer.contains_key(&group) => {
                self.consumer_classic_leave(&group, &members, tx);
            }
            Command::ConsumerHeartbeat(hb, tx) => self.consumer_heartbeat(*hb, tx, now),
            Command::ConsumerDescribe(groups, tx) => {
                let out = groups
                    .iter()
                    .map(|g| match self.route(g) {
                        Ok(()) => self.consumer_describe(g),
                        Err(code) => Err((code, String::new())),
                    })
                    .collect();
                let _ = tx.send(out);
            }
            Command::Join(req, tx) => {
                tracing::debug!(
                    group = req.group_id,
                    member = req.member_id,
                    version = req.version,
                    "JoinGroup"
                );
                let t = self.token();
                self.joins.insert(t, (req.group_id.clone(), tx));
                let fx = self.machine.join(req, t, now);
                self.apply(fx);
            }
            Command::Sync(req, tx) => {
                let t = self.token();
                self.syncs.insert(t, (req.group_id.clone(), tx));
                let fx = self.machine.sync(&req, t, now);
                self.apply(fx);
            }
            Command::Heartbeat(group, generation, member, instance, tx)
                if self.consumer.contains_key(&group) =>
            {
                let result = self.consumer_classic_heartbeat(
                    &group,
                    generation,
                    &member,
                    instance.as_deref(),
                    now,
                );
                let _ = tx.send(result.unwrap_or(Some(ErrorCode::UnknownMemberId)));
            }
            Command::Heartbeat(group, generation, member, instance, tx) => {
                let _ = tx.send(self.machine.heartbeat(
                    &group,
                    generation,
                    &member,
                    instance.as_deref(),
                    now,
                ));
            }
            Command::Leave(group, members, tx) => {
                tracing::debug!(group, ?members, "LeaveGroup");
                let (results, fx) = self.machine.leave(&group, &members, now);
                self.apply(fx);
                let _ = tx.send(Ok(results));
            }
            Command::Commit(req, tx) => {
                let written = self.commit(req, now);
                answer_when_replicated(&self.replicas, written, tx);
            }
            Command::Fetch(group, topics, require_stable, (member, epoch), tx) => {
                let checked = self
                    .consumer_fetch_check(&group, member.as_deref(), epoch)
                    .and_then(|()| self.streams_fetch_check(&group, member.as_deref(), epoch));
                if let Err(code) = checked {
                    let _ = tx.send(Err(code));
                    return;
                }
                let committed = self.offsets.get(&group);
                let unstable = |t: &String, p: i32| require_stable && self.is_pending(&group, t, p);
                let row = |t: &String, p: i32, v: Option<&OffsetValue>| {
                    let value = match unstable(t, p) {
                        true => Err(ErrorCode::UnstableOffsetCommit),
                        false => Ok(v.cloned()),
                    };
                    (t.clone(), p, value)
                };
                let out = match topics {
                    Some(topics) => topics
                        .iter()
                        .flat_map(|(t, parts)| {
                            parts
                                .iter()
                                .map(|&p| row(t, p, committed.and_then(|c| c.get(&(t.clone(), p)))))
                        })
                        .collect(),
                    // All of the group's committed offsets (a partition with only a pending
                    // transactional offset is not listed, as in Kafka).
                    None => committed
                        .map(|c| c.iter().map(|((t, p), v)| row(t, *p, Some(v))).collect())
                        .unwrap_or_default(),
                };
                let _ = tx.send(Ok(out));
            }
            Command::List(tx) => {
                let mut groups: Vec<GroupListing> = self
                    .machine
                    .groups()
                    .map(|g| {
                        (
                            g.id.clone(),
                            g.protocol_type.clone().unwrap_or_default(),
                            g.state.name(),
                            "classic",
                        )
                    })
                    .collect();
                groups.extend(self.consumer.values().map(|g| {
                    (
                        g.group_id.clone(),
                        "consumer".to_string(),
                        g.state().name(),
                        "consumer",
                    )
                }));
                groups.extend(self.streams.values().map(|g| {
                    (
                        g.group_id.clone(),
                        "streams".to_string(),
                        g.state().name(),
                        "streams",
                    )
                }));
                groups.extend(
                    self.share
                        .iter()
                        .map(|(id, g)| (id.clone(), "share".to_string(), g.state(), "share")),
                );
                let _ = tx.send(Ok(groups));
            }
            Command::Describe(groups, tx) => {
                let out = groups.iter().map(|g| self.describe(g)).collect();
                let _ = tx.send(Ok(out));
            }
            Command::Delete(groups, tx) => {
                let results = groups
                    .iter()
                    .map(|g| match self.route(g) {
                        Ok(()) => {
                            let found = self
                                .consumer_delete(g)
                                .or_else(|| self.streams_delete(g))
                                .or_else(|| self.share_delete(g, now));
                            match found {
                                Some(result) => result,
                                None => self.delete_group(g, now),
                            }
                        }
                        Err(code) => Some(code),
                    })
                    .collect();
                let _ = tx.send(Ok(results));
            }
            Command::TxnCommit(req, tx) => {
                let written = self.txn_commit(req, now);
                answer_when_replicated(&self.replicas, written, tx);
            }
            Command::CompleteTxn(producer_id, partition, commit, marker_offset, tx) => {
                if self
                    .owned
                    .get(&partition)
                    .is_some_and(|(_, loaded)| !loaded)
                {
                    // The load may have read the log before this marker: apply it after.
                    self.early_markers.entry(partition).or_default().push((
                        producer_id,
                        commit,
                        marker_offset,
                    ));
                }
                self.complete_txn(producer_id, partition, commit);
                let _ = tx.send(());
            }
            Command::DeleteOffsets(group, partitions, tx) => {
                let _ = tx.send(self.delete_offsets(&group, &partitions, now));
            }
            Command::Loaded { .. } | Command::Stop => {}
        }
    }

    /// Whether this broker coordinates `group` now: the leader of its partition, loaded.
    fn route(&self, group: &str) -> Result<(), ErrorCode> {
        match self
            .owned
            .get(&partition_for(group, self.config.offsets_partitions))
        {
            None => Err(ErrorCode::NotCoordinator),
            Some((_, false)) => Err(ErrorCode::CoordinatorLoadInProgress),
            Some((_, true)) => Ok(()),
        }
    }

    /// Load the `__consumer_offsets` partitions this broker now leads (a new leader epoch
    /// reloads), and drop the groups of those it no longer leads.
    fn follow_leadership(&mut self) {
        let changes =
            self.replicas
                .leadership_changes(OFFSETS_TOPIC, self.config.offsets_partitions, |p| {
                    self.owned.get(&p).map(|(e, _)| *e)
                });
        for (partition, led) in changes {
            if self.owned.contains_key(&partition) {
                self.unload(partition);
            }
            let Some(epoch) = led else { continue };
            self.owned.insert(partition, (epoch, false));
            let replicas = Arc::clone(&self.replicas);
            let tx = self.tx.clone();
            tokio::spawn(async move {
                let tp = TopicPartition::new(OFFSETS_TOPIC, partition);
                if !replicas.await_committed_log(&tp, epoch).await {
                    return; // deposed before its log was committed: the next leader loads
                }
                let result = sluice_rt::task::spawn_blocking(move || load(&replicas, partition))
                    .await
                    .unwrap_or_default();
                let _ = tx
                    .send(Command::Loaded {
                        partition,
                        epoch,
                        result: Box::new(result),
                    })
                    .await;
            });
        }
    }

    fn loaded(&mut self, partition: i32, epoch: i32, result: LoadResult, now: i64) {
        match self.owned.get_mut(&partition) {
            Some((e, loaded)) if *e == epoch => *loaded = true,
            _ => return, // leadership moved on while loading
        }
        for (group, value) in result.groups {
            match value {
                Some(v) => self.machine.restore(&group, &v, now),
                None => self.machine.forget(&group),
            }
        }
        self.consumer_loaded(result.consumer_groups, now);
        self.streams_loaded(result.streams_groups, now);
        for group in result.offsets.keys() {
            if self.machine.group(group).is_none()
                && !self.consumer.contains_key(group)
                && !self.streams.contains_key(group)
            {
                self.machine.ensure_group(group, now);
            }
        }
        let groups = result.offsets.len();
        self.offsets.extend(result.offsets);
        for (producer_id, by_group) in result.pending {
            self.pending
                .entry(producer_id)
                .or_default()
                .extend(by_group);
        }
        let early = self.early_markers.remove(&partition).unwrap_or_default();
        for (producer_id, commit, offset) in early {
            if offset >= result.end {
                self.complete_txn(producer_id, partition, commit);
            }
        }
        info!(
            partition,
            epoch, groups, "group coordinator loaded {OFFSETS_TOPIC}-{partition}"
        );
    }

    /// Stop coordinating the groups of `partition`: their parked requests are answered
    /// NOT_COORDINATOR and their state is dropped (the new leader loads it).
    fn unload(&mut self, partition: i32) {
        self.owned.remove(&partition);
        self.early_markers.remove(&partition);
        let n = self.config.offsets_partitions;
        let mine = |g: &str| partition_for(g, n) == partition;
        self.answer_parked(&mine, ErrorCode::NotCoordinator);
        let groups: Vec<String> = self
            .machine
            .groups()
            .filter(|g| mine(&g.id))
            .map(|g| g.id.clone())
            .collect();
        for g in &groups {
            self.machine.forget(g);
        }
        let consumer_groups = self.consumer_unload(&mine);
        let streams_groups = self.streams_unload(&mine);
        let share_groups = self.share_unload(&mine);
        self.offsets.retain(|g, _| !mine(g));
        for by_group in self.pending.values_mut() {
            by_group.retain(|g, _| !mine(g));
        }
        self.pending.retain(|_, by_group| !by_group.is_empty());
        info!(
            partition,
            groups = groups.len(),
            consumer_groups,
            streams_groups,
            share_groups,
            "group coordinator unloaded {OFFSETS_TOPIC}-{partition}"
        );
    }

    /// Answer the parked JoinGroup and SyncGroup requests of the groups `which` picks.
    fn answer_parked(&mut self, which: &dyn Fn(&str) -> bool, code: ErrorCode) {
        let joins: Vec<Token> = self
            .joins
            .iter()
            .filter(|(_, (g, _))| which(g))
            .map(|(t, _)| *t)
            .collect();
        for t in joins {
            if let Some((_, tx)) = self.joins.remove(&t) {
                let _ = tx.send(join_error(code, ""));
            }
        }
        let syncs: Vec<Token> = self
            .syncs
            .iter()
            .filter(|(_, (g, _))| which(g))
            .map(|(t, _)| *t)
            .collect();
        for t in syncs {
            if let Some((_, tx)) = self.syncs.remove(&t) {
                let _ = tx.send(sync_error(code));
            }
        }
    }

    /// Answer every parked request NOT_COORDINATOR (this broker stops coordinating).
    fn unload_all(&mut self) {
        let partitions: Vec<i32> = self.owned.keys().copied().collect();
        for p in partitions {
            self.unload(p);
        }
        for (_, (_, tx)) in self.joins.drain() {
            let _ = tx.send(join_error(ErrorCode::NotCoordinator, ""));
        }
        for (_, (_, tx)) in self.syncs.drain() {
            let _ = tx.send(sync_error(ErrorCode::NotCoordinator));
        }
    }

    /// Whether a transaction has written offsets of `group` (for these partitions, or any)
    /// that no marker has settled yet.
    /// Whether a transaction has committed an offset of `group` for (topic, partition)
    /// that is not yet committed or aborted.
    fn is_pending(&self, group: &str, topic: &str, partition: i32) -> bool {
        self.pending
            .values()
            .filter_map(|g| g.get(group))
            .any(|c| c.contains_key(&(topic.to_string(), partition)))
    }

    fn apply(&mut self, fx: Vec<Effect>) {
        for e in fx {
            match e {
                Effect::Join(t, outcome) => {
                    if let Some((_, tx)) = self.joins.remove(&t) {
                        let _ = tx.send(outcome);
                    }
                }
                Effect::Sync(t, outcome) => {
                    if let Some((_, tx)) = self.syncs.remove(&t) {
                        let _ = tx.send(outcome);
                    }
                }
                Effect::Persist(group) => {
                    if let Some(g) = self.machine.group(&group) {
                        info!(
                            group,
                            generation = g.generation,
                            state = g.state.name(),
                            members = g.members.len(),
                            protocol = g.protocol.as_deref().unwrap_or(""),
                            "group changed"
                        );
                    }
                    let value = self.machine.snapshot(&group).map(|v| v.encode());
                    let key = OffsetsKey::Group {
                        group: group.clone(),
                    }
                    .encode();
                    if let Err(code) = self.append(&group, vec![(key, value)]) {
                        warn!(group, ?code, "cannot persist group metadata");
                    }
                }
            }
        }
    }

    /// Append records to the group's `__consumer_offsets` partition.
    fn append(
        &self,
        group: &str,
        records: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    ) -> Result<(), ErrorCode> {
        self.append_batch(group, records, None).map(drop)
    }

    /// Append records to the group's `__consumer_offsets` partition; with `producer`, as
    /// that producer's transactional batch (ended later by its marker).
    fn append_batch(
        &self,
        group: &str,
        records: Vec<(Vec<u8>, Option<Vec<u8>>)>,
        producer: Option<(i64, i16)>,
    ) -> Result<Appended, ErrorCode> {
        let tp = TopicPartition::new(
            OFFSETS_TOPIC,
            partition_for(group, self.config.offsets_partitions),
        );
        let now = now_ms();
        let mut b = BatchBuilder::new(Compression::None);
        if let Some((id, epoch)) = producer {
            b.set_producer(id, epoch, 0);
            b = b.with_transactional(true);
        }
        for (k, v) in &records {
            b.append(now, Some(k), v.as_deref(), &[]);
        }
        let bytes = b.build(0).map_err(|_| ErrorCode::UnknownServerError)?;
        let origin = match producer {
            Some(_) => AppendOrigin::Coordinator,
            None => AppendOrigin::Client,
        };
        self.replicas
            .append_blocking(origin, Acks::All, &tp, bytes.into())
            .map_err(|e| match e.code() {
                ErrorCode::NotLeaderOrFollower | ErrorCode::UnknownTopicOrPartition => {
                    ErrorCode::NotCoordinator
                }
                code => code,
            })
    }

    /// The records of an offset commit: per offset its result (metadata too large is
    /// refused), the records to write and the values to remember once written.
    #[allow(clippy::type_complexity)]
    fn offset_records(
        &self,
        group: &str,
        offsets: &[(String, i32, i64, i32, Option<String>)],
        now: i64,
    ) -> (
        Vec<Option<ErrorCode>>,
        Vec<(Vec<u8>, Option<Vec<u8>>)>,
        Vec<((String, i32), OffsetValue)>,
    ) {
        let max = self.config.offset_metadata_max_bytes;
        let mut results = Vec::with_capacity(offsets.len());
        let mut records = Vec::new();
        let mut accepted = Vec::new();
        for (topic, partition, offset, epoch, metadata) in offsets {
            let metadata = metadata.clone().unwrap_or_default();
            if metadata.encode_utf16().count() > max {
                results.push(Some(ErrorCode::OffsetMetadataTooLarge));
                continue;
            }
            let value = OffsetValue {
                offset: *offset,
                leader_epoch: *epoch,
                metadata,
                commit_timestamp: now,
            };
            let key = OffsetsKey::Offset {
                group: group.to_string(),
                topic: topic.clone(),
                partition: *partition,
            };
            records.push((key.encode(), Some(value.encode())));
            accepted.push(((topic.clone(), *partition), value));
            results.push(None);
        }
        (results, records, accepted)
    }

    /// OffsetCommit: the offsets are written (and remembered) now; the answer waits for the
    /// write to be replicated (see [`answer_when_replicated`]).
    fn commit(&mut self, req: CommitRequest, now: i64) -> Result<CommitWritten, ErrorCode> {
        let partitions: Vec<(String, i32)> =
            req.offsets.iter().map(|o| (o.0.clone(), o.1)).collect();
        let checked = self
            .consumer_commit_check(
                &req.group_id,
                req.generation,
                &req.member_id,
                req.instance_id.as_deref(),
                Some(req.version),
            )
            .or_else(|| {
                self.streams_commit_check(
                    &req.group_id,
                    req.generation,
                    &req.member_id,
                    req.instance_id.as_deref(),
                    Some(req.version),
                    &partitions,
                )
            });
        match checked {
            Some(checked) => checked?,
            None => self.machine.check_commit(
                &req.group_id,
                req.generation,
                &req.member_id,
                req.instance_id.as_deref(),
                req.version,
                now,
            )?,
        }
        let (results, records, accepted) = self.offset_records(&req.group_id, &req.offsets, now);
        let mut written = None;
        if !records.is_empty() {
            match self.append_batch(&req.group_id, records, None) {
                Ok(a) => written = Some(a),
                Err(code) => {
                    return Ok((
                        results.into_iter().map(|r| r.or(Some(code))).collect(),
                        None,
                    ))
                }
            }
        }
        let committed = self.offsets.entry(req.group_id.clone()).or_default();
        for (k, v) in accepted {
            committed.insert(k, v);
        }
        Ok((results, written))
    }

    /// TxnOffsetCommit: written now as the producer's transactional batch, visible (to
    /// OffsetFetch) only once the commit marker arrives.
    fn txn_commit(&mut self, req: TxnCommitRequest, now: i64) -> Result<CommitWritten, ErrorCode> {
        let partitions: Vec<(String, i32)> =
            req.offsets.iter().map(|o| (o.0.clone(), o.1)).collect();
        let checked = self
            .consumer_commit_check(
                &req.group_id,
                req.generation,
                &req.member_id,
                req.instance_id.as_deref(),
                None,
            )
            .or_else(|| {
                self.streams_commit_check(
                    &req.group_id,
                    req.generation,
                    &req.member_id,
                    req.instance_id.as_deref(),
                    None,
                    &partitions,
                )
            });
        match checked {
            Some(checked) => checked?,
            None => self.machine.check_txn_commit(
                &req.group_id,
                req.generation,
                &req.member_id,
                req.instance_id.as_deref(),
                now,
            )?,
        }
        let (results, records, accepted) = self.offset_records(&req.group_id, &req.offsets, now);
        let mut written = None;
        if !records.is_empty() {
            let producer = Some((req.producer_id, req.producer_epoch));
            match self.append_batch(&req.group_id, records, producer) {
                Ok(a) => written = Some(a),
                Err(code) => {
                    return Ok((
                        results.into_iter().map(|r| r.or(Some(code))).collect(),
                        None,
                    ))
                }
            }
        }
        let pending = self
            .pending
            .entry(req.producer_id)
            .or_default()
            .entry(req.group_id.clone())
            .or_default();
        for (k, v) in accepted {
            pending.insert(k, v);
        }
        Ok((results, written))
    }

    /// A marker for `producer_id` in `partition`: its pending offsets of the groups there
    /// become committed (commit) or are dropped (abort).
    fn complete_txn(&mut self, producer_id: i64, partition: i32, commit: bool) {
        let n = self.config.offsets_partitions;
        let Some(by_group) = self.pending.get_mut(&producer_id) else {
            return;
        };
        let groups: Vec<String> = by_group
            .keys()
            .filter(|g| partition_for(g, n) == partition)
            .cloned()
            .collect();
        for g in groups {
            let Some(offsets) = by_group.remove(&g) else {
                continue;
            };
            if commit {
                self.offsets.entry(g).or_default().extend(offsets);
            }
        }
        if by_group.is_empty() {
            self.pending.remove(&producer_id);
        }
    }

    fn describe(&self, group: &str) -> Option<GroupDescription> {
        let modern = self
            .consumer
            .get(group)
            .map(|g| g.group_id.clone())
            .or_else(|| self.streams.get(group).map(|g| g.group_id.clone()));
        if let Some(group_id) = modern {
            return Some(GroupDescription {
                group_id,
                state: "Dead",
                protocol_type: String::new(),
                protocol: String::new(),
                members: Vec::new(),
                consumer: true,
            });
        }
        let g = self.machine.group(group)?;
        let protocol = g.protocol.clone().unwrap_or_default();
        let show_members = matches!(
            g.state,
            GroupState::Stable | GroupState::CompletingRebalance | GroupState::PreparingRebalance
        );
        let members = if show_members {
            g.members
                .values()
                .map(|m| {
                    let metadata = m
                        .protocols
                        .iter()
                        .find(|(n, _)| *n == protocol)
                        .map(|(_, b)| b.clone())
                        .unwrap_or_default();
                    let assignment = if g.state == GroupState::Stable {
                        m.assignment.clone()
                    } else {
                        Bytes::new()
                    };
                    (
                        m.id.clone(),
                        m.instance_id.clone(),
                        m.client_id.clone(),
                        m.client_host.clone(),
                        metadata,
                        assignment,
                    )
                })
                .collect()
        } else {
            Vec::new()
        };
        Some(GroupDescription {
            group_id: g.id.clone(),
            state: g.state.name(),
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            protocol: if g.state == GroupState::Stable {
                protocol
            } else {
                String::new()
            },
            members,
            consumer: false,
        })
    }

    fn tombstones(
        &self,
        group: &str,
        partitions: impl Iterator<Item = (String, i32)>,
    ) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        partitions
            .map(|(topic, partition)| {
                let key = OffsetsKey::Offset {
                    group: group.to_string(),
                    topic,
                    partition,
                };
                (key.encode(), None)
            })
            .collect()
    }

    fn delete_group(&mut self, group: &str, _now: i64) -> Option<ErrorCode> {
        if let Err(code) = self.machine.delete(group) {
            return Some(code);
        }
        let committed = self.offsets.remove(group).unwrap_or_default();
        let mut records = self.tombstones(group, committed.into_keys());
        records.push((
            OffsetsKey::Group {
                group: group.to_string(),
            }
            .encode(),
            None,
        ));
        self.append(group, records).err()
    }

    fn delete_offsets(
        &mut self,
        group: &str,
        partitions: &[(String, i32)],
        _now: i64,
    ) -> Result<Vec<Option<ErrorCode>>, ErrorCode> {
        // Topics the group's members are consuming keep their offsets.
        let subscribed: Box<dyn Fn(&str) -> bool> =
            match (self.machine.group(group), self.consumer.get(group)) {
                _ if self.streams.contains_key(group) => {
                    let g = &self.streams[group];
                    Box::new(move |topic: &str| g.reads_topic(topic))
                }
                (_, Some(g)) => Box::new(move |topic: &str| {
                    g.members
                        .values()
                        .any(|m| g.member_topics(m).iter().any(|t| t.as_str() == topic))
                }),
                (Some(g), None) => Box::new(move |topic: &str| {
                    g.state != GroupState::Empty
                        && g.members.values().any(|m| {
                            m.protocols
                                .iter()
                                .any(|(_, meta)| subscription_mentions(meta, topic))
                        })
                }),
                (None, None) => return Err(ErrorCode::GroupIdNotFound),
            };
        let results: Vec<Option<ErrorCode>> = partitions
            .iter()
            .map(|(t, _)| subscribed(t).then_some(ErrorCode::GroupSubscribedToTopic))
            .collect();
        let doomed: Vec<(String, i32)> = partitions
            .iter()
            .zip(&results)
            .filter(|(_, r)| r.is_none())
            .map(|(k, _)| k.clone())
            .collect();
        if let Some(c) = self.offsets.get_mut(group) {
            for k in &doomed {
                c.remove(k);
            }
        }
        let records = self.tombstones(group, doomed.into_iter());
        if !records.is_empty() {
            self.append(group, records)?;
        }
        Ok(results)
    }

    /// Offsets of groups that have had no members for `offsets.retention.minutes` expire.
    fn expire_offsets(&mut self, now: i64) {
        let retention = self.config.offsets_retention_ms;
        let expired: Vec<String> = self
            .machine
            .groups()
            .filter(|g| g.state == GroupState::Empty && now - g.state_since_ms >= retention)
            .map(|g| g.id.clone())
            .filter(|id| self.offsets.get(id).is_some_and(|c| !c.is_empty()))
            .collect();
        for group in expired {
            let committed = self.offsets.remove(&group).unwrap_or_default();
            info!(
                group,
                offsets = committed.len(),
                "expiring offsets of an empty group"
            );
            let records = self.tombstones(&group, committed.into_keys());
            if let Err(code) = self.append(&group, records) {
                warn!(group, ?code, "cannot write offset tombstones");
            }
        }
        self.expire_consumer_offsets(now);
        self.expire_streams_offsets(now);
    }
}

/// An offset commit's per-partition results, and its write to `__consumer_offsets` (None
/// when nothing was written).
type CommitWritten = (Vec<Option<ErrorCode>>, Option<Appended>);

/// How long an offset commit waits for its write to be replicated (Kafka's
/// `offsets.commit.timeout.ms` default).
const OFFSETS_COMMIT_TIMEOUT: Duration = Duration::from_millis(5000);

/// Answer an offset commit once its write is committed in `__consumer_offsets` (replicated
/// to the ISR, as Kafka's coordinator appends with acks=all), without holding up the
/// coordinator: an acknowledged commit survives the coordinator's failover. Replication
/// errors become the codes Kafka's coordinator answers (COORDINATOR_NOT_AVAILABLE, or
/// NOT_COORDINATOR when this replica was deposed), which clients retry.
fn answer_when_replicated(
    replicas: &Arc<ReplicaManager>,
    written: Result<CommitWritten, ErrorCode>,
    tx: oneshot::Sender<Result<Vec<Option<ErrorCode>>, ErrorCode>>,
) {
    let (results, appended) = match written {
        Ok((results, Some(appended))) => (results, appended),
        Ok((results, None)) => return drop(tx.send(Ok(results))),
        Err(code) => return drop(tx.send(Err(code))),
    };
    let replicas = Arc::clone(replicas);
    tokio::spawn(async move {
        let outcome = replicas
            .await_replication(&[&appended], OFFSETS_COMMIT_TIMEOUT)
            .await;
        let code = outcome
            .first()
            .and_then(|o| o.error())
            .map(|code| match code {
                ErrorCode::NotLeaderOrFollower => ErrorCode::NotCoordinator,
                _ => ErrorCode::CoordinatorNotAvailable,
            });
        let _ = tx.send(Ok(results.into_iter().map(|r| r.or(code)).collect()));
    });
}

/// Whether a consumer-protocol subscription (v0+: version i16, topics [string], ...) names
/// `topic`.
fn subscription_mentions(metadata: &[u8], topic: &str) -> bool {
    let mut pos = 2usize;
    let read_i32 = |b: &[u8], p: usize| {
        b.get(p..p + 4)
            .map(|x| i32::from_be_bytes([x[0], x[1], x[2], x[3]]))
    };
    let Some(n) = read_i32(metadata, pos) else {
        return false;
    };
    pos += 4;
    for _ in 0..n.max(0) {
        let Some(len) = metadata
            .get(pos..pos + 2)
            .map(|x| i16::from_be_bytes([x[0], x[1]]))
        else {
            return false;
        };
        pos += 2;
        let Some(name) = metadata.get(pos..pos + len.max(0) as usize) else {
            return false;
        };
        if name == topic.as_bytes() {
            return true;
        }
        pos += len.max(0) as usize;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coordinator_partition_matches_kafka() {
        // Java: "my-group".hashCode() == 1_574_218_155 (positive); "".hashCode() == 0.
        assert_eq!(java_hash_code(""), 0);
        assert_eq!(java_hash_code("a"), 97);
        assert_eq!(java_hash_code("ab"), 97 * 31 + 98);
        assert_eq!(partition_for("", 50), 0);
        assert_eq!(partition_for("a", 50), 97 % 50);
        // A name whose hash is negative still maps into range.
        let neg = (0..1000)
            .map(|i| format!("group-{i}"))
            .find(|g| java_hash_code(g) < 0)
            .unwrap();
        assert!((0..50).contains(&partition_for(&neg, 50)));
    }

    #[test]
    fn subscriptions_are_read_for_topic_names() {
        let mut meta = vec![0, 1, 0, 0, 0, 2];
        for t in ["orders", "pay"] {
            meta.extend_from_slice(&(t.len() as i16).to_be_bytes());
            meta.extend_from_slice(t.as_bytes());
        }
        assert!(subscription_mentions(&meta, "pay"));
        assert!(!subscription_mentions(&meta, "other"));
        assert!(!subscription_mentions(&[0, 1, 0x7f], "x"));
    }
}
