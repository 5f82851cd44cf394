//! Records of `__consumer_offsets`, in Kafka's byte formats (so Kafka's tools can decode
//! them). Keys start with an i16 version: 0/1 = offset commit, 2 = group metadata.
//!
//! ```text
//! OffsetCommitKey   v1: group string, topic string, partition i32
//! OffsetCommitValue v3: offset i64, leader_epoch i32, metadata string, commit_timestamp i64
//!                   v1: offset i64, metadata string, commit_timestamp i64, expire_timestamp i64
//!                   v0: offset i64, metadata string, timestamp i64
//! GroupMetadataKey  v2: group string
//! GroupMetadataValue v3: protocol_type string, generation i32, protocol string?, leader string?,
//!                   current_state_timestamp i64, members [member_id string,
//!                   group_instance_id string?, client_id string, client_host string,
//!                   rebalance_timeout i32, session_timeout i32, subscription bytes,
//!                   assignment bytes]
//! ```
//! Strings are i16 length + UTF-8 (-1 = null), bytes are i32 length + data, arrays i32 count.
//! A record with a null value is a tombstone.

use bytes::Bytes;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OffsetsKey {
    Offset {
        group: String,
        topic: String,
        partition: i32,
    },
    Group {
        group: String,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetValue {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberValue {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub subscription: Bytes,
    pub assignment: Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub current_state_timestamp: i64,
    pub members: Vec<MemberValue>,
}

/// Big-endian writer for Kafka's internal-topic record formats (shared with `txn`).
pub(crate) struct W(pub(crate) Vec<u8>);

impl W {
    pub(crate) fn i8(&mut self, v: i8) {
        self.0.push(v as u8);
    }
    pub(crate) fn i16(&mut self, v: i16) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    pub(crate) fn str(&mut self, s: &str) {
        let b = &s.as_bytes()[..s.len().min(i16::MAX as usize)];
        self.i16(b.len() as i16);
        self.0.extend_from_slice(b);
    }
    pub(crate) fn opt_str(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.str(s),
            None => self.i16(-1),
        }
    }
    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.i32(b.len() as i32);
        self.0.extend_from_slice(b);
    }
}

/// Reader for the same formats: None on truncation or bad UTF-8.
pub(crate) struct R<'a>(pub(crate) &'a [u8]);

impl<'a> R<'a> {
    pub(crate) fn i8(&mut self) -> Option<i8> {
        self.take(1).map(|b| b[0] as i8)
    }
    pub(crate) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (h, t) = self.0.split_at(n);
        self.0 = t;
        Some(h)
    }
    pub(crate) fn i16(&mut self) -> Option<i16> {
        self.take(2).map(|b| i16::from_be_bytes([b[0], b[1]]))
    }
    pub(crate) fn i32(&mut self) -> Option<i32> {
        self.take(4)
            .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub(crate) fn i64(&mut self) -> Option<i64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Some(i64::from_be_bytes(a))
    }
    pub(crate) fn opt_str(&mut self) -> Option<Option<String>> {
        let n = self.i16()?;
        if n < 0 {
            return Some(None);
        }
        Some(Some(
            String::from_utf8(self.take(n as usize)?.to_vec()).ok()?,
        ))
    }
    pub(crate) fn str(&mut self) -> Option<String> {
        self.opt_str()?
    }
    pub(crate) fn bytes(&mut self) -> Option<Bytes> {
        let n = self.i32()?;
        if n < 0 {
            return Some(Bytes::new());
        }
        Some(Bytes::copy_from_slice(self.take(n as usize)?))
    }
}

impl OffsetsKey {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W(Vec::with_capacity(64));
        match self {
            OffsetsKey::Offset {
                group,
                topic,
                partition,
            } => {
                w.i16(1);
                w.str(group);
                w.str(topic);
                w.i32(*partition);
            }
            OffsetsKey::Group { group } => {
                w.i16(2);
                w.str(group);
            }
        }
        w.0
    }

    /// None for keys of versions this broker does not know (they are skipped).
    pub fn decode(buf: &[u8]) -> Option<OffsetsKey> {
        let mut r = R(buf);
        match r.i16()? {
            0 | 1 => Some(OffsetsKey::Offset {
                group: r.str()?,
                topic: r.str()?,
                partition: r.i32()?,
            }),
            2 => Some(OffsetsKey::Group { group: r.str()? }),
            _ => None,
        }
    }

    pub fn group(&self) -> &str {
        match self {
            OffsetsKey::Offset { group, .. } | OffsetsKey::Group { group } => group,
        }
    }
}

impl OffsetValue {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W(Vec::with_capacity(32 + self.metadata.len()));
        w.i16(3);
        w.i64(self.offset);
        w.i32(self.leader_epoch);
        w.str(&self.metadata);
        w.i64(self.commit_timestamp);
        w.0
    }

    pub fn decode(buf: &[u8]) -> Option<OffsetValue> {
        let mut r = R(buf);
        let version = r.i16()?;
        let offset = r.i64()?;
        let leader_epoch = if version >= 3 { r.i32()? } else { -1 };
        let metadata = r.opt_str()?.unwrap_or_default();
        let commit_timestamp = r.i64()?;
        Some(OffsetValue {
            offset,
            leader_epoch,
            metadata,
            commit_timestamp,
        })
    }
}

impl GroupValue {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W(Vec::with_capacity(128));
        w.i16(3);
        w.str(&self.protocol_type);
        w.i32(self.generation);
        w.opt_str(self.protocol.as_deref());
        w.opt_str(self.leader.as_deref());
        w.i64(self.current_state_timestamp);
        w.i32(self.members.len() as i32);
        for m in &self.members {
            w.str(&m.member_id);
            w.opt_str(m.group_instance_id.as_deref());
            w.str(&m.client_id);
            w.str(&m.client_host);
            w.i32(m.rebalance_timeout_ms);
            w.i32(m.session_timeout_ms);
            w.bytes(&m.subscription);
            w.bytes(&m.assignment);
        }
        w.0
    }

    pub fn decode(buf: &[u8]) -> Option<GroupValue> {
        let mut r = R(buf);
        let version = r.i16()?;
        let protocol_type = r.str()?;
        let generation = r.i32()?;
        let protocol = r.opt_str()?;
        let leader = r.opt_str()?;
        let current_state_timestamp = if version >= 2 { r.i64()? } else { -1 };
        let count = r.i32()?;
        if count < 0 || count as usize > r.0.len() {
            return None;
        }
        let mut members = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let member_id = r.str()?;
            let group_instance_id = if version >= 3 { r.opt_str()? } else { None };
            let client_id = r.str()?;
            let client_host = r.str()?;
            let rebalance_timeout_ms = if version >= 1 { r.i32()? } else { -1 };
            let session_timeout_ms = r.i32()?;
            members.push(MemberValue {
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                subscription: r.bytes()?,
                assignment: r.bytes()?,
            });
        }
        Some(GroupValue {
            protocol_type,
            generation,
            protocol,
            leader,
            current_state_timestamp,
            members,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_truncations_are_rejected() {
        let key = OffsetsKey::Offset {
            group: "g".into(),
            topic: "t".into(),
            partition: 3,
        };
        assert_eq!(OffsetsKey::decode(&key.encode()), Some(key.clone()));
        let v = OffsetValue {
            offset: 42,
            leader_epoch: 1,
            metadata: "m".into(),
            commit_timestamp: 7,
        };
        assert_eq!(OffsetValue::decode(&v.encode()), Some(v.clone()));
        let g = GroupValue {
            protocol_type: "consumer".into(),
            generation: 5,
            protocol: Some("range".into()),
            leader: Some("a".into()),
            current_state_timestamp: 9,
            members: vec![MemberValue {
                member_id: "a".into(),
                group_instance_id: None,
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 300_000,
                session_timeout_ms: 45_000,
                subscription: Bytes::from_static(b"sub"),
                assignment: Bytes::from_static(b"asg"),
            }],
        };
        assert_eq!(GroupValue::decode(&g.encode()), Some(g.clone()));
        let bytes = g.encode();
        for cut in 0..bytes.len() {
            assert!(GroupValue::decode(&bytes[..cut]).is_none());
        }
        // Kafka's bytes for an offset key: version 1, "g", "t", 3.
        assert_eq!(key.encode(), vec![0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 3]);
    }
}
