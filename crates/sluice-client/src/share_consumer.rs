//! [`ShareConsumer`]: a member of a share group (KIP-932, "queues for Kafka").
//!
//! Many members read the same partitions; the partition leader hands each record to one
//! member under an acquisition lock, and the member acknowledges it: ACCEPT (done), RELEASE
//! (deliver again, to anyone) or REJECT (never again). A record not acknowledged before its
//! lock expires, or still held when the member's share session closes, is delivered again;
//! after `group.share.delivery.count.limit` deliveries it is archived.
//!
//! As Kafka's Java `KafkaShareConsumer`:
//! - Membership: a background task sends ShareGroupHeartbeat (the member id is the client's
//!   own, epoch 0 joins, -1 leaves) and takes the assignment the coordinator computes; there
//!   is no revocation step, a new assignment applies at the next `poll`.
//! - Fetching: one share session per broker (ShareFetch at epoch 0 opens it with the
//!   partitions this member reads there, later epochs add and forget partitions); acknowledgements
//!   ride on the next ShareFetch to the broker that delivered the records, or go in a
//!   ShareAcknowledge (`commit_sync`, `close`, or when no fetch goes that way).
//! - `share.acknowledgement.mode=implicit` (default): the records a poll returned are accepted
//!   by the next `poll`, `commit_sync` or `close`. `explicit`: the application calls
//!   [`ShareConsumer::acknowledge`] for each record before polling again.
//! - Offsets acquired without a record to hand out (control records of transactions) are
//!   acknowledged as GAP, so they do not come back.
//!
//! The outcome of acknowledgements sent (a broker may refuse one, e.g. when the lock expired
//! and the record went to another member) is kept until [`ShareConsumer::commit_sync`] or
//! [`ShareConsumer::acknowledgement_results`] hands it over.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch as AckBatch,
};
use kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch, FetchPartition, FetchTopic, ForgottenTopic,
};
use kafka_protocol::messages::{
    ApiKey, ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest,
    ShareFetchResponse, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use sluice_protocol::batch::{self, BatchIter, RecordLimits};
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::cluster::ClusterCore;
use crate::config::ClientConfig;
use crate::connection::{Connection, TaskGuard};
use crate::consumer::ConsumerRecord;
use crate::error::{Error, Result};
use crate::group::coordinator::{
    find_coordinator, group_id, is_coordinator_error, str_bytes, KEY_TYPE_GROUP,
};

/// How the records a poll returns are acknowledged (`share.acknowledgement.mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcknowledgementMode {
    /// Accepted by the next `poll`, `commit_sync` or `close`.
    Implicit,
    /// Each one by [`ShareConsumer::acknowledge`], before the next `poll`.
    Explicit,
}

/// What to do with a delivered record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcknowledgeType {
    /// Processed: never delivered again.
    Accept,
    /// Not processed: deliver it again (to any member), counting the delivery.
    Release,
    /// Unprocessable: never deliver it again.
    Reject,
}

impl AcknowledgeType {
    fn wire(self) -> i8 {
        match self {
            AcknowledgeType::Accept => ACCEPT,
            AcknowledgeType::Release => 2,
            AcknowledgeType::Reject => 3,
        }
    }
}

/// Wire acknowledge types: an offset with no record, and ACCEPT.
const GAP: i8 = 0;
const ACCEPT: i8 = 1;

/// The epoch that leaves a share group, and the one that closes a share session.
const LEAVE: i32 = -1;
const CLOSE_SESSION: i32 = -1;

/// A record a share group handed to this member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareRecord {
    pub record: ConsumerRecord,
    /// How often it has been delivered, this time included (1 the first time).
    pub delivery_count: i16,
}

impl std::ops::Deref for ShareRecord {
    type Target = ConsumerRecord;
    fn deref(&self) -> &ConsumerRecord {
        &self.record
    }
}

/// The outcome of acknowledging some offsets of a partition.
#[derive(Clone, Debug)]
pub struct AcknowledgementResult {
    pub partition: TopicPartition,
    pub offsets: Vec<i64>,
    /// None: the leader took them.
    pub error: Option<Error>,
}

/// The member's side of the share group: heartbeat state and its assignment.
struct MemberState {
    member_id: String,
    epoch: i32,
    subscription: Vec<String>,
    assignment: Vec<TopicPartition>,
    interval: Duration,
    fatal: Option<Error>,
    coordinator: Option<Arc<Connection>>,
}

struct Member {
    core: Arc<ClusterCore>,
    group: String,
    state: Mutex<MemberState>,
    /// The assignment changed (or the member failed for good).
    changed: Notify,
    /// Heartbeat now (the subscription changed).
    kick: Notify,
}

/// Errors after which the member cannot go on.
fn is_fatal(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::GroupAuthorizationFailed
            | ErrorCode::TopicAuthorizationFailed
            | ErrorCode::UnsupportedVersion
            | ErrorCode::InvalidRequest
            | ErrorCode::GroupMaxSizeReached
            | ErrorCode::InconsistentGroupProtocol
            | ErrorCode::GroupIdNotFound
    )
}

impl Member {
    fn state(&self) -> MutexGuard<'_, MemberState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn coordinator(&self) -> Result<Arc<Connection>> {
        if let Some(c) = self.state().coordinator.clone().filter(|c| !c.is_closed()) {
            return Ok(c);
        }
        let (_, addr) = find_coordinator(&self.core, &self.group, KEY_TYPE_GROUP).await?;
        let conn = self.core.connection_to(&addr).await?;
        self.state().coordinator = Some(Arc::clone(&conn));
        Ok(conn)
    }

    async fn heartbeat_once(&self) -> Result<()> {
        let (member_id, epoch, subscription) = {
            let st = self.state();
            (st.member_id.clone(), st.epoch, st.subscription.clone())
        };
        let conn = self.coordinator().await?;
        let version = conn.version_for(ApiKey::ShareGroupHeartbeat)?;
        let req = ShareGroupHeartbeatRequest::default()
            .with_group_id(group_id(&self.group))
            .with_member_id(str_bytes(&member_id))
            .with_member_epoch(epoch)
            .with_subscribed_topic_names(Some(
                subscription
                    .iter()
                    .map(|t| TopicName(str_bytes(t)))
                    .collect(),
            ));
        let resp: ShareGroupHeartbeatResponse = conn
            .call_within(&req, version, self.core.config.request_timeout)
            .await?;
        if let Some(code) = ErrorCode::try_from_code(resp.error_code) {
            if matches!(
                code,
                ErrorCode::FencedMemberEpoch | ErrorCode::UnknownMemberId
            ) {
                warn!(group = %self.group, epoch, "share heartbeat answered {code:?}: joining again");
                let mut st = self.state();
                st.epoch = 0;
                st.assignment.clear();
                drop(st);
                self.changed.notify_one();
                self.kick.notify_one();
                return Ok(());
            }
            return Err(Error::Kafka {
                code,
                message: resp.error_message.as_ref().map(StrBytes::to_string),
            });
        }
        let assignment = match &resp.assignment {
            None => None,
            Some(a) => {
                let ids: Vec<[u8; 16]> = a
                    .topic_partitions
                    .iter()
                    .map(|t| *t.topic_id.as_bytes())
                    .collect();
                let names = self.core.topic_ids(&[], &ids, &subscription).await?;
                let mut tps: Vec<TopicPartition> = Vec::new();
                for t in &a.topic_partitions {
                    if let Some(name) = names.get(t.topic_id.as_bytes()) {
                        tps.extend(t.partitions.iter().map(|p| TopicPartition::new(name, *p)));
                    }
                }
                tps.sort();
                Some(tps)
            }
        };
        let mut st = self.state();
        if epoch == 0 {
            info!(group = %self.group, member = %member_id, epoch = resp.member_epoch, "joined the share group");
        }
        st.epoch = resp.member_epoch;
        if resp.heartbeat_interval_ms > 0 {
            st.interval = Duration::from_millis(resp.heartbeat_interval_ms as u64);
        }
        if let Some(tps) = assignment {
            if tps != st.assignment {
                debug!(group = %self.group, partitions = tps.len(), "share assignment");
                st.assignment = tps;
                drop(st);
                self.changed.notify_one();
            }
        }
        Ok(())
    }

    async fn heartbeat_loop(self: Arc<Self>) {
        loop {
            let wait = match self.heartbeat_once().await {
                Ok(()) => self.state().interval,
                Err(e) if e.code().is_some_and(is_fatal) => {
                    warn!(group = %self.group, "share heartbeat failed for good: {e}");
                    self.state().fatal = Some(e);
                    self.changed.notify_one();
                    return;
                }
                Err(e) => {
                    debug!(group = %self.group, "share heartbeat failed: {e}");
                    if is_coordinator_error(&e) || e.is_retriable() {
                        self.state().coordinator = None;
                    }
                    self.core.config.retry_backoff
                }
            };
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.kick.notified() => {}
            }
        }
    }

    /// Leave the group (epoch -1). Best effort: errors are logged.
    async fn leave(&self) {
        let (member_id, epoch) = {
            let mut st = self.state();
            let out = (st.member_id.clone(), st.epoch);
            st.epoch = LEAVE;
            st.assignment.clear();
            out
        };
        if epoch <= 0 {
            return;
        }
        let result = async {
            let conn = self.coordinator().await?;
            let version = conn.version_for(ApiKey::ShareGroupHeartbeat)?;
            let req = ShareGroupHeartbeatRequest::default()
                .with_group_id(group_id(&self.group))
                .with_member_id(str_bytes(&member_id))
                .with_member_epoch(LEAVE);
            let resp: ShareGroupHeartbeatResponse = conn.call_at(&req, version).await?;
            crate::error::check(resp.error_code, resp.error_message.map(|m| m.to_string()))
        }
        .await;
        match result {
            Ok(()) => info!(group = %self.group, member = %member_id, "left the share group"),
            Err(e) => debug!(group = %self.group, "leaving the share group failed: {e}"),
        }
    }
}

/// A share session with one broker.
#[derive(Default)]
struct Session {
    /// 0: none open (the next ShareFetch opens one).
    epoch: i32,
    partitions: BTreeSet<TopicPartition>,
}

/// Acknowledgements owed to a share session that ended before they were sent.
fn session_ended() -> Error {
    Error::Kafka {
        code: ErrorCode::ShareSessionNotFound,
        message: Some("the share session ended before they were sent".into()),
    }
}

fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

/// Acknowledgements waiting to be sent: by broker, partition, offset.
type Pending = BTreeMap<i32, BTreeMap<TopicPartition, BTreeMap<i64, i8>>>;

/// What a request to one broker carried, to read its answer with.
struct Sent {
    node: i32,
    epoch: i32,
    added: Vec<TopicPartition>,
    forgotten: Vec<TopicPartition>,
    acks: BTreeMap<TopicPartition, BTreeMap<i64, i8>>,
    /// Topic names by id, for the answer.
    names: HashMap<[u8; 16], String>,
}

enum Answer {
    Fetch(Result<ShareFetchResponse>),
    Acknowledge(Result<ShareAcknowledgeResponse>),
}

pub struct ShareConsumer {
    core: Arc<ClusterCore>,
    config: ClientConfig,
    group: String,
    member: Option<(Arc<Member>, TaskGuard)>,
    sessions: HashMap<i32, Session>,
    /// Records the last poll returned that are not acknowledged yet, and the broker each
    /// came from.
    delivered: BTreeMap<(TopicPartition, i64), i32>,
    pending: Pending,
    results: Vec<AcknowledgementResult>,
    topic_names: HashMap<String, Arc<str>>,
}

impl ShareConsumer {
    /// A share consumer of the group `group.id` (required).
    pub fn new(config: ClientConfig) -> Result<ShareConsumer> {
        let group = config.group_id.clone().ok_or_else(|| Error::Config {
            key: "group.id".into(),
            message: "a share consumer needs a group.id".into(),
        })?;
        Ok(ShareConsumer {
            core: ClusterCore::new(config.clone())?,
            config,
            group,
            member: None,
            sessions: HashMap::new(),
            delivered: BTreeMap::new(),
            pending: BTreeMap::new(),
            results: Vec::new(),
            topic_names: HashMap::new(),
        })
    }

    /// This member's id (the client's own, as KIP-932 has it).
    pub fn member_id(&self) -> Option<String> {
        self.member
            .as_ref()
            .map(|(m, _)| m.state().member_id.clone())
    }

    /// The partitions the group assigned to this member.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.member
            .as_ref()
            .map(|(m, _)| m.state().assignment.clone())
            .unwrap_or_default()
    }

    /// Join the group reading `topics` (or change what it reads).
    pub async fn subscribe(&mut self, topics: &[&str]) -> Result<()> {
        if topics.iter().any(|t| t.trim().is_empty()) {
            return Err(Error::Unsupported(
                "topic names to subscribe to cannot be empty".into(),
            ));
        }
        let mut subscription: Vec<String> = topics.iter().map(|t| t.to_string()).collect();
        subscription.sort();
        subscription.dedup();
        if let Some((m, _)) = &self.member {
            m.state().subscription = subscription;
            m.kick.notify_one();
            return Ok(());
        }
        let member = Arc::new(Member {
            core: Arc::clone(&self.core),
            group: self.group.clone(),
            state: Mutex::new(MemberState {
                member_id: uuid::Uuid::new_v4().simple().to_string(),
                epoch: 0,
                subscription,
                assignment: Vec::new(),
                interval: Duration::from_millis(5_000),
                fatal: None,
                coordinator: None,
            }),
            changed: Notify::new(),
            kick: Notify::new(),
        });
        let task = TaskGuard(tokio::spawn(Arc::clone(&member).heartbeat_loop()));
        self.member = Some((member, task));
        Ok(())
    }

    /// Records acquired for this member, waiting up to `timeout` for some. In implicit mode
    /// the records the previous poll returned are accepted first; in explicit mode they must
    /// all have been acknowledged.
    pub async fn poll(&mut self, timeout: Duration) -> Result<Vec<ShareRecord>> {
        let member = match &self.member {
            Some((m, _)) => Arc::clone(m),
            None => {
                return Err(Error::Unsupported(
                    "the share consumer is not subscribed to any topics".into(),
                ))
            }
        };
        match self.config.share_acknowledgement_mode {
            AcknowledgementMode::Implicit => self.accept_delivered(),
            AcknowledgementMode::Explicit if !self.delivered.is_empty() => {
                return Err(Error::Unsupported(
                    "all records must be acknowledged in explicit acknowledgement mode".into(),
                ))
            }
            AcknowledgementMode::Explicit => {}
        }
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(e) = member.state().fatal.clone() {
                return Err(e);
            }
            let assignment = member.state().assignment.clone();
            let plan = self.plan(&assignment).await?;
            let started = Instant::now();
            let (out, sent) = self.round(&plan, deadline).await?;
            if !out.is_empty() {
                return Ok(out);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(out);
            }
            if !sent {
                // Nothing to fetch from yet: wait for an assignment (or a leader).
                tokio::select! {
                    () = member.changed.notified() => {}
                    () = tokio::time::sleep_until(deadline.min(now + self.config.retry_backoff * 5)) => {}
                }
            } else if now - started < Duration::from_millis(5) {
                // Errors answered at once: do not spin.
                tokio::time::sleep_until(deadline.min(now + self.config.retry_backoff)).await;
            }
        }
    }

    /// Acknowledge a record the last poll returned (explicit mode; in implicit mode it
    /// overrides the implicit ACCEPT). Sent with the next poll, `commit_sync` or `close`.
    pub fn acknowledge(&mut self, record: &ShareRecord, how: AcknowledgeType) -> Result<()> {
        let tp = TopicPartition::new(record.topic.as_ref(), record.partition);
        let key = (tp, record.offset);
        let node = self.delivered.remove(&key).ok_or_else(|| {
            Error::Unsupported(format!(
                "{}-{} at offset {} was not delivered by the last poll, or is acknowledged already",
                record.topic, record.partition, record.offset
            ))
        })?;
        let (tp, offset) = key;
        self.pending
            .entry(node)
            .or_default()
            .entry(tp)
            .or_default()
            .insert(offset, how.wire());
        Ok(())
    }

    /// Send every acknowledgement not sent yet (implicit mode: accepting what the last poll
    /// returned) and wait for the answers; the outcome of every acknowledgement sent since
    /// the last call, piggybacked ones included.
    pub async fn commit_sync(&mut self) -> Result<Vec<AcknowledgementResult>> {
        if self.config.share_acknowledgement_mode == AcknowledgementMode::Implicit {
            self.accept_delivered();
        }
        let nodes: Vec<i32> = self.pending.keys().copied().collect();
        let mut set = JoinSet::new();
        for node in nodes {
            let epoch = self.sessions.get(&node).map_or(0, |s| s.epoch);
            self.acknowledge_on(node, epoch, &mut set).await;
        }
        self.collect(set).await?;
        Ok(std::mem::take(&mut self.results))
    }

    /// The outcome of the acknowledgements sent so far (and not handed over before).
    pub fn acknowledgement_results(&mut self) -> Vec<AcknowledgementResult> {
        std::mem::take(&mut self.results)
    }

    /// Send what is left to acknowledge, close every share session (the brokers release what
    /// this member still holds unacknowledged) and leave the group.
    pub async fn close(mut self) -> Result<Vec<AcknowledgementResult>> {
        if self.config.share_acknowledgement_mode == AcknowledgementMode::Implicit {
            self.accept_delivered();
        }
        let nodes: BTreeSet<i32> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.epoch > 0)
            .map(|(n, _)| *n)
            .chain(self.pending.keys().copied())
            .collect();
        let mut set = JoinSet::new();
        for node in nodes {
            self.acknowledge_on(node, CLOSE_SESSION, &mut set).await;
        }
        let collected = self.collect(set).await;
        if let Some((m, task)) = self.member.take() {
            drop(task);
            m.leave().await;
        }
        collected?;
        Ok(std::mem::take(&mut self.results))
    }

    fn accept_delivered(&mut self) {
        for ((tp, offset), node) in std::mem::take(&mut self.delivered) {
            self.pending
                .entry(node)
                .or_default()
                .entry(tp)
                .or_default()
                .insert(offset, ACCEPT);
        }
    }

    /// The assigned partitions by leader; partitions whose leader is unknown wait.
    async fn plan(
        &mut self,
        assignment: &[TopicPartition],
    ) -> Result<BTreeMap<i32, BTreeSet<TopicPartition>>> {
        let mut plan: BTreeMap<i32, BTreeSet<TopicPartition>> = BTreeMap::new();
        for tp in assignment {
            let leader = match self.core.leader(tp) {
                Some(l) => Some(l),
                None => {
                    match self
                        .core
                        .topic(&tp.topic, false, self.config.request_timeout)
                        .await
                    {
                        Ok(_) => self.core.leader(tp),
                        Err(e) if e.is_retriable() => None,
                        Err(e) => return Err(e),
                    }
                }
            };
            if let Some(l) = leader {
                plan.entry(l).or_default().insert(tp.clone());
            }
        }
        Ok(plan)
    }

    fn topic_id(&self, topic: &str) -> Option<[u8; 16]> {
        self.core
            .cached_topic(topic)
            .map(|t| t.id)
            .filter(|id| *id != [0; 16])
    }

    /// One request to each broker this member reads from or owes acknowledgements: a
    /// ShareFetch (acknowledgements on board), or a ShareAcknowledge where there is nothing
    /// to fetch or the acknowledgements are for partitions no longer read there. Returns the
    /// records and whether anything was sent.
    async fn round(
        &mut self,
        plan: &BTreeMap<i32, BTreeSet<TopicPartition>>,
        deadline: Instant,
    ) -> Result<(Vec<ShareRecord>, bool)> {
        let nodes: BTreeSet<i32> = plan.keys().chain(self.pending.keys()).copied().collect();
        let mut set = JoinSet::new();
        let max_wait = deadline
            .saturating_duration_since(Instant::now())
            .min(self.config.fetch_max_wait);
        for node in nodes {
            let empty = BTreeSet::new();
            let wanted = plan.get(&node).unwrap_or(&empty);
            let session_epoch = self.sessions.get(&node).map_or(0, |s| s.epoch);
            let acks_elsewhere = self
                .pending
                .get(&node)
                .is_some_and(|p| p.keys().any(|tp| !wanted.contains(tp)));
            if wanted.is_empty() || (acks_elsewhere && session_epoch > 0) {
                if self.pending.contains_key(&node) {
                    self.acknowledge_on(node, session_epoch, &mut set).await;
                }
                continue;
            }
            self.fetch_from(node, wanted, max_wait, &mut set).await;
        }
        let sent = !set.is_empty();
        let records = self.collect(set).await?;
        Ok((records, sent))
    }

    /// Queue a ShareFetch to `node` for `wanted`, with the acknowledgements owed to it.
    async fn fetch_from(
        &mut self,
        node: i32,
        wanted: &BTreeSet<TopicPartition>,
        max_wait: Duration,
        set: &mut JoinSet<(Sent, Answer)>,
    ) {
        let session = self.sessions.entry(node).or_default();
        let epoch = session.epoch;
        let mut acks = self.pending.remove(&node).unwrap_or_default();
        if epoch == 0 {
            // The session that delivered these is gone, and its records went back with it.
            self.fail_acks(std::mem::take(&mut acks), &session_ended());
        }
        let session = self.sessions.entry(node).or_default();
        let added: Vec<TopicPartition> = if epoch == 0 {
            wanted.iter().cloned().collect()
        } else {
            wanted
                .iter()
                .filter(|tp| !session.partitions.contains(*tp))
                .cloned()
                .collect()
        };
        let forgotten: Vec<TopicPartition> = if epoch == 0 {
            Vec::new()
        } else {
            session
                .partitions
                .iter()
                .filter(|tp| !wanted.contains(*tp))
                .cloned()
                .collect()
        };
        // The answer names topics by id: every topic this session reads may be in it.
        let in_session: Vec<TopicPartition> = session.partitions.iter().cloned().collect();
        let mut names: HashMap<[u8; 16], String> = HashMap::new();
        for tp in wanted.iter().chain(&in_session) {
            if let Some(id) = self.topic_id(&tp.topic) {
                names.insert(id, tp.topic.clone());
            }
        }
        let mut topics: BTreeMap<[u8; 16], Vec<FetchPartition>> = BTreeMap::new();
        for tp in added.iter().chain(acks.keys()) {
            let Some(id) = self.topic_id(&tp.topic) else {
                continue;
            };
            names.insert(id, tp.topic.clone());
            let parts = topics.entry(id).or_default();
            if parts.iter().any(|p| p.partition_index == tp.partition.0) {
                continue;
            }
            let batches = acks.get(tp).map(ack_batches).unwrap_or_default();
            parts.push(
                FetchPartition::default()
                    .with_partition_index(tp.partition.0)
                    .with_partition_max_bytes(self.config.max_partition_fetch_bytes)
                    .with_acknowledgement_batches(
                        batches
                            .into_iter()
                            .map(|(first, last, types)| {
                                AcknowledgementBatch::default()
                                    .with_first_offset(first)
                                    .with_last_offset(last)
                                    .with_acknowledge_types(types)
                            })
                            .collect(),
                    ),
            );
        }
        let mut gone: BTreeMap<[u8; 16], Vec<i32>> = BTreeMap::new();
        for tp in &forgotten {
            if let Some(id) = self.topic_id(&tp.topic) {
                names.insert(id, tp.topic.clone());
                gone.entry(id).or_default().push(tp.partition.0);
            }
        }
        let max_records = self.config.max_poll_records.min(i32::MAX as usize) as i32;
        let req = ShareFetchRequest::default()
            .with_group_id(Some(group_id(&self.group)))
            .with_member_id(Some(str_bytes(&self.member_id().unwrap_or_default())))
            .with_share_session_epoch(epoch)
            .with_max_wait_ms(max_wait.as_millis().min(i32::MAX as u128) as i32)
            .with_min_bytes(self.config.fetch_min_bytes)
            .with_max_bytes(self.config.fetch_max_bytes)
            .with_max_records(max_records)
            .with_batch_size(max_records)
            .with_topics(
                topics
                    .into_iter()
                    .map(|(id, partitions)| {
                        FetchTopic::default()
                            .with_topic_id(uuid::Uuid::from_bytes(id))
                            .with_partitions(partitions)
                    })
                    .collect(),
            )
            .with_forgotten_topics_data(
                gone.into_iter()
                    .map(|(id, partitions)| {
                        ForgottenTopic::default()
                            .with_topic_id(uuid::Uuid::from_bytes(id))
                            .with_partitions(partitions)
                    })
                    .collect(),
            );
        let sent = Sent {
            node,
            epoch,
            added,
            forgotten,
            acks,
            names,
        };
        let core = Arc::clone(&self.core);
        let timeout = self.config.request_timeout + max_wait;
        set.spawn(async move {
            let result = async {
                let conn = core.connection_to_node(node).await?;
                let version = conn.version_for(ApiKey::ShareFetch)?;
                conn.call_within(&req, version, timeout).await
            }
            .await;
            (sent, Answer::Fetch(result))
        });
    }

    /// Queue a ShareAcknowledge to `node` at `epoch` (-1 closes the session) with what is owed
    /// to it. Nothing is sent to a broker without a session unless it closes one.
    async fn acknowledge_on(&mut self, node: i32, epoch: i32, set: &mut JoinSet<(Sent, Answer)>) {
        let acks = self.pending.remove(&node).unwrap_or_default();
        if epoch == 0 {
            self.fail_acks(acks, &session_ended());
            return;
        }
        let mut names = HashMap::new();
        let mut topics: BTreeMap<[u8; 16], Vec<AcknowledgePartition>> = BTreeMap::new();
        for (tp, offsets) in &acks {
            let Some(id) = self.topic_id(&tp.topic) else {
                continue;
            };
            names.insert(id, tp.topic.clone());
            topics.entry(id).or_default().push(
                AcknowledgePartition::default()
                    .with_partition_index(tp.partition.0)
                    .with_acknowledgement_batches(
                        ack_batches(offsets)
                            .into_iter()
                            .map(|(first, last, types)| {
                                AckBatch::default()
                                    .with_first_offset(first)
                                    .with_last_offset(last)
                                    .with_acknowledge_types(types)
                            })
                            .collect(),
                    ),
            );
        }
        let req = ShareAcknowledgeRequest::default()
            .with_group_id(Some(group_id(&self.group)))
            .with_member_id(Some(str_bytes(&self.member_id().unwrap_or_default())))
            .with_share_session_epoch(epoch)
            .with_topics(
                topics
                    .into_iter()
                    .map(|(id, partitions)| {
                        AcknowledgeTopic::default()
                            .with_topic_id(uuid::Uuid::from_bytes(id))
                            .with_partitions(partitions)
                    })
                    .collect(),
            );
        let sent = Sent {
            node,
            epoch,
            added: Vec::new(),
            forgotten: Vec::new(),
            acks,
            names,
        };
        let core = Arc::clone(&self.core);
        set.spawn(async move {
            let result = async {
                let conn = core.connection_to_node(node).await?;
                let version = conn.version_for(ApiKey::ShareAcknowledge)?;
                conn.call_at(&req, version).await
            }
            .await;
            (sent, Answer::Acknowledge(result))
        });
    }

    /// Wait for every queued request and take in its answer.
    async fn collect(&mut self, mut set: JoinSet<(Sent, Answer)>) -> Result<Vec<ShareRecord>> {
        let mut out = Vec::new();
        let mut first_error = None;
        while let Some(done) = set.join_next().await {
            let (sent, answer) =
                done.map_err(|e| Error::Protocol(format!("share request task failed: {e}")))?;
            if let Err(e) = self.absorb(sent, answer, &mut out) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(out), Err)
    }

    /// The session with `node` is gone: acknowledgements it carried fail, what it held is
    /// released by the broker, the next fetch opens a new one.
    fn session_lost(&mut self, sent: Sent, error: &Error) {
        self.sessions.remove(&sent.node);
        for tp in sent.added.iter().chain(sent.forgotten.iter()) {
            self.core.invalidate(&tp.topic);
        }
        self.delivered.retain(|_, node| *node != sent.node);
        self.fail_acks(sent.acks, error);
    }

    fn fail_acks(&mut self, acks: BTreeMap<TopicPartition, BTreeMap<i64, i8>>, error: &Error) {
        for (tp, offsets) in acks {
            self.results.push(AcknowledgementResult {
                partition: tp,
                offsets: offsets.into_keys().collect(),
                error: Some(error.clone()),
            });
        }
    }

    fn absorb(&mut self, sent: Sent, answer: Answer, out: &mut Vec<ShareRecord>) -> Result<()> {
        let (top, responses) = match answer {
            Answer::Fetch(Ok(r)) => (
                Error::kafka(r.error_code, r.error_message.map(|m| m.to_string())),
                Some(Ok(r.responses)),
            ),
            Answer::Acknowledge(Ok(r)) => (
                Error::kafka(r.error_code, r.error_message.map(|m| m.to_string())),
                Some(Err(r.responses)),
            ),
            Answer::Fetch(Err(e)) | Answer::Acknowledge(Err(e)) => (Some(e), None),
        };
        if let Some(e) = top {
            debug!(
                node = sent.node,
                epoch = sent.epoch,
                "share request failed: {e}"
            );
            let fatal = e.code().is_some_and(is_fatal);
            self.session_lost(sent, &e);
            return if fatal { Err(e) } else { Ok(()) };
        }
        // The session moved on (or was closed).
        if sent.epoch == CLOSE_SESSION {
            self.sessions.remove(&sent.node);
        } else {
            let s = self.sessions.entry(sent.node).or_default();
            s.epoch = next_epoch(sent.epoch);
            if sent.epoch == 0 {
                s.partitions.clear();
            }
            s.partitions.extend(sent.added.iter().cloned());
            for tp in &sent.forgotten {
                s.partitions.remove(tp);
            }
        }
        let mut acks = sent.acks;
        match responses {
            Some(Ok(topics)) => {
                for t in topics {
                    let Some(topic) = sent.names.get(t.topic_id.as_bytes()) else {
                        continue;
                    };
                    for p in t.partitions {
                        let tp = TopicPartition::new(topic.clone(), p.partition_index);
                        if let Some(offsets) = acks.remove(&tp) {
                            self.results.push(AcknowledgementResult {
                                partition: tp.clone(),
                                offsets: offsets.into_keys().collect(),
                                error: Error::kafka(
                                    p.acknowledge_error_code,
                                    p.acknowledge_error_message.map(|m| m.to_string()),
                                ),
                            });
                        }
                        if let Some(e) =
                            Error::kafka(p.error_code, p.error_message.map(|m| m.to_string()))
                        {
                            debug!(%tp, "share fetch: {e}");
                            self.core.invalidate(&tp.topic);
                            continue;
                        }
                        let name = self
                            .topic_names
                            .entry(topic.clone())
                            .or_insert_with(|| Arc::from(topic.as_str()))
                            .clone();
                        let acquired: Vec<(i64, i64, i16)> = p
                            .acquired_records
                            .iter()
                            .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
                            .collect();
                        let records = p.records.unwrap_or_default();
                        let (got, gaps) = decode_acquired(
                            &name,
                            &tp,
                            &records,
                            &acquired,
                            self.config.check_crcs,
                        )?;
                        for r in &got {
                            self.delivered.insert((tp.clone(), r.offset), sent.node);
                        }
                        if !gaps.is_empty() {
                            let owed = self
                                .pending
                                .entry(sent.node)
                                .or_default()
                                .entry(tp.clone())
                                .or_default();
                            owed.extend(gaps.into_iter().map(|o| (o, GAP)));
                        }
                        out.extend(got);
                    }
                }
            }
            Some(Err(topics)) => {
                for t in topics {
                    let Some(topic) = sent.names.get(t.topic_id.as_bytes()) else {
                        continue;
                    };
                    for p in t.partitions {
                        let tp = TopicPartition::new(topic.clone(), p.partition_index);
                        if let Some(offsets) = acks.remove(&tp) {
                            self.results.push(AcknowledgementResult {
                                partition: tp,
                                offsets: offsets.into_keys().collect(),
                                error: Error::kafka(
                                    p.error_code,
                                    p.error_message.map(|m| m.to_string()),
                                ),
                            });
                        }
                    }
                }
            }
            None => {}
        }
        self.fail_acks(
            acks,
            &Error::Protocol("the broker did not answer for these acknowledgements".into()),
        );
        Ok(())
    }
}

/// Consecutive offsets as acknowledgement batches: (first, last, types), one type for the
/// whole batch when they agree, else one per offset.
fn ack_batches(acks: &BTreeMap<i64, i8>) -> Vec<(i64, i64, Vec<i8>)> {
    let mut out: Vec<(i64, i64, Vec<i8>)> = Vec::new();
    for (&offset, &t) in acks {
        match out.last_mut() {
            Some((_, last, types)) if *last + 1 == offset => {
                *last = offset;
                types.push(t);
            }
            _ => out.push((offset, offset, vec![t])),
        }
    }
    for (_, _, types) in &mut out {
        if types.iter().all(|t| *t == types[0]) {
            types.truncate(1);
        }
    }
    out
}

/// The records of the acquired ranges, and the acquired offsets with no record to hand out
/// (control records, offsets compacted away).
fn decode_acquired(
    topic: &Arc<str>,
    tp: &TopicPartition,
    records: &[u8],
    acquired: &[(i64, i64, i16)],
    check_crcs: bool,
) -> Result<(Vec<ShareRecord>, Vec<i64>)> {
    let count_of = |offset: i64| -> Option<i16> {
        acquired
            .iter()
            .find(|(first, last, _)| *first <= offset && offset <= *last)
            .map(|(_, _, c)| *c)
    };
    let corrupt = |offset: i64, e: &dyn std::fmt::Display| Error::Kafka {
        code: ErrorCode::CorruptMessage,
        message: Some(format!("{tp} at offset {offset}: {e}")),
    };
    let mut out = Vec::new();
    // Handed-out offsets, ascending as the log holds them (an offset out of order is skipped).
    let mut seen: Vec<i64> = Vec::new();
    for item in BatchIter::new(records) {
        let Ok((header, bytes)) = item else { break };
        if header.is_control() {
            continue;
        }
        if !acquired
            .iter()
            .any(|(first, last, _)| *first <= header.last_offset() && header.base_offset <= *last)
        {
            continue;
        }
        if check_crcs {
            batch::verify_crc(bytes).map_err(|e| corrupt(header.base_offset, &e))?;
        }
        let decoded = batch::decode_records(bytes, RecordLimits::default())
            .map_err(|e| corrupt(header.base_offset, &e))?;
        for r in decoded {
            let Some(delivery_count) = count_of(r.offset) else {
                continue;
            };
            if seen.last().is_some_and(|last| *last >= r.offset) {
                continue;
            }
            seen.push(r.offset);
            out.push(ShareRecord {
                record: ConsumerRecord {
                    topic: Arc::clone(topic),
                    partition: tp.partition.0,
                    offset: r.offset,
                    timestamp: r.timestamp,
                    key: r.key,
                    value: r.value,
                    headers: r.headers,
                },
                delivery_count,
            });
        }
    }
    let mut gaps = Vec::new();
    for (first, last, _) in acquired {
        // A range far larger than any fetch is a broker's mistake: do not walk it.
        if last - first > 1_000_000 {
            warn!(%tp, first, last, "an acquired range too large to acknowledge gaps in");
            continue;
        }
        gaps.extend((*first..=*last).filter(|o| seen.binary_search(o).is_err()));
    }
    Ok((out, gaps))
}

impl Drop for ShareConsumer {
    /// A share consumer dropped without `close` still leaves its group (in the background,
    /// if a runtime is there to run it); its sessions end with its connections, and the
    /// brokers release what it held.
    fn drop(&mut self) {
        let Some((m, task)) = self.member.take() else {
            return;
        };
        drop(task);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { m.leave().await });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acknowledgements_go_in_batches_of_consecutive_offsets() {
        let acks: BTreeMap<i64, i8> = [(1, 1), (2, 1), (3, 1), (5, 2), (6, 3), (9, 0)]
            .into_iter()
            .collect();
        assert_eq!(
            ack_batches(&acks),
            vec![(1, 3, vec![1]), (5, 6, vec![2, 3]), (9, 9, vec![0])]
        );
        assert!(ack_batches(&BTreeMap::new()).is_empty());
    }

    #[test]
    fn session_epochs_wrap_to_one() {
        assert_eq!(next_epoch(0), 1);
        assert_eq!(next_epoch(41), 42);
        assert_eq!(next_epoch(i32::MAX), 1);
    }

    #[test]
    fn acquired_offsets_without_records_are_gaps() {
        use sluice_protocol::batch::BatchBuilder;
        use sluice_protocol::compression::Compression;
        // Offsets 10-12 data, 13 a control record, 14-15 data; 11 compacted away.
        let mut data = BatchBuilder::new(Compression::None);
        data.append_at(0, 1, None, Some(b"a"), &[]);
        data.append_at(2, 1, None, Some(b"c"), &[]);
        let mut bytes = data.build(10).unwrap();
        let mut control = BatchBuilder::new(Compression::None).with_control(true);
        control.append(1, Some(&[0, 0, 0, 1]), Some(&[0, 0, 0, 0, 0, 0]), &[]);
        bytes.extend(control.build(13).unwrap());
        let mut tail = BatchBuilder::new(Compression::None);
        tail.append(1, None, Some(b"e"), &[]);
        tail.append(1, None, Some(b"f"), &[]);
        bytes.extend(tail.build(14).unwrap());
        let tp = TopicPartition::new("t", 0);
        let name: Arc<str> = Arc::from("t");
        // 10-13 acquired for the second time; 14 not acquired (another member's); 15 first.
        let (got, gaps) =
            decode_acquired(&name, &tp, &bytes, &[(10, 13, 2), (15, 15, 1)], true).unwrap();
        let seen: Vec<(i64, i16)> = got.iter().map(|r| (r.offset, r.delivery_count)).collect();
        assert_eq!(seen, vec![(10, 2), (12, 2), (15, 1)]);
        assert_eq!(gaps, vec![11, 13]);
        // A damaged batch is an error, not records.
        let at = bytes.len() - 1;
        bytes[at] ^= 0xff;
        assert!(decode_acquired(&name, &tp, &bytes, &[(15, 15, 1)], true).is_err());
    }
}
