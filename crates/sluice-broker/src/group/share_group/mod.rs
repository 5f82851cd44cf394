//! One share group (KIP-932) as a pure state machine: its members, their subscriptions, the
//! group epoch, and the target assignment of partitions to members computed by the simple
//! assignor at the assignment epoch. Share groups have no revocation phase: a member takes
//! its target at its next heartbeat, since records (not partitions) are what a member holds,
//! each under its own acquisition lock at the partition leader. Members' sessions are timed
//! by the caller through [`ShareGroup::expire`]. Kafka's rules
//! (GroupMetadataManager.shareGroupHeartbeat, SimpleAssignor).

use std::collections::{BTreeMap, BTreeSet};

use sluice_protocol::ErrorCode;

pub mod assignor;

/// A refusal: Kafka's error code and message.
pub type Refusal = (ErrorCode, String);

/// Partitions by topic name.
pub type Assignment = BTreeMap<String, BTreeSet<i32>>;

/// The subscribed topics as the cluster has them: name → (topic id, partition count).
pub type TopicsView = BTreeMap<String, (u128, i32)>;

/// One member of a share group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareMember {
    pub member_epoch: i32,
    pub previous_epoch: i32,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed: BTreeSet<String>,
    pub assigned: Assignment,
    /// When the member's session runs out unless it heartbeats again.
    pub deadline_ms: i64,
}

/// A ShareGroupHeartbeat, decoded and checked for form.
#[derive(Clone, Debug)]
pub struct ShareHeartbeat {
    pub member_id: String,
    pub member_epoch: i32,
    pub rack_id: Option<String>,
    /// None: unchanged since the last heartbeat.
    pub subscribed: Option<Vec<String>>,
    pub client_id: String,
    pub client_host: String,
}

/// A heartbeat's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareAnswer {
    pub member_id: String,
    pub member_epoch: i32,
    /// Sent on a join, a full request, or when the member's partitions changed.
    pub assignment: Option<Assignment>,
}

/// Settings the coordinator reads from configs.
#[derive(Clone, Copy, Debug)]
pub struct ShareSettings {
    /// `group.share.max.size` (200).
    pub max_size: usize,
    /// `share.session.timeout.ms` (45,000).
    pub session_timeout_ms: i64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShareGroup {
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, ShareMember>,
    /// The subscribed topics' partition counts the target assignment was computed for.
    topics_seen: BTreeMap<String, i32>,
    target: BTreeMap<String, Assignment>,
    /// Every topic a member has subscribed to since the group was made: where the group may
    /// have share-partition state (DescribeShareGroupOffsets of all topics).
    state_topics: BTreeSet<String>,
}

impl ShareGroup {
    /// "Empty" or "Stable" (share groups have no assigning or reconciling state).
    pub fn state(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else {
            "Stable"
        }
    }

    /// Every topic a member has subscribed to since the group was made.
    pub fn state_topics(&self) -> &BTreeSet<String> {
        &self.state_topics
    }

    /// Every topic some member subscribes to.
    pub fn subscribed_topics(&self) -> BTreeSet<String> {
        self.members
            .values()
            .flat_map(|m| m.subscribed.iter().cloned())
            .collect()
    }

    /// One heartbeat at `now_ms`: join (epoch 0), heartbeat, or leave (epoch -1).
    pub fn heartbeat(
        &mut self,
        req: ShareHeartbeat,
        topics: &TopicsView,
        settings: ShareSettings,
        now_ms: i64,
    ) -> Result<ShareAnswer, Refusal> {
        let id = req.member_id.clone();
        let epoch = req.member_epoch;
        if epoch == -1 {
            if self.members.remove(&id).is_none() {
                return Err(unknown_member(&id));
            }
            self.group_epoch += 1;
            return Ok(ShareAnswer {
                member_id: id,
                member_epoch: -1,
                assignment: None,
            });
        }
        let full = req.subscribed.is_some();
        match self.members.get(&id) {
            None if epoch != 0 => return Err(unknown_member(&id)),
            None if self.members.len() >= settings.max_size => {
                return Err((
                    ErrorCode::GroupMaxSizeReached,
                    format!(
                        "The share group has reached its maximum capacity of {} members.",
                        settings.max_size
                    ),
                ))
            }
            Some(m) if epoch != 0 && epoch != m.member_epoch && epoch != m.previous_epoch => {
                return Err((
                    ErrorCode::FencedMemberEpoch,
                    format!(
                        "The share group member has a smaller or larger member epoch ({epoch}) \
                         than the one known by the group coordinator ({}).",
                        m.member_epoch
                    ),
                ))
            }
            _ => {}
        }
        let member = self
            .members
            .entry(id.clone())
            .or_insert_with(|| ShareMember {
                member_epoch: 0,
                previous_epoch: 0,
                rack_id: None,
                client_id: String::new(),
                client_host: String::new(),
                subscribed: BTreeSet::new(),
                assigned: Assignment::new(),
                deadline_ms: 0,
            });
        member.deadline_ms = now_ms.saturating_add(settings.session_timeout_ms);
        member.client_id = req.client_id;
        member.client_host = req.client_host;
        if req.rack_id.is_some() {
            member.rack_id = req.rack_id;
        }
        let mut bump = false;
        if let Some(topics) = req.subscribed {
            let topics: BTreeSet<String> = topics.into_iter().collect();
            if topics != member.subscribed {
                self.state_topics.extend(topics.iter().cloned());
                member.subscribed = topics;
                bump = true;
            }
        }
        if epoch == 0 && member.member_epoch == 0 {
            bump = true;
        }
        let seen = self.topics_now(topics);
        if seen != self.topics_seen {
            self.topics_seen = seen;
            bump = true;
        }
        if bump {
            self.group_epoch += 1;
        }
        if self.assignment_epoch < self.group_epoch {
            self.target = assignor::assign(&self.members, &self.topics_seen);
            self.assignment_epoch = self.group_epoch;
        }
        let assignment_epoch = self.assignment_epoch;
        let target = self.target.get(&id).cloned().unwrap_or_default();
        let member = self.members.get_mut(&id).expect("inserted above");
        let mut changed = false;
        if member.member_epoch != assignment_epoch {
            member.previous_epoch = member.member_epoch;
            member.member_epoch = assignment_epoch;
            changed = member.assigned != target;
            member.assigned = target;
        }
        Ok(ShareAnswer {
            member_id: id,
            member_epoch: member.member_epoch,
            assignment: (epoch == 0 || full || changed).then(|| member.assigned.clone()),
        })
    }

    /// Partition counts of the topics members subscribe to, as the cluster has them now.
    fn topics_now(&self, topics: &TopicsView) -> BTreeMap<String, i32> {
        self.subscribed_topics()
            .into_iter()
            .filter_map(|t| topics.get(&t).map(|(_, n)| (t, *n)))
            .collect()
    }

    /// Remove members whose session ran out by `now_ms`; true when any did.
    pub fn expire(&mut self, now_ms: i64) -> bool {
        let before = self.members.len();
        self.members.retain(|_, m| m.deadline_ms > now_ms);
        let expired = self.members.len() != before;
        if expired {
            self.group_epoch += 1;
        }
        expired
    }
}

fn unknown_member(id: &str) -> Refusal {
    (
        ErrorCode::UnknownMemberId,
        format!("Member {id} is not a member of the share group."),
    )
}

#[cfg(test)]
mod tests;
