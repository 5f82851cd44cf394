//! One consumer group of the consumer group protocol (KIP-848), as a pure state machine: the
//! group epoch, the target assignment computed by a server-side assignor at the assignment
//! epoch, and each member's reconciliation towards its target ([`super::reconcile`]). What
//! the coordinator must persist and time (session and rebalance timeouts) it does around
//! these calls. Kafka's rules (GroupMetadataManager.consumerGroupHeartbeat), except regular
//! expression subscriptions and classic-protocol members, which are not built yet.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use sluice_protocol::ErrorCode;

use super::assignor::{assign, MemberSpec, Partitions, ServerAssignor};
pub use super::consumer_records::ClassicMemberMetadata;
use super::reconcile::{reconcile, MemberAssignment, MemberState, Target};

/// A refusal: Kafka's error code and message.
pub type Refusal = (ErrorCode, String);

/// A ConsumerGroupHeartbeat, decoded (None / -1: unchanged, as on the wire).
#[derive(Clone, Debug, Default)]
pub struct HeartbeatRequest<T: Ord> {
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: Option<Vec<String>>,
    /// A regular expression over topic names (None: unchanged; "": none any more).
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    /// What the member owns (None: unchanged / not said).
    pub owned: Option<Partitions<T>>,
    pub client_id: String,
    pub client_host: String,
}

/// The answer: the member's epoch and, when it changed or was asked for, its assignment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeartbeatResponse<T: Ord> {
    pub member_id: String,
    pub member_epoch: i32,
    pub assignment: Option<Partitions<T>>,
}

/// A member of the group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member<T: Ord> {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: BTreeSet<String>,
    /// The member's regular expression, if any (the group's `resolved` says what it matches).
    pub subscribed_topic_regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
    pub assignment: MemberAssignment<T>,
    /// Set for a member that speaks the classic protocol (JoinGroup, SyncGroup, Heartbeat)
    /// inside this group: a group being migrated between the protocols.
    pub classic: Option<ClassicMemberMetadata>,
}

/// The group's state as ListGroups and ConsumerGroupDescribe name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    Assigning,
    Reconciling,
    Stable,
}

impl GroupState {
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::Assigning => "Assigning",
            GroupState::Reconciling => "Reconciling",
            GroupState::Stable => "Stable",
        }
    }
}

/// The topics the group may subscribe to: name -> (topic id, partition count).
pub type Topics<T> = BTreeMap<String, (T, i32)>;

/// Group-wide settings the machine needs.
#[derive(Clone, Debug)]
pub struct GroupSettings {
    /// `group.consumer.assignors`: the first is the default.
    pub assignors: Vec<ServerAssignor>,
    /// `group.consumer.max.size`.
    pub max_size: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerGroup<T: Ord> {
    pub group_id: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, Member<T>>,
    /// The target assignment of each member, at `assignment_epoch`.
    pub target: BTreeMap<String, Partitions<T>>,
    /// A hash of the subscribed topics' ids and partition counts when the epoch last moved:
    /// a topic created, deleted or given partitions bumps the epoch at the next heartbeat.
    pub metadata_hash: u64,
    /// The topic names each regular expression members use matches now (the coordinator
    /// resolves them before each heartbeat; not persisted, resolved again after a load).
    pub resolved: BTreeMap<String, BTreeSet<String>>,
}

impl<T: Ord + Clone + Hash> ConsumerGroup<T> {
    pub fn new(group_id: &str) -> Self {
        ConsumerGroup {
            group_id: group_id.to_string(),
            group_epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            metadata_hash: 0,
            resolved: BTreeMap::new(),
        }
    }

    /// The topic names `m` subscribes to: its names and what its expression matches.
    pub fn member_topics<'a>(&'a self, m: &'a Member<T>) -> BTreeSet<&'a String> {
        let matched = m
            .subscribed_topic_regex
            .as_ref()
            .and_then(|r| self.resolved.get(r));
        m.subscribed_topic_names
            .iter()
            .chain(matched.into_iter().flatten())
            .collect()
    }

    pub fn state(&self) -> GroupState {
        if self.members.is_empty() {
            GroupState::Empty
        } else if self.group_epoch > self.assignment_epoch {
            GroupState::Assigning
        } else if self.members.values().any(|m| {
            m.assignment.state != MemberState::Stable
                || m.assignment.member_epoch != self.assignment_epoch
        }) {
            GroupState::Reconciling
        } else {
            GroupState::Stable
        }
    }

    /// One heartbeat of a joining (epoch 0) or current member (epoch > 0). Leaving (-1, -2)
    /// is [`ConsumerGroup::leave`].
    pub fn heartbeat(
        &mut self,
        req: &HeartbeatRequest<T>,
        topics: &Topics<T>,
        settings: &GroupSettings,
    ) -> Result<HeartbeatResponse<T>, Refusal> {
        let epoch = req.member_epoch;
        let member_id = self.resolve_member(req, settings)?;
        let old = self.members.get(&member_id).cloned();
        let mut member = old.clone().unwrap_or_else(|| Member {
            member_id: member_id.clone(),
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            subscribed_topic_names: BTreeSet::new(),
            subscribed_topic_regex: None,
            rebalance_timeout_ms: -1,
            server_assignor: None,
            assignment: MemberAssignment::joining(),
            classic: None,
        });
        if let Some(old) = &old {
            check_epoch(old, epoch, req.owned.as_ref(), &self.group_id)?;
        }
        // 2. The member's fields from the request (what it did not send stays).
        if req.instance_id.is_some() {
            member.instance_id = req.instance_id.clone();
        }
        if req.rack_id.is_some() {
            member.rack_id = req.rack_id.clone();
        }
        if req.rebalance_timeout_ms != -1 {
            member.rebalance_timeout_ms = req.rebalance_timeout_ms;
        }
        if req.server_assignor.is_some() {
            member.server_assignor = req.server_assignor.clone();
        }
        let mut subscription_changed = false;
        if let Some(names) = &req.subscribed_topic_names {
            let names: BTreeSet<String> = names.iter().cloned().collect();
            subscription_changed = names != member.subscribed_topic_names;
            member.subscribed_topic_names = names;
        }
        if let Some(regex) = &req.subscribed_topic_regex {
            let regex = Some(regex.clone()).filter(|r| !r.is_empty());
            if regex != member.subscribed_topic_regex {
                subscription_changed = true;
                member.subscribed_topic_regex = regex;
            }
        }
        member.client_id = req.client_id.clone();
        member.client_host = req.client_host.clone();
        // The group sees the updated member for the target; its reconciliation is stored last.
        self.members.insert(member_id.clone(), member.clone());
        // 4. A new group, a new subscription or changed topics move the group epoch.
        let hash = self.subscribed_metadata_hash(topics);
        if self.group_epoch == 0 || subscription_changed || hash != self.metadata_hash {
            self.group_epoch += 1;
            self.metadata_hash = hash;
        }
        // 5. A new target assignment at the new epoch.
        if self.group_epoch > self.assignment_epoch {
            self.compute_target(topics, settings);
        }
        // 6. Reconcile the member towards its target.
        let before = member.assignment.clone();
        let empty = Partitions::new();
        let subscribed: BTreeSet<T> = self
            .member_topics(&member)
            .into_iter()
            .filter_map(|n| topics.get(n).map(|(id, _)| id.clone()))
            .collect();
        let owners = self.owners(&member_id);
        let target = Target {
            epoch: self.assignment_epoch,
            partitions: self.target.get(&member_id).unwrap_or(&empty),
            subscribed: &subscribed,
            subscription_changed,
            owned: if epoch == 0 {
                // A (re)joining member owns nothing (Kafka requires it to say so).
                Some(&empty)
            } else {
                req.owned.as_ref()
            },
        };
        let after = reconcile(&before, &target, &|t, p| owners.contains(&(t.clone(), p)));
        let changed = after.assigned != before.assigned;
        member.assignment = after.clone();
        self.members.insert(member_id.clone(), member);
        let full = req.rebalance_timeout_ms != -1
            && req.subscribed_topic_names.is_some()
            && req.owned.is_some();
        Ok(HeartbeatResponse {
            member_id,
            member_epoch: after.member_epoch,
            assignment: (epoch == 0 || full || changed).then_some(after.assigned),
        })
    }

    /// Which member the request is, with Kafka's checks of member ids, instance ids and
    /// the group's size; a static member taking over a left (-2) instance replaces it.
    fn resolve_member(
        &mut self,
        req: &HeartbeatRequest<T>,
        settings: &GroupSettings,
    ) -> Result<String, Refusal> {
        let epoch = req.member_epoch;
        let id = req.member_id.clone();
        if !self.members.contains_key(&id) && self.members.len() >= settings.max_size {
            return Err((
                ErrorCode::GroupMaxSizeReached,
                format!(
                    "The consumer group has reached its maximum capacity of {} members.",
                    settings.max_size
                ),
            ));
        }
        let Some(instance) = &req.instance_id else {
            if epoch != 0 && !self.members.contains_key(&id) {
                return Err((
                    ErrorCode::UnknownMemberId,
                    format!("Member {id} is not a member of group {}.", self.group_id),
                ));
            }
            return Ok(id);
        };
        let holder = self
            .members
            .values()
            .find(|m| m.instance_id.as_deref() == Some(instance.as_str()))
            .map(|m| (m.member_id.clone(), m.assignment.member_epoch));
        match holder {
            None if epoch == 0 => Ok(id),
            None => Err((
                ErrorCode::UnknownMemberId,
                format!("Instance id {instance} is unknown."),
            )),
            Some((_, held_epoch)) if epoch == 0 && held_epoch != -2 => Err((
                ErrorCode::UnreleasedInstanceId,
                format!(
                    "Static member {id} with instance id {instance} cannot join the group because the instance id is owned by another member."
                ),
            )),
            Some((old_id, _)) if epoch == 0 => {
                // Take over the left member: its target and partitions, under the new id.
                if let Some(mut m) = self.members.remove(&old_id) {
                    m.member_id = id.clone();
                    m.assignment.member_epoch = 0;
                    m.assignment.previous_member_epoch = 0;
                    if let Some(t) = self.target.remove(&old_id) {
                        self.target.insert(id.clone(), t);
                    }
                    self.members.insert(id.clone(), m);
                }
                Ok(id)
            }
            Some((old_id, _)) if old_id != id => Err((
                ErrorCode::FencedInstanceId,
                format!(
                    "Static member {id} with instance id {instance} is not the member {old_id}."
                ),
            )),
            Some(_) => Ok(id),
        }
    }

    /// A member leaves: -1 removes it (and moves the group epoch), -2 (static members) keeps
    /// its partitions for it until its session expires.
    pub fn leave(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        epoch: i32,
    ) -> Result<HeartbeatResponse<T>, Refusal> {
        let id = match instance_id {
            Some(instance) => {
                let holder = self
                    .members
                    .values()
                    .find(|m| m.instance_id.as_deref() == Some(instance))
                    .map(|m| m.member_id.clone())
                    .ok_or_else(|| {
                        (
                            ErrorCode::UnknownMemberId,
                            format!("Instance id {instance} is unknown."),
                        )
                    })?;
                if holder != member_id {
                    return Err((
                        ErrorCode::FencedInstanceId,
                        format!("Static member {member_id} with instance id {instance} is not the member {holder}."),
                    ));
                }
                holder
            }
            None if self.members.contains_key(member_id) => member_id.to_string(),
            None => {
                return Err((
                    ErrorCode::UnknownMemberId,
                    format!(
                        "Member {member_id} is not a member of group {}.",
                        self.group_id
                    ),
                ))
            }
        };
        if epoch == -2 && instance_id.is_some() {
            if let Some(m) = self.members.get_mut(&id) {
                m.assignment.member_epoch = -2;
                m.assignment.pending_revocation.clear();
            }
        } else {
            self.remove(&id);
        }
        Ok(HeartbeatResponse {
            member_id: member_id.to_string(),
            member_epoch: epoch,
            assignment: None,
        })
    }

    /// Remove a member whose session or rebalance timeout expired (or that left): the group
    /// epoch moves; the new target is computed at the next heartbeat.
    pub fn remove(&mut self, member_id: &str) -> bool {
        if self.members.remove(member_id).is_none() {
            return false;
        }
        self.target.remove(member_id);
        self.group_epoch += 1;
        true
    }

    /// Partitions that members other than `me` own (assigned or being revoked).
    fn owners(&self, me: &str) -> BTreeSet<(T, i32)> {
        self.members
            .values()
            .filter(|m| m.member_id != me)
            .flat_map(|m| {
                m.assignment
                    .assigned
                    .iter()
                    .chain(m.assignment.pending_revocation.iter())
                    .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
            })
            .collect()
    }

    fn subscribed_metadata_hash(&self, topics: &Topics<T>) -> u64 {
        let names: BTreeSet<&String> = self
            .members
            .values()
            .flat_map(|m| self.member_topics(m))
            .collect();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for n in names {
            if let Some((id, count)) = topics.get(n) {
                (n, id, count).hash(&mut h);
            }
        }
        h.finish()
    }

    /// The assignor most members asked for, else the first configured.
    pub fn assignor(&self, settings: &GroupSettings) -> ServerAssignor {
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = &m.server_assignor {
                *votes.entry(a.as_str()).or_default() += 1;
            }
        }
        votes
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
            .and_then(|(name, _)| ServerAssignor::from_name(name))
            .or_else(|| settings.assignors.first().copied())
            .unwrap_or(ServerAssignor::Uniform)
    }

    /// A new target assignment at the group epoch, over every member's subscription and
    /// current target.
    fn compute_target(&mut self, topics: &Topics<T>, settings: &GroupSettings) {
        let assignor = self.assignor(settings);
        let specs: BTreeMap<String, MemberSpec<T>> = self
            .members
            .values()
            .map(|m| {
                (
                    m.member_id.clone(),
                    MemberSpec {
                        subscribed: self
                            .member_topics(m)
                            .into_iter()
                            .filter_map(|n| topics.get(n).map(|(id, _)| id.clone()))
                            .collect(),
                        current: self.target.get(&m.member_id).cloned().unwrap_or_default(),
                        instance_id: m.instance_id.clone(),
                    },
                )
            })
            .collect();
        let counts: BTreeMap<T, i32> = topics.values().map(|(id, n)| (id.clone(), *n)).collect();
        self.target = assign(assignor, &specs, &counts);
        self.assignment_epoch = self.group_epoch;
    }
}

/// Kafka's epoch check: a higher epoch than the member's is fenced, so is a lower one unless
/// it is the previous epoch of a member whose answer was lost (it reports owning only what
/// it is assigned). A joining member (epoch 0) always passes.
fn check_epoch<T: Ord>(
    member: &Member<T>,
    epoch: i32,
    owned: Option<&Partitions<T>>,
    group: &str,
) -> Result<(), Refusal> {
    let stored = member.assignment.member_epoch;
    if epoch == 0 || epoch == stored {
        return Ok(());
    }
    let lost_answer = epoch < stored
        && epoch == member.assignment.previous_member_epoch
        && owned.is_some_and(|owned| {
            owned.iter().all(|(t, ps)| {
                member
                    .assignment
                    .assigned
                    .get(t)
                    .is_some_and(|a| ps.is_subset(a))
                    || ps.is_empty()
            })
        });
    if lost_answer {
        return Ok(());
    }
    Err((
        ErrorCode::FencedMemberEpoch,
        format!(
            "The consumer group member {} of group {group} has an epoch {epoch} that is not the current one ({stored}).",
            member.member_id
        ),
    ))
}

pub mod classic;
pub mod records;
pub mod validate;

#[cfg(test)]
mod tests;
