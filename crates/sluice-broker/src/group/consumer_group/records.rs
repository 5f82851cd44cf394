//! A consumer group as `__consumer_offsets` records: what a change writes (Kafka's records
//! and order, see [`crate::group::consumer_records`]) and how reading them back rebuilds the
//! group, so a coordinator that takes over resumes the group without a rebalance.

use std::collections::BTreeMap;

use sluice_metadata::Uuid;

use super::{ConsumerGroup, Member};
use crate::group::assignor::Partitions;
use crate::group::consumer_records::{
    ClassicMemberMetadata, ConsumerGroupKey, CurrentMemberAssignmentValue, GroupMetadataValue,
    MemberMetadataValue, TargetAssignmentMemberValue, TargetAssignmentMetadataValue,
    TopicPartitions, CLASSIC_MEMBER_TAG,
};
use crate::group::reconcile::{MemberAssignment, MemberState};

/// A record to append: key, value (None: tombstone).
pub type Record = (Vec<u8>, Option<Vec<u8>>);

fn to_list(p: &Partitions<Uuid>) -> Vec<TopicPartitions> {
    p.iter()
        .map(|(t, ps)| TopicPartitions {
            topic_id: *t.as_bytes(),
            partitions: ps.iter().copied().collect(),
            tags: Vec::new(),
        })
        .collect()
}

fn from_list(list: &[TopicPartitions]) -> Partitions<Uuid> {
    let mut out = Partitions::new();
    for t in list {
        if !t.partitions.is_empty() {
            out.entry(Uuid::from_bytes(t.topic_id))
                .or_default()
                .extend(t.partitions.iter().copied());
        }
    }
    out
}

fn state_byte(s: MemberState) -> i8 {
    match s {
        MemberState::Stable => 0,
        MemberState::UnrevokedPartitions => 1,
        MemberState::UnreleasedPartitions => 2,
    }
}

fn metadata_value(m: &Member<Uuid>) -> MemberMetadataValue {
    MemberMetadataValue {
        instance_id: m.instance_id.clone(),
        rack_id: m.rack_id.clone(),
        client_id: m.client_id.clone(),
        client_host: m.client_host.clone(),
        subscribed_topic_names: m.subscribed_topic_names.iter().cloned().collect(),
        subscribed_topic_regex: m.subscribed_topic_regex.clone(),
        rebalance_timeout_ms: m.rebalance_timeout_ms,
        server_assignor: m.server_assignor.clone(),
        tags: m
            .classic
            .iter()
            .map(|c| (CLASSIC_MEMBER_TAG, c.encode()))
            .collect(),
    }
}

fn assignment_value(a: &MemberAssignment<Uuid>) -> CurrentMemberAssignmentValue {
    CurrentMemberAssignmentValue {
        member_epoch: a.member_epoch,
        previous_member_epoch: a.previous_member_epoch,
        state: state_byte(a.state),
        assigned: to_list(&a.assigned),
        pending_revocation: to_list(&a.pending_revocation),
        tags: Vec::new(),
    }
}

fn group_value(g: &ConsumerGroup<Uuid>) -> GroupMetadataValue {
    GroupMetadataValue {
        epoch: g.group_epoch,
        tags: vec![(0, (g.metadata_hash as i64).to_be_bytes().to_vec())],
    }
}

/// The key of a member's record of type `kind` (5 metadata, 7 target, 8 current assignment).
fn member_key(group: &str, member: &str, kind: u8) -> Vec<u8> {
    let (group, member) = (group.to_string(), member.to_string());
    match kind {
        5 => ConsumerGroupKey::MemberMetadata { group, member },
        7 => ConsumerGroupKey::TargetAssignmentMember { group, member },
        _ => ConsumerGroupKey::CurrentMemberAssignment { group, member },
    }
    .encode()
}

/// The records that take the group from `before` (None: it did not exist) to `after`, in
/// Kafka's order: removed members' current assignment, target and metadata tombstones;
/// changed member metadata; the group epoch; changed targets, then the assignment epoch;
/// changed current assignments.
pub fn changes(before: Option<&ConsumerGroup<Uuid>>, after: &ConsumerGroup<Uuid>) -> Vec<Record> {
    let group = after.group_id.clone();
    let empty = ConsumerGroup::new(&group);
    let before = before.unwrap_or(&empty);
    let key = |member: &str, kind: u8| member_key(&group, member, kind);
    let mut out = Vec::new();
    for id in before
        .members
        .keys()
        .filter(|id| !after.members.contains_key(*id))
    {
        out.push((key(id, 8), None));
        if before.target.contains_key(id) {
            out.push((key(id, 7), None));
        }
        out.push((key(id, 5), None));
    }
    for (id, m) in &after.members {
        let old = before.members.get(id);
        if old.map(metadata_value) != Some(metadata_value(m)) {
            out.push((key(id, 5), Some(metadata_value(m).encode())));
        }
    }
    if before.group_epoch != after.group_epoch || before.metadata_hash != after.metadata_hash {
        out.push((
            ConsumerGroupKey::Metadata {
                group: group.clone(),
            }
            .encode(),
            Some(group_value(after).encode()),
        ));
    }
    for id in before
        .target
        .keys()
        .filter(|id| !after.target.contains_key(*id) && after.members.contains_key(*id))
    {
        out.push((key(id, 7), None));
    }
    for (id, t) in &after.target {
        if before.target.get(id) != Some(t) {
            let v = TargetAssignmentMemberValue {
                topic_partitions: to_list(t),
                tags: Vec::new(),
            };
            out.push((key(id, 7), Some(v.encode())));
        }
    }
    if before.assignment_epoch != after.assignment_epoch {
        let v = TargetAssignmentMetadataValue {
            assignment_epoch: after.assignment_epoch,
            tags: Vec::new(),
        };
        out.push((
            ConsumerGroupKey::TargetAssignmentMetadata {
                group: group.clone(),
            }
            .encode(),
            Some(v.encode()),
        ));
    }
    for (id, m) in &after.members {
        let old = before.members.get(id).map(|o| &o.assignment);
        if old != Some(&m.assignment) {
            out.push((key(id, 8), Some(assignment_value(&m.assignment).encode())));
        }
    }
    out
}

/// The records that delete the group (DeleteGroups, expiry): Kafka's order.
pub fn tombstones(g: &ConsumerGroup<Uuid>) -> Vec<Record> {
    let group = g.group_id.clone();
    let mut out = Vec::new();
    let member_key = |kind: u8, member: &str| member_key(&group, member, kind);
    for id in g.members.keys() {
        out.push((member_key(8, id), None));
    }
    for id in g.target.keys() {
        out.push((member_key(7, id), None));
    }
    out.push((
        ConsumerGroupKey::TargetAssignmentMetadata {
            group: group.clone(),
        }
        .encode(),
        None,
    ));
    for id in g.members.keys() {
        out.push((member_key(5, id), None));
    }
    out.push((ConsumerGroupKey::Metadata { group }.encode(), None));
    out
}

fn blank_member(id: &str) -> Member<Uuid> {
    Member {
        member_id: id.to_string(),
        instance_id: None,
        rack_id: None,
        client_id: String::new(),
        client_host: String::new(),
        subscribed_topic_names: Default::default(),
        subscribed_topic_regex: None,
        rebalance_timeout_ms: -1,
        server_assignor: None,
        assignment: MemberAssignment {
            state: MemberState::Stable,
            member_epoch: 0,
            previous_member_epoch: -1,
            assigned: BTreeMap::new(),
            pending_revocation: BTreeMap::new(),
        },
        classic: None,
    }
}

fn group_mut<'a>(
    groups: &'a mut BTreeMap<String, ConsumerGroup<Uuid>>,
    group: &str,
) -> &'a mut ConsumerGroup<Uuid> {
    groups.entry(group.to_string()).or_insert_with(|| {
        let mut g = ConsumerGroup::new(group);
        g.assignment_epoch = -1;
        g
    })
}

/// Apply one record read from `__consumer_offsets` (in log order). Values this broker cannot
/// decode are skipped.
pub fn replay(
    groups: &mut BTreeMap<String, ConsumerGroup<Uuid>>,
    key: &ConsumerGroupKey,
    value: Option<&[u8]>,
) {
    match (key, value) {
        (ConsumerGroupKey::Metadata { group }, None) => {
            groups.remove(group);
        }
        (ConsumerGroupKey::Metadata { group }, Some(v)) => {
            let Some(v) = GroupMetadataValue::decode(v) else {
                return;
            };
            let g = group_mut(groups, group);
            g.group_epoch = v.epoch;
            g.metadata_hash = v
                .tags
                .iter()
                .find(|(t, _)| *t == 0)
                .and_then(|(_, b)| <[u8; 8]>::try_from(b.as_slice()).ok())
                .map_or(0, u64::from_be_bytes);
        }
        (ConsumerGroupKey::TargetAssignmentMetadata { group }, v) => {
            let epoch = match v.map(TargetAssignmentMetadataValue::decode) {
                Some(Some(v)) => v.assignment_epoch,
                Some(None) => return,
                None => -1,
            };
            group_mut(groups, group).assignment_epoch = epoch;
        }
        (ConsumerGroupKey::MemberMetadata { group, member }, v) => {
            match v.map(MemberMetadataValue::decode) {
                None => {
                    group_mut(groups, group).members.remove(member);
                }
                Some(None) => {}
                Some(Some(v)) => {
                    let m = group_mut(groups, group)
                        .members
                        .entry(member.clone())
                        .or_insert_with(|| blank_member(member));
                    m.instance_id = v.instance_id;
                    m.rack_id = v.rack_id;
                    m.client_id = v.client_id;
                    m.client_host = v.client_host;
                    m.subscribed_topic_names = v.subscribed_topic_names.into_iter().collect();
                    m.subscribed_topic_regex = v.subscribed_topic_regex.filter(|r| !r.is_empty());
                    m.rebalance_timeout_ms = v.rebalance_timeout_ms;
                    m.server_assignor = v.server_assignor;
                    m.classic = v
                        .tags
                        .iter()
                        .find(|(t, _)| *t == CLASSIC_MEMBER_TAG)
                        .and_then(|(_, b)| ClassicMemberMetadata::decode(b));
                }
            }
        }
        (ConsumerGroupKey::TargetAssignmentMember { group, member }, v) => {
            match v.map(TargetAssignmentMemberValue::decode) {
                None => {
                    group_mut(groups, group).target.remove(member);
                }
                Some(None) => {}
                Some(Some(v)) => {
                    group_mut(groups, group)
                        .target
                        .insert(member.clone(), from_list(&v.topic_partitions));
                }
            }
        }
        (ConsumerGroupKey::CurrentMemberAssignment { group, member }, v) => {
            let value = match v.map(CurrentMemberAssignmentValue::decode) {
                Some(None) => return,
                other => other.flatten(),
            };
            let m = group_mut(groups, group)
                .members
                .entry(member.clone())
                .or_insert_with(|| blank_member(member));
            match value {
                None => {
                    m.assignment.member_epoch = -1;
                    m.assignment.previous_member_epoch = -1;
                    m.assignment.assigned.clear();
                    m.assignment.pending_revocation.clear();
                }
                Some(v) => {
                    m.assignment = MemberAssignment {
                        // A state this broker does not know: reconciled again from scratch.
                        state: match v.state {
                            1 => MemberState::UnrevokedPartitions,
                            2 => MemberState::UnreleasedPartitions,
                            _ => MemberState::Stable,
                        },
                        member_epoch: v.member_epoch,
                        previous_member_epoch: v.previous_member_epoch,
                        assigned: from_list(&v.assigned),
                        pending_revocation: from_list(&v.pending_revocation),
                    };
                }
            }
        }
    }
}
