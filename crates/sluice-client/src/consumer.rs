//! [`Consumer`]: fetches records of its partitions, which come either from the consumer
//! group (`subscribe`: the group coordinator and the group's leader decide) or from the
//! application (`assign`). Positions are tracked per partition; one fetch per broker is kept
//! in flight and the next is issued as soon as data is handed out (prefetch), so fetching
//! overlaps the application's work. Batches are CRC-checked, decompressed (all five codecs)
//! and control batches skipped.
//!
//! Group membership follows the Java client: a background task heartbeats; `poll` runs
//! rebalances (revoking, committing, calling the [`RebalanceListener`]) and auto-commits
//! every `auto.commit.interval.ms`. A partition's first position is its committed offset
//! (when `group.id` is set), else `auto.offset.reset`.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use sluice_protocol::batch::{self, BatchIter, RecordLimits};
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tracing::{debug, warn};

use crate::admin::{list_offsets, OffsetSpec};
use crate::cluster::ClusterCore;
use crate::config::ClientConfig;
use crate::config::GroupProtocol;
use crate::connection::{decode_response, TaskGuard};
use crate::error::{Error, Result};
use crate::group::coordinator::{self, with_coordinator, CommitIdentity};
use crate::group::member::{GroupSettings, Joined, Membership, Phase};
use crate::group::{CommittedOffset, OffsetAndMetadata, RebalanceListener};

/// What to do when a partition has no valid position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetReset {
    Earliest,
    Latest,
    /// Fail with OFFSET_OUT_OF_RANGE.
    None,
}

/// A consumed record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerRecord {
    pub topic: Arc<str>,
    pub partition: i32,
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
}

#[derive(Debug, Default)]
struct PartitionState {
    /// Offset of the next record `poll` returns; None until reset.
    position: Option<i64>,
    /// Offset the next fetch starts at.
    fetch_position: Option<i64>,
    paused: bool,
    /// Bumped by every seek, so a fetch answer from before it is ignored.
    generation: u64,
    /// Records fetched and not yet returned.
    buffered: VecDeque<ConsumerRecord>,
    high_watermark: i64,
    /// The first position comes from the group's committed offset (else
    /// `auto.offset.reset`).
    needs_committed: bool,
    /// The last offset committed (or read as committed) for the partition.
    last_committed: Option<i64>,
}

impl PartitionState {
    /// Move buffered records to `out` (until it holds `max`), advancing the position past
    /// each. Once the buffer is empty the position is the next fetch offset: past the
    /// control batches and aborted transactions the fetch skipped, as Kafka's consumer
    /// moves it (a partition ending in a commit marker is read to its end, not to one
    /// short of it).
    fn drain_into(&mut self, out: &mut Vec<ConsumerRecord>, max: usize) {
        while out.len() < max {
            let Some(r) = self.buffered.pop_front() else {
                break;
            };
            self.position = Some(r.offset + 1);
            out.push(r);
        }
        if self.buffered.is_empty() {
            if let Some(next) = self.fetch_position {
                if self.position.is_some_and(|p| p < next) {
                    self.position = Some(next);
                }
            }
        }
    }
}

type FetchOutcome = (i32, Vec<(TopicPartition, u64, i64)>, Result<FetchResponse>);

type JoinResult = std::result::Result<Result<Joined>, tokio::task::JoinError>;

/// Membership of a subscribed consumer.
struct GroupMember {
    membership: Arc<Membership>,
    _heartbeat: TaskGuard,
    topics: Vec<String>,
    listener: Option<Box<dyn RebalanceListener>>,
    /// A join in flight.
    join: Option<JoinHandle<Result<Joined>>>,
    next_auto_commit: Instant,
}

impl Drop for GroupMember {
    fn drop(&mut self) {
        if let Some(j) = self.join.take() {
            j.abort();
        }
    }
}

pub struct Consumer {
    core: Arc<ClusterCore>,
    config: ClientConfig,
    partitions: BTreeMap<TopicPartition, PartitionState>,
    topic_names: HashMap<String, Arc<str>>,
    in_flight: JoinSet<FetchOutcome>,
    busy_nodes: Vec<i32>,
    /// Round-robin start for fairness across partitions in `poll`.
    next_partition: usize,
    /// Stamps partition states and seeks, so a fetch answer from before either is dropped.
    next_epoch: u64,
    group: Option<GroupMember>,
}

/// What woke a waiting `poll`.
enum Woken {
    Deadline,
    Fetch(std::result::Result<FetchOutcome, tokio::task::JoinError>),
    Joined(JoinResult),
    Group,
}

/// Records buffered per partition before prefetching pauses.
const PREFETCH_RECORDS: usize = 10_000;

impl Consumer {
    pub fn new(config: ClientConfig) -> Result<Consumer> {
        Ok(Consumer {
            core: ClusterCore::new(config.clone())?,
            config,
            partitions: BTreeMap::new(),
            topic_names: HashMap::new(),
            in_flight: JoinSet::new(),
            busy_nodes: Vec::new(),
            next_partition: 0,
            next_epoch: 0,
            group: None,
        })
    }

    fn epoch(&mut self) -> u64 {
        self.next_epoch += 1;
        self.next_epoch
    }

    /// A state for a partition just taken on: it starts at the committed offset when the
    /// consumer has a group.
    fn fresh_state(&mut self) -> PartitionState {
        PartitionState {
            generation: self.epoch(),
            needs_committed: self.config.group_id.is_some(),
            high_watermark: -1,
            ..PartitionState::default()
        }
    }

    fn add_partition(&mut self, tp: TopicPartition) {
        let state = self.fresh_state();
        self.topic_names
            .entry(tp.topic.clone())
            .or_insert_with(|| Arc::from(tp.topic.as_str()));
        self.partitions.insert(tp, state);
    }

    /// Consume exactly these partitions (replacing any previous assignment). With a
    /// `group.id`, each starts at the group's committed offset if there is one. Not
    /// possible while subscribed.
    pub fn assign(&mut self, partitions: &[TopicPartition]) -> Result<()> {
        if self.group.is_some() {
            return Err(Error::Unsupported(
                "assign() while subscribed: unsubscribe() first".into(),
            ));
        }
        let mut keep = BTreeMap::new();
        for tp in partitions {
            if let Some(state) = self.partitions.remove(tp) {
                keep.insert(tp.clone(), state);
            }
        }
        self.partitions = keep;
        for tp in partitions {
            if !self.partitions.contains_key(tp) {
                self.add_partition(tp.clone());
            }
        }
        Ok(())
    }

    /// The partitions this consumer reads now.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.partitions.keys().cloned().collect()
    }

    /// The subscribed topics (empty when not subscribed).
    pub fn subscription(&self) -> Vec<String> {
        self.group
            .as_ref()
            .map(|g| g.topics.clone())
            .unwrap_or_default()
    }

    /// This member's id and generation in its group (None when not a member right now).
    pub fn group_generation(&self) -> Option<(String, i32)> {
        let g = self.group.as_ref()?;
        let s = g.membership.state();
        (s.phase == Phase::Stable).then(|| (s.member_id.clone(), s.generation))
    }

    /// What a transactional producer needs to commit this consumer's offsets in its
    /// transaction (`Producer::send_offsets_to_transaction`): the group, and this member's
    /// generation when it is in one (so a zombie member's commit is refused).
    pub fn group_metadata(&self) -> Option<crate::producer::GroupMetadata> {
        let group_id = self.config.group_id.clone()?;
        let identity = self.group.as_ref().map(|g| g.membership.commit_identity());
        Some(match identity {
            Some(i) => crate::producer::GroupMetadata {
                group_id,
                generation: i.generation,
                member_id: i.member_id,
                instance_id: i.instance_id,
            },
            None => crate::producer::GroupMetadata::group(group_id),
        })
    }

    /// Join the consumer group (`group.id`) and consume what it assigns from `topics`.
    /// Calling it again changes the subscription (and rebalances the group); an empty list
    /// unsubscribes. The group is joined during `poll`.
    pub async fn subscribe(&mut self, topics: &[&str]) -> Result<()> {
        self.subscribe_inner(topics, None).await
    }

    /// [`Consumer::subscribe`] with a listener told about every assignment change.
    pub async fn subscribe_with_listener(
        &mut self,
        topics: &[&str],
        listener: Box<dyn RebalanceListener>,
    ) -> Result<()> {
        self.subscribe_inner(topics, Some(listener)).await
    }

    async fn subscribe_inner(
        &mut self,
        topics: &[&str],
        listener: Option<Box<dyn RebalanceListener>>,
    ) -> Result<()> {
        let group_id = self.config.group_id.clone().ok_or_else(|| Error::Config {
            key: "group.id".into(),
            message: "subscribe needs a group.id".into(),
        })?;
        if topics.is_empty() {
            self.unsubscribe().await;
            return Ok(());
        }
        if let Some(t) = topics.iter().find(|t| t.is_empty()) {
            return Err(Error::Config {
                key: "topics".into(),
                message: format!("invalid topic name '{t}'"),
            });
        }
        let mut wanted: Vec<String> = topics.iter().map(|t| t.to_string()).collect();
        wanted.sort();
        wanted.dedup();
        if let Some(g) = self.group.as_mut() {
            if listener.is_some() {
                g.listener = listener;
            }
            if g.topics != wanted {
                g.topics = wanted;
                g.membership.request_rejoin();
            }
            return Ok(());
        }
        if !self.partitions.is_empty() {
            return Err(Error::Unsupported(
                "subscribe() after assign(): assign(&[]) first".into(),
            ));
        }
        let c = &self.config;
        if c.heartbeat_interval >= c.session_timeout {
            return Err(Error::Config {
                key: "heartbeat.interval.ms".into(),
                message: "must be lower than session.timeout.ms".into(),
            });
        }
        let settings = GroupSettings {
            group_id,
            instance_id: c.group_instance_id.clone(),
            session_timeout: c.session_timeout,
            rebalance_timeout: c.max_poll_interval,
            heartbeat_interval: c.heartbeat_interval,
            assignors: c.assignors.clone(),
            protocol: c.group_protocol,
            remote_assignor: c.group_remote_assignor.clone(),
        };
        let membership = Membership::new(Arc::clone(&self.core), settings);
        // Find the coordinator now, so a broker without consumer groups fails here. One that
        // cannot be reached yet (it died and is not replaced yet) is the join's to retry.
        if let Err(e) = membership.coordinator().await {
            if !crate::group::coordinator::is_coordinator_error(&e) {
                return Err(e);
            }
            debug!(error = %e, "the group coordinator is not reachable yet");
            membership.forget_coordinator().await;
        }
        let heartbeat = tokio::spawn(Arc::clone(&membership).heartbeat_loop(c.max_poll_interval));
        self.group = Some(GroupMember {
            membership,
            _heartbeat: TaskGuard(heartbeat),
            topics: wanted,
            listener,
            join: None,
            next_auto_commit: Instant::now() + c.auto_commit_interval,
        });
        Ok(())
    }

    /// Leave the group: commit (with `enable.auto.commit`), tell the listener the
    /// partitions are revoked, send LeaveGroup (not for static members, KIP-345), and drop
    /// the assignment. No-op when not subscribed.
    pub async fn unsubscribe(&mut self) {
        self.leave_group("the consumer unsubscribed").await;
    }

    /// Leave the group (as `unsubscribe`) and release everything.
    pub async fn close(mut self) -> Result<()> {
        self.leave_group("the consumer is being closed").await;
        Ok(())
    }

    async fn leave_group(&mut self, reason: &str) {
        let Some(mut g) = self.group.take() else {
            return;
        };
        if let Some(j) = g.join.take() {
            j.abort();
        }
        let (phase, lost) = {
            let s = g.membership.state();
            (s.phase, s.lost)
        };
        let owned = self.assignment();
        if lost {
            if let Some(l) = g.listener.as_mut() {
                l.on_lost(&owned);
            }
        } else {
            if self.config.enable_auto_commit && phase == Phase::Stable {
                let offsets = self.positions_to_commit(false);
                if let Err(e) = self.commit_with(Some(&g.membership), offsets).await {
                    warn!("committing before leaving the group failed: {e}");
                }
            }
            if let Some(l) = g.listener.as_mut() {
                l.on_revoked(&owned);
            }
        }
        g.membership.leave(reason).await;
        self.partitions.clear();
    }

    /// Start reading `tp` at `offset` (the next record returned has this offset).
    pub fn seek(&mut self, tp: &TopicPartition, offset: i64) -> Result<()> {
        let state = self
            .partitions
            .get_mut(tp)
            .ok_or_else(|| not_assigned(tp))?;
        state.position = Some(offset);
        state.fetch_position = Some(offset);
        state.needs_committed = false;
        state.buffered.clear();
        let epoch = self.epoch();
        if let Some(state) = self.partitions.get_mut(tp) {
            state.generation = epoch;
        }
        Ok(())
    }

    pub async fn seek_to_beginning(&mut self, tps: &[TopicPartition]) -> Result<()> {
        self.seek_to(tps, OffsetSpec::Earliest).await
    }

    pub async fn seek_to_end(&mut self, tps: &[TopicPartition]) -> Result<()> {
        self.seek_to(tps, OffsetSpec::Latest).await
    }

    async fn seek_to(&mut self, tps: &[TopicPartition], spec: OffsetSpec) -> Result<()> {
        let wanted: Vec<(TopicPartition, OffsetSpec)> =
            tps.iter().map(|tp| (tp.clone(), spec)).collect();
        for (tp, r) in list_offsets(&self.core, &wanted, self.config.read_committed).await? {
            self.seek(&tp, r?.offset)?;
        }
        Ok(())
    }

    /// The offset of the next record `poll` will return for `tp` (resolving it with
    /// `auto.offset.reset` if needed).
    pub async fn position(&mut self, tp: &TopicPartition) -> Result<i64> {
        if !self.partitions.contains_key(tp) {
            return Err(not_assigned(tp));
        }
        let deadline = Instant::now() + self.config.request_timeout;
        loop {
            self.reset_positions().await?;
            if let Some(p) = self.partitions.get(tp).and_then(|s| s.position) {
                return Ok(p);
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout(format!("no position for {tp}")));
            }
            tokio::time::sleep(self.config.retry_backoff).await;
        }
    }

    /// For each partition, the first offset whose timestamp is at or after the given one
    /// (None when there is none).
    pub async fn offsets_for_times(
        &self,
        times: &[(TopicPartition, i64)],
    ) -> Result<Vec<(TopicPartition, Option<(i64, i64)>)>> {
        let wanted: Vec<(TopicPartition, OffsetSpec)> = times
            .iter()
            .map(|(tp, t)| (tp.clone(), OffsetSpec::Timestamp(*t)))
            .collect();
        list_offsets(&self.core, &wanted, self.config.read_committed)
            .await?
            .into_iter()
            .map(|(tp, r)| r.map(|o| (tp, (o.offset >= 0).then_some((o.offset, o.timestamp)))))
            .collect()
    }

    /// Stop fetching these partitions until `resume`.
    pub fn pause(&mut self, tps: &[TopicPartition]) {
        for tp in tps {
            if let Some(s) = self.partitions.get_mut(tp) {
                s.paused = true;
            }
        }
    }

    pub fn resume(&mut self, tps: &[TopicPartition]) {
        for tp in tps {
            if let Some(s) = self.partitions.get_mut(tp) {
                s.paused = false;
            }
        }
    }

    /// The high watermark of `tp` seen in the last fetch answer (-1 before one).
    pub fn high_watermark(&self, tp: &TopicPartition) -> Option<i64> {
        self.partitions.get(tp).map(|s| s.high_watermark)
    }

    /// Up to `max.poll.records` records, waiting at most `timeout` for some to arrive. A
    /// subscribed consumer joins and rebalances here (a join in flight is waited on within
    /// the same timeout and picked up by a later `poll`).
    pub async fn poll(&mut self, timeout: Duration) -> Result<Vec<ConsumerRecord>> {
        let deadline = Instant::now() + timeout;
        loop {
            self.group_tick().await?;
            let out = self.take_buffered();
            if !out.is_empty() {
                self.send_fetches().await?;
                return Ok(out);
            }
            self.reset_positions().await?;
            self.send_fetches().await?;
            match self.wait(deadline).await {
                Woken::Deadline => return Ok(Vec::new()),
                Woken::Fetch(Ok(outcome)) => self.absorb(outcome)?,
                Woken::Fetch(Err(e)) => {
                    return Err(Error::Protocol(format!("fetch task failed: {e}")))
                }
                Woken::Joined(result) => {
                    if let Some(g) = self.group.as_mut() {
                        g.join = None;
                    }
                    self.finish_join(result).await?;
                }
                Woken::Group => {}
            }
        }
    }

    /// Wait for a fetch answer, the end of a join, a word from the heartbeat task, or the
    /// deadline.
    async fn wait(&mut self, deadline: Instant) -> Woken {
        let Consumer {
            in_flight, group, ..
        } = self;
        let has_fetch = !in_flight.is_empty();
        let membership = group.as_ref().map(|g| Arc::clone(&g.membership));
        let join = group.as_mut().and_then(|g| g.join.as_mut());
        let joined = async {
            match join {
                Some(handle) => handle.await,
                None => std::future::pending().await,
            }
        };
        let woken = async {
            match &membership {
                Some(m) => m.wake.notified().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => Woken::Deadline,
            Some(done) = in_flight.join_next(), if has_fetch => Woken::Fetch(done),
            result = joined => Woken::Joined(result),
            () = woken => Woken::Group,
        }
    }

    /// Group upkeep at every `poll`: note the poll (for `max.poll.interval.ms`), surface a
    /// fatal error, collect a finished join, start a needed one, auto-commit.
    async fn group_tick(&mut self) -> Result<()> {
        let Some(g) = self.group.as_mut() else {
            return Ok(());
        };
        let membership = Arc::clone(&g.membership);
        let (phase, rejoin, lost) = {
            let mut s = membership.state();
            s.last_poll = Instant::now();
            if let Some(e) = s.fatal.take() {
                return Err(e);
            }
            (s.phase, s.rejoin, s.lost)
        };
        if g.join.as_ref().is_some_and(|j| j.is_finished()) {
            if let Some(handle) = g.join.take() {
                let result = handle.await;
                return self.finish_join(result).await;
            }
        }
        if g.join.is_none() && (phase == Phase::Unjoined || rejoin) {
            return self.start_join(lost).await;
        }
        if self.config.enable_auto_commit && phase == Phase::Stable {
            let now = Instant::now();
            if now >= g.next_auto_commit {
                g.next_auto_commit = now + self.config.auto_commit_interval;
                let offsets = self.positions_to_commit(true);
                if !offsets.is_empty() {
                    for (tp, o) in &offsets {
                        if let Some(s) = self.partitions.get_mut(tp) {
                            s.last_committed = Some(o.offset);
                        }
                    }
                    let core = Arc::clone(&self.core);
                    tokio::spawn(async move {
                        if let Err(e) = commit_offsets(&core, Some(&membership), &offsets).await {
                            debug!("auto-commit failed: {e}");
                        }
                    });
                }
            }
        }
        Ok(())
    }

    /// Before (re)joining: lost partitions are dropped (`on_lost`); with eager rebalancing
    /// every partition is committed and revoked; with cooperative, committed and kept.
    async fn start_join(&mut self, lost: bool) -> Result<()> {
        let Some(g) = self.group.as_ref() else {
            return Ok(());
        };
        let membership = Arc::clone(&g.membership);
        let cooperative = membership.settings.cooperative();
        let owned = self.assignment();
        if lost {
            membership.state().lost = false;
            self.notify(|l, p| l.on_lost(p), &owned);
            self.partitions.clear();
        } else if !owned.is_empty() {
            if self.config.enable_auto_commit {
                let offsets = self.positions_to_commit(false);
                if let Err(e) = self.commit_with(Some(&membership), offsets).await {
                    warn!("committing before the rebalance failed: {e}");
                }
            }
            if !cooperative {
                self.notify(|l, p| l.on_revoked(p), &owned);
                self.partitions.clear();
            }
        }
        let Some(g) = self.group.as_mut() else {
            return Ok(());
        };
        {
            let mut s = membership.state();
            s.phase = Phase::Joining;
            s.rejoin = false;
        }
        let owned = self.partitions.keys().cloned().collect();
        g.join = Some(tokio::spawn(membership.join(g.topics.clone(), owned)));
        Ok(())
    }

    /// Take on the assignment a join produced: revoke what is no longer ours (cooperative;
    /// then rejoin so the group can hand those partitions on), add what is new.
    async fn finish_join(&mut self, result: JoinResult) -> Result<()> {
        let joined = result.map_err(|e| Error::Protocol(format!("join task failed: {e}")))??;
        let Some(g) = self.group.as_ref() else {
            return Ok(());
        };
        let membership = Arc::clone(&g.membership);
        let consumer_protocol = membership.settings.protocol == GroupProtocol::Consumer;
        let new: BTreeSet<TopicPartition> = joined.assignment.into_iter().collect();
        let revoked: Vec<TopicPartition> = self
            .partitions
            .keys()
            .filter(|tp| !new.contains(tp))
            .cloned()
            .collect();
        let added: Vec<TopicPartition> = new
            .iter()
            .filter(|tp| !self.partitions.contains_key(*tp))
            .cloned()
            .collect();
        if !revoked.is_empty() {
            if self.config.enable_auto_commit {
                let offsets: Vec<(TopicPartition, OffsetAndMetadata)> = self
                    .positions_to_commit(false)
                    .into_iter()
                    .filter(|(tp, _)| revoked.contains(tp))
                    .collect();
                if let Err(e) = self.commit_with(Some(&membership), offsets).await {
                    warn!("committing revoked partitions failed: {e}");
                }
            }
            self.notify(|l, p| l.on_revoked(p), &revoked);
            for tp in &revoked {
                self.partitions.remove(tp);
            }
            if !consumer_protocol {
                // The classic protocol: join again so the group can hand them on.
                membership.request_rejoin();
            }
        }
        for tp in &added {
            self.add_partition(tp.clone());
        }
        self.notify(|l, p| l.on_assigned(p), &added);
        if consumer_protocol {
            // The consumer protocol: tell the coordinator what this member owns now.
            membership.assignment_applied(self.assignment());
        }
        debug!(
            generation = joined.generation,
            added = added.len(),
            revoked = revoked.len(),
            "assignment applied"
        );
        Ok(())
    }

    fn notify(
        &mut self,
        call: impl FnOnce(&mut dyn RebalanceListener, &[TopicPartition]),
        partitions: &[TopicPartition],
    ) {
        if let Some(l) = self.group.as_mut().and_then(|g| g.listener.as_mut()) {
            call(l.as_mut(), partitions);
        }
    }

    /// Current positions as offsets to commit (only those moved since the last commit
    /// when `changed_only`).
    fn positions_to_commit(&self, changed_only: bool) -> Vec<(TopicPartition, OffsetAndMetadata)> {
        self.partitions
            .iter()
            .filter_map(|(tp, s)| {
                let pos = s.position?;
                (!changed_only || s.last_committed != Some(pos))
                    .then(|| (tp.clone(), OffsetAndMetadata::from(pos)))
            })
            .collect()
    }

    /// Commit the current position of every partition, waiting for the answer.
    pub async fn commit_sync(&mut self) -> Result<()> {
        let offsets = self.positions_to_commit(false);
        let membership = self.group.as_ref().map(|g| Arc::clone(&g.membership));
        self.commit_with(membership.as_deref(), offsets).await
    }

    /// Commit these offsets (each the next offset to read), waiting for the answer.
    pub async fn commit_offsets(&mut self, offsets: &[(TopicPartition, i64)]) -> Result<()> {
        let offsets = offsets
            .iter()
            .map(|(tp, o)| (tp.clone(), OffsetAndMetadata::from(*o)))
            .collect();
        let membership = self.group.as_ref().map(|g| Arc::clone(&g.membership));
        self.commit_with(membership.as_deref(), offsets).await
    }

    /// Commit the current positions in the background; the handle resolves to the outcome
    /// (dropping it does not cancel the commit).
    pub fn commit_async(&mut self) -> JoinHandle<Result<()>> {
        let offsets = self.positions_to_commit(false);
        for (tp, o) in &offsets {
            if let Some(s) = self.partitions.get_mut(tp) {
                s.last_committed = Some(o.offset);
            }
        }
        let core = Arc::clone(&self.core);
        let membership = self.group.as_ref().map(|g| Arc::clone(&g.membership));
        tokio::spawn(async move { commit_offsets(&core, membership.as_deref(), &offsets).await })
    }

    async fn commit_with(
        &mut self,
        membership: Option<&Membership>,
        offsets: Vec<(TopicPartition, OffsetAndMetadata)>,
    ) -> Result<()> {
        commit_offsets(&self.core, membership, &offsets).await?;
        for (tp, o) in offsets {
            if let Some(s) = self.partitions.get_mut(&tp) {
                s.last_committed = Some(o.offset);
            }
        }
        Ok(())
    }

    /// The group's committed offsets for these partitions (None where nothing is
    /// committed).
    pub async fn committed(
        &self,
        partitions: &[TopicPartition],
    ) -> Result<Vec<(TopicPartition, Option<CommittedOffset>)>> {
        let membership = self.group.as_ref().map(|g| Arc::clone(&g.membership));
        fetch_committed(&self.core, membership.as_deref(), partitions)
            .await?
            .into_iter()
            .map(|(tp, r)| r.map(|c| (tp, (c.offset >= 0).then_some(c))))
            .collect()
    }

    /// The records as an async stream (polling with a one-second timeout under the hood).
    pub fn into_stream(self) -> RecordStream {
        RecordStream {
            state: StreamState::Idle(Box::new(self), VecDeque::new()),
        }
    }

    fn take_buffered(&mut self) -> Vec<ConsumerRecord> {
        let mut out = Vec::new();
        let tps: Vec<TopicPartition> = self.partitions.keys().cloned().collect();
        if tps.is_empty() {
            return out;
        }
        let n = tps.len();
        for i in 0..n {
            let tp = &tps[(self.next_partition + i) % n];
            let Some(state) = self.partitions.get_mut(tp) else {
                continue;
            };
            if state.paused {
                continue;
            }
            state.drain_into(&mut out, self.config.max_poll_records);
            if out.len() >= self.config.max_poll_records {
                break;
            }
        }
        self.next_partition = (self.next_partition + 1) % n;
        out
    }

    /// Give partitions without a position one: the group's committed offset, else per
    /// `auto.offset.reset`.
    async fn reset_positions(&mut self) -> Result<()> {
        let from_group: Vec<TopicPartition> = self
            .partitions
            .iter()
            .filter(|(_, s)| s.position.is_none() && s.needs_committed)
            .map(|(tp, _)| tp.clone())
            .collect();
        if !from_group.is_empty() {
            let membership = self.group.as_ref().map(|g| Arc::clone(&g.membership));
            match fetch_committed(&self.core, membership.as_deref(), &from_group).await {
                Ok(rows) => {
                    for (tp, r) in rows {
                        let committed = match r {
                            Ok(c) => c,
                            // UNSTABLE_OFFSET_COMMIT (a transaction is committing offsets):
                            // ask again at the next poll.
                            Err(e) if e.is_retriable() => continue,
                            Err(e) => return Err(e),
                        };
                        if let Some(s) = self.partitions.get_mut(&tp) {
                            s.needs_committed = false;
                            if committed.offset >= 0 {
                                s.position = Some(committed.offset);
                                s.fetch_position = Some(committed.offset);
                                s.last_committed = Some(committed.offset);
                            }
                        }
                    }
                }
                // Partitions keep waiting for their committed offset; the next poll asks again.
                Err(e) if e.is_retriable() => debug!("fetching committed offsets: {e}"),
                Err(e) => return Err(e),
            }
        }
        let missing: Vec<TopicPartition> = self
            .partitions
            .iter()
            .filter(|(_, s)| s.position.is_none() && !s.needs_committed)
            .map(|(tp, _)| tp.clone())
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let spec = match self.config.auto_offset_reset {
            OffsetReset::Earliest => OffsetSpec::Earliest,
            OffsetReset::Latest => OffsetSpec::Latest,
            OffsetReset::None => {
                return Err(Error::Kafka {
                    code: ErrorCode::OffsetOutOfRange,
                    message: Some(format!(
                        "no position for {} and auto.offset.reset=none",
                        missing[0]
                    )),
                })
            }
        };
        let wanted: Vec<(TopicPartition, OffsetSpec)> =
            missing.into_iter().map(|tp| (tp, spec)).collect();
        // A leader that is moving or not elected yet: those partitions wait for the next poll.
        let answers = match list_offsets(&self.core, &wanted, self.config.read_committed).await {
            Ok(a) => a,
            Err(e) if e.is_retriable() => {
                debug!("resetting positions: {e}");
                for (tp, _) in &wanted {
                    self.core.invalidate(&tp.topic);
                }
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        for (tp, r) in answers {
            let offset = match r {
                Ok(o) => o.offset,
                Err(e) if e.is_retriable() => {
                    self.core.invalidate(&tp.topic);
                    continue;
                }
                Err(e) => return Err(e),
            };
            if let Some(s) = self.partitions.get_mut(&tp) {
                s.position = Some(offset);
                s.fetch_position = Some(offset);
            }
        }
        Ok(())
    }

    /// One fetch per leader without one in flight, for partitions that want data.
    async fn send_fetches(&mut self) -> Result<()> {
        let mut by_leader: BTreeMap<i32, Vec<(TopicPartition, u64, i64)>> = BTreeMap::new();
        for (tp, s) in &self.partitions {
            let Some(pos) = s.fetch_position else {
                continue;
            };
            if s.paused || s.buffered.len() >= PREFETCH_RECORDS {
                continue;
            }
            let leader = match self.core.leader(tp) {
                Some(l) => l,
                None => {
                    match self
                        .core
                        .topic(&tp.topic, false, self.config.request_timeout)
                        .await
                    {
                        Ok(_) => {}
                        Err(e) if e.is_retriable() => continue,
                        Err(e) => return Err(e),
                    }
                    match self.core.leader(tp) {
                        Some(l) => l,
                        None => continue,
                    }
                }
            };
            if self.busy_nodes.contains(&leader) {
                continue;
            }
            by_leader
                .entry(leader)
                .or_default()
                .push((tp.clone(), s.generation, pos));
        }
        for (leader, parts) in by_leader {
            let conn = match self.core.connection_to_node(leader).await {
                Ok(c) => c,
                // The broker is away: look for the partitions' leaders again next time.
                Err(e) if e.is_retriable() => {
                    debug!("fetching from broker {leader}: {e}");
                    for (tp, _, _) in &parts {
                        self.core.invalidate(&tp.topic);
                    }
                    continue;
                }
                Err(e) => return Err(e),
            };
            let version = conn.version_for(ApiKey::Fetch)?;
            let mut topics: BTreeMap<&str, Vec<FetchPartition>> = BTreeMap::new();
            for (tp, _, pos) in &parts {
                topics.entry(tp.topic.as_str()).or_default().push(
                    FetchPartition::default()
                        .with_partition(tp.partition.0)
                        .with_fetch_offset(*pos)
                        .with_partition_max_bytes(self.config.max_partition_fetch_bytes),
                );
            }
            let req = FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(self.config.fetch_max_wait.as_millis() as i32)
                .with_min_bytes(self.config.fetch_min_bytes)
                .with_max_bytes(self.config.fetch_max_bytes)
                .with_isolation_level(i8::from(self.config.read_committed))
                .with_session_epoch(-1)
                .with_topics(
                    topics
                        .into_iter()
                        .map(|(t, p)| {
                            FetchTopic::default()
                                .with_topic(TopicName(StrBytes::from_string(t.to_string())))
                                .with_partitions(p)
                        })
                        .collect(),
                );
            let rx = conn.send_at(&req, version).await?;
            let timeout = self.config.request_timeout + self.config.fetch_max_wait;
            self.busy_nodes.push(leader);
            self.in_flight.spawn(async move {
                let result = async {
                    let body = tokio::time::timeout(timeout, rx)
                        .await
                        .map_err(|_| Error::Timeout(format!("Fetch from broker {leader}")))?
                        .map_err(|_| Error::Connection {
                            addr: format!("broker {leader}"),
                            reason: "connection closed".into(),
                        })??;
                    decode_response::<FetchResponse>(body, version)
                }
                .await;
                (leader, parts, result)
            });
        }
        Ok(())
    }

    /// Take a fetch answer into the partitions' buffers.
    fn absorb(&mut self, (leader, parts, result): FetchOutcome) -> Result<()> {
        self.busy_nodes.retain(|n| *n != leader);
        let resp = match result {
            Ok(r) => r,
            Err(e) if e.is_retriable() => {
                for (tp, _, _) in &parts {
                    self.core.invalidate(&tp.topic);
                }
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let generations: HashMap<(String, i32), u64> = parts
            .iter()
            .map(|(tp, g, _)| ((tp.topic.clone(), tp.partition.0), *g))
            .collect();
        for t in resp.responses {
            let topic = t.topic.to_string();
            for p in t.partitions {
                let tp = TopicPartition::new(topic.clone(), p.partition_index);
                let sent_generation = generations
                    .get(&(topic.clone(), p.partition_index))
                    .copied();
                let name = self
                    .topic_names
                    .entry(topic.clone())
                    .or_insert_with(|| Arc::from(topic.as_str()))
                    .clone();
                let check_crcs = self.config.check_crcs;
                let reset = self.config.auto_offset_reset;
                let Some(state) = self.partitions.get_mut(&tp) else {
                    continue;
                };
                if Some(state.generation) != sent_generation {
                    continue; // sought since the fetch was sent
                }
                match ErrorCode::try_from_code(p.error_code) {
                    None => {}
                    Some(ErrorCode::OffsetOutOfRange) if reset != OffsetReset::None => {
                        state.position = None;
                        state.fetch_position = None;
                        continue;
                    }
                    Some(code) if code.is_retriable() => {
                        self.core.invalidate(&topic);
                        continue;
                    }
                    Some(code) => {
                        return Err(Error::Kafka {
                            code,
                            message: Some(format!("fetching {tp}")),
                        })
                    }
                }
                state.high_watermark = p.high_watermark;
                if let Some(records) = p.records {
                    let mut aborted: Vec<(i64, i64)> = p
                        .aborted_transactions
                        .iter()
                        .flatten()
                        .map(|a| (a.first_offset, a.producer_id.0))
                        .collect();
                    aborted.sort_unstable();
                    let next = decode_into(
                        &name,
                        p.partition_index,
                        &records,
                        state,
                        check_crcs,
                        &aborted,
                    )?;
                    state.fetch_position = Some(next);
                }
            }
        }
        Ok(())
    }
}

/// Commit offsets for the consumer's group, as its member when it has joined.
async fn commit_offsets(
    core: &ClusterCore,
    membership: Option<&Membership>,
    offsets: &[(TopicPartition, OffsetAndMetadata)],
) -> Result<()> {
    if offsets.is_empty() {
        return Ok(());
    }
    let group = core
        .config
        .group_id
        .as_deref()
        .ok_or_else(|| Error::Config {
            key: "group.id".into(),
            message: "committing offsets needs a group.id".into(),
        })?;
    let who = membership.map_or_else(CommitIdentity::standalone, Membership::commit_identity);
    let results = with_coordinator(core, group, membership, |conn| {
        let who = &who;
        async move { coordinator::commit(&conn, group, who, offsets).await }
    })
    .await?;
    let mut first = None;
    for (_, r) in results {
        if let Err(e) = r {
            if let Some(m) = membership {
                match e.code() {
                    Some(ErrorCode::RebalanceInProgress) => m.request_rejoin(),
                    Some(code @ (ErrorCode::IllegalGeneration | ErrorCode::UnknownMemberId)) => {
                        m.reset_generation(code == ErrorCode::UnknownMemberId)
                    }
                    _ => {}
                }
            }
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

async fn fetch_committed(
    core: &ClusterCore,
    membership: Option<&Membership>,
    partitions: &[TopicPartition],
) -> Result<Vec<(TopicPartition, Result<CommittedOffset>)>> {
    let group = core
        .config
        .group_id
        .as_deref()
        .ok_or_else(|| Error::Config {
            key: "group.id".into(),
            message: "committed offsets need a group.id".into(),
        })?;
    with_coordinator(core, group, membership, |conn| async move {
        let rows =
            coordinator::fetch(&conn, group, Some(partitions), core.config.read_committed).await?;
        // A partition whose offset a transaction has written but not ended is answered
        // UNSTABLE_OFFSET_COMMIT on its own (Kafka 4.4): the whole question is asked again,
        // as the Java consumer does, until the transaction ends or the request times out.
        let unstable = rows.iter().find_map(|(_, r)| {
            r.as_ref()
                .err()
                .filter(|e| e.code() == Some(ErrorCode::UnstableOffsetCommit))
        });
        match unstable {
            Some(e) => Err(e.clone()),
            None => Ok(rows),
        }
    })
    .await
}

/// Decode fetched batches into `state.buffered`; returns the next fetch offset. `aborted`:
/// (first offset, producer id) of the aborted transactions a read_committed fetch reported,
/// sorted: a transactional batch of a producer whose aborted transaction has begun (and
/// whose abort marker has not yet been passed) is skipped, as Kafka's consumer does.
fn decode_into(
    topic: &Arc<str>,
    partition: i32,
    records: &[u8],
    state: &mut PartitionState,
    check_crcs: bool,
    aborted: &[(i64, i64)],
) -> Result<i64> {
    let mut next = state.fetch_position.unwrap_or(0);
    let mut pending_aborts = aborted.iter().peekable();
    let mut aborting: std::collections::HashSet<i64> = std::collections::HashSet::new();
    for item in BatchIter::new(records) {
        // A partial batch at the end of a response is normal: fetch it whole next time.
        let Ok((header, bytes)) = item else { break };
        if header.last_offset() < next {
            continue;
        }
        if check_crcs {
            batch::verify_crc(bytes).map_err(|e| Error::Kafka {
                code: ErrorCode::CorruptMessage,
                message: Some(format!(
                    "{topic}-{partition} at offset {}: {e}",
                    header.base_offset
                )),
            })?;
        }
        while let Some((_, pid)) =
            pending_aborts.next_if(|(first, _)| *first <= header.last_offset())
        {
            aborting.insert(*pid);
        }
        let skip = if header.is_control() {
            // An abort marker ends its producer's aborted transaction.
            if is_abort_marker(bytes) {
                aborting.remove(&header.producer_id);
            }
            true
        } else {
            header.is_transactional() && aborting.contains(&header.producer_id)
        };
        if !skip {
            let decoded = batch::decode_records(bytes, RecordLimits::default()).map_err(|e| {
                Error::Kafka {
                    code: ErrorCode::CorruptMessage,
                    message: Some(format!(
                        "{topic}-{partition} at offset {}: {e}",
                        header.base_offset
                    )),
                }
            })?;
            for r in decoded.into_iter().filter(|r| r.offset >= next) {
                state.buffered.push_back(ConsumerRecord {
                    topic: Arc::clone(topic),
                    partition,
                    offset: r.offset,
                    timestamp: r.timestamp,
                    key: r.key,
                    value: r.value,
                    headers: r.headers,
                });
            }
        }
        next = header.next_offset();
    }
    Ok(next)
}

/// Whether a control batch holds an abort marker (key: version i16, type i16 = 0).
fn is_abort_marker(batch_bytes: &[u8]) -> bool {
    batch::decode_records(batch_bytes, RecordLimits::default())
        .ok()
        .and_then(|r| r.into_iter().next())
        .and_then(|r| r.key)
        .is_some_and(|k| k.len() >= 4 && k[2..4] == [0, 0])
}

impl Drop for Consumer {
    /// A consumer dropped without `close` still leaves its group (in the background, if a
    /// runtime is there to run it), so the group need not wait out its session timeout.
    fn drop(&mut self) {
        let Some(g) = self.group.take() else {
            return;
        };
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let membership = Arc::clone(&g.membership);
            drop(g);
            rt.spawn(async move { membership.leave("the consumer was dropped").await });
        }
    }
}

fn not_assigned(tp: &TopicPartition) -> Error {
    Error::Unsupported(format!("{tp} is not assigned to this consumer"))
}

/// A poll in progress: it owns the consumer and hands it back with the records.
type PollFuture =
    Pin<Box<dyn Future<Output = (Box<Consumer>, Result<Vec<ConsumerRecord>>)> + Send>>;

enum StreamState {
    Idle(Box<Consumer>, VecDeque<ConsumerRecord>),
    Polling(PollFuture),
    Gone,
}

/// [`Consumer::into_stream`]: an endless `Stream` of records (errors are items too).
pub struct RecordStream {
    state: StreamState,
}

impl RecordStream {
    /// The consumer back, once no poll is in progress.
    pub fn into_inner(self) -> Option<Consumer> {
        match self.state {
            StreamState::Idle(c, _) => Some(*c),
            _ => None,
        }
    }
}

impl futures_core::Stream for RecordStream {
    type Item = Result<ConsumerRecord>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            match std::mem::replace(&mut self.state, StreamState::Gone) {
                StreamState::Idle(c, mut buf) => {
                    if let Some(r) = buf.pop_front() {
                        self.state = StreamState::Idle(c, buf);
                        return Poll::Ready(Some(Ok(r)));
                    }
                    let mut c = c;
                    self.state = StreamState::Polling(Box::pin(async move {
                        let r = c.poll(Duration::from_secs(1)).await;
                        (c, r)
                    }));
                }
                StreamState::Polling(mut f) => match f.as_mut().poll(cx) {
                    Poll::Pending => {
                        self.state = StreamState::Polling(f);
                        return Poll::Pending;
                    }
                    Poll::Ready((c, Ok(records))) => {
                        self.state = StreamState::Idle(c, records.into())
                    }
                    Poll::Ready((c, Err(e))) => {
                        self.state = StreamState::Idle(c, VecDeque::new());
                        return Poll::Ready(Some(Err(e)));
                    }
                },
                StreamState::Gone => return Poll::Ready(None),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(offset: i64) -> ConsumerRecord {
        ConsumerRecord {
            topic: Arc::from("t"),
            partition: 0,
            offset,
            timestamp: 0,
            key: None,
            value: None,
            headers: Vec::new(),
        }
    }

    #[test]
    fn the_position_passes_a_trailing_control_batch_once_the_records_are_returned() {
        // Records 0 and 1, then a commit marker at 2: the next fetch starts at 3.
        let mut state = PartitionState {
            position: Some(0),
            fetch_position: Some(3),
            buffered: [record(0), record(1)].into_iter().collect(),
            ..PartitionState::default()
        };
        let mut out = Vec::new();
        state.drain_into(&mut out, 1);
        assert_eq!((out.len(), state.position), (1, Some(1)));
        state.drain_into(&mut out, 10);
        assert_eq!((out.len(), state.position), (2, Some(3)));
        // A seek back behind the fetch position is not undone.
        state.position = Some(0);
        state.fetch_position = Some(0);
        state.drain_into(&mut out, 10);
        assert_eq!(state.position, Some(0));
    }
}
