//! The `__consumer_offsets` records of consumer groups (KIP-848), in Kafka's byte formats:
//! the key is an i16 record type and the key struct (classic encoding: i16-length strings);
//! the value is an i16 version (0) and the value struct in flexible encoding (compact strings
//! and arrays, a tagged-field section after each struct). Tagged fields this broker does not
//! know (Kafka 4.4 adds some) are kept as they are, so a record read and written again is
//! byte for byte what it was.
//!
//! ```text
//! 3 ConsumerGroupMetadata                key: group    value: epoch i32 (tag 0: metadata hash i64)
//! 5 ConsumerGroupMemberMetadata          key: group, member
//!                                        value: instance_id string?, rack_id string?, client_id,
//!                                        client_host, subscribed_topic_names [string],
//!                                        subscribed_topic_regex string?, rebalance_timeout_ms i32,
//!                                        server_assignor string? (tag 0: classic member metadata)
//! 6 ConsumerGroupTargetAssignmentMetadata key: group   value: assignment_epoch i32
//! 7 ConsumerGroupTargetAssignmentMember  key: group, member   value: [topic_id uuid, partitions [i32]]
//! 8 ConsumerGroupCurrentMemberAssignment key: group, member
//!                                        value: member_epoch i32, previous_member_epoch i32,
//!                                        state i8, assigned [topic_id, partitions],
//!                                        pending_revocation [topic_id, partitions]
//! ```
//! A null value is a tombstone.

use super::records::{R, W};

/// Tagged fields kept as read: (tag, bytes).
pub type Tags = Vec<(u32, Vec<u8>)>;

/// A consumer group record key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConsumerGroupKey {
    Metadata { group: String },
    MemberMetadata { group: String, member: String },
    TargetAssignmentMetadata { group: String },
    TargetAssignmentMember { group: String, member: String },
    CurrentMemberAssignment { group: String, member: String },
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupMetadataValue {
    pub epoch: i32,
    pub tags: Tags,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberMetadataValue {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
    pub tags: Tags,
}

/// One topic's partitions, by topic id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopicPartitions {
    pub topic_id: [u8; 16],
    pub partitions: Vec<i32>,
    pub tags: Tags,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TargetAssignmentMetadataValue {
    pub assignment_epoch: i32,
    pub tags: Tags,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TargetAssignmentMemberValue {
    pub topic_partitions: Vec<TopicPartitions>,
    pub tags: Tags,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CurrentMemberAssignmentValue {
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    /// Kafka's MemberState byte: 0 stable, 1 unrevoked, 2 unreleased.
    pub state: i8,
    pub assigned: Vec<TopicPartitions>,
    pub pending_revocation: Vec<TopicPartitions>,
    pub tags: Tags,
}

impl ConsumerGroupKey {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W(Vec::with_capacity(64));
        let (kind, group, member) = match self {
            ConsumerGroupKey::Metadata { group } => (3, group, None),
            ConsumerGroupKey::MemberMetadata { group, member } => (5, group, Some(member)),
            ConsumerGroupKey::TargetAssignmentMetadata { group } => (6, group, None),
            ConsumerGroupKey::TargetAssignmentMember { group, member } => (7, group, Some(member)),
            ConsumerGroupKey::CurrentMemberAssignment { group, member } => (8, group, Some(member)),
        };
        w.i16(kind);
        w.str(group);
        if let Some(m) = member {
            w.str(m);
        }
        w.0
    }

    /// None for other record types (offset commits, classic groups, share and streams
    /// groups) and for truncated keys.
    pub fn decode(buf: &[u8]) -> Option<ConsumerGroupKey> {
        let mut r = R(buf);
        let kind = r.i16()?;
        let group = r.str()?;
        Some(match kind {
            3 => ConsumerGroupKey::Metadata { group },
            5 => ConsumerGroupKey::MemberMetadata {
                group,
                member: r.str()?,
            },
            6 => ConsumerGroupKey::TargetAssignmentMetadata { group },
            7 => ConsumerGroupKey::TargetAssignmentMember {
                group,
                member: r.str()?,
            },
            8 => ConsumerGroupKey::CurrentMemberAssignment {
                group,
                member: r.str()?,
            },
            _ => return None,
        })
    }
}

// -- flexible encoding ----------------------------------------------------------------

pub(crate) fn uvarint(w: &mut W, mut v: u32) {
    while v >= 0x80 {
        w.0.push((v as u8) | 0x80);
        v >>= 7;
    }
    w.0.push(v as u8);
}

pub(crate) fn read_uvarint(r: &mut R<'_>) -> Option<u32> {
    let mut v: u32 = 0;
    for shift in (0..35).step_by(7) {
        let b = r.i8()? as u8;
        v |= u32::from(b & 0x7f).checked_shl(shift)?;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

pub(crate) fn compact_str(w: &mut W, s: Option<&str>) {
    match s {
        None => uvarint(w, 0),
        Some(s) => {
            uvarint(w, s.len() as u32 + 1);
            w.0.extend_from_slice(s.as_bytes());
        }
    }
}

pub(crate) fn read_compact_str(r: &mut R<'_>) -> Option<Option<String>> {
    let n = read_uvarint(r)?;
    if n == 0 {
        return Some(None);
    }
    let b = r.take(n as usize - 1)?;
    Some(Some(String::from_utf8(b.to_vec()).ok()?))
}

/// A compact array's length (None: null, read as empty).
pub(crate) fn read_len(r: &mut R<'_>) -> Option<usize> {
    let n = read_uvarint(r)? as usize;
    let len = n.saturating_sub(1);
    // Each element takes at least one byte: refuse lengths beyond what is left.
    (len <= r.0.len()).then_some(len)
}

pub(crate) fn tags(w: &mut W, tags: &Tags) {
    uvarint(w, tags.len() as u32);
    for (tag, bytes) in tags {
        uvarint(w, *tag);
        uvarint(w, bytes.len() as u32);
        w.0.extend_from_slice(bytes);
    }
}

pub(crate) fn read_tags(r: &mut R<'_>) -> Option<Tags> {
    let n = read_uvarint(r)? as usize;
    let mut out = Vec::with_capacity(n.min(16));
    for _ in 0..n {
        let tag = read_uvarint(r)?;
        let len = read_uvarint(r)? as usize;
        out.push((tag, r.take(len)?.to_vec()));
    }
    Some(out)
}

fn topic_partitions(w: &mut W, list: &[TopicPartitions]) {
    uvarint(w, list.len() as u32 + 1);
    for t in list {
        w.0.extend_from_slice(&t.topic_id);
        uvarint(w, t.partitions.len() as u32 + 1);
        for p in &t.partitions {
            w.i32(*p);
        }
        tags(w, &t.tags);
    }
}

fn read_topic_partitions(r: &mut R<'_>) -> Option<Vec<TopicPartitions>> {
    let n = read_len(r)?;
    let mut out = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        let mut topic_id = [0u8; 16];
        topic_id.copy_from_slice(r.take(16)?);
        let k = read_len(r)?;
        let mut partitions = Vec::with_capacity(k.min(4096));
        for _ in 0..k {
            partitions.push(r.i32()?);
        }
        out.push(TopicPartitions {
            topic_id,
            partitions,
            tags: read_tags(r)?,
        });
    }
    Some(out)
}

/// The value's version prefix (0) then the struct; None for other versions or truncation.
pub(crate) fn value_reader(buf: &[u8]) -> Option<R<'_>> {
    let mut r = R(buf);
    (r.i16()? == 0).then_some(r)
}

/// Every byte read: trailing bytes mean the value is not what it claims.
pub(crate) fn done<T>(r: &R<'_>, v: T) -> Option<T> {
    r.0.is_empty().then_some(v)
}

impl GroupMetadataValue {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W(vec![0, 0]);
        w.i32(self.epoch);
        tags(&mut w, &self.tags);
        w.0
    }

    pub fn decode(buf: &[u8]) -> Option<Self> {
        let mut r = value_reader(buf)?;
        let v = GroupMetadataValue {
            epoch: r.i32()?,
            tags: read_tags(&mut r)?,
        };
        done(&r, v)
    }
}

impl MemberMetadataValue {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W(vec![0, 0]);
        compact_str(&mut w, self.instance_id.as_deref());
        compact_str(&mut w, self.rack_id.as_deref());
        compact_str(&mut w, Some(&self.client_id));
        compact_str(&mut w, Some(&self.client_host));
        uvarint(&mut w, self.subscribed_topic_names.len() as u32 + 1);
        for t in &self.subscribed_topic_names {
            compact_str(&mut w, Some(t));
        }
        compact_str(&mut w, self.subscribed_topic_regex.as_deref());
        w.i32(self.rebalance_timeout_ms);
        compact_str(&mut w, self.server_assignor.as_deref());
        tags(&mut w, &self.tags);
        w.0
    }

    pub fn decode(buf: &[u8]) -> Option<Self> {
        let mut r = value_reader(buf)?;
        let instance_id = read_compact_str(&mut r)?;
        let rack_id = read_compact_str(&mut r)?;
        let client_id = read_compact_str(&mut r)?.unwrap_or_default();
        let client_host = read_compact_str(&mut r)?.unwrap_or_default();
        let n = read_len(&mut r)?;
        let mut subscribed_topic_names = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            subscribed_topic_names.push(read_compact_str(&mut r)?.unwrap_or_default());
        }
        let v = MemberMetadataValue {
            instance_id,
            rack_id,
            client_id,
            client_host,
            subscribed_topic_names,
            subscribed_topic_regex: read_compact_str(&mut r)?,
            rebalance_timeout_ms: r.i32()?,
            server_assignor: read_compact_str(&mut r)?,
            tags: read_tags(&mut r)?,
        };
        done(&r, v)
    }
}

impl TargetAssignmentMetadataValue {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W(vec![0, 0]);
        w.i32(self.assignment_epoch);
        tags(&mut w, &self.tags);
        w.0
    }

    pub fn decode(buf: &[u8]) -> Option<Self> {
        let mut r = value_reader(buf)?;
        let v = TargetAssignmentMetadataValue {
            assignment_epoch: r.i32()?,
            tags: read_tags(&mut r)?,
        };
        done(&r, v)
    }
}

impl TargetAssignmentMemberValue {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W(vec![0, 0]);
        topic_partitions(&mut w, &self.topic_partitions);
        tags(&mut w, &self.tags);
        w.0
    }

    pub fn decode(buf: &[u8]) -> Option<Self> {
        let mut r = value_reader(buf)?;
        let v = TargetAssignmentMemberValue {
            topic_partitions: read_topic_partitions(&mut r)?,
            tags: read_tags(&mut r)?,
        };
        done(&r, v)
    }
}

impl CurrentMemberAssignmentValue {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W(vec![0, 0]);
        w.i32(self.member_epoch);
        w.i32(self.previous_member_epoch);
        w.i8(self.state);
        topic_partitions(&mut w, &self.assigned);
        topic_partitions(&mut w, &self.pending_revocation);
        tags(&mut w, &self.tags);
        w.0
    }

    pub fn decode(buf: &[u8]) -> Option<Self> {
        let mut r = value_reader(buf)?;
        let v = CurrentMemberAssignmentValue {
            member_epoch: r.i32()?,
            previous_member_epoch: r.i32()?,
            state: r.i8()?,
            assigned: read_topic_partitions(&mut r)?,
            pending_revocation: read_topic_partitions(&mut r)?,
            tags: read_tags(&mut r)?,
        };
        done(&r, v)
    }
}

#[cfg(test)]
mod tests;

/// The classic-protocol metadata of a consumer group member that uses the classic protocol
/// (MemberMetadata's tagged field 0): its session timeout and its protocols (name,
/// metadata) in its order of preference.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassicMemberMetadata {
    pub session_timeout_ms: i32,
    pub protocols: Vec<(String, Vec<u8>)>,
}

/// The tag of [`ClassicMemberMetadata`] in MemberMetadata's value.
pub const CLASSIC_MEMBER_TAG: u32 = 0;

impl ClassicMemberMetadata {
    /// The tagged field's bytes: a present nullable struct (1), then its fields.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W(Vec::new());
        w.i8(1);
        w.i32(self.session_timeout_ms);
        uvarint(&mut w, self.protocols.len() as u32 + 1);
        for (name, metadata) in &self.protocols {
            compact_str(&mut w, Some(name));
            uvarint(&mut w, metadata.len() as u32 + 1);
            w.0.extend_from_slice(metadata);
            uvarint(&mut w, 0);
        }
        uvarint(&mut w, 0);
        w.0
    }

    /// None for a null struct or bytes that are not one.
    pub fn decode(buf: &[u8]) -> Option<Self> {
        let mut r = R(buf);
        if r.i8()? != 1 {
            return None;
        }
        let session_timeout_ms = r.i32()?;
        let n = read_len(&mut r)?;
        let mut protocols = Vec::with_capacity(n.min(16));
        for _ in 0..n {
            let name = read_compact_str(&mut r)??;
            let len = read_len(&mut r)?;
            let metadata = r.take(len)?.to_vec();
            read_tags(&mut r)?;
            protocols.push((name, metadata));
        }
        read_tags(&mut r)?;
        done(
            &r,
            ClassicMemberMetadata {
                session_timeout_ms,
                protocols,
            },
        )
    }
}
