//! The `__consumer_offsets` records of streams groups (KIP-1071), in Kafka 4.4's byte
//! formats: the key is an i16 record type and the key struct (classic encoding); the value
//! is an i16 version (0) and the struct in flexible encoding, as for consumer groups (see
//! [`crate::group::consumer_records`], whose primitives these share).
//!
//! ```text
//! 17 StreamsGroupMetadata                key: group    value: epoch i32, metadata_hash i64
//!                                        (tag 0: validated topology epoch i32, default -1;
//!                                        tag 1: last assignment configs [key, value]?)
//! 19 StreamsGroupMemberMetadata          key: group, member
//!                                        value: instance_id string?, rack_id string?,
//!                                        client_id, client_host, rebalance_timeout_ms i32,
//!                                        topology_epoch i32, process_id,
//!                                        user_endpoint {host, port u16}?, client_tags [key, value]
//! 20 StreamsGroupTargetAssignmentMetadata key: group   value: assignment_epoch i32
//! 21 StreamsGroupTargetAssignmentMember  key: group, member
//!                                        value: active, standby, warmup [TaskIds]
//! 22 StreamsGroupCurrentMemberAssignment key: group, member
//!                                        value: member_epoch i32, previous_member_epoch i32,
//!                                        state i8, active, standby, warmup,
//!                                        and the three pending revocation [TaskIds]
//! 23 StreamsGroupTopology                key: group
//!                                        value: epoch i32, [subtopology: id, source topics,
//!                                        source topic regexes, changelogs [TopicInfo],
//!                                        repartition sinks, repartition sources [TopicInfo],
//!                                        copartition groups [3 x [i16]]]
//! TaskIds:   subtopology_id, partitions [i32] (tag 0: assignment epochs [i32]?, one per
//!            partition, active tasks of the current assignment only)
//! TopicInfo: name, partitions i32, replication_factor i16, configs [key, value]
//! ```
//! A null value is a tombstone. Tagged fields of the top-level structs that this broker does
//! not know (Kafka 4.4 adds some) are kept as read, so a value read and written again is
//! byte for byte what it was; those of nested structs are dropped (Kafka defines none).

use super::consumer_records::{
    compact_str, done, read_compact_str, read_len, read_tags, read_uvarint, tags, uvarint,
    value_reader, Tags,
};
use super::records::{R, W};
use super::streams_group::topology::{CopartitionGroup, Subtopology, TopicInfo, Topology};

/// The kinds of streams group records (their key's record type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamsRecord {
    Metadata = 17,
    MemberMetadata = 19,
    TargetAssignmentMetadata = 20,
    TargetAssignmentMember = 21,
    CurrentMemberAssignment = 22,
    Topology = 23,
}

impl StreamsRecord {
    fn per_member(self) -> bool {
        matches!(
            self,
            StreamsRecord::MemberMetadata
                | StreamsRecord::TargetAssignmentMember
                | StreamsRecord::CurrentMemberAssignment
        )
    }
}

/// A streams group record key: the group, and the member for per-member records (empty
/// otherwise).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamsGroupKey {
    pub kind: StreamsRecord,
    pub group: String,
    pub member: String,
}

impl StreamsGroupKey {
    pub fn group(kind: StreamsRecord, group: &str) -> Self {
        StreamsGroupKey {
            kind,
            group: group.to_string(),
            member: String::new(),
        }
    }

    pub fn member(kind: StreamsRecord, group: &str, member: &str) -> Self {
        StreamsGroupKey {
            kind,
            group: group.to_string(),
            member: member.to_string(),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut w = W(Vec::with_capacity(64));
        w.i16(self.kind as i16);
        w.str(&self.group);
        if self.kind.per_member() {
            w.str(&self.member);
        }
        w.0
    }

    /// None for other record types and for truncated keys.
    pub fn decode(buf: &[u8]) -> Option<Self> {
        let mut r = R(buf);
        let kind = match r.i16()? {
            17 => StreamsRecord::Metadata,
            19 => StreamsRecord::MemberMetadata,
            20 => StreamsRecord::TargetAssignmentMetadata,
            21 => StreamsRecord::TargetAssignmentMember,
            22 => StreamsRecord::CurrentMemberAssignment,
            23 => StreamsRecord::Topology,
            _ => return None,
        };
        let group = r.str()?;
        let member = if kind.per_member() {
            r.str()?
        } else {
            String::new()
        };
        Some(StreamsGroupKey {
            kind,
            group,
            member,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamsMetadataValue {
    pub epoch: i32,
    pub metadata_hash: i64,
    /// Tag 0 (-1 when absent).
    pub validated_topology_epoch: i32,
    /// Tag 1.
    pub last_assignment_configs: Option<Vec<(String, String)>>,
    /// Other tags, as read.
    pub tags: Tags,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamsMemberValue {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub topology_epoch: i32,
    pub process_id: String,
    pub user_endpoint: Option<(String, u16)>,
    pub client_tags: Vec<(String, String)>,
    pub tags: Tags,
}

/// One subtopology's tasks (partitions).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskIds {
    pub subtopology_id: String,
    pub partitions: Vec<i32>,
    /// The epoch each partition was assigned at (active tasks of a current assignment).
    pub assignment_epochs: Option<Vec<i32>>,
}

/// Active, standby and warm-up tasks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskLists {
    pub active: Vec<TaskIds>,
    pub standby: Vec<TaskIds>,
    pub warmup: Vec<TaskIds>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamsTargetMemberValue {
    pub tasks: TaskLists,
    pub tags: Tags,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamsCurrentAssignmentValue {
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    /// Kafka's MemberState byte: 0 stable, 1 unrevoked, 2 unreleased.
    pub state: i8,
    pub assigned: TaskLists,
    pub pending_revocation: TaskLists,
    pub tags: Tags,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamsTopologyValue {
    pub topology: Topology,
    pub tags: Tags,
}

// -- shared pieces ----------------------------------------------------------------------

fn len(w: &mut W, n: usize) {
    uvarint(w, n as u32 + 1);
}

fn pairs(w: &mut W, list: &[(String, String)]) {
    len(w, list.len());
    for (k, v) in list {
        compact_str(w, Some(k));
        compact_str(w, Some(v));
        uvarint(w, 0);
    }
}

fn read_pairs(r: &mut R<'_>) -> Option<Vec<(String, String)>> {
    let n = read_len(r)?;
    let mut out = Vec::with_capacity(n.min(64));
    for _ in 0..n {
        let k = read_compact_str(r)??;
        let v = read_compact_str(r)??;
        read_tags(r)?;
        out.push((k, v));
    }
    Some(out)
}

fn strings(w: &mut W, list: &[String]) {
    len(w, list.len());
    for s in list {
        compact_str(w, Some(s));
    }
}

fn read_strings(r: &mut R<'_>) -> Option<Vec<String>> {
    let n = read_len(r)?;
    let mut out = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        out.push(read_compact_str(r)??);
    }
    Some(out)
}

fn int32s(w: &mut W, list: &[i32]) {
    len(w, list.len());
    for v in list {
        w.i32(*v);
    }
}

fn read_int32s(r: &mut R<'_>) -> Option<Vec<i32>> {
    let n = read_len(r)?;
    let mut out = Vec::with_capacity(n.min(4096));
    for _ in 0..n {
        out.push(r.i32()?);
    }
    Some(out)
}

fn int16s(w: &mut W, list: &[i16]) {
    len(w, list.len());
    for v in list {
        w.i16(*v);
    }
}

fn read_int16s(r: &mut R<'_>) -> Option<Vec<i16>> {
    let n = read_len(r)?;
    let mut out = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        out.push(r.i16()?);
    }
    Some(out)
}

/// Known tagged fields (in tag order) merged with the ones kept as read.
fn merged_tags(w: &mut W, known: Vec<(u32, Vec<u8>)>, kept: &Tags) {
    let mut all: Tags = known;
    all.extend(
        kept.iter()
            .filter(|(t, _)| all.iter().all(|(k, _)| k != t))
            .cloned()
            .collect::<Vec<_>>(),
    );
    all.sort_by_key(|(t, _)| *t);
    tags(w, &all);
}

/// Split the tags read into the known ones (by tag) and the rest.
fn take_tag(tags: &mut Tags, tag: u32) -> Option<Vec<u8>> {
    let i = tags.iter().position(|(t, _)| *t == tag)?;
    Some(tags.remove(i).1)
}

fn task_ids(w: &mut W, list: &[TaskIds]) {
    len(w, list.len());
    for t in list {
        compact_str(w, Some(&t.subtopology_id));
        int32s(w, &t.partitions);
        match &t.assignment_epochs {
            None => uvarint(w, 0),
            Some(epochs) => {
                let mut inner = W(Vec::new());
                int32s(&mut inner, epochs);
                tags(w, &vec![(0, inner.0)]);
            }
        }
    }
}

fn read_task_ids(r: &mut R<'_>) -> Option<Vec<TaskIds>> {
    let n = read_len(r)?;
    let mut out = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        let subtopology_id = read_compact_str(r)??;
        let partitions = read_int32s(r)?;
        let mut t = read_tags(r)?;
        let assignment_epochs = match take_tag(&mut t, 0) {
            None => None,
            Some(bytes) => {
                let mut inner = R(&bytes);
                let epochs = read_int32s(&mut inner)?;
                Some(done(&inner, epochs)?)
            }
        };
        out.push(TaskIds {
            subtopology_id,
            partitions,
            assignment_epochs,
        });
    }
    Some(out)
}

fn task_lists(w: &mut W, t: &TaskLists) {
    task_ids(w, &t.active);
    task_ids(w, &t.standby);
    task_ids(w, &t.warmup);
}

fn read_task_lists(r: &mut R<'_>) -> Option<TaskLists> {
    Some(TaskLists {
        active: read_task_ids(r)?,
        standby: read_task_ids(r)?,
        warmup: read_task_ids(r)?,
    })
}

fn topic_infos(w: &mut W, list: &[TopicInfo]) {
    len(w, list.len());
    for t in list {
        compact_str(w, Some(&t.name));
        w.i32(t.partitions);
        w.i16(t.replication_factor);
        pairs(w, &t.configs);
        uvarint(w, 0);
    }
}

fn read_topic_infos(r: &mut R<'_>) -> Option<Vec<TopicInfo>> {
    let n = read_len(r)?;
    let mut out = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        let name = read_compact_str(r)??;
        let partitions = r.i32()?;
        let replication_factor = r.i16()?;
        let configs = read_pairs(r)?;
        read_tags(r)?;
        out.push(TopicInfo {
            name,
            partitions,
            replication_factor,
            configs,
        });
    }
    Some(out)
}

// -- values -----------------------------------------------------------------------------

impl StreamsMetadataValue {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W(vec![0, 0]);
        w.i32(self.epoch);
        w.i64(self.metadata_hash);
        let mut known = Vec::new();
        if self.validated_topology_epoch != -1 {
            known.push((0, self.validated_topology_epoch.to_be_bytes().to_vec()));
        }
        if let Some(configs) = &self.last_assignment_configs {
            let mut inner = W(Vec::new());
            pairs(&mut inner, configs);
            known.push((1, inner.0));
        }
        merged_tags(&mut w, known, &self.tags);
        w.0
    }

    pub fn decode(buf: &[u8]) -> Option<Self> {
        let mut r = value_reader(buf)?;
        let epoch = r.i32()?;
        let metadata_hash = r.i64()?;
        let mut tags = read_tags(&mut r)?;
        let validated_topology_epoch = match take_tag(&mut tags, 0) {
            None => -1,
            Some(b) => i32::from_be_bytes(<[u8; 4]>::try_from(b.as_slice()).ok()?),
        };
        let last_assignment_configs = match take_tag(&mut tags, 1) {
            None => None,
            Some(b) => {
                let mut inner = R(&b);
                let n = read_uvarint(&mut inner)?;
                if n == 0 {
                    done(&inner, ())?;
                    None
                } else {
                    let mut again = R(&b);
                    let configs = read_pairs(&mut again)?;
                    Some(done(&again, configs)?)
                }
            }
        };
        done(
            &r,
            StreamsMetadataValue {
                epoch,
                metadata_hash,
                validated_topology_epoch,
                last_assignment_configs,
                tags,
            },
        )
    }
}

impl StreamsMemberValue {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W(vec![0, 0]);
        compact_str(&mut w, self.instance_id.as_deref());
        compact_str(&mut w, self.rack_id.as_deref());
        compact_str(&mut w, Some(&self.client_id));
        compact_str(&mut w, Some(&self.client_host));
        w.i32(self.rebalance_timeout_ms);
        w.i32(self.topology_epoch);
        compact_str(&mut w, Some(&self.process_id));
        match &self.user_endpoint {
            None => w.i8(-1),
            Some((host, port)) => {
                w.i8(1);
                compact_str(&mut w, Some(host));
                w.0.extend_from_slice(&port.to_be_bytes());
                uvarint(&mut w, 0);
            }
        }
        pairs(&mut w, &self.client_tags);
        tags(&mut w, &self.tags);
        w.0
    }

    pub fn decode(buf: &[u8]) -> Option<Self> {
        let mut r = value_reader(buf)?;
        let instance_id = read_compact_str(&mut r)?;
        let rack_id = read_compact_str(&mut r)?;
        let client_id = read_compact_str(&mut r)??;
        let client_host = read_compact_str(&mut r)??;
        let rebalance_timeout_ms = r.i32()?;
        let topology_epoch = r.i32()?;
        let process_id = read_compact_str(&mut r)??;
        let user_endpoint = match r.i8()? {
            -1 => None,
            1 => {
                let host = read_compact_str(&mut r)??;
                let port = r.i16()? as u16;
                read_tags(&mut r)?;
                Some((host, port))
            }
            _ => return None,
        };
        let v = StreamsMemberValue {
            instance_id,
            rack_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            topology_epoch,
            process_id,
            user_endpoint,
            client_tags: read_pairs(&mut r)?,
            tags: read_tags(&mut r)?,
        };
        done(&r, v)
    }
}

impl StreamsTargetMemberValue {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W(vec![0, 0]);
        task_lists(&mut w, &self.tasks);
        tags(&mut w, &self.tags);
        w.0
    }

    pub fn decode(buf: &[u8]) -> Option<Self> {
        let mut r = value_reader(buf)?;
        let v = StreamsTargetMemberValue {
            tasks: read_task_lists(&mut r)?,
            tags: read_tags(&mut r)?,
        };
        done(&r, v)
    }
}

impl StreamsCurrentAssignmentValue {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W(vec![0, 0]);
        w.i32(self.member_epoch);
        w.i32(self.previous_member_epoch);
        w.i8(self.state);
        task_lists(&mut w, &self.assigned);
        task_lists(&mut w, &self.pending_revocation);
        tags(&mut w, &self.tags);
        w.0
    }

    pub fn decode(buf: &[u8]) -> Option<Self> {
        let mut r = value_reader(buf)?;
        let v = StreamsCurrentAssignmentValue {
            member_epoch: r.i32()?,
            previous_member_epoch: r.i32()?,
            state: r.i8()?,
            assigned: read_task_lists(&mut r)?,
            pending_revocation: read_task_lists(&mut r)?,
            tags: read_tags(&mut r)?,
        };
        done(&r, v)
    }
}

impl StreamsTopologyValue {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W(vec![0, 0]);
        w.i32(self.topology.epoch);
        len(&mut w, self.topology.subtopologies.len());
        for s in &self.topology.subtopologies {
            compact_str(&mut w, Some(&s.id));
            strings(&mut w, &s.source_topics);
            len(&mut w, 0); // source topic regexes: none (Sluice refuses them)
            topic_infos(&mut w, &s.state_changelog_topics);
            strings(&mut w, &s.repartition_sink_topics);
            topic_infos(&mut w, &s.repartition_source_topics);
            len(&mut w, s.copartition_groups.len());
            for c in &s.copartition_groups {
                int16s(&mut w, &c.source_topics);
                len(&mut w, 0);
                int16s(&mut w, &c.repartition_source_topics);
                uvarint(&mut w, 0);
            }
            uvarint(&mut w, 0);
        }
        tags(&mut w, &self.tags);
        w.0
    }

    /// None also for a topology that reads topics by regular expression, which this broker
    /// does not serve (so cannot have written).
    pub fn decode(buf: &[u8]) -> Option<Self> {
        let mut r = value_reader(buf)?;
        let epoch = r.i32()?;
        let n = read_len(&mut r)?;
        let mut subtopologies = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            let id = read_compact_str(&mut r)??;
            let source_topics = read_strings(&mut r)?;
            if !read_strings(&mut r)?.is_empty() {
                return None;
            }
            let state_changelog_topics = read_topic_infos(&mut r)?;
            let repartition_sink_topics = read_strings(&mut r)?;
            let repartition_source_topics = read_topic_infos(&mut r)?;
            let k = read_len(&mut r)?;
            let mut copartition_groups = Vec::with_capacity(k.min(1024));
            for _ in 0..k {
                let source_topics = read_int16s(&mut r)?;
                if !read_int16s(&mut r)?.is_empty() {
                    return None;
                }
                copartition_groups.push(CopartitionGroup {
                    source_topics,
                    repartition_source_topics: read_int16s(&mut r)?,
                });
                read_tags(&mut r)?;
            }
            read_tags(&mut r)?;
            subtopologies.push(Subtopology {
                id,
                source_topics,
                state_changelog_topics,
                repartition_sink_topics,
                repartition_source_topics,
                copartition_groups,
            });
        }
        let v = StreamsTopologyValue {
            topology: Topology {
                epoch,
                subtopologies,
            },
            tags: read_tags(&mut r)?,
        };
        done(&r, v)
    }
}

#[cfg(test)]
mod tests;
