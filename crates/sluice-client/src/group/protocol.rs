//! The "consumer" embedded protocol: what members put in JoinGroup (their subscription) and
//! what the leader hands out in SyncGroup (their assignment). Both are a big-endian i16
//! version followed by the message (Kafka's `ConsumerProtocolSubscription` /
//! `ConsumerProtocolAssignment`, never flexible); newer versions only append fields, so a
//! version above the highest we know is read as that highest.

use std::collections::BTreeMap;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    consumer_protocol_assignment, consumer_protocol_subscription, ConsumerProtocolAssignment,
    ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use sluice_protocol::types::TopicPartition;

use crate::error::{Error, Result};

/// The protocol type consumer groups register with.
pub const PROTOCOL_TYPE: &str = "consumer";

/// The version written; Kafka 3+ and librdkafka 2+ read it.
const VERSION: i16 = 3;

/// A member's subscription, decoded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Subscription {
    pub topics: Vec<String>,
    pub owned: Vec<TopicPartition>,
    /// The generation the owned partitions are from (-1 when unknown; v2+).
    pub generation: i32,
    pub user_data: Option<Bytes>,
}

fn encode_versioned<T: Encodable>(msg: &T) -> Result<Bytes> {
    let mut out = BytesMut::new();
    out.put_i16(VERSION);
    msg.encode(&mut out, VERSION)
        .map_err(|e| Error::Protocol(format!("encoding group metadata: {e}")))?;
    Ok(out.freeze())
}

/// A bounds-checked reader for the (non-flexible) consumer protocol encodings. Written by
/// hand rather than with `kafka-protocol`'s decoders, which size arrays from the length
/// prefix before checking it: a member's metadata is untrusted input to the group leader.
struct Reader<'a> {
    buf: &'a [u8],
    what: &'static str,
}

impl<'a> Reader<'a> {
    fn err(&self, m: &str) -> Error {
        Error::Protocol(format!("{}: {m}", self.what))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.buf.len() < n {
            return Err(self.err("truncated"));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn i16(&mut self) -> Result<i16> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Result<i32> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// An array length: -1 (null) reads as empty; a length the remaining bytes cannot hold
    /// (each element needs at least `min_size` bytes) is an error.
    fn len(&mut self, min_size: usize) -> Result<usize> {
        let n = self.i32()?;
        if n < 0 {
            return Ok(0);
        }
        let n = n as usize;
        if n.saturating_mul(min_size) > self.buf.len() {
            return Err(self.err("array longer than the data"));
        }
        Ok(n)
    }

    fn string(&mut self) -> Result<String> {
        self.nullable_string()?
            .ok_or_else(|| self.err("null where a string is required"))
    }

    fn nullable_string(&mut self) -> Result<Option<String>> {
        let n = self.i16()?;
        if n < 0 {
            return Ok(None);
        }
        let b = self.take(n as usize)?;
        String::from_utf8(b.to_vec())
            .map(Some)
            .map_err(|_| self.err("string is not UTF-8"))
    }

    fn nullable_bytes(&mut self) -> Result<Option<Bytes>> {
        let n = self.i32()?;
        if n < 0 {
            return Ok(None);
        }
        Ok(Some(Bytes::copy_from_slice(self.take(n as usize)?)))
    }

    /// `[topic string, partitions [int32]]` entries, flattened.
    fn topic_partitions(&mut self) -> Result<Vec<TopicPartition>> {
        let mut out = Vec::new();
        for _ in 0..self.len(6)? {
            let topic = self.string()?;
            for _ in 0..self.len(4)? {
                out.push(TopicPartition::new(topic.clone(), self.i32()?));
            }
        }
        Ok(out)
    }
}

/// The version prefix and a reader over the rest; versions above ours read as ours.
fn versioned<'a>(bytes: &'a [u8], what: &'static str) -> Result<(i16, Reader<'a>)> {
    let mut r = Reader { buf: bytes, what };
    let version = r.i16()?;
    if version < 0 {
        return Err(r.err(&format!("version {version}")));
    }
    Ok((version.min(VERSION), r))
}

/// Group partitions by topic, topics and partitions ascending.
fn by_topic(partitions: &[TopicPartition]) -> BTreeMap<&str, Vec<i32>> {
    let mut out: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        out.entry(tp.topic.as_str())
            .or_default()
            .push(tp.partition.0);
    }
    for parts in out.values_mut() {
        parts.sort_unstable();
        parts.dedup();
    }
    out
}

pub fn encode_subscription(s: &Subscription) -> Result<Bytes> {
    let owned = by_topic(&s.owned)
        .into_iter()
        .map(|(t, parts)| {
            consumer_protocol_subscription::TopicPartition::default()
                .with_topic(TopicName(StrBytes::from_string(t.to_string())))
                .with_partitions(parts)
        })
        .collect();
    encode_versioned(
        &ConsumerProtocolSubscription::default()
            .with_topics(
                s.topics
                    .iter()
                    .map(|t| StrBytes::from_string(t.clone()))
                    .collect(),
            )
            .with_user_data(s.user_data.clone())
            .with_owned_partitions(owned)
            .with_generation_id(s.generation),
    )
}

pub fn decode_subscription(bytes: &[u8]) -> Result<Subscription> {
    let (version, mut r) = versioned(bytes, "subscription")?;
    let mut topics = Vec::new();
    for _ in 0..r.len(2)? {
        topics.push(r.string()?);
    }
    let user_data = r.nullable_bytes()?;
    let owned = if version >= 1 {
        r.topic_partitions()?
    } else {
        Vec::new()
    };
    let generation = if version >= 2 { r.i32()? } else { -1 };
    Ok(Subscription {
        topics,
        owned,
        generation,
        user_data,
    })
}

pub fn encode_assignment(partitions: &[TopicPartition]) -> Result<Bytes> {
    let assigned = by_topic(partitions)
        .into_iter()
        .map(|(t, parts)| {
            consumer_protocol_assignment::TopicPartition::default()
                .with_topic(TopicName(StrBytes::from_string(t.to_string())))
                .with_partitions(parts)
        })
        .collect();
    encode_versioned(&ConsumerProtocolAssignment::default().with_assigned_partitions(assigned))
}

/// The partitions of an assignment; an empty byte string is an empty assignment (what the
/// coordinator hands a member the leader left out).
pub fn decode_assignment(bytes: &[u8]) -> Result<Vec<TopicPartition>> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    let (_, mut r) = versioned(bytes, "assignment")?;
    r.topic_partitions()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscription_and_assignment_round_trip() {
        let s = Subscription {
            topics: vec!["a".into(), "b".into()],
            owned: vec![TopicPartition::new("b", 2), TopicPartition::new("a", 1)],
            generation: 7,
            user_data: None,
        };
        let back = decode_subscription(&encode_subscription(&s).unwrap()).unwrap();
        assert_eq!(back.topics, s.topics);
        assert_eq!(
            back.owned,
            vec![TopicPartition::new("a", 1), TopicPartition::new("b", 2)]
        );
        assert_eq!(back.generation, 7);

        let parts = vec![TopicPartition::new("x", 0), TopicPartition::new("x", 3)];
        assert_eq!(
            decode_assignment(&encode_assignment(&parts).unwrap()).unwrap(),
            parts
        );
        assert_eq!(decode_assignment(&[]).unwrap(), vec![]);
    }

    #[test]
    fn version_zero_subscription_from_an_old_client_decodes() {
        // v0: topics array ["t"], null user data.
        let mut b = BytesMut::new();
        b.put_i16(0);
        b.put_i32(1);
        b.put_i16(1);
        b.put_slice(b"t");
        b.put_i32(-1);
        let s = decode_subscription(&b).unwrap();
        assert_eq!(s.topics, vec!["t".to_string()]);
        assert!(s.owned.is_empty());
    }

    #[test]
    fn a_future_version_reads_as_the_newest_known_and_garbage_is_an_error() {
        let mut b = BytesMut::from(&encode_assignment(&[TopicPartition::new("x", 1)]).unwrap()[..]);
        b[0..2].copy_from_slice(&9i16.to_be_bytes());
        assert_eq!(
            decode_assignment(&b).unwrap(),
            vec![TopicPartition::new("x", 1)]
        );
        assert!(decode_assignment(&[0]).is_err());
        assert!(decode_subscription(&[0, 3, 0x7f, 0xff, 0xff, 0xff]).is_err());
        assert!(decode_assignment(&[0xff, 0xff, 0, 0]).is_err());
        // A huge array count is refused before anything is allocated for it.
        assert!(decode_subscription(&[0, 0, 0x7f, 0xff, 0xff, 0xff]).is_err());
        assert!(decode_assignment(&[0, 1, 0, 0, 0, 1, 0, 1, b'x', 0x7f, 0, 0, 0]).is_err());
    }
}
