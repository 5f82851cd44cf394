//! The consumer group protocol (KIP-848, `group.protocol=consumer`) from the member's side:
//! one request, ConsumerGroupHeartbeat, joins (epoch 0), heartbeats, acknowledges and leaves
//! (epoch -1, or -2 for a static member); the coordinator computes the assignment and sends
//! each member the partitions it may own now (revocations first, then additions).
//!
//! It fits the consumer's life cycle as the classic protocol does (see [`super::member`]):
//! the heartbeat task sends heartbeats and, when the coordinator sends another assignment,
//! keeps it as `pending` and wakes `poll`; `poll` runs a "join" that hands the pending
//! assignment over, revokes (committing first) and adds partitions, and then tells the
//! heartbeat task, which acknowledges what the member owns at once. A member fenced
//! (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID) loses its partitions and joins again at epoch 0
//! under the same member id, as the Java client does.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
};
use kafka_protocol::protocol::StrBytes;
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;
use tracing::{debug, info, warn};

use super::coordinator::{group_id, is_coordinator_error, str_bytes};
use super::member::{millis, Joined, Membership, Phase};
use crate::error::{Error, Result};

/// The epochs a member leaves with: for good, or (a static member) for a while.
const LEAVE: i32 = -1;
const LEAVE_STATIC: i32 = -2;

/// Errors after which the member cannot go on (Kafka's fatal heartbeat errors).
fn is_fatal(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::GroupAuthorizationFailed
            | ErrorCode::TopicAuthorizationFailed
            | ErrorCode::UnsupportedVersion
            | ErrorCode::UnsupportedAssignor
            | ErrorCode::InvalidRequest
            | ErrorCode::GroupMaxSizeReached
            | ErrorCode::FencedInstanceId
            | ErrorCode::UnreleasedInstanceId
            | ErrorCode::GroupIdNotFound
    )
}

impl Membership {
    /// One ConsumerGroupHeartbeat at the member's epoch, with its subscription and what it
    /// owns; its answer updates the member (epoch, interval, a new assignment to apply).
    async fn consumer_heartbeat_once(&self) -> Result<()> {
        let s = &self.settings;
        let (member_id, epoch, owned, subscription) = {
            let st = self.state();
            let owned = if st.generation <= 0 {
                Vec::new()
            } else {
                st.owned.clone()
            };
            (
                st.member_id.clone(),
                st.generation.max(0),
                owned,
                st.subscription.clone(),
            )
        };
        let owned_names: Vec<String> = owned.iter().map(|tp| tp.topic.to_string()).collect();
        let ids = self
            .core
            .topic_ids(&owned_names, &[], &subscription)
            .await?;
        let by_name: HashMap<&str, [u8; 16]> =
            ids.iter().map(|(id, n)| (n.as_str(), *id)).collect();
        let mut grouped: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for tp in &owned {
            grouped.entry(&tp.topic).or_default().push(tp.partition.0);
        }
        let topic_partitions = grouped
            .into_iter()
            .filter_map(|(t, ps)| {
                Some(
                    TopicPartitions::default()
                        .with_topic_id(uuid::Uuid::from_bytes(*by_name.get(t)?))
                        .with_partitions(ps),
                )
            })
            .collect();
        let req = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(group_id(&s.group_id))
            .with_member_id(str_bytes(&member_id))
            .with_member_epoch(epoch)
            .with_instance_id(s.instance_id.as_deref().map(str_bytes))
            .with_rebalance_timeout_ms(millis(s.rebalance_timeout))
            .with_subscribed_topic_names(Some(
                subscription.iter().map(|t| str_bytes(t).into()).collect(),
            ))
            .with_server_assignor(s.remote_assignor.as_deref().map(str_bytes))
            .with_topic_partitions(Some(topic_partitions));
        let conn = self.coordinator().await?;
        let version = conn.version_for(ApiKey::ConsumerGroupHeartbeat)?;
        let wait = self.core.config.request_timeout;
        let resp: ConsumerGroupHeartbeatResponse = conn.call_within(&req, version, wait).await?;
        if let Some(code) = ErrorCode::try_from_code(resp.error_code) {
            let message = resp.error_message.as_ref().map(StrBytes::to_string);
            if matches!(
                code,
                ErrorCode::FencedMemberEpoch | ErrorCode::UnknownMemberId
            ) {
                warn!(group = %s.group_id, epoch, "heartbeat answered {code:?}: partitions lost, joining again");
                let mut st = self.state();
                st.generation = 0;
                st.lost = st.phase == Phase::Stable;
                st.rejoin = true;
                st.phase = Phase::Unjoined;
                st.pending = None;
                st.owned.clear();
                drop(st);
                self.wake.notify_one();
                return Ok(());
            }
            return Err(Error::Kafka { code, message });
        }
        let assignment = match &resp.assignment {
            None => None,
            Some(a) => {
                let ids_sent: Vec<[u8; 16]> = a
                    .topic_partitions
                    .iter()
                    .map(|t| *t.topic_id.as_bytes())
                    .collect();
                let names = self.core.topic_ids(&[], &ids_sent, &subscription).await?;
                let mut tps: Vec<TopicPartition> = Vec::new();
                for t in &a.topic_partitions {
                    // A topic this member cannot name yet is picked up at a later heartbeat.
                    if let Some(name) = names.get(t.topic_id.as_bytes()) {
                        tps.extend(t.partitions.iter().map(|p| TopicPartition::new(name, *p)));
                    }
                }
                tps.sort();
                Some(tps)
            }
        };
        let mut st = self.state();
        st.member_id = resp
            .member_id
            .as_ref()
            .map_or(member_id, StrBytes::to_string);
        st.generation = resp.member_epoch;
        if resp.heartbeat_interval_ms > 0 {
            st.interval = Duration::from_millis(resp.heartbeat_interval_ms as u64);
        }
        if let Some(tps) = assignment {
            let mut owned = st.owned.clone();
            owned.sort();
            if tps != owned || epoch == 0 {
                st.pending = Some(tps);
            }
        }
        Ok(())
    }

    /// The "join" `poll` runs: the pending assignment when there is one; otherwise
    /// heartbeats (at epoch 0 when not in the group) until the coordinator sends one.
    pub(super) async fn join_consumer(self: Arc<Self>, topics: Vec<String>) -> Result<Joined> {
        self.state().subscription = topics;
        loop {
            {
                let mut st = self.state();
                if let Some(assignment) = st.pending.take() {
                    st.phase = Phase::Stable;
                    st.rejoin = false;
                    st.lost = false;
                    let generation = st.generation;
                    drop(st);
                    return Ok(Joined {
                        generation,
                        assignment,
                    });
                }
            }
            match self.consumer_heartbeat_once().await {
                Ok(()) => {
                    let wait = {
                        let mut st = self.state();
                        if st.pending.is_none() && st.generation > 0 {
                            // In the group, nothing to change (a rejoin asked for a new
                            // subscription the assignment does not reflect yet).
                            st.phase = Phase::Stable;
                            st.rejoin = false;
                            let mut owned = st.owned.clone();
                            owned.sort();
                            return Ok(Joined {
                                generation: st.generation,
                                assignment: owned,
                            });
                        }
                        st.pending.is_none().then_some(st.interval)
                    };
                    if let Some(interval) = wait {
                        tokio::time::sleep(interval.min(Duration::from_millis(500))).await;
                    }
                }
                Err(e) if is_coordinator_error(&e) || e.is_retriable() => {
                    debug!(group = %self.settings.group_id, "joining again after {e}");
                    self.forget_coordinator().await;
                    tokio::time::sleep(self.core.config.retry_backoff).await;
                }
                Err(e) => {
                    self.state().phase = Phase::Unjoined;
                    return Err(e);
                }
            }
        }
    }

    /// The consumer applied an assignment: it owns `owned` now; the heartbeat task says so.
    pub fn assignment_applied(&self, owned: Vec<TopicPartition>) {
        let (group, epoch, n) = {
            let mut st = self.state();
            st.owned = owned;
            (
                self.settings.group_id.clone(),
                st.generation,
                st.owned.len(),
            )
        };
        info!(group = %group, epoch, partitions = n, "assignment applied");
        self.applied.notify_one();
    }

    /// Heartbeats at the interval the coordinator asks for, at once after an assignment was
    /// applied; leaves the group when `poll` is not called within `max.poll.interval.ms`.
    pub(super) async fn consumer_heartbeat_loop(self: Arc<Self>, max_poll_interval: Duration) {
        let group = self.settings.group_id.clone();
        loop {
            let interval = self.state().interval;
            tokio::select! {
                () = tokio::time::sleep(interval) => {}
                () = self.applied.notified() => {}
            }
            let (phase, last_poll) = {
                let st = self.state();
                (st.phase, st.last_poll)
            };
            if phase != Phase::Stable {
                continue;
            }
            if last_poll.elapsed() > max_poll_interval {
                warn!(
                    group = %group,
                    "no poll within max.poll.interval.ms ({} ms): leaving the group",
                    max_poll_interval.as_millis()
                );
                self.leave_consumer("consumer poll timeout has expired")
                    .await;
                let mut st = self.state();
                st.lost = true;
                st.rejoin = true;
                drop(st);
                self.wake.notify_one();
                continue;
            }
            match self.consumer_heartbeat_once().await {
                Ok(()) => {
                    if self.state().pending.is_some() {
                        self.request_rejoin();
                    }
                }
                Err(e) if e.code().is_some_and(is_fatal) => {
                    warn!(group = %group, "heartbeat failed for good: {e}");
                    let mut st = self.state();
                    st.fatal = Some(e);
                    st.phase = Phase::Unjoined;
                    drop(st);
                    self.wake.notify_one();
                }
                Err(e) => {
                    debug!(group = %group, "heartbeat failed: {e}");
                    if is_coordinator_error(&e) || e.is_retriable() {
                        self.forget_coordinator().await;
                    }
                }
            }
        }
    }

    /// Leave: epoch -1 (a static member: -2, keeping its partitions for its session).
    /// Best effort: errors are logged.
    pub(super) async fn leave_consumer(&self, reason: &str) {
        let (member_id, phase) = {
            let mut st = self.state();
            let out = (st.member_id.clone(), st.phase);
            st.phase = Phase::Unjoined;
            st.generation = -1;
            st.owned.clear();
            st.pending = None;
            out
        };
        if phase == Phase::Unjoined {
            return;
        }
        if phase == Phase::Joining {
            self.forget_coordinator().await;
        }
        let s = &self.settings;
        let epoch = if s.instance_id.is_some() {
            LEAVE_STATIC
        } else {
            LEAVE
        };
        let result = async {
            let conn = self.coordinator().await?;
            let version = conn.version_for(ApiKey::ConsumerGroupHeartbeat)?;
            let req = ConsumerGroupHeartbeatRequest::default()
                .with_group_id(group_id(&s.group_id))
                .with_member_id(str_bytes(&member_id))
                .with_member_epoch(epoch)
                .with_instance_id(s.instance_id.as_deref().map(str_bytes));
            let resp: ConsumerGroupHeartbeatResponse = conn.call_at(&req, version).await?;
            crate::error::check(resp.error_code, resp.error_message.map(|m| m.to_string()))
        }
        .await;
        match result {
            Ok(()) => info!(group = %s.group_id, member = %member_id, "left the group: {reason}"),
            Err(e) => debug!(group = %s.group_id, "leaving the group failed: {e}"),
        }
    }
}
