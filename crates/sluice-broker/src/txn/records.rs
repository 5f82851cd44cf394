//! Records of `__transaction_state`, in Kafka's byte formats, so Kafka's tools can read them:
//!
//! ```text
//! TransactionLogKey   v0: transactional_id string
//! TransactionLogValue v0: producer_id i64, producer_epoch i16, transaction_timeout_ms i32,
//!                     status i8, partitions [topic string, partition_ids [i32]] (nullable),
//!                     last_update_timestamp_ms i64, start_timestamp_ms i64
//! ```
//! Both begin with their i16 version. A null value (tombstone) removes a transactional id.
//! Value v1 (Kafka 4's, flexible) is written when a transaction holds what only it can say:
//! the previous and next producer id of a run-out epoch and the client's transactions version
//! (tagged fields 0, 1, 2); the partitions are then a compact array.

use std::collections::BTreeSet;

use super::state::{TxnMetadata, TxnState};
use crate::group::records::{R, W};

pub fn encode_key(transactional_id: &str) -> Vec<u8> {
    let mut w = W(Vec::with_capacity(4 + transactional_id.len()));
    w.i16(0);
    w.str(transactional_id);
    w.0
}

/// The transactional id of a key (None: not a version-0 transaction key, or truncated).
pub fn decode_key(bytes: &[u8]) -> Option<String> {
    let mut r = R(bytes);
    if r.i16()? != 0 {
        return None;
    }
    let id = r.str()?;
    r.0.is_empty().then_some(id)
}

/// Kafka's unsigned varint.
fn put_uvarint(w: &mut W, mut v: u64) {
    while v >= 0x80 {
        w.0.push((v as u8) | 0x80);
        v >>= 7;
    }
    w.0.push(v as u8);
}

fn uvarint(r: &mut R<'_>) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = r.take(1)?[0];
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// (topic, its partitions) in order.
fn by_topic(m: &TxnMetadata) -> Vec<(&str, Vec<i32>)> {
    let mut topics: Vec<(&str, Vec<i32>)> = Vec::new();
    for (topic, partition) in &m.partitions {
        match topics.last_mut() {
            Some((t, ps)) if *t == topic.as_str() => ps.push(*partition),
            _ => topics.push((topic.as_str(), vec![*partition])),
        }
    }
    topics
}

pub fn encode_value(m: &TxnMetadata) -> Vec<u8> {
    let flexible =
        m.previous_producer_id != -1 || m.next_producer_id != -1 || m.client_version != 0;
    let mut w = W(Vec::with_capacity(64));
    w.i16(i16::from(flexible));
    w.i64(m.producer_id);
    w.i16(m.producer_epoch);
    w.i32(m.timeout_ms.clamp(0, i64::from(i32::MAX)) as i32);
    w.i8(m.state.id() as i8);
    let topics = by_topic(m);
    if flexible {
        put_uvarint(&mut w, topics.len() as u64 + 1);
        for (topic, partitions) in topics {
            put_uvarint(&mut w, topic.len() as u64 + 1);
            w.0.extend_from_slice(topic.as_bytes());
            put_uvarint(&mut w, partitions.len() as u64 + 1);
            for p in partitions {
                w.i32(p);
            }
            put_uvarint(&mut w, 0);
        }
    } else {
        w.i32(topics.len() as i32);
        for (topic, partitions) in topics {
            w.str(topic);
            w.i32(partitions.len() as i32);
            for p in partitions {
                w.i32(p);
            }
        }
    }
    w.i64(m.last_update_ms);
    w.i64(m.txn_start_ms);
    if flexible {
        let mut tags: Vec<(u64, Vec<u8>)> = Vec::new();
        if m.previous_producer_id != -1 {
            tags.push((0, m.previous_producer_id.to_be_bytes().to_vec()));
        }
        if m.next_producer_id != -1 {
            tags.push((1, m.next_producer_id.to_be_bytes().to_vec()));
        }
        if m.client_version != 0 {
            tags.push((2, m.client_version.to_be_bytes().to_vec()));
        }
        put_uvarint(&mut w, tags.len() as u64);
        for (tag, data) in tags {
            put_uvarint(&mut w, tag);
            put_uvarint(&mut w, data.len() as u64);
            w.0.extend_from_slice(&data);
        }
    }
    w.0
}

/// The state a value records for `transactional_id` (None: unknown version or state,
/// truncated, or trailing bytes).
pub fn decode_value(transactional_id: &str, bytes: &[u8]) -> Option<TxnMetadata> {
    let mut r = R(bytes);
    let version = r.i16()?;
    if !(0..=1).contains(&version) {
        return None;
    }
    let flexible = version == 1;
    let producer_id = r.i64()?;
    let producer_epoch = r.i16()?;
    let timeout_ms = i64::from(r.i32()?);
    let state = TxnState::from_id(r.i8()? as u8)?;
    let mut partitions = BTreeSet::new();
    let topics = if flexible {
        uvarint(&mut r)? as i64 - 1
    } else {
        i64::from(r.i32()?)
    };
    for _ in 0..topics.max(0) {
        let topic = if flexible {
            let n = usize::try_from(uvarint(&mut r)?.checked_sub(1)?).ok()?;
            String::from_utf8(r.take(n)?.to_vec()).ok()?
        } else {
            r.str()?
        };
        let n = if flexible {
            uvarint(&mut r)? as i64 - 1
        } else {
            i64::from(r.i32()?)
        };
        if n < 0 || n as usize > r.0.len() / 4 {
            return None;
        }
        for _ in 0..n {
            partitions.insert((topic.clone(), r.i32()?));
        }
        if flexible {
            skip_tags(&mut r)?;
        }
    }
    let last_update_ms = r.i64()?;
    let txn_start_ms = r.i64()?;
    let mut m = TxnMetadata {
        transactional_id: transactional_id.to_string(),
        producer_id,
        producer_epoch,
        timeout_ms,
        state,
        partitions,
        txn_start_ms,
        last_update_ms,
        previous_producer_id: -1,
        next_producer_id: -1,
        client_version: 0,
    };
    if flexible {
        for _ in 0..uvarint(&mut r)? {
            let tag = uvarint(&mut r)?;
            let n = usize::try_from(uvarint(&mut r)?).ok()?;
            let data = r.take(n)?;
            match (tag, data.len()) {
                (0, 8) => m.previous_producer_id = i64::from_be_bytes(data.try_into().ok()?),
                (1, 8) => m.next_producer_id = i64::from_be_bytes(data.try_into().ok()?),
                (2, 2) => m.client_version = i16::from_be_bytes(data.try_into().ok()?),
                (0..=2, _) => return None,
                _ => {} // a newer field: skipped
            }
        }
    }
    r.0.is_empty().then_some(m)
}

/// Skip a tagged-fields section.
fn skip_tags(r: &mut R<'_>) -> Option<()> {
    for _ in 0..uvarint(r)? {
        uvarint(r)?;
        let n = usize::try_from(uvarint(r)?).ok()?;
        r.take(n)?;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_round_trip_in_kafkas_layout() {
        let key = encode_key("tx-1");
        assert_eq!(key, [0, 0, 0, 4, b't', b'x', b'-', b'1']);
        assert_eq!(decode_key(&key).as_deref(), Some("tx-1"));
        assert_eq!(decode_key(&[0, 1, 0, 0]), None, "not a v0 key");
        let mut m = TxnMetadata::new("tx-1", 4000, 60_000, 5);
        m.init_producer_id(60_000, None, 6, || 0).unwrap();
        m.add_partitions(
            4000,
            0,
            &[("a".into(), 1), ("a".into(), 0), ("b".into(), 7)],
            7,
        )
        .unwrap();
        let bytes = encode_value(&m);
        // version, producer id, epoch, timeout, status (Ongoing = 1), then two topics.
        assert_eq!(&bytes[..2], &[0, 0]);
        assert_eq!(&bytes[2..10], &4000i64.to_be_bytes());
        assert_eq!(&bytes[10..12], &0i16.to_be_bytes());
        assert_eq!(&bytes[12..16], &60_000i32.to_be_bytes());
        assert_eq!(bytes[16], 1);
        assert_eq!(&bytes[17..21], &2i32.to_be_bytes());
        assert_eq!(decode_value("tx-1", &bytes), Some(m.clone()));
        for cut in 0..bytes.len() {
            assert_eq!(decode_value("tx-1", &bytes[..cut]), None);
        }
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert_eq!(decode_value("tx-1", &trailing), None);
        let mut bad_state = bytes;
        bad_state[16] = 9;
        assert_eq!(decode_value("tx-1", &bad_state), None);
    }

    #[test]
    fn v2_transactions_write_kafkas_flexible_value() {
        let mut m = TxnMetadata::new("tx-2", 4000, 60_000, 5);
        m.init_producer_id(60_000, None, 6, || 0).unwrap();
        m.add_partitions(4000, 0, &[("a".into(), 1), ("b".into(), 7)], 7)
            .unwrap();
        m.producer_epoch = super::super::state::MAX_EPOCH;
        m.end_v2(4000, m.producer_epoch, true, 8, Some(9000))
            .unwrap();
        assert_eq!((m.next_producer_id, m.client_version), (9000, 2));
        let bytes = encode_value(&m);
        assert_eq!(&bytes[..2], &[0, 1], "version 1");
        // Compact array of two topics, then "a" as a compact string.
        assert_eq!(&bytes[17..20], &[3, 2, b'a']);
        assert_eq!(decode_value("tx-2", &bytes), Some(m.clone()));
        for cut in 0..bytes.len() {
            assert_eq!(decode_value("tx-2", &bytes[..cut]), None, "cut at {cut}");
        }
        // Tags: 2 of them (next producer id, client version), in tag order.
        let tail = &bytes[bytes.len() - 15..];
        assert_eq!(tail[0], 2);
        assert_eq!(&tail[1..3], &[1, 8]);
        assert_eq!(&tail[3..11], &9000i64.to_be_bytes());
        assert_eq!(&tail[11..], &[2, 2, 0, 2]);
        // An unknown tag is skipped.
        let mut newer = bytes.clone();
        let n = newer.len();
        newer[n - 15] = 3;
        newer.extend_from_slice(&[7, 1, 0]);
        assert_eq!(decode_value("tx-2", &newer), Some(m.clone()));
        m.complete(9).unwrap();
        assert_eq!(decode_value("tx-2", &encode_value(&m)), Some(m));
    }
}
