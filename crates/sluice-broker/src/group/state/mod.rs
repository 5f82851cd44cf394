//! The classic consumer-group protocol as a pure state machine: no sockets, no clock, no
//! disk. Requests come in with a reply token and `now`; what the coordinator must do comes
//! out as [`Effect`]s (answer a parked JoinGroup/SyncGroup, persist the group). Timers are
//! one `next_deadline()` plus `tick(now)`.
//!
//! States: Empty → PreparingRebalance → CompletingRebalance → Stable, and Dead once deleted.
//! A rebalance completes when every member has rejoined (or the rebalance timeout removes
//! the rest); the first rebalance of an empty group waits `group.initial.rebalance.delay.ms`
//! (extended by each join, capped by the rebalance timeout) so members arriving together
//! land in one generation.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use sluice_protocol::ErrorCode;

/// Identifies a parked request; the shell maps it to the waiting connection.
pub type Token = u64;

#[derive(Clone, Debug)]
pub struct GroupConfig {
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub initial_rebalance_delay_ms: i64,
    pub max_size: usize,
}

impl Default for GroupConfig {
    fn default() -> Self {
        Self {
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            initial_rebalance_delay_ms: 3_000,
            max_size: i32::MAX as usize,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// The name Kafka's ListGroups/DescribeGroups use.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Member {
    pub id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    /// (name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    pub last_heartbeat_ms: i64,
    awaiting_join: Option<(Token, i16)>,
    awaiting_sync: Option<Token>,
    /// Join order, for picking a leader.
    seq: u64,
}

impl Member {
    fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }
}

#[derive(Clone, Debug)]
pub struct Group {
    pub id: String,
    pub state: GroupState,
    pub state_since_ms: i64,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub generation: i32,
    pub leader: Option<String>,
    pub members: BTreeMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, valid until the deadline (KIP-394).
    pending: HashMap<String, i64>,
    /// group.instance.id → member id (KIP-345).
    statics: HashMap<String, String>,
    rebalance_deadline_ms: i64,
    /// The first rebalance of an empty group waits until this; the cap is its budget.
    initial_delay_until_ms: Option<i64>,
    initial_delay_cap_ms: i64,
    next_seq: u64,
}

impl Group {
    fn new(id: &str, now: i64) -> Self {
        Self {
            id: id.to_string(),
            state: GroupState::Empty,
            state_since_ms: now,
            protocol_type: None,
            protocol: None,
            generation: 0,
            leader: None,
            members: BTreeMap::new(),
            pending: HashMap::new(),
            statics: HashMap::new(),
            rebalance_deadline_ms: 0,
            initial_delay_until_ms: None,
            initial_delay_cap_ms: 0,
            next_seq: 0,
        }
    }

    fn set_state(&mut self, state: GroupState, now: i64) {
        self.state = state;
        self.state_since_ms = now;
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Whether a member with these protocols may join (type matches and a protocol is
    /// common to everyone).
    fn supports(
        &self,
        protocol_type: &str,
        protocols: &[(String, Bytes)],
        except: Option<&str>,
    ) -> bool {
        if protocols.is_empty() || protocol_type.is_empty() {
            return false;
        }
        let others: Vec<&Member> = self
            .members
            .values()
            .filter(|m| Some(m.id.as_str()) != except)
            .collect();
        if others.is_empty() {
            return true;
        }
        if self
            .protocol_type
            .as_deref()
            .is_some_and(|t| t != protocol_type)
        {
            return false;
        }
        protocols.iter().any(|(name, _)| {
            others
                .iter()
                .all(|m| m.protocols.iter().any(|(n, _)| n == name))
        })
    }

    /// The protocol every member supports that most members prefer.
    fn select_protocol(&self) -> Option<String> {
        let members: Vec<&Member> = self.members.values().collect();
        let first = members.first()?;
        let candidates: Vec<&String> = first
            .protocols
            .iter()
            .map(|(n, _)| n)
            .filter(|n| {
                members
                    .iter()
                    .all(|m| m.protocols.iter().any(|(x, _)| x == *n))
            })
            .collect();
        let mut votes: Vec<(&String, usize)> = candidates.iter().map(|c| (*c, 0)).collect();
        for m in &members {
            if let Some((name, _)) = m.protocols.iter().find(|(n, _)| candidates.contains(&n)) {
                if let Some(v) = votes.iter_mut().find(|(c, _)| *c == name) {
                    v.1 += 1;
                }
            }
        }
        let best = votes.iter().map(|(_, v)| *v).max()?;
        votes
            .into_iter()
            .find(|(_, v)| *v == best)
            .map(|(c, _)| c.clone())
    }

    fn all_joined(&self) -> bool {
        self.pending.is_empty() && self.members.values().all(|m| m.awaiting_join.is_some())
    }

    fn max_rebalance_timeout(&self) -> i64 {
        self.members
            .values()
            .map(|m| i64::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
    }

    fn current_member_list(&self, protocol: &str) -> Vec<(String, Option<String>, Bytes)> {
        let mut members: Vec<&Member> = self.members.values().collect();
        members.sort_by_key(|m| m.seq);
        members
            .into_iter()
            .map(|m| {
                (
                    m.id.clone(),
                    m.instance_id.clone(),
                    m.metadata_for(protocol),
                )
            })
            .collect()
    }
}

/// A JoinGroup request, decoded.
#[derive(Clone, Debug)]
pub struct JoinRequest {
    pub group_id: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub client_id: String,
    pub client_host: String,
    pub version: i16,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinOutcome {
    pub error: Option<ErrorCode>,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: String,
    pub member_id: String,
    pub skip_assignment: bool,
    /// Only for the leader: (member id, instance id, metadata of the chosen protocol).
    pub members: Vec<(String, Option<String>, Bytes)>,
}

impl JoinOutcome {
    fn error(code: ErrorCode, member_id: &str) -> Self {
        Self {
            error: Some(code),
            generation: -1,
            protocol_type: None,
            protocol: None,
            leader: String::new(),
            member_id: member_id.to_string(),
            skip_assignment: false,
            members: Vec::new(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncOutcome {
    pub error: Option<ErrorCode>,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub assignment: Bytes,
}

impl SyncOutcome {
    fn error(code: ErrorCode) -> Self {
        Self {
            error: Some(code),
            protocol_type: None,
            protocol: None,
            assignment: Bytes::new(),
        }
    }
}

/// What the shell must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    Join(Token, JoinOutcome),
    Sync(Token, SyncOutcome),
    /// Write the group's metadata record (after a generation completes or the group empties).
    Persist(String),
}

/// A SyncGroup request, decoded.
#[derive(Clone, Debug)]
pub struct SyncRequest {
    pub group_id: String,
    pub generation: i32,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignments: Vec<(String, Bytes)>,
}

/// Every group of one coordinator.
#[derive(Debug, Default)]
pub struct GroupMachine {
    pub config: GroupConfig,
    groups: BTreeMap<String, Group>,
    next_member: u64,
}

impl GroupMachine {
    pub fn new(config: GroupConfig) -> Self {
        Self {
            config,
            groups: BTreeMap::new(),
            next_member: 0,
        }
    }

    pub fn group(&self, id: &str) -> Option<&Group> {
        self.groups.get(id)
    }

    pub fn groups(&self) -> impl Iterator<Item = &Group> {
        self.groups.values()
    }

    /// A group known only from committed offsets (simple consumers) or reloaded as empty.
    pub fn ensure_group(&mut self, id: &str, now: i64) -> &mut Group {
        self.groups
            .entry(id.to_string())
            .or_insert_with(|| Group::new(id, now))
    }

    /// Restore a group from its metadata record (coordinator load).
    pub fn restore(&mut self, id: &str, value: &super::records::GroupValue, now: i64) {
        let mut g = Group::new(id, now);
        g.protocol_type = Some(value.protocol_type.clone()).filter(|t| !t.is_empty());
        g.generation = value.generation;
        g.protocol = value.protocol.clone();
        g.leader = value.leader.clone();
        for (i, m) in value.members.iter().enumerate() {
            if let Some(inst) = &m.group_instance_id {
                g.statics.insert(inst.clone(), m.member_id.clone());
            }
            let protocol = value.protocol.clone().unwrap_or_default();
            g.members.insert(
                m.member_id.clone(),
                Member {
                    id: m.member_id.clone(),
                    instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    session_timeout_ms: m.session_timeout_ms,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    protocol_type: value.protocol_type.clone(),
                    protocols: vec![(protocol, m.subscription.clone())],
                    assignment: m.assignment.clone(),
                    last_heartbeat_ms: now,
                    awaiting_join: None,
                    awaiting_sync: None,
                    seq: i as u64,
                },
            );
        }
        g.next_seq = value.members.len() as u64;
        let state = if g.members.is_empty() {
            GroupState::Empty
        } else {
            GroupState::Stable
        };
        g.set_state(state, now);
        // An empty group keeps the time it became empty (offsets expire from it).
        if state == GroupState::Empty && value.current_state_timestamp >= 0 {
            g.state_since_ms = value.current_state_timestamp.min(now);
        }
        self.groups.insert(id.to_string(), g);
    }

    /// Forget a group entirely (its record was a tombstone).
    pub fn forget(&mut self, id: &str) {
        self.groups.remove(id);
    }

    /// A member id no member had before: the client id, a counter and the time given (the
    /// machine reads no clock; ids stay unique across restarts through the time).
    fn new_member_id(&mut self, client_id: &str, now_ms: i64) -> String {
        self.next_member += 1;
        format!(
            "{client_id}-{:08x}-{:016x}",
            self.next_member,
            (now_ms as u64) ^ self.next_member.rotate_left(32)
        )
    }

    pub fn join(&mut self, req: JoinRequest, token: Token, now: i64) -> Vec<Effect> {
        let mut fx = Vec::new();
        let reply = |code: ErrorCode| {
            vec![Effect::Join(
                token,
                JoinOutcome::error(code, &req.member_id),
            )]
        };
        if req.group_id.is_empty() {
            return reply(ErrorCode::InvalidGroupId);
        }
        if req.session_timeout_ms < self.config.min_session_timeout_ms
            || req.session_timeout_ms > self.config.max_session_timeout_ms
        {
            return reply(ErrorCode::InvalidSessionTimeout);
        }
        if !self.groups.contains_key(&req.group_id) {
            if !req.member_id.is_empty() && req.instance_id.is_none() {
                return reply(ErrorCode::UnknownMemberId);
            }
            self.groups
                .insert(req.group_id.clone(), Group::new(&req.group_id, now));
        }
        let new_member_id = if req.member_id.is_empty() {
            Some(self.new_member_id(&req.client_id, now))
        } else {
            None
        };
        let max_size = self.config.max_size;
        let initial_delay = self.config.initial_rebalance_delay_ms;
        let group = self.groups.get_mut(&req.group_id).expect("ensured above");
        if group.state == GroupState::Dead {
            return reply(ErrorCode::CoordinatorNotAvailable);
        }
        let existing = if req.member_id.is_empty() {
            None
        } else {
            Some(req.member_id.as_str())
        };
        if !group.supports(&req.protocol_type, &req.protocols, existing) {
            return reply(ErrorCode::InconsistentGroupProtocol);
        }
        match new_member_id {
            Some(new_id) => {
                if let Some(instance) = req.instance_id.clone() {
                    if let Some(old_id) = group.statics.get(&instance).cloned() {
                        return rejoin_static(
                            group,
                            &req,
                            old_id,
                            new_id,
                            token,
                            now,
                            initial_delay,
                        );
                    }
                    group.statics.insert(instance, new_id.clone());
                } else if req.version >= 4 {
                    // KIP-394: hand out the id first; the member must come back with it.
                    group
                        .pending
                        .insert(new_id.clone(), now + i64::from(req.session_timeout_ms));
                    return vec![Effect::Join(
                        token,
                        JoinOutcome::error(ErrorCode::MemberIdRequired, &new_id),
                    )];
                }
                if group.members.len() >= max_size {
                    return vec![Effect::Join(
                        token,
                        JoinOutcome::error(ErrorCode::GroupMaxSizeReached, &new_id),
                    )];
                }
                add_member(group, &req, &new_id, token, now);
                prepare_rebalance(group, now, initial_delay, &mut fx);
            }
            None => {
                let id = req.member_id.clone();
                if let Some(instance) = &req.instance_id {
                    if group.statics.get(instance).is_some_and(|m| *m != id) {
                        return reply(ErrorCode::FencedInstanceId);
                    }
                }
                if group.pending.remove(&id).is_some() {
                    if group.members.len() >= max_size {
                        return reply(ErrorCode::GroupMaxSizeReached);
                    }
                    add_member(group, &req, &id, token, now);
                    prepare_rebalance(group, now, initial_delay, &mut fx);
                } else if !group.members.contains_key(&id) {
                    return reply(ErrorCode::UnknownMemberId);
                } else {
                    let member = group.members.get_mut(&id).expect("checked above");
                    let changed = member.protocols != req.protocols;
                    member.protocols = req.protocols.clone();
                    member.session_timeout_ms = req.session_timeout_ms;
                    member.rebalance_timeout_ms = req.rebalance_timeout_ms;
                    member.last_heartbeat_ms = now;
                    let is_leader = group.leader.as_deref() == Some(id.as_str());
                    match group.state {
                        GroupState::PreparingRebalance => {
                            if let Some((old, _)) =
                                member.awaiting_join.replace((token, req.version))
                            {
                                fx.push(Effect::Join(
                                    old,
                                    JoinOutcome::error(ErrorCode::UnknownMemberId, &id),
                                ));
                            }
                        }
                        GroupState::CompletingRebalance | GroupState::Stable
                            if !(changed || is_leader && group.state == GroupState::Stable) =>
                        {
                            // Nothing changed: answer with the current generation.
                            let protocol = group.protocol.clone().unwrap_or_default();
                            let members = if is_leader {
                                group.current_member_list(&protocol)
                            } else {
                                Vec::new()
                            };
                            fx.push(Effect::Join(
                                token,
                                current_join(group, &id, members, false),
                            ));
                            return fx;
                        }
                        _ => {
                            member.awaiting_join = Some((token, req.version));
                            prepare_rebalance(group, now, initial_delay, &mut fx);
                        }
                    }
                }
            }
        }
        maybe_complete_join(group, now, &mut fx);
        fx
    }

    pub fn sync(&mut self, req: &SyncRequest, token: Token, now: i64) -> Vec<Effect> {
        let (group_id, generation, member_id) = (
            req.group_id.as_str(),
            req.generation,
            req.member_id.as_str(),
        );
        let (instance_id, protocol_type, protocol_name) = (
            req.instance_id.as_deref(),
            req.protocol_type.as_deref(),
            req.protocol_name.as_deref(),
        );
        let assignments = req.assignments.clone();
        let reply = |code| vec![Effect::Sync(token, SyncOutcome::error(code))];
        let Some(group) = self.groups.get_mut(group_id) else {
            return reply(ErrorCode::UnknownMemberId);
        };
        if group.state == GroupState::Dead {
            return reply(ErrorCode::CoordinatorNotAvailable);
        }
        if let Err(code) = check_member(group, member_id, instance_id) {
            return reply(code);
        }
        if generation != group.generation {
            return reply(ErrorCode::IllegalGeneration);
        }
        if protocol_type.is_some_and(|t| Some(t) != group.protocol_type.as_deref())
            || protocol_name.is_some_and(|n| Some(n) != group.protocol.as_deref())
        {
            return reply(ErrorCode::InconsistentGroupProtocol);
        }
        let mut fx = Vec::new();
        match group.state {
            GroupState::Empty => return reply(ErrorCode::UnknownMemberId),
            GroupState::PreparingRebalance => return reply(ErrorCode::RebalanceInProgress),
            GroupState::Stable => {
                let m = &group.members[member_id];
                fx.push(Effect::Sync(token, sync_ok(group, m.assignment.clone())));
            }
            GroupState::CompletingRebalance => {
                if let Some(m) = group.members.get_mut(member_id) {
                    m.awaiting_sync = Some(token);
                    m.last_heartbeat_ms = now;
                }
                if group.leader.as_deref() == Some(member_id) {
                    let mut given: HashMap<String, Bytes> = assignments.into_iter().collect();
                    for m in group.members.values_mut() {
                        m.assignment = given.remove(&m.id).unwrap_or_default();
                    }
                    group.set_state(GroupState::Stable, now);
                    fx.push(Effect::Persist(group.id.clone()));
                    let waiting: Vec<(Token, Bytes)> = group
                        .members
                        .values_mut()
                        .filter_map(|m| m.awaiting_sync.take().map(|t| (t, m.assignment.clone())))
                        .collect();
                    for (t, a) in waiting {
                        fx.push(Effect::Sync(t, sync_ok(group, a)));
                    }
                }
            }
            GroupState::Dead => unreachable!("handled above"),
        }
        fx
    }

    pub fn heartbeat(
        &mut self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
        now: i64,
    ) -> Option<ErrorCode> {
        let Some(group) = self.groups.get_mut(group_id) else {
            return Some(ErrorCode::UnknownMemberId);
        };
        if group.state == GroupState::Dead {
            return Some(ErrorCode::CoordinatorNotAvailable);
        }
        if let Err(code) = check_member(group, member_id, instance_id) {
            return Some(code);
        }
        if generation != group.generation {
            return Some(ErrorCode::IllegalGeneration);
        }
        match group.state {
            GroupState::Empty => Some(ErrorCode::UnknownMemberId),
            GroupState::PreparingRebalance => {
                touch(group, member_id, now);
                Some(ErrorCode::RebalanceInProgress)
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                touch(group, member_id, now);
                None
            }
            GroupState::Dead => Some(ErrorCode::CoordinatorNotAvailable),
        }
    }

    /// LeaveGroup: per-member results, plus effects (parked requests answered, rebalances).
    pub fn leave(
        &mut self,
        group_id: &str,
        leaving: &[(String, Option<String>)],
        now: i64,
    ) -> (Vec<Option<ErrorCode>>, Vec<Effect>) {
        let mut fx = Vec::new();
        let initial_delay = self.config.initial_rebalance_delay_ms;
        let Some(group) = self.groups.get_mut(group_id) else {
            return (
                leaving
                    .iter()
                    .map(|_| Some(ErrorCode::UnknownMemberId))
                    .collect(),
                fx,
            );
        };
        let mut results = Vec::with_capacity(leaving.len());
        let mut removed_any = false;
        for (member_id, instance_id) in leaving {
            let id = match (member_id.is_empty(), instance_id) {
                (true, Some(inst)) => group.statics.get(inst).cloned(),
                _ => Some(member_id.clone()),
            };
            let Some(id) = id else {
                results.push(Some(ErrorCode::UnknownMemberId));
                continue;
            };
            if let Some(inst) = instance_id {
                if group.statics.get(inst).is_some_and(|m| *m != id) {
                    results.push(Some(ErrorCode::FencedInstanceId));
                    continue;
                }
            }
            if group.pending.remove(&id).is_some() {
                results.push(None);
                continue;
            }
            if group.members.contains_key(&id) {
                remove_member(group, &id, &mut fx);
                removed_any = true;
                results.push(None);
            } else {
                results.push(Some(ErrorCode::UnknownMemberId));
            }
        }
        if removed_any {
            after_removal(group, now, initial_delay, &mut fx);
        }
        (results, fx)
    }

    /// Advance timers: session expiry, pending member expiry, rebalance and initial delays.
    pub fn tick(&mut self, now: i64) -> Vec<Effect> {
        let mut fx = Vec::new();
        let initial_delay = self.config.initial_rebalance_delay_ms;
        for group in self.groups.values_mut() {
            group.pending.retain(|_, deadline| *deadline > now);
            let expired: Vec<String> = group
                .members
                .values()
                .filter(|m| {
                    m.awaiting_join.is_none()
                        && now - m.last_heartbeat_ms >= i64::from(m.session_timeout_ms)
                })
                .map(|m| m.id.clone())
                .collect();
            for id in &expired {
                remove_member(group, id, &mut fx);
            }
            if !expired.is_empty() {
                after_removal(group, now, initial_delay, &mut fx);
            }
            if group.state == GroupState::PreparingRebalance {
                if group.initial_delay_until_ms.is_some_and(|d| now >= d) {
                    group.initial_delay_until_ms = None;
                }
                let timed_out = now >= group.rebalance_deadline_ms;
                if group.initial_delay_until_ms.is_none() && (timed_out || group.all_joined()) {
                    complete_join(group, now, &mut fx);
                }
            }
        }
        fx
    }

    pub fn next_deadline(&self) -> Option<i64> {
        let mut next: Option<i64> = None;
        let mut at = |t: i64| next = Some(next.map_or(t, |n| n.min(t)));
        for g in self.groups.values() {
            for d in g.pending.values() {
                at(*d);
            }
            for m in g.members.values().filter(|m| m.awaiting_join.is_none()) {
                at(m.last_heartbeat_ms + i64::from(m.session_timeout_ms));
            }
            if g.state == GroupState::PreparingRebalance {
                at(g.initial_delay_until_ms
                    .unwrap_or(g.rebalance_deadline_ms)
                    .min(g.rebalance_deadline_ms));
            }
        }
        next
    }

    /// Whether this commit may go ahead (Kafka's `validateOffsetCommit`): "simple" commits
    /// (generation < 0) for groups without members; member commits in Stable and
    /// PreparingRebalance with the current generation.
    #[allow(clippy::too_many_arguments)]
    pub fn check_commit(
        &mut self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
        version: i16,
        now: i64,
    ) -> Result<(), ErrorCode> {
        let group = match self.groups.get_mut(group_id) {
            Some(g) => g,
            None if generation < 0 => self.ensure_group(group_id, now),
            None if version >= 9 => return Err(ErrorCode::GroupIdNotFound),
            None => return Err(ErrorCode::IllegalGeneration),
        };
        if group.state == GroupState::Dead {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        if generation < 0 && group.state == GroupState::Empty {
            return Ok(());
        }
        if generation >= 0 || !member_id.is_empty() || instance_id.is_some() {
            check_member(group, member_id, instance_id)?;
            if generation != group.generation {
                return Err(ErrorCode::IllegalGeneration);
            }
        } else {
            return Err(ErrorCode::UnknownMemberId);
        }
        match group.state {
            GroupState::CompletingRebalance => Err(ErrorCode::RebalanceInProgress),
            _ => {
                touch(group, member_id, now);
                Ok(())
            }
        }
    }

    /// TxnOffsetCommit (Kafka's rules): an unknown group is created empty; a named member must
    /// belong to the group (and its static instance match); a generation, when given, must be
    /// the group's. A producer that sends only the group id (generation -1, no member) may
    /// commit whatever the group's state.
    pub fn check_txn_commit(
        &mut self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
        now: i64,
    ) -> Result<(), ErrorCode> {
        let group = self.ensure_group(group_id, now);
        if group.state == GroupState::Dead {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        if !member_id.is_empty() || instance_id.is_some() {
            check_member(group, member_id, instance_id)?;
        }
        if generation >= 0 && generation != group.generation {
            return Err(ErrorCode::IllegalGeneration);
        }
        Ok(())
    }

    /// DeleteGroups: only groups without members.
    pub fn delete(&mut self, group_id: &str) -> Result<(), ErrorCode> {
        match self.groups.get(group_id) {
            None => Err(ErrorCode::GroupIdNotFound),
            Some(g) if g.state == GroupState::Dead => Err(ErrorCode::GroupIdNotFound),
            Some(g) if !g.is_empty() => Err(ErrorCode::NonEmptyGroup),
            Some(_) => {
                self.groups.remove(group_id);
                Ok(())
            }
        }
    }

    /// The group's metadata record value, for persistence.
    pub fn snapshot(&self, group_id: &str) -> Option<super::records::GroupValue> {
        let g = self.groups.get(group_id)?;
        let protocol = g.protocol.clone().unwrap_or_default();
        let mut members: Vec<&Member> = g.members.values().collect();
        members.sort_by_key(|m| m.seq);
        Some(super::records::GroupValue {
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            generation: g.generation,
            protocol: g.protocol.clone(),
            leader: g.leader.clone(),
            current_state_timestamp: g.state_since_ms,
            members: members
                .into_iter()
                .map(|m| super::records::MemberValue {
                    member_id: m.id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: m.metadata_for(&protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        })
    }
}

fn touch(group: &mut Group, member_id: &str, now: i64) {
    if let Some(m) = group.members.get_mut(member_id) {
        m.last_heartbeat_ms = now;
    }
}

fn check_member(
    group: &Group,
    member_id: &str,
    instance_id: Option<&str>,
) -> Result<(), ErrorCode> {
    if let Some(inst) = instance_id {
        match group.statics.get(inst) {
            Some(m) if m != member_id => return Err(ErrorCode::FencedInstanceId),
            None if group.members.contains_key(member_id) => {
                return Err(ErrorCode::FencedInstanceId)
            }
            _ => {}
        }
    }
    if group.members.contains_key(member_id) {
        Ok(())
    } else {
        Err(ErrorCode::UnknownMemberId)
    }
}

fn sync_ok(group: &Group, assignment: Bytes) -> SyncOutcome {
    SyncOutcome {
        error: None,
        protocol_type: group.protocol_type.clone(),
        protocol: group.protocol.clone(),
        assignment,
    }
}

fn current_join(
    group: &Group,
    member_id: &str,
    members: Vec<(String, Option<String>, Bytes)>,
    skip: bool,
) -> JoinOutcome {
    JoinOutcome {
        error: None,
        generation: group.generation,
        protocol_type: group.protocol_type.clone(),
        protocol: group.protocol.clone(),
        leader: group.leader.clone().unwrap_or_default(),
        member_id: member_id.to_string(),
        skip_assignment: skip,
        members,
    }
}

fn add_member(group: &mut Group, req: &JoinRequest, id: &str, token: Token, now: i64) {
    let seq = group.next_seq;
    group.next_seq += 1;
    if group.members.is_empty() {
        group.protocol_type = Some(req.protocol_type.clone());
    }
    group.members.insert(
        id.to_string(),
        Member {
            id: id.to_string(),
            instance_id: req.instance_id.clone(),
            client_id: req.client_id.clone(),
            client_host: req.client_host.clone(),
            session_timeout_ms: req.session_timeout_ms,
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            protocol_type: req.protocol_type.clone(),
            protocols: req.protocols.clone(),
            assignment: Bytes::new(),
            last_heartbeat_ms: now,
            awaiting_join: Some((token, req.version)),
            awaiting_sync: None,
            seq,
        },
    );
}

/// A static member (known group.instance.id) rejoined with a fresh member id: the old id is
/// fenced. If nothing changed and the group is stable, it gets the current assignment back
/// without a rebalance (KIP-345); a v9 leader is told to skip the assignment.
fn rejoin_static(
    group: &mut Group,
    req: &JoinRequest,
    old_id: String,
    new_id: String,
    token: Token,
    now: i64,
    initial_delay: i64,
) -> Vec<Effect> {
    let mut fx = Vec::new();
    let Some(mut member) = group.members.remove(&old_id) else {
        // Known instance without a live member (expired): join as new.
        group
            .statics
            .remove(req.instance_id.as_deref().unwrap_or_default());
        let mut r = req.clone();
        r.instance_id = req.instance_id.clone();
        group
            .statics
            .insert(req.instance_id.clone().unwrap_or_default(), new_id.clone());
        add_member(group, &r, &new_id, token, now);
        prepare_rebalance(group, now, initial_delay, &mut fx);
        maybe_complete_join(group, now, &mut fx);
        return fx;
    };
    if let Some((t, _)) = member.awaiting_join.take() {
        fx.push(Effect::Join(
            t,
            JoinOutcome::error(ErrorCode::FencedInstanceId, &old_id),
        ));
    }
    if let Some(t) = member.awaiting_sync.take() {
        fx.push(Effect::Sync(
            t,
            SyncOutcome::error(ErrorCode::FencedInstanceId),
        ));
    }
    let changed = member.protocols != req.protocols;
    member.id = new_id.clone();
    member.protocols = req.protocols.clone();
    member.session_timeout_ms = req.session_timeout_ms;
    member.rebalance_timeout_ms = req.rebalance_timeout_ms;
    member.last_heartbeat_ms = now;
    let was_leader = group.leader.as_deref() == Some(old_id.as_str());
    if was_leader {
        group.leader = Some(new_id.clone());
    }
    group
        .statics
        .insert(req.instance_id.clone().unwrap_or_default(), new_id.clone());
    let stable = group.state == GroupState::Stable;
    let selected_supported = group
        .protocol
        .as_ref()
        .is_some_and(|p| member.protocols.iter().any(|(n, _)| n == p));
    let _ = changed;
    group.members.insert(new_id.clone(), member);
    if stable && selected_supported {
        // KIP-345: a static member coming back keeps its assignment; no rebalance. A leader
        // is told to skip assigning (v9), or is shown the old leader id so it acts as a
        // follower (older versions).
        let protocol = group.protocol.clone().unwrap_or_default();
        let mut outcome = current_join(group, &new_id, Vec::new(), false);
        if was_leader {
            if req.version >= 9 {
                outcome.members = group.current_member_list(&protocol);
                outcome.skip_assignment = true;
            } else {
                outcome.leader = old_id.clone();
            }
        }
        fx.push(Effect::Join(token, outcome));
        fx.push(Effect::Persist(group.id.clone()));
        return fx;
    }
    if let Some(m) = group.members.get_mut(&new_id) {
        m.awaiting_join = Some((token, req.version));
    }
    prepare_rebalance(group, now, initial_delay, &mut fx);
    maybe_complete_join(group, now, &mut fx);
    fx
}

fn remove_member(group: &mut Group, id: &str, fx: &mut Vec<Effect>) {
    if let Some(mut m) = group.members.remove(id) {
        if let Some(inst) = &m.instance_id {
            if group.statics.get(inst).is_some_and(|x| x == id) {
                group.statics.remove(inst);
            }
        }
        if let Some((t, _)) = m.awaiting_join.take() {
            fx.push(Effect::Join(
                t,
                JoinOutcome::error(ErrorCode::UnknownMemberId, id),
            ));
        }
        if let Some(t) = m.awaiting_sync.take() {
            fx.push(Effect::Sync(
                t,
                SyncOutcome::error(ErrorCode::UnknownMemberId),
            ));
        }
    }
    if group.leader.as_deref() == Some(id) {
        group.leader = None;
    }
}

/// After members left or expired: a rebalance, which completes at once when every member
/// left has rejoined (as Kafka's `maybeCompleteJoinElseSchedule`): the last member leaving
/// a stable group makes it Empty before the LeaveGroup is answered, not at the next timer.
fn after_removal(group: &mut Group, now: i64, initial_delay: i64, fx: &mut Vec<Effect>) {
    match group.state {
        GroupState::Stable | GroupState::CompletingRebalance => {
            prepare_rebalance(group, now, initial_delay, fx);
            maybe_complete_join(group, now, fx);
        }
        GroupState::PreparingRebalance => maybe_complete_join(group, now, fx),
        _ => {}
    }
}

fn prepare_rebalance(group: &mut Group, now: i64, initial_delay: i64, fx: &mut Vec<Effect>) {
    match group.state {
        GroupState::PreparingRebalance => {
            // An initial delay in progress is extended by each join, within its budget.
            if let Some(until) = group.initial_delay_until_ms {
                group.initial_delay_until_ms = Some(
                    (now + initial_delay)
                        .max(until)
                        .min(group.initial_delay_cap_ms),
                );
            }
            group.rebalance_deadline_ms = group
                .rebalance_deadline_ms
                .max(now + group.max_rebalance_timeout());
            return;
        }
        GroupState::CompletingRebalance => {
            // Members waiting for an assignment of the old generation must rejoin.
            for m in group.members.values_mut() {
                if let Some(t) = m.awaiting_sync.take() {
                    fx.push(Effect::Sync(
                        t,
                        SyncOutcome::error(ErrorCode::RebalanceInProgress),
                    ));
                }
            }
        }
        _ => {}
    }
    let was_empty = group.state == GroupState::Empty;
    group.set_state(GroupState::PreparingRebalance, now);
    group.rebalance_deadline_ms = now + group.max_rebalance_timeout();
    if was_empty {
        // The first rebalance waits for the initial delay, completed by the timer even when
        // the delay is 0 (as Kafka's, which schedules it): members whose joins arrived
        // together (two static members started at once) land in the same generation.
        group.initial_delay_cap_ms = now + group.max_rebalance_timeout();
        group.initial_delay_until_ms = Some((now + initial_delay).min(group.initial_delay_cap_ms));
    } else {
        group.initial_delay_until_ms = None;
    }
}

fn maybe_complete_join(group: &mut Group, now: i64, fx: &mut Vec<Effect>) {
    if group.state == GroupState::PreparingRebalance
        && group.initial_delay_until_ms.is_none()
        && group.all_joined()
    {
        complete_join(group, now, fx);
    }
}

fn complete_join(group: &mut Group, now: i64, fx: &mut Vec<Effect>) {
    let missing: Vec<String> = group
        .members
        .values()
        .filter(|m| m.awaiting_join.is_none())
        .map(|m| m.id.clone())
        .collect();
    for id in missing {
        remove_member(group, &id, fx);
    }
    group.pending.clear();
    group.generation += 1;
    if group.members.is_empty() {
        group.protocol = None;
        group.leader = None;
        group.set_state(GroupState::Empty, now);
        fx.push(Effect::Persist(group.id.clone()));
        return;
    }
    group.protocol = group.select_protocol();
    if group
        .leader
        .as_ref()
        .is_none_or(|l| !group.members.contains_key(l))
    {
        group.leader = group
            .members
            .values()
            .min_by_key(|m| m.seq)
            .map(|m| m.id.clone());
    }
    group.set_state(GroupState::CompletingRebalance, now);
    let protocol = group.protocol.clone().unwrap_or_default();
    let leader = group.leader.clone().unwrap_or_default();
    let all = group.current_member_list(&protocol);
    let waiting: Vec<(String, Token)> = group
        .members
        .values_mut()
        .filter_map(|m| {
            m.last_heartbeat_ms = now;
            m.awaiting_join.take().map(|(t, _)| (m.id.clone(), t))
        })
        .collect();
    for (id, token) in waiting {
        let members = if id == leader {
            all.clone()
        } else {
            Vec::new()
        };
        fx.push(Effect::Join(
            token,
            current_join(group, &id, members, false),
        ));
    }
}

#[cfg(test)]
mod tests;
