//! One streams group (KIP-1071) as a pure state machine: the group epoch, the topology the
//! application declared and its configuration against the cluster's topics, the target
//! assignment of tasks computed by the sticky assignor at the assignment epoch, and each
//! member's reconciliation towards its target (revoke first; an active task is never owned
//! by two members, a process never holds a task twice). What the coordinator must time
//! (sessions, rebalance timeouts, the initial assignment delay) it does around these calls.
//! Kafka's rules (GroupMetadataManager.streamsGroupHeartbeat, CurrentAssignmentBuilder).

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use sluice_protocol::ErrorCode;

pub mod assignor;
pub mod records;
pub mod topology;

use topology::{Configured, TopicInfo, Topology, SHUTDOWN_APPLICATION, STALE_TOPOLOGY};

/// A refusal: Kafka's error code and message.
pub type Refusal = (ErrorCode, String);

/// Tasks by subtopology id: the partitions (task numbers) of each.
pub type Tasks = BTreeMap<String, BTreeSet<i32>>;

/// A member's tasks of the three kinds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct TaskSet {
    pub active: Tasks,
    pub standby: Tasks,
    pub warmup: Tasks,
}

impl TaskSet {
    pub fn is_empty(&self) -> bool {
        [&self.active, &self.standby, &self.warmup]
            .iter()
            .all(|t| t.values().all(BTreeSet::is_empty))
    }

    fn kinds(&self) -> [&Tasks; 3] {
        [&self.active, &self.standby, &self.warmup]
    }

    fn kinds_mut(&mut self) -> [&mut Tasks; 3] {
        [&mut self.active, &mut self.standby, &mut self.warmup]
    }

    /// Whether every task of `self` is one of `other`'s of the same kind.
    pub fn is_subset(&self, other: &TaskSet) -> bool {
        self.kinds()
            .iter()
            .zip(other.kinds())
            .all(|(a, b)| subset(a, b))
    }

    fn intersects(&self, other: &TaskSet) -> bool {
        self.kinds().iter().zip(other.kinds()).any(|(a, b)| {
            a.iter()
                .any(|(s, ps)| b.get(s).is_some_and(|o| !ps.is_disjoint(o)))
        })
    }
}

fn subset(a: &Tasks, b: &Tasks) -> bool {
    a.iter()
        .all(|(s, ps)| ps.is_empty() || b.get(s).is_some_and(|o| ps.is_subset(o)))
}

fn minus(a: &Tasks, b: &Tasks) -> Tasks {
    a.iter()
        .map(|(s, ps)| {
            let rest: BTreeSet<i32> = match b.get(s) {
                Some(o) => ps.difference(o).copied().collect(),
                None => ps.clone(),
            };
            (s.clone(), rest)
        })
        .filter(|(_, ps)| !ps.is_empty())
        .collect()
}

fn intersect(a: &Tasks, b: &Tasks) -> Tasks {
    a.iter()
        .filter_map(|(s, ps)| {
            let both: BTreeSet<i32> = ps.intersection(b.get(s)?).copied().collect();
            (!both.is_empty()).then(|| (s.clone(), both))
        })
        .collect()
}

/// Where a member is in its reconciliation (Kafka's MemberState).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberState {
    Stable,
    UnrevokedTasks,
    UnreleasedTasks,
}

/// A user endpoint (`application.server`).
pub type Endpoint = (String, u16);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamsMember {
    pub member_id: String,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub topology_epoch: i32,
    pub process_id: String,
    pub user_endpoint: Option<Endpoint>,
    pub client_tags: BTreeMap<String, String>,
    /// What it may own now.
    pub assigned: TaskSet,
    /// What it must give up before it moves on.
    pub pending_revocation: TaskSet,
    /// The epoch each active task (assigned or being revoked) was given at.
    pub active_epochs: BTreeMap<(String, i32), i32>,
}

impl StreamsMember {
    fn new(member_id: &str) -> Self {
        StreamsMember {
            member_id: member_id.to_string(),
            member_epoch: 0,
            previous_member_epoch: 0,
            state: MemberState::Stable,
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            rebalance_timeout_ms: -1,
            topology_epoch: -1,
            process_id: String::new(),
            user_endpoint: None,
            client_tags: BTreeMap::new(),
            assigned: TaskSet::default(),
            pending_revocation: TaskSet::default(),
            active_epochs: BTreeMap::new(),
        }
    }

    /// Metadata that moves the group epoch when it changes (not the reconciliation).
    fn metadata(&self) -> impl PartialEq + '_ {
        (
            &self.instance_id,
            &self.rack_id,
            &self.client_id,
            &self.client_host,
            self.rebalance_timeout_ms,
            self.topology_epoch,
            &self.process_id,
            &self.user_endpoint,
            &self.client_tags,
        )
    }
}

/// A StreamsGroupHeartbeat, decoded (None: not sent / unchanged).
#[derive(Clone, Debug, Default)]
pub struct StreamsHeartbeat {
    pub member_id: String,
    pub member_epoch: i32,
    pub endpoint_information_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub topology: Option<Topology>,
    /// What the member owns (all three lists sent), else None.
    pub owned: Option<TaskSet>,
    pub process_id: Option<String>,
    pub user_endpoint: Option<Endpoint>,
    pub client_tags: Option<BTreeMap<String, String>>,
    pub shutdown_application: bool,
    pub client_id: String,
    pub client_host: String,
}

/// The partitions each member with an endpoint serves (for interactive queries).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointPartitions {
    pub endpoint: Endpoint,
    pub active: BTreeMap<String, BTreeSet<i32>>,
    pub standby: BTreeMap<String, BTreeSet<i32>>,
}

/// The answer to a heartbeat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamsAnswer {
    pub member_id: String,
    pub member_epoch: i32,
    /// The member's tasks, when they changed or it (re)joined.
    pub tasks: Option<TaskSet>,
    /// Always a list, empty when all is well (as Kafka 4.3+).
    pub status: Vec<(i8, String)>,
    pub endpoint_information_epoch: i32,
    pub endpoints: Option<Vec<EndpointPartitions>>,
    /// Internal topics the broker is to create.
    pub to_create: Vec<TopicInfo>,
}

/// Group-wide settings the machine needs.
#[derive(Clone, Debug)]
pub struct StreamsSettings {
    /// `group.streams.max.size`.
    pub max_size: usize,
    /// `streams.num.standby.replicas`.
    pub num_standby: usize,
    /// Whether the first assignment is to wait (`streams.initial.rebalance.delay.ms`): the
    /// coordinator computes it when the delay ends ([`StreamsGroup::assign_now`]).
    pub delay_initial_assignment: bool,
}

/// The group's state as ListGroups and StreamsGroupDescribe name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    NotReady,
    Assigning,
    Reconciling,
    Stable,
}

impl GroupState {
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::NotReady => "NotReady",
            GroupState::Assigning => "Assigning",
            GroupState::Reconciling => "Reconciling",
            GroupState::Stable => "Stable",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamsGroup {
    pub group_id: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub topology: Option<Topology>,
    /// The topology epoch last configured ready (-1: none).
    pub validated_topology_epoch: i32,
    /// A hash of the required topics' ids and partition counts when the epoch last moved.
    pub metadata_hash: u64,
    /// `num.standby.replicas` the target was last computed with.
    pub last_num_standby: usize,
    pub members: BTreeMap<String, StreamsMember>,
    /// Each member's target, at `assignment_epoch`.
    pub target: BTreeMap<String, TaskSet>,
    /// The topology as configured against the cluster (recomputed, never persisted).
    pub configured: Option<Configured>,
    /// The member that asked the whole application to shut down.
    pub shutdown_requester: Option<String>,
    pub endpoint_information_epoch: i32,
    /// The initial assignment is being delayed: members reconcile to epoch 1, no tasks.
    pub delaying: bool,
}

/// The topics the group's topology needs, as the cluster has them: name -> (hashable id,
/// partition count).
pub type TopicsView = BTreeMap<String, (u128, i32)>;

impl StreamsGroup {
    pub fn new(group_id: &str) -> Self {
        StreamsGroup {
            group_id: group_id.to_string(),
            group_epoch: 0,
            assignment_epoch: 0,
            topology: None,
            validated_topology_epoch: -1,
            metadata_hash: 0,
            last_num_standby: 0,
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            configured: None,
            shutdown_requester: None,
            endpoint_information_epoch: 0,
            delaying: false,
        }
    }

    pub fn state(&self) -> GroupState {
        if self.members.is_empty() {
            GroupState::Empty
        } else if self
            .topology
            .as_ref()
            .is_none_or(|t| t.epoch != self.validated_topology_epoch)
        {
            GroupState::NotReady
        } else if self.group_epoch > self.assignment_epoch {
            GroupState::Assigning
        } else if self
            .members
            .values()
            .any(|m| m.state != MemberState::Stable || m.member_epoch != self.assignment_epoch)
        {
            GroupState::Reconciling
        } else {
            GroupState::Stable
        }
    }

    /// The topology's topic names the coordinator must look up.
    pub fn required_topics(&self, extra: Option<&Topology>) -> BTreeSet<String> {
        self.topology
            .as_ref()
            .or(extra)
            .map(|t| {
                t.required_topics()
                    .into_iter()
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// One heartbeat of a joining (epoch 0) or current member. Leaving is [`Self::leave`].
    pub fn heartbeat(
        &mut self,
        req: &StreamsHeartbeat,
        topics: &TopicsView,
        settings: &StreamsSettings,
    ) -> Result<StreamsAnswer, Refusal> {
        let epoch = req.member_epoch;
        let id = req.member_id.clone();
        let joining = epoch == 0;
        self.resolve_static(req)?;
        let old = self.members.get(&id).cloned();
        if joining {
            if self.members.len() >= settings.max_size && old.is_none() {
                return Err((
                    ErrorCode::GroupMaxSizeReached,
                    format!(
                        "The streams group has reached its maximum capacity of {} members.",
                        settings.max_size
                    ),
                ));
            }
        } else if old.is_none() {
            return Err((
                ErrorCode::UnknownMemberId,
                format!("Member {id} is not a member of group {}.", self.group_id),
            ));
        }
        let member = old.clone().unwrap_or_else(|| StreamsMember::new(&id));
        check_epoch(&member, epoch, req.owned.as_ref())?;
        // The topology: the first member's initializes the group; a different one at the
        // same epoch is refused (Kafka does not update topologies yet).
        let mut status = Vec::new();
        let mut bump = false;
        if let Some(t) = &req.topology {
            match &self.topology {
                None => {
                    self.topology = Some(t.clone());
                    self.configured = None;
                }
                Some(stored) if stored.epoch > t.epoch => {}
                Some(stored) if stored == t => {}
                Some(_) => {
                    return Err((
                        ErrorCode::InvalidRequest,
                        "Topology updates are not supported yet.".into(),
                    ))
                }
            }
        }
        // The member's fields.
        let mut updated = member.clone();
        if req.rack_id.is_some() {
            updated.rack_id = req.rack_id.clone();
        }
        if req.instance_id.is_some() {
            updated.instance_id = req.instance_id.clone();
        }
        if req.rebalance_timeout_ms != -1 {
            updated.rebalance_timeout_ms = req.rebalance_timeout_ms;
        }
        if let Some(t) = &req.topology {
            updated.topology_epoch = t.epoch;
        }
        updated.client_id = req.client_id.clone();
        updated.client_host = req.client_host.clone();
        if let Some(p) = &req.process_id {
            updated.process_id = p.clone();
        }
        if let Some(tags) = &req.client_tags {
            updated.client_tags = tags.clone();
        }
        if req.user_endpoint.is_some() {
            updated.user_endpoint = req.user_endpoint.clone();
        }
        if old.is_none() || updated.metadata() != member.metadata() {
            bump = true;
        }
        if let Some(t) = &self.topology {
            if updated.topology_epoch < t.epoch {
                status.push((
                    STALE_TOPOLOGY,
                    format!(
                        "The member's topology epoch {} is behind the group's topology epoch {}.",
                        updated.topology_epoch, t.epoch
                    ),
                ));
            }
        }
        // The topology configured against the topics as they are now.
        let hash = self.topics_hash(topics);
        if self.configured.is_none() || hash != self.metadata_hash {
            let configured = match &self.topology {
                Some(t) => t
                    .configure(&|name| topics.get(name).map(|(_, n)| *n))
                    .map_err(|e| (ErrorCode::StreamsInvalidTopology, e))?,
                None => Configured::default(),
            };
            self.configured = Some(configured);
            if hash != self.metadata_hash {
                self.metadata_hash = hash;
                bump = true;
            }
        }
        let configured = self.configured.clone().unwrap_or_default();
        let validated = match (&self.topology, configured.is_ready()) {
            (Some(t), true) => t.epoch,
            _ => -1,
        };
        if validated != self.validated_topology_epoch {
            self.validated_topology_epoch = validated;
            bump = true;
        }
        if settings.num_standby != self.last_num_standby {
            self.last_num_standby = settings.num_standby;
            bump = true;
        }
        // Owned tasks must exist in the topology.
        if configured.is_ready() {
            if let Some(owned) = &req.owned {
                check_tasks(owned, &configured.tasks)?;
            }
        }
        self.members.insert(id.clone(), updated.clone());
        if bump || self.group_epoch == 0 {
            let first = self.group_epoch == 0;
            self.group_epoch = if first { 2 } else { self.group_epoch + 1 };
            if first && settings.delay_initial_assignment {
                self.delaying = true;
            }
        }
        // The target at the new epoch, unless the first one is being delayed.
        let target_epoch = if self.group_epoch > self.assignment_epoch {
            if self.delaying && self.assignment_epoch == 0 {
                1
            } else {
                self.compute_target();
                self.assignment_epoch
            }
        } else {
            self.assignment_epoch
        };
        let target = if target_epoch == 1 && self.delaying {
            TaskSet::default()
        } else {
            self.target.get(&id).cloned().unwrap_or_default()
        };
        let owned = if joining {
            Some(TaskSet::default())
        } else {
            req.owned.clone()
        };
        let reconciled = self.reconcile(&updated, target_epoch, &target, owned.as_ref());
        let changed = reconciled.assigned != member.assigned;
        self.members.insert(id.clone(), reconciled.clone());
        if req.shutdown_application && self.shutdown_requester.is_none() {
            self.shutdown_requester = Some(id.clone());
        }
        if let Some((code, detail)) = &configured.problem {
            status.push((*code, detail.clone()));
        }
        if let Some(requester) = &self.shutdown_requester {
            status.push((
                SHUTDOWN_APPLICATION,
                format!("Streams group member {requester} encountered a fatal error and requested a shutdown for the entire application."),
            ));
        }
        if self.delaying && self.assignment_epoch == 0 {
            status.push((
                topology::ASSIGNMENT_DELAYED,
                "Assignment delayed due to the configured initial rebalance delay.".into(),
            ));
        }
        let tasks_sent = joining || changed;
        if tasks_sent && reconciled.user_endpoint.is_some() {
            self.endpoint_information_epoch += 1;
        }
        let endpoints = (self.endpoint_information_epoch != req.endpoint_information_epoch)
            .then(|| self.endpoints(&id));
        Ok(StreamsAnswer {
            member_id: id,
            member_epoch: reconciled.member_epoch,
            tasks: tasks_sent.then(|| reconciled.assigned.clone()),
            status,
            endpoint_information_epoch: self.endpoint_information_epoch,
            endpoints,
            to_create: configured.to_create.clone(),
        })
    }

    /// Static membership (`group.instance.id`): a member joining with an instance id a
    /// member that left temporarily (-2) holds takes its place, tasks and target (no
    /// rebalance); an instance id held by a live member is refused, as is a heartbeat of a
    /// member that is not the holder.
    fn resolve_static(&mut self, req: &StreamsHeartbeat) -> Result<(), Refusal> {
        let Some(instance) = &req.instance_id else {
            return Ok(());
        };
        let id = &req.member_id;
        let epoch = req.member_epoch;
        let holder = self
            .members
            .values()
            .find(|m| m.instance_id.as_deref() == Some(instance.as_str()))
            .map(|m| (m.member_id.clone(), m.member_epoch));
        match holder {
            None if epoch == 0 => Ok(()),
            None => Err((
                ErrorCode::UnknownMemberId,
                format!("Instance id {instance} is unknown."),
            )),
            Some((old_id, _)) if epoch == 0 && old_id == *id => Ok(()),
            Some((_, held)) if epoch == 0 && held != -2 => Err((
                ErrorCode::UnreleasedInstanceId,
                format!("Static member {id} with instance id {instance} cannot join the group because the instance id is owned by another member."),
            )),
            Some((old_id, _)) if epoch == 0 => {
                if let Some(mut m) = self.members.remove(&old_id) {
                    m.member_id = id.clone();
                    m.member_epoch = 0;
                    m.previous_member_epoch = 0;
                    m.state = MemberState::Stable;
                    m.pending_revocation = TaskSet::default();
                    if let Some(t) = self.target.remove(&old_id) {
                        self.target.insert(id.clone(), t);
                    }
                    self.members.insert(id.clone(), m);
                }
                Ok(())
            }
            Some((old_id, _)) if old_id != *id => Err((
                ErrorCode::FencedInstanceId,
                format!("Static member {id} with instance id {instance} is not the member {old_id}."),
            )),
            Some(_) => Ok(()),
        }
    }

    /// The delayed first assignment is due: compute it (members pick it up at their next
    /// heartbeat).
    pub fn assign_now(&mut self) {
        if !self.delaying {
            return;
        }
        self.delaying = false;
        if !self.members.is_empty() && self.group_epoch > self.assignment_epoch {
            self.compute_target();
        }
    }

    /// A member leaves: -1 removes it (the group epoch moves); -2, a static member leaving
    /// for a while, keeps its place and tasks until its session ends.
    pub fn leave(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        epoch: i32,
        shutdown: bool,
    ) -> Result<(), Refusal> {
        let Some(m) = self.members.get_mut(member_id) else {
            return Err((
                ErrorCode::UnknownMemberId,
                format!(
                    "Member {member_id} is not a member of group {}.",
                    self.group_id
                ),
            ));
        };
        if let Some(instance) = instance_id {
            if m.instance_id.as_deref() != Some(instance) {
                return Err((
                    ErrorCode::FencedInstanceId,
                    format!("Static member {member_id} with instance id {instance} is not the member of that instance."),
                ));
            }
        }
        if shutdown && self.shutdown_requester.is_none() {
            self.shutdown_requester = Some(member_id.to_string());
        }
        if epoch == -2 && instance_id.is_some() {
            m.member_epoch = -2;
            m.pending_revocation = TaskSet::default();
        } else {
            self.remove(member_id);
        }
        Ok(())
    }

    /// Remove a member (left, or its session or rebalance timeout ended).
    pub fn remove(&mut self, member_id: &str) -> bool {
        if self.members.remove(member_id).is_none() {
            return false;
        }
        self.target.remove(member_id);
        self.group_epoch += 1;
        if self.members.is_empty() {
            self.shutdown_requester = None;
        }
        true
    }

    fn topics_hash(&self, topics: &TopicsView) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for name in self.required_topics(None) {
            if let Some((id, n)) = topics.get(&name) {
                (name, id, n).hash(&mut h);
            }
        }
        h.finish()
    }

    /// A new target assignment at the group epoch (every member gets nothing while the
    /// topology is not ready).
    fn compute_target(&mut self) {
        let configured = self.configured.clone().unwrap_or_default();
        if !configured.is_ready() || self.topology.is_none() {
            self.target = self
                .members
                .keys()
                .map(|m| (m.clone(), TaskSet::default()))
                .collect();
        } else {
            let stateful: BTreeSet<String> = self
                .topology
                .iter()
                .flat_map(|t| t.subtopologies.iter())
                .filter(|s| !s.state_changelog_topics.is_empty())
                .map(|s| s.id.clone())
                .collect();
            let specs = self
                .members
                .values()
                .map(|m| {
                    (
                        m.member_id.clone(),
                        assignor::AssignMember {
                            process_id: m.process_id.clone(),
                            previous: self.target.get(&m.member_id).cloned().unwrap_or_default(),
                        },
                    )
                })
                .collect();
            self.target =
                assignor::assign(&specs, &configured.tasks, &stateful, self.last_num_standby);
        }
        self.assignment_epoch = self.group_epoch;
    }

    /// Kafka's CurrentAssignmentBuilder: one step of `member` towards `target`.
    fn reconcile(
        &self,
        member: &StreamsMember,
        target_epoch: i32,
        target: &TaskSet,
        owned: Option<&TaskSet>,
    ) -> StreamsMember {
        match member.state {
            MemberState::Stable if member.member_epoch == target_epoch => member.clone(),
            MemberState::Stable | MemberState::UnreleasedTasks => {
                self.next(member, member.member_epoch, target_epoch, target, owned)
            }
            MemberState::UnrevokedTasks => {
                let still = owned.is_none_or(|o| o.intersects(&member.pending_revocation));
                if still {
                    member.clone()
                } else {
                    // Done revoking: on to the next epoch (Kafka's current + 1).
                    self.next(member, member.member_epoch + 1, target_epoch, target, owned)
                }
            }
        }
    }

    fn next(
        &self,
        member: &StreamsMember,
        member_epoch: i32,
        target_epoch: i32,
        target: &TaskSet,
        owned: Option<&TaskSet>,
    ) -> StreamsMember {
        // Who holds what now, among the other members (assigned or being revoked).
        let mut active_owner: BTreeSet<(&str, i32)> = BTreeSet::new();
        let mut process_holds: BTreeSet<(&str, i32)> = BTreeSet::new();
        for m in self
            .members
            .values()
            .filter(|m| m.member_id != member.member_id)
        {
            for set in [&m.assigned, &m.pending_revocation] {
                for (s, ps) in &set.active {
                    for p in ps {
                        active_owner.insert((s, *p));
                        if m.process_id == member.process_id {
                            process_holds.insert((s, *p));
                        }
                    }
                }
                if m.process_id == member.process_id {
                    for kind in [&set.standby, &set.warmup] {
                        for (s, ps) in kind {
                            for p in ps {
                                process_holds.insert((s, *p));
                            }
                        }
                    }
                }
            }
        }
        let mut kept = TaskSet::default();
        let mut revoke = TaskSet::default();
        let mut add = TaskSet::default();
        let mut unreleased = false;
        let own_other_kinds = |kind: usize, s: &str, p: i32| -> bool {
            // This member holds the task as another kind (it must give that up first).
            member
                .assigned
                .kinds()
                .iter()
                .enumerate()
                .any(|(k, t)| k != kind && t.get(s).is_some_and(|ps| ps.contains(&p)))
        };
        for (k, ((cur, tgt), (kept_k, (revoke_k, add_k)))) in member
            .assigned
            .kinds()
            .into_iter()
            .zip(target.kinds())
            .zip(
                kept.kinds_mut()
                    .into_iter()
                    .zip(revoke.kinds_mut().into_iter().zip(add.kinds_mut())),
            )
            .enumerate()
        {
            *kept_k = intersect(cur, tgt);
            *revoke_k = minus(cur, tgt);
            for (s, ps) in minus(tgt, cur) {
                for p in ps {
                    let blocked = if k == 0 {
                        active_owner.contains(&(s.as_str(), p))
                            || process_holds.contains(&(s.as_str(), p))
                            || own_other_kinds(k, &s, p)
                    } else {
                        process_holds.contains(&(s.as_str(), p)) || own_other_kinds(k, &s, p)
                    };
                    if blocked {
                        unreleased = true;
                    } else {
                        add_k.entry(s.clone()).or_default().insert(p);
                    }
                }
            }
        }
        let mut out = member.clone();
        let must_revoke = !revoke.is_empty() && owned.is_none_or(|o| o.intersects(&revoke));
        if must_revoke {
            out.state = MemberState::UnrevokedTasks;
            out.previous_member_epoch = member.member_epoch;
            out.member_epoch = member_epoch;
            out.assigned = kept;
            out.pending_revocation = revoke;
        } else {
            out.previous_member_epoch = member.member_epoch;
            out.member_epoch = target_epoch;
            let mut assigned = kept;
            for (mine, more) in assigned.kinds_mut().into_iter().zip(add.kinds()) {
                for (s, ps) in more {
                    mine.entry(s.clone())
                        .or_default()
                        .extend(ps.iter().copied());
                }
            }
            out.assigned = assigned;
            out.pending_revocation = TaskSet::default();
            out.state = if unreleased {
                MemberState::UnreleasedTasks
            } else {
                MemberState::Stable
            };
        }
        // Active tasks keep the epoch they were given at; new ones take the target epoch.
        let mut epochs = BTreeMap::new();
        for set in [&out.assigned.active, &out.pending_revocation.active] {
            for (s, ps) in set {
                for p in ps {
                    let key = (s.clone(), *p);
                    let e = member
                        .active_epochs
                        .get(&key)
                        .copied()
                        .unwrap_or(out.member_epoch);
                    epochs.insert(key, e);
                }
            }
        }
        out.active_epochs = epochs;
        out
    }

    /// The partitions each member with an endpoint serves, `me` last (as Kafka orders them).
    fn endpoints(&self, me: &str) -> Vec<EndpointPartitions> {
        let Some(topology) = &self.topology else {
            return Vec::new();
        };
        let to_partitions = |tasks: &Tasks| {
            let mut out: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
            for (s, ps) in tasks {
                for topic in topology.inputs(s) {
                    out.entry(topic.to_string()).or_default().extend(ps);
                }
            }
            out
        };
        let mut members: Vec<&StreamsMember> = self
            .members
            .values()
            .filter(|m| m.user_endpoint.is_some())
            .collect();
        members.sort_by_key(|m| m.member_id == me);
        members
            .into_iter()
            .filter_map(|m| {
                Some(EndpointPartitions {
                    endpoint: m.user_endpoint.clone()?,
                    active: to_partitions(&m.assigned.active),
                    standby: to_partitions(&m.assigned.standby),
                })
            })
            .collect()
    }

    /// Kafka's check of a commit at `epoch` by `member` (OffsetCommit / TxnOffsetCommit):
    /// the current epoch passes; an older one only for partitions of active tasks the
    /// member was given at or before it.
    pub fn commit_epoch_ok(
        &self,
        member: &StreamsMember,
        epoch: i32,
        partitions: &[(String, i32)],
    ) -> Result<(), String> {
        if epoch == member.member_epoch {
            return Ok(());
        }
        if epoch > member.member_epoch {
            return Err(format!(
                "Received member epoch {epoch} is newer than current member epoch {}.",
                member.member_epoch
            ));
        }
        let Some(topology) = &self.topology else {
            return Err("Topology is not available for offset commit validation.".into());
        };
        for (topic, p) in partitions {
            let Some(s) = topology.subtopologies.iter().find(|s| {
                s.source_topics.iter().any(|t| t == topic)
                    || s.repartition_source_topics.iter().any(|t| &t.name == topic)
            }) else {
                return Err(format!("Topic {topic} is not in the topology."));
            };
            match member.active_epochs.get(&(s.id.clone(), *p)) {
                None => {
                    return Err(format!(
                        "Task {}-{p} is not assigned or pending revocation for member.",
                        s.id
                    ))
                }
                Some(given) if epoch < *given => {
                    return Err(format!(
                        "Received member epoch {epoch} is older than assignment epoch {given} for task {}-{p}.",
                        s.id
                    ))
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// Whether the group reads `topic` (OffsetDelete refuses those partitions).
    pub fn reads_topic(&self, topic: &str) -> bool {
        !self.members.is_empty()
            && self.topology.as_ref().is_some_and(|t| {
                t.subtopologies.iter().any(|s| {
                    s.source_topics.iter().any(|n| n == topic)
                        || s.repartition_source_topics.iter().any(|n| n.name == topic)
                })
            })
    }
}

/// Kafka's epoch check (also for a member rejoining at epoch 0 that is still known): a
/// higher epoch is fenced, a lower one too unless it is the previous epoch of a member whose
/// answer was lost (it reports owning only what it is assigned).
fn check_epoch(member: &StreamsMember, epoch: i32, owned: Option<&TaskSet>) -> Result<(), Refusal> {
    let stored = member.member_epoch;
    if epoch > stored {
        return Err((
            ErrorCode::FencedMemberEpoch,
            format!("The streams group member has a greater member epoch ({epoch}) than the one known by the group coordinator ({stored}). The member must abandon all its partitions and rejoin."),
        ));
    }
    if epoch < stored {
        let lost_answer = epoch == member.previous_member_epoch
            && owned.is_some_and(|o| o.is_subset(&member.assigned));
        if !lost_answer {
            return Err((
                ErrorCode::FencedMemberEpoch,
                format!("The streams group member has a smaller member epoch ({epoch}) than the one known by the group coordinator ({stored}). The member must abandon all its partitions and rejoin."),
            ));
        }
    }
    Ok(())
}

/// Owned tasks must be tasks of the configured topology.
fn check_tasks(owned: &TaskSet, tasks: &BTreeMap<String, i32>) -> Result<(), Refusal> {
    for kind in owned.kinds() {
        for (s, ps) in kind {
            let Some(n) = tasks.get(s) else {
                return Err((
                    ErrorCode::InvalidRequest,
                    format!("Subtopology {s} does not exist in the topology."),
                ));
            };
            if let Some(p) = ps.iter().find(|p| **p < 0 || **p >= *n) {
                return Err((
                    ErrorCode::InvalidRequest,
                    format!("Task {p} for subtopology {s} is invalid. Number of tasks for this subtopology: {n}"),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
