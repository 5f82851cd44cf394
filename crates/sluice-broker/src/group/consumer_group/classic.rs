//! Members that speak the classic protocol (JoinGroup, SyncGroup, Heartbeat) inside a
//! consumer group, and a classic group turned into a consumer group: how a group migrates
//! online between the protocols as its members are restarted one by one (Kafka's
//! `classicGroupJoinToConsumerGroup`, `classicGroupSyncToConsumerGroup`,
//! `classicGroupHeartbeatToConsumerGroup`, `ConsumerGroup.fromClassicGroup`). A classic
//! member's subscription and owned partitions come from its embedded consumer protocol; the
//! group computes its target and reconciles it as any member's, and it learns of a new
//! assignment by rejoining (REBALANCE_IN_PROGRESS on its heartbeat).

use std::hash::Hash;

use sluice_protocol::ErrorCode;

use super::{
    ClassicMemberMetadata, ConsumerGroup, GroupSettings, HeartbeatRequest, Member, Refusal, Topics,
};
use crate::group::assignor::Partitions;
use crate::group::reconcile::{MemberAssignment, MemberState};

/// A JoinGroup of a classic member, with its embedded subscription decoded.
#[derive(Clone, Debug)]
pub struct ClassicJoin<T: Ord> {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub protocol_type: String,
    /// (name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Vec<u8>)>,
    pub topics: Vec<String>,
    pub owned: Partitions<T>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
}

/// A member of a classic group being converted, with what its protocol metadata and its
/// last assignment say.
#[derive(Clone, Debug)]
pub struct ClassicSource<T: Ord> {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocols: Vec<(String, Vec<u8>)>,
    pub topics: Vec<String>,
    pub rack_id: Option<String>,
    pub assigned: Partitions<T>,
}

impl<T: Ord + Clone + Hash> ConsumerGroup<T> {
    /// Whether a classic member with `protocol_type` and `protocols` may be in the group:
    /// the consumer protocol type, and a protocol every classic member has.
    fn supports_classic(&self, protocol_type: &str, protocols: &[(String, Vec<u8>)]) -> bool {
        let classic: Vec<&ClassicMemberMetadata> = self
            .members
            .values()
            .filter_map(|m| m.classic.as_ref())
            .collect();
        protocol_type == "consumer"
            && !protocols.is_empty()
            && protocols.iter().any(|(name, _)| {
                classic
                    .iter()
                    .all(|c| c.protocols.iter().any(|(n, _)| n == name))
            })
    }

    /// A classic member joins (or rejoins): it becomes or stays a member subscribed to its
    /// embedded subscription's topics, reconciled from what it says it owns. Returns its
    /// epoch (the generation it is told) and its protocol (its first).
    pub fn classic_join(
        &mut self,
        j: &ClassicJoin<T>,
        topics: &Topics<T>,
        settings: &GroupSettings,
    ) -> Result<(i32, String), Refusal> {
        if !self.supports_classic(&j.protocol_type, &j.protocols) {
            return Err((ErrorCode::InconsistentGroupProtocol, String::new()));
        }
        let epoch = self
            .members
            .get(&j.member_id)
            .map_or(0, |m| m.assignment.member_epoch.max(0));
        let req = HeartbeatRequest {
            member_id: j.member_id.clone(),
            member_epoch: epoch,
            instance_id: j.instance_id.clone(),
            rack_id: j.rack_id.clone(),
            rebalance_timeout_ms: j.rebalance_timeout_ms,
            subscribed_topic_names: Some(j.topics.clone()),
            subscribed_topic_regex: Some(String::new()),
            server_assignor: None,
            owned: Some(j.owned.clone()),
            client_id: j.client_id.clone(),
            client_host: j.client_host.clone(),
        };
        self.heartbeat(&req, topics, settings)?;
        let m = self
            .members
            .get_mut(&j.member_id)
            .ok_or((ErrorCode::UnknownMemberId, String::new()))?;
        m.classic = Some(ClassicMemberMetadata {
            session_timeout_ms: j.session_timeout_ms,
            protocols: j.protocols.clone(),
        });
        let protocol = j.protocols.first().map(|p| p.0.clone()).unwrap_or_default();
        Ok((m.assignment.member_epoch, protocol))
    }

    /// The classic member a SyncGroup or Heartbeat names, with Kafka's checks.
    fn classic_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<&Member<T>, ErrorCode> {
        let m = match instance_id {
            None => self.members.get(member_id),
            Some(instance) => self
                .members
                .values()
                .find(|m| m.instance_id.as_deref() == Some(instance)),
        }
        .ok_or(ErrorCode::UnknownMemberId)?;
        if m.member_id != member_id {
            return Err(ErrorCode::FencedInstanceId);
        }
        if m.classic.is_none() {
            return Err(ErrorCode::UnknownMemberId);
        }
        if generation != m.assignment.member_epoch {
            return Err(ErrorCode::IllegalGeneration);
        }
        Ok(m)
    }

    /// SyncGroup of a classic member: its current assignment, unless the group has moved
    /// on and it has nothing to revoke (then it must rejoin).
    pub fn classic_sync(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        protocol_type: Option<&str>,
        protocol_name: Option<&str>,
    ) -> Result<(String, Partitions<T>), ErrorCode> {
        let m = self.classic_member(member_id, instance_id, generation)?;
        let protocol = m
            .classic
            .as_ref()
            .and_then(|c| c.protocols.first())
            .map(|p| p.0.clone())
            .unwrap_or_default();
        if protocol_type.is_some_and(|t| t != "consumer")
            || protocol_name.is_some_and(|n| n != protocol)
        {
            return Err(ErrorCode::InconsistentGroupProtocol);
        }
        if self.group_epoch > m.assignment.member_epoch
            && m.assignment.state != MemberState::UnrevokedPartitions
        {
            return Err(ErrorCode::RebalanceInProgress);
        }
        Ok((protocol, m.assignment.assigned.clone()))
    }

    /// Heartbeat of a classic member: REBALANCE_IN_PROGRESS when it has something to do
    /// (a newer group epoch, partitions to revoke, or partitions now released to it).
    pub fn classic_heartbeat(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), ErrorCode> {
        let m = self.classic_member(member_id, instance_id, generation)?;
        let waiting = || {
            let owners = self.owners(member_id);
            self.target.get(member_id).is_some_and(|t| {
                t.iter()
                    .any(|(topic, ps)| ps.iter().any(|p| owners.contains(&(topic.clone(), *p))))
            })
        };
        let behind = m.assignment.member_epoch < self.group_epoch
            || m.assignment.state == MemberState::UnrevokedPartitions
            || (m.assignment.state == MemberState::UnreleasedPartitions && !waiting());
        if behind {
            Err(ErrorCode::RebalanceInProgress)
        } else {
            Ok(())
        }
    }

    /// A classic group's members as a consumer group at the classic generation: each keeps
    /// its assignment as its target and current assignment (nothing moves), and speaks the
    /// classic protocol until it is restarted with the consumer protocol.
    pub fn from_classic(
        group_id: &str,
        generation: i32,
        members: Vec<ClassicSource<T>>,
        topics: &Topics<T>,
    ) -> Self {
        let mut g = ConsumerGroup::new(group_id);
        g.group_epoch = generation;
        g.assignment_epoch = generation;
        for s in members {
            g.target.insert(s.member_id.clone(), s.assigned.clone());
            g.members.insert(
                s.member_id.clone(),
                Member {
                    member_id: s.member_id,
                    instance_id: s.instance_id,
                    rack_id: s.rack_id,
                    client_id: s.client_id,
                    client_host: s.client_host,
                    subscribed_topic_names: s.topics.into_iter().collect(),
                    subscribed_topic_regex: None,
                    rebalance_timeout_ms: s.rebalance_timeout_ms,
                    server_assignor: None,
                    assignment: MemberAssignment {
                        state: MemberState::Stable,
                        member_epoch: generation,
                        previous_member_epoch: generation,
                        assigned: s.assigned,
                        pending_revocation: Partitions::new(),
                    },
                    classic: Some(ClassicMemberMetadata {
                        session_timeout_ms: s.session_timeout_ms,
                        protocols: s.protocols,
                    }),
                },
            );
        }
        g.metadata_hash = g.subscribed_metadata_hash(topics);
        g
    }
}
