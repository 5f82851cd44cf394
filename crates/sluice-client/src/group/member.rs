//! Group membership of one consumer: joining (JoinGroup with KIP-394's MEMBER_ID_REQUIRED
//! round trip, the leader's assignment, SyncGroup), heartbeats on a background task, leaving.
//!
//! The split follows the Java client's classic consumer: the background task only
//! heartbeats and watches `max.poll.interval.ms`; joins run as a task the consumer's `poll`
//! starts and collects, because revoking and assigning partitions (and the listener
//! callbacks) belong to the consumer. The task and the consumer share a [`MemberState`];
//! the heartbeat task wakes a waiting `poll` through [`Membership::wake`] when the group
//! needs this member to rejoin.
//!
//! Membership uses its own connection to the coordinator: a JoinGroup parks on the broker
//! for up to a rebalance, and Kafka answers a connection's requests in order, so sharing the
//! fetch connection would stall fetches behind it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, LeaveGroupResponse, SyncGroupRequest, SyncGroupResponse,
};
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;
use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::assignor::{Assignor, MemberSubscription};
use super::coordinator::{
    find_coordinator, group_id, is_coordinator_error, str_bytes, CommitIdentity, KEY_TYPE_GROUP,
};
use super::protocol::{self, Subscription, PROTOCOL_TYPE};
use crate::cluster::ClusterCore;
use crate::config::GroupProtocol;
use crate::connection::Connection;
use crate::error::{Error, Result};

/// Where this member stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Not in the group (never joined, left, or thrown out).
    Unjoined,
    /// A join is in flight.
    Joining,
    /// Joined and synced: heartbeating.
    Stable,
}

#[derive(Debug)]
pub struct MemberState {
    pub member_id: String,
    pub generation: i32,
    pub phase: Phase,
    /// The group asked this member to rejoin (or its subscription changed).
    pub rejoin: bool,
    /// The member's generation was reset behind its back: its partitions are lost (not
    /// revoked), and may already belong to someone else.
    pub lost: bool,
    /// A fatal error (FENCED_INSTANCE_ID and the like) for the next `poll` to return.
    pub fatal: Option<Error>,
    pub last_poll: Instant,
    /// The consumer group protocol (KIP-848): what the consumer owns now (sent with each
    /// heartbeat), an assignment the coordinator sent that `poll` has not applied yet, the
    /// subscription, and the heartbeat interval the coordinator asks for.
    pub owned: Vec<TopicPartition>,
    pub pending: Option<Vec<TopicPartition>>,
    pub subscription: Vec<String>,
    pub interval: Duration,
}

/// The group-facing settings, from the client config.
#[derive(Clone, Debug)]
pub struct GroupSettings {
    pub group_id: String,
    pub instance_id: Option<String>,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    pub heartbeat_interval: Duration,
    pub assignors: Vec<Assignor>,
    /// `group.protocol`.
    pub protocol: GroupProtocol,
    /// `group.remote.assignor` (consumer protocol).
    pub remote_assignor: Option<String>,
}

impl GroupSettings {
    /// KIP-429: cooperative only when every configured assignor is; otherwise eager (all
    /// partitions are revoked before every rejoin), as the Java client decides.
    pub fn cooperative(&self) -> bool {
        self.protocol == GroupProtocol::Consumer
            || self.assignors.iter().all(|a| a.is_cooperative())
    }
}

/// The outcome of a successful join + sync.
#[derive(Debug)]
pub struct Joined {
    pub generation: i32,
    pub assignment: Vec<TopicPartition>,
}

pub struct Membership {
    pub settings: GroupSettings,
    pub(super) core: Arc<ClusterCore>,
    state: Mutex<MemberState>,
    coordinator: tokio::sync::Mutex<Option<Arc<Connection>>>,
    /// Notified when `poll` should look at the state again (rejoin needed, fatal error).
    pub wake: Notify,
    /// Notified when the consumer applied an assignment (consumer protocol): the heartbeat
    /// task tells the coordinator at once.
    pub(crate) applied: Notify,
}

impl Membership {
    pub fn new(core: Arc<ClusterCore>, settings: GroupSettings) -> Arc<Self> {
        // The consumer protocol's member id is the client's own, kept for its lifetime.
        let member_id = match settings.protocol {
            GroupProtocol::Classic => String::new(),
            GroupProtocol::Consumer => uuid::Uuid::new_v4().to_string(),
        };
        let interval = settings.heartbeat_interval;
        Arc::new(Self {
            settings,
            core,
            state: Mutex::new(MemberState {
                member_id,
                generation: -1,
                phase: Phase::Unjoined,
                rejoin: false,
                lost: false,
                fatal: None,
                last_poll: Instant::now(),
                owned: Vec::new(),
                pending: None,
                subscription: Vec::new(),
                interval,
            }),
            coordinator: tokio::sync::Mutex::new(None),
            wake: Notify::new(),
            applied: Notify::new(),
        })
    }

    pub fn state(&self) -> MutexGuard<'_, MemberState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The identity commits carry: the current generation once joined, else a standalone
    /// commit (which the coordinator accepts only for a group with no members).
    pub fn commit_identity(&self) -> CommitIdentity {
        let s = self.state();
        if s.phase == Phase::Unjoined && s.generation < 0 {
            return CommitIdentity::standalone();
        }
        CommitIdentity {
            generation: s.generation,
            member_id: s.member_id.clone(),
            instance_id: self.settings.instance_id.clone(),
        }
    }

    /// Ask for a rejoin at the next `poll`.
    pub fn request_rejoin(&self) {
        self.state().rejoin = true;
        self.wake.notify_one();
    }

    /// The generation is gone (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, poll timeout): the
    /// partitions are lost and the member joins afresh.
    pub fn reset_generation(&self, forget_member_id: bool) {
        let mut s = self.state();
        s.generation = -1;
        if forget_member_id {
            s.member_id.clear();
        }
        s.phase = Phase::Unjoined;
        s.lost = true;
        s.rejoin = true;
        drop(s);
        self.wake.notify_one();
    }

    /// The dedicated coordinator connection, looked up and opened if needed.
    pub async fn coordinator(&self) -> Result<Arc<Connection>> {
        let mut slot = self.coordinator.lock().await;
        if let Some(c) = slot.as_ref().filter(|c| !c.is_closed()) {
            return Ok(Arc::clone(c));
        }
        let (node, addr) =
            find_coordinator(&self.core, &self.settings.group_id, KEY_TYPE_GROUP).await?;
        let config = &self.core.config;
        let conn = Arc::new(
            Connection::connect(
                &addr,
                &config.client_id,
                &self.core.connector,
                config.connect_timeout,
                config.request_timeout,
            )
            .await?,
        );
        debug!(group = %self.settings.group_id, node, %addr, "found the group coordinator");
        *slot = Some(Arc::clone(&conn));
        Ok(conn)
    }

    /// Drop the coordinator connection after a coordinator error; the next call looks it up.
    pub async fn forget_coordinator(&self) {
        *self.coordinator.lock().await = None;
    }

    /// Join the group and sync: retries coordinator moves, MEMBER_ID_REQUIRED, unknown
    /// member ids and rebalances that restart under it; returns on success or a fatal error.
    pub async fn join(
        self: Arc<Self>,
        topics: Vec<String>,
        owned: Vec<TopicPartition>,
    ) -> Result<Joined> {
        if self.settings.protocol == GroupProtocol::Consumer {
            return self.join_consumer(topics).await;
        }
        let cooperative = self.settings.cooperative();
        loop {
            let conn = match self.coordinator().await {
                Ok(c) => c,
                Err(e) if e.is_retriable() => {
                    tokio::time::sleep(self.core.config.retry_backoff).await;
                    continue;
                }
                Err(e) => return Err(e),
            };
            match self.join_once(&conn, &topics, &owned, cooperative).await {
                Ok(Some(joined)) => return Ok(joined),
                Ok(None) => {}
                Err(e) if is_coordinator_error(&e) => {
                    debug!(group = %self.settings.group_id, "rejoining after {e}");
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

    /// One JoinGroup + SyncGroup round; `None` means "go round again".
    async fn join_once(
        &self,
        conn: &Connection,
        topics: &[String],
        owned: &[TopicPartition],
        cooperative: bool,
    ) -> Result<Option<Joined>> {
        let (member_id, generation) = {
            let s = self.state();
            (s.member_id.clone(), s.generation)
        };
        let subscription = protocol::encode_subscription(&Subscription {
            topics: topics.to_vec(),
            owned: if cooperative {
                owned.to_vec()
            } else {
                Vec::new()
            },
            generation,
            user_data: None,
        })?;
        let protocols = self
            .settings
            .assignors
            .iter()
            .map(|a| {
                JoinGroupRequestProtocol::default()
                    .with_name(str_bytes(a.name()))
                    .with_metadata(subscription.clone())
            })
            .collect();
        let s = &self.settings;
        let req = JoinGroupRequest::default()
            .with_group_id(group_id(&s.group_id))
            .with_session_timeout_ms(millis(s.session_timeout))
            .with_rebalance_timeout_ms(millis(s.rebalance_timeout))
            .with_member_id(str_bytes(&member_id))
            .with_group_instance_id(s.instance_id.as_deref().map(str_bytes))
            .with_protocol_type(str_bytes(PROTOCOL_TYPE))
            .with_protocols(protocols);
        let version = conn.version_for(ApiKey::JoinGroup)?;
        // The coordinator holds a JoinGroup until the rebalance completes.
        let wait = s.rebalance_timeout + Duration::from_secs(5);
        let resp: JoinGroupResponse = conn.call_within(&req, version, wait).await?;
        match ErrorCode::try_from_code(resp.error_code) {
            None => {}
            Some(ErrorCode::MemberIdRequired) => {
                self.state().member_id = resp.member_id.to_string();
                return Ok(None);
            }
            Some(ErrorCode::UnknownMemberId) => {
                let mut st = self.state();
                st.member_id.clear();
                st.generation = -1;
                return Ok(None);
            }
            Some(ErrorCode::RebalanceInProgress) => return Ok(None),
            Some(code) => {
                return Err(Error::Kafka {
                    code,
                    message: Some(format!("joining group {}", s.group_id)),
                })
            }
        }
        let member_id = resp.member_id.to_string();
        let generation = resp.generation_id;
        let protocol_name = resp.protocol_name.as_ref().map(|p| p.to_string());
        {
            let mut st = self.state();
            st.member_id = member_id.clone();
            st.generation = generation;
        }
        let assignments = if resp.leader.as_str() == member_id && !resp.skip_assignment {
            let assignor = protocol_name
                .as_deref()
                .and_then(Assignor::from_name)
                .ok_or_else(|| {
                    Error::Protocol(format!(
                        "the coordinator chose assignor {protocol_name:?}, which this member did not offer"
                    ))
                })?;
            self.lead(assignor, &resp).await?
        } else {
            Vec::new()
        };
        let req = SyncGroupRequest::default()
            .with_group_id(group_id(&s.group_id))
            .with_generation_id(generation)
            .with_member_id(str_bytes(&member_id))
            .with_group_instance_id(s.instance_id.as_deref().map(str_bytes))
            .with_protocol_type(Some(str_bytes(PROTOCOL_TYPE)))
            .with_protocol_name(protocol_name.as_deref().map(str_bytes))
            .with_assignments(assignments);
        let version = conn.version_for(ApiKey::SyncGroup)?;
        let resp: SyncGroupResponse = conn.call_within(&req, version, wait).await?;
        match ErrorCode::try_from_code(resp.error_code) {
            None => {}
            Some(ErrorCode::RebalanceInProgress) => return Ok(None),
            Some(ErrorCode::UnknownMemberId) | Some(ErrorCode::IllegalGeneration) => {
                let mut st = self.state();
                if resp.error_code == ErrorCode::UnknownMemberId.code() {
                    st.member_id.clear();
                }
                st.generation = -1;
                return Ok(None);
            }
            Some(code) => {
                return Err(Error::Kafka {
                    code,
                    message: Some(format!("syncing group {}", s.group_id)),
                })
            }
        }
        let assignment = protocol::decode_assignment(&resp.assignment)?;
        {
            let mut st = self.state();
            st.phase = Phase::Stable;
            st.rejoin = false;
            st.lost = false;
        }
        info!(
            group = %s.group_id,
            member = %member_id,
            generation,
            partitions = assignment.len(),
            "joined the group"
        );
        Ok(Some(Joined {
            generation,
            assignment,
        }))
    }

    /// As the group leader: run the chosen assignor over every member's subscription.
    async fn lead(
        &self,
        assignor: Assignor,
        resp: &JoinGroupResponse,
    ) -> Result<Vec<SyncGroupRequestAssignment>> {
        let mut members = Vec::new();
        for m in &resp.members {
            // A member whose metadata does not decode is assigned nothing rather than
            // failing the whole group.
            let sub = protocol::decode_subscription(&m.metadata).unwrap_or_else(|e| {
                warn!(member = %m.member_id, "unreadable subscription: {e}");
                Subscription::default()
            });
            members.push(MemberSubscription {
                member_id: m.member_id.to_string(),
                instance_id: m.group_instance_id.as_ref().map(|i| i.to_string()),
                topics: sub.topics,
                owned: sub.owned,
                generation: sub.generation,
            });
        }
        let mut wanted: Vec<String> = members.iter().flat_map(|m| m.topics.clone()).collect();
        wanted.sort();
        wanted.dedup();
        let cluster = if wanted.is_empty() {
            Default::default()
        } else {
            self.core.refresh(&wanted).await?
        };
        let counts: BTreeMap<String, i32> = wanted
            .iter()
            .filter_map(|t| {
                let info = cluster.topics.get(t)?;
                (info.error.is_none() && !info.partitions.is_empty())
                    .then(|| (t.clone(), info.partitions.len() as i32))
            })
            .collect();
        let plan = assignor.assign(&members, &counts);
        debug!(group = %self.settings.group_id, assignor = assignor.name(), members = members.len(), "assigned as leader");
        plan.into_iter()
            .map(|(member, parts)| {
                Ok(SyncGroupRequestAssignment::default()
                    .with_member_id(str_bytes(&member))
                    .with_assignment(protocol::encode_assignment(&parts)?))
            })
            .collect()
    }

    /// Leave the group (dynamic members; a static member's absence is only noticed at its
    /// session timeout, KIP-345). Best effort: errors are logged.
    pub async fn leave(&self, reason: &str) {
        if self.settings.protocol == GroupProtocol::Consumer {
            return self.leave_consumer(reason).await;
        }
        let (member_id, phase) = {
            let s = self.state();
            (s.member_id.clone(), s.phase)
        };
        {
            let mut s = self.state();
            s.phase = Phase::Unjoined;
            s.generation = -1;
            s.member_id.clear();
        }
        if member_id.is_empty() || phase == Phase::Unjoined || self.settings.instance_id.is_some() {
            return;
        }
        if phase == Phase::Joining {
            // A JoinGroup may be parked on the coordinator connection, and the broker answers
            // a connection's requests in order: leave over a fresh one.
            self.forget_coordinator().await;
        }
        let result = async {
            let conn = self.coordinator().await?;
            let version = conn.version_for(ApiKey::LeaveGroup)?;
            let mut req =
                LeaveGroupRequest::default().with_group_id(group_id(&self.settings.group_id));
            if version >= 3 {
                req = req.with_members(vec![MemberIdentity::default()
                    .with_member_id(str_bytes(&member_id))
                    .with_reason(Some(str_bytes(reason)))]);
            } else {
                req = req.with_member_id(str_bytes(&member_id));
            }
            let resp: LeaveGroupResponse = conn.call_at(&req, version).await?;
            crate::error::check(resp.error_code, None)?;
            for m in resp.members {
                crate::error::check(m.error_code, None)?;
            }
            Ok::<(), Error>(())
        }
        .await;
        match result {
            Ok(()) => {
                info!(group = %self.settings.group_id, member = %member_id, "left the group: {reason}")
            }
            Err(e) => debug!(group = %self.settings.group_id, "leaving the group failed: {e}"),
        }
    }

    /// The background heartbeat loop; runs until aborted (the consumer holds its handle).
    pub async fn heartbeat_loop(self: Arc<Self>, max_poll_interval: Duration) {
        if self.settings.protocol == GroupProtocol::Consumer {
            return self.consumer_heartbeat_loop(max_poll_interval).await;
        }
        let s = &self.settings;
        loop {
            tokio::time::sleep(s.heartbeat_interval).await;
            let (phase, member_id, generation, last_poll) = {
                let st = self.state();
                (st.phase, st.member_id.clone(), st.generation, st.last_poll)
            };
            if phase != Phase::Stable {
                continue;
            }
            if last_poll.elapsed() > max_poll_interval {
                warn!(
                    group = %s.group_id,
                    "no poll within max.poll.interval.ms ({} ms): leaving the group",
                    max_poll_interval.as_millis()
                );
                self.leave("consumer poll timeout has expired").await;
                self.reset_generation(s.instance_id.is_none());
                continue;
            }
            let outcome = async {
                let conn = self.coordinator().await?;
                let version = conn.version_for(ApiKey::Heartbeat)?;
                let req = HeartbeatRequest::default()
                    .with_group_id(group_id(&s.group_id))
                    .with_generation_id(generation)
                    .with_member_id(str_bytes(&member_id))
                    .with_group_instance_id(s.instance_id.as_deref().map(str_bytes));
                let wait = s.session_timeout.min(self.core.config.request_timeout);
                let resp: HeartbeatResponse = conn.call_within(&req, version, wait).await?;
                Ok::<i16, Error>(resp.error_code)
            }
            .await;
            // The answer concerns the generation it was sent for.
            let current = {
                let st = self.state();
                st.phase == Phase::Stable && st.generation == generation
            };
            if !current {
                continue;
            }
            match outcome.map(ErrorCode::try_from_code) {
                Ok(None) => {}
                Ok(Some(ErrorCode::RebalanceInProgress)) => {
                    debug!(group = %s.group_id, "the group is rebalancing");
                    self.request_rejoin();
                }
                Ok(Some(code @ (ErrorCode::IllegalGeneration | ErrorCode::UnknownMemberId))) => {
                    warn!(group = %s.group_id, generation, "heartbeat answered {code:?}: partitions lost, rejoining");
                    self.reset_generation(code == ErrorCode::UnknownMemberId);
                }
                Ok(Some(code @ ErrorCode::FencedInstanceId)) => {
                    let mut st = self.state();
                    st.fatal = Some(Error::Kafka {
                        code,
                        message: Some(format!(
                            "another consumer joined group {} with group.instance.id {:?}",
                            s.group_id, s.instance_id
                        )),
                    });
                    st.phase = Phase::Unjoined;
                    drop(st);
                    self.wake.notify_one();
                }
                Ok(Some(code)) => {
                    debug!(group = %s.group_id, "heartbeat answered {code:?}");
                    if code.is_retriable() {
                        self.forget_coordinator().await;
                    }
                }
                Err(e) => {
                    debug!(group = %s.group_id, "heartbeat failed: {e}");
                    self.forget_coordinator().await;
                }
            }
        }
    }
}

pub(super) fn millis(d: Duration) -> i32 {
    d.as_millis().min(i32::MAX as u128) as i32
}
