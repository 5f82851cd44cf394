//! A streams group as `__consumer_offsets` records: what a change writes (Kafka's records,
//! in Kafka's order, see [`crate::group::streams_records`]) and how reading them back
//! rebuilds the group, so a coordinator that takes the group over resumes it where it was
//! (members, epochs, topology, target and current assignments, task epochs) instead of
//! starting it again.
//!
//! Not written, as in Kafka: the topology as configured against the cluster (recomputed),
//! the member that asked the application to shut down, the endpoints' epoch.

use std::collections::BTreeMap;

use super::{MemberState, StreamsGroup, StreamsMember, TaskSet, Tasks};
use crate::group::consumer_records::TargetAssignmentMetadataValue;
use crate::group::streams_records::{
    StreamsCurrentAssignmentValue, StreamsGroupKey, StreamsMemberValue, StreamsMetadataValue,
    StreamsRecord, StreamsTargetMemberValue, StreamsTopologyValue, TaskIds, TaskLists,
};

/// A record to append: key, value (None: tombstone).
pub type Record = (Vec<u8>, Option<Vec<u8>>);

/// The epoch each active task was given at, and the epoch for one not listed.
type TaskEpochs<'a> = Option<(&'a BTreeMap<(String, i32), i32>, i32)>;

/// The assignment config Kafka keeps with the group epoch.
const NUM_STANDBY: &str = "num.standby.replicas";

fn to_ids(tasks: &Tasks, epochs: TaskEpochs<'_>) -> Vec<TaskIds> {
    tasks
        .iter()
        .filter(|(_, ps)| !ps.is_empty())
        .map(|(s, ps)| TaskIds {
            subtopology_id: s.clone(),
            partitions: ps.iter().copied().collect(),
            assignment_epochs: epochs.map(|(by_task, default)| {
                ps.iter()
                    .map(|p| by_task.get(&(s.clone(), *p)).copied().unwrap_or(default))
                    .collect()
            }),
        })
        .collect()
}

fn from_ids(list: &[TaskIds], epochs: Option<&mut BTreeMap<(String, i32), i32>>) -> Tasks {
    let mut out = Tasks::new();
    let mut epochs = epochs;
    for t in list {
        if t.partitions.is_empty() {
            continue;
        }
        out.entry(t.subtopology_id.clone())
            .or_default()
            .extend(t.partitions.iter().copied());
        if let (Some(by_task), Some(es)) = (epochs.as_deref_mut(), &t.assignment_epochs) {
            for (p, e) in t.partitions.iter().zip(es) {
                by_task.insert((t.subtopology_id.clone(), *p), *e);
            }
        }
    }
    out
}

fn to_lists(t: &TaskSet, epochs: TaskEpochs<'_>) -> TaskLists {
    TaskLists {
        active: to_ids(&t.active, epochs),
        standby: to_ids(&t.standby, None),
        warmup: to_ids(&t.warmup, None),
    }
}

fn from_lists(t: &TaskLists, epochs: Option<&mut BTreeMap<(String, i32), i32>>) -> TaskSet {
    TaskSet {
        active: from_ids(&t.active, epochs),
        standby: from_ids(&t.standby, None),
        warmup: from_ids(&t.warmup, None),
    }
}

fn member_value(m: &StreamsMember) -> StreamsMemberValue {
    StreamsMemberValue {
        instance_id: m.instance_id.clone(),
        rack_id: m.rack_id.clone(),
        client_id: m.client_id.clone(),
        client_host: m.client_host.clone(),
        rebalance_timeout_ms: m.rebalance_timeout_ms,
        topology_epoch: m.topology_epoch,
        process_id: m.process_id.clone(),
        user_endpoint: m.user_endpoint.clone(),
        client_tags: m
            .client_tags
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        tags: Vec::new(),
    }
}

fn state_byte(s: MemberState) -> i8 {
    match s {
        MemberState::Stable => 0,
        MemberState::UnrevokedTasks => 1,
        MemberState::UnreleasedTasks => 2,
    }
}

fn assignment_value(m: &StreamsMember) -> StreamsCurrentAssignmentValue {
    let epochs = Some((&m.active_epochs, m.member_epoch));
    StreamsCurrentAssignmentValue {
        member_epoch: m.member_epoch,
        previous_member_epoch: m.previous_member_epoch,
        state: state_byte(m.state),
        assigned: to_lists(&m.assigned, epochs),
        pending_revocation: to_lists(&m.pending_revocation, epochs),
        tags: Vec::new(),
    }
}

fn metadata_value(g: &StreamsGroup) -> StreamsMetadataValue {
    StreamsMetadataValue {
        epoch: g.group_epoch,
        metadata_hash: g.metadata_hash as i64,
        validated_topology_epoch: g.validated_topology_epoch,
        last_assignment_configs: Some(vec![(
            NUM_STANDBY.to_string(),
            g.last_num_standby.to_string(),
        )]),
        tags: Vec::new(),
    }
}

fn key(kind: StreamsRecord, group: &str, member: &str) -> Vec<u8> {
    StreamsGroupKey::member(kind, group, member).encode()
}

fn group_key(kind: StreamsRecord, group: &str) -> Vec<u8> {
    StreamsGroupKey::group(kind, group).encode()
}

/// The records that take the group from `before` (None: it did not exist) to `after`, in
/// Kafka's order: removed members' current assignment, target and metadata tombstones;
/// changed member metadata; the topology; the group epoch; changed targets, then the
/// assignment epoch; changed current assignments.
pub fn changes(before: Option<&StreamsGroup>, after: &StreamsGroup) -> Vec<Record> {
    use StreamsRecord::*;
    let group = after.group_id.as_str();
    let empty = StreamsGroup::new(group);
    let before = before.unwrap_or(&empty);
    let mut out = Vec::new();
    for id in before
        .members
        .keys()
        .filter(|id| !after.members.contains_key(*id))
    {
        out.push((key(CurrentMemberAssignment, group, id), None));
        if before.target.contains_key(id) {
            out.push((key(TargetAssignmentMember, group, id), None));
        }
        out.push((key(MemberMetadata, group, id), None));
    }
    for (id, m) in &after.members {
        let value = member_value(m);
        if before.members.get(id).map(member_value).as_ref() != Some(&value) {
            out.push((key(MemberMetadata, group, id), Some(value.encode())));
        }
    }
    if before.topology != after.topology {
        let value = after.topology.as_ref().map(|t| {
            StreamsTopologyValue {
                topology: t.clone(),
                tags: Vec::new(),
            }
            .encode()
        });
        out.push((group_key(Topology, group), value));
    }
    if metadata_value(before) != metadata_value(after) {
        out.push((
            group_key(Metadata, group),
            Some(metadata_value(after).encode()),
        ));
    }
    for id in before
        .target
        .keys()
        .filter(|id| !after.target.contains_key(*id) && after.members.contains_key(*id))
    {
        out.push((key(TargetAssignmentMember, group, id), None));
    }
    for (id, t) in &after.target {
        if before.target.get(id) != Some(t) {
            let v = StreamsTargetMemberValue {
                tasks: to_lists(t, None),
                tags: Vec::new(),
            };
            out.push((key(TargetAssignmentMember, group, id), Some(v.encode())));
        }
    }
    if before.assignment_epoch != after.assignment_epoch {
        let v = TargetAssignmentMetadataValue {
            assignment_epoch: after.assignment_epoch,
            tags: Vec::new(),
        };
        out.push((group_key(TargetAssignmentMetadata, group), Some(v.encode())));
    }
    for (id, m) in &after.members {
        let value = assignment_value(m);
        if before.members.get(id).map(assignment_value).as_ref() != Some(&value) {
            out.push((
                key(CurrentMemberAssignment, group, id),
                Some(value.encode()),
            ));
        }
    }
    out
}

/// The records that delete the group (DeleteGroups, expiry, another protocol taking the
/// group id): Kafka's order (StreamsGroup.createGroupTombstoneRecords).
pub fn tombstones(g: &StreamsGroup) -> Vec<Record> {
    use StreamsRecord::*;
    let group = g.group_id.as_str();
    let mut out = Vec::new();
    for id in g.members.keys() {
        out.push((key(CurrentMemberAssignment, group, id), None));
    }
    for id in g.members.keys() {
        out.push((key(TargetAssignmentMember, group, id), None));
    }
    out.push((group_key(TargetAssignmentMetadata, group), None));
    for id in g.members.keys() {
        out.push((key(MemberMetadata, group, id), None));
    }
    out.push((group_key(Metadata, group), None));
    out.push((group_key(Topology, group), None));
    out
}

/// Apply one record read from `__consumer_offsets` (in log order). Values this broker
/// cannot decode are skipped; tombstones never create a group (Kafka writes the topology's
/// after the group's).
pub fn replay(
    groups: &mut BTreeMap<String, StreamsGroup>,
    key: &StreamsGroupKey,
    value: Option<&[u8]>,
) {
    let group = key.group.as_str();
    let member = key.member.as_str();
    let Some(value) = value else {
        if key.kind == StreamsRecord::Metadata {
            groups.remove(group);
            return;
        }
        let Some(g) = groups.get_mut(group) else {
            return;
        };
        match key.kind {
            StreamsRecord::MemberMetadata => {
                g.members.remove(member);
            }
            StreamsRecord::TargetAssignmentMember => {
                g.target.remove(member);
            }
            StreamsRecord::CurrentMemberAssignment => {
                if let Some(m) = g.members.get_mut(member) {
                    m.member_epoch = -1;
                    m.previous_member_epoch = -1;
                    m.assigned = TaskSet::default();
                    m.pending_revocation = TaskSet::default();
                    m.active_epochs.clear();
                }
            }
            StreamsRecord::TargetAssignmentMetadata => g.assignment_epoch = 0,
            StreamsRecord::Topology => g.topology = None,
            StreamsRecord::Metadata => {}
        }
        return;
    };
    let g = || StreamsGroup::new(group);
    match key.kind {
        StreamsRecord::Metadata => {
            let Some(v) = StreamsMetadataValue::decode(value) else {
                return;
            };
            let g = groups.entry(group.to_string()).or_insert_with(g);
            g.group_epoch = v.epoch;
            g.metadata_hash = v.metadata_hash as u64;
            g.validated_topology_epoch = v.validated_topology_epoch;
            g.last_num_standby = v
                .last_assignment_configs
                .iter()
                .flatten()
                .find(|(k, _)| k == NUM_STANDBY)
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0);
        }
        StreamsRecord::Topology => {
            if let Some(v) = StreamsTopologyValue::decode(value) {
                let g = groups.entry(group.to_string()).or_insert_with(g);
                g.topology = Some(v.topology);
                g.configured = None;
            }
        }
        StreamsRecord::TargetAssignmentMetadata => {
            if let Some(v) = TargetAssignmentMetadataValue::decode(value) {
                groups
                    .entry(group.to_string())
                    .or_insert_with(g)
                    .assignment_epoch = v.assignment_epoch;
            }
        }
        StreamsRecord::MemberMetadata => {
            let Some(v) = StreamsMemberValue::decode(value) else {
                return;
            };
            let m = groups
                .entry(group.to_string())
                .or_insert_with(g)
                .members
                .entry(member.to_string())
                .or_insert_with(|| StreamsMember::new(member));
            m.instance_id = v.instance_id;
            m.rack_id = v.rack_id;
            m.client_id = v.client_id;
            m.client_host = v.client_host;
            m.rebalance_timeout_ms = v.rebalance_timeout_ms;
            m.topology_epoch = v.topology_epoch;
            m.process_id = v.process_id;
            m.user_endpoint = v.user_endpoint;
            m.client_tags = v.client_tags.into_iter().collect();
        }
        StreamsRecord::TargetAssignmentMember => {
            if let Some(v) = StreamsTargetMemberValue::decode(value) {
                groups
                    .entry(group.to_string())
                    .or_insert_with(g)
                    .target
                    .insert(member.to_string(), from_lists(&v.tasks, None));
            }
        }
        StreamsRecord::CurrentMemberAssignment => {
            let Some(v) = StreamsCurrentAssignmentValue::decode(value) else {
                return;
            };
            let m = groups
                .entry(group.to_string())
                .or_insert_with(g)
                .members
                .entry(member.to_string())
                .or_insert_with(|| StreamsMember::new(member));
            let mut epochs = BTreeMap::new();
            m.assigned = from_lists(&v.assigned, Some(&mut epochs));
            m.pending_revocation = from_lists(&v.pending_revocation, Some(&mut epochs));
            m.active_epochs = epochs;
            m.member_epoch = v.member_epoch;
            m.previous_member_epoch = v.previous_member_epoch;
            // A state this broker does not know: reconciled again from scratch.
            m.state = match v.state {
                1 => MemberState::UnrevokedTasks,
                2 => MemberState::UnreleasedTasks,
                _ => MemberState::Stable,
            };
        }
    }
}
