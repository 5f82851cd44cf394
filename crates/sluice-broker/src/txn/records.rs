//! Records of `__transaction_state`, in Kafka's byte formats, so Kafka's tools can read them:
//!
//! ```text
//! TransactionLogKey   v0: transactional_id string
//! TransactionLogValue v0: producer_id i64, producer_epoch i16, transaction_timeout_ms i32,
//!                     status i8, partitions [topic string, partition_ids [i32]] (nullable),
//!                     last_update_timestamp_ms i64, start_timestamp_ms i64
//! ```
//! Both begin with their i16 version. A null value (tombstone) removes a transactional id.

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

pub fn encode_value(m: &TxnMetadata) -> Vec<u8> {
    let mut w = W(Vec::with_capacity(64));
    w.i16(0);
    w.i64(m.producer_id);
    w.i16(m.producer_epoch);
    w.i32(m.timeout_ms.clamp(0, i64::from(i32::MAX)) as i32);
    w.i8(m.state.id() as i8);
    let mut topics: Vec<(&str, Vec<i32>)> = Vec::new();
    for (topic, partition) in &m.partitions {
        match topics.last_mut() {
            Some((t, ps)) if *t == topic.as_str() => ps.push(*partition),
            _ => topics.push((topic.as_str(), vec![*partition])),
        }
    }
    w.i32(topics.len() as i32);
    for (topic, partitions) in topics {
        w.str(topic);
        w.i32(partitions.len() as i32);
        for p in partitions {
            w.i32(p);
        }
    }
    w.i64(m.last_update_ms);
    w.i64(m.txn_start_ms);
    w.0
}

/// The state a value records for `transactional_id` (None: unknown version or state,
/// truncated, or trailing bytes).
pub fn decode_value(transactional_id: &str, bytes: &[u8]) -> Option<TxnMetadata> {
    let mut r = R(bytes);
    if r.i16()? != 0 {
        return None;
    }
    let producer_id = r.i64()?;
    let producer_epoch = r.i16()?;
    let timeout_ms = i64::from(r.i32()?);
    let state = TxnState::from_id(r.i8()? as u8)?;
    let mut partitions = BTreeSet::new();
    let topics = r.i32()?;
    for _ in 0..topics.max(0) {
        let topic = r.str()?;
        let n = r.i32()?;
        if n < 0 || n as usize > r.0.len() / 4 {
            return None;
        }
        for _ in 0..n {
            partitions.insert((topic.clone(), r.i32()?));
        }
    }
    let last_update_ms = r.i64()?;
    let txn_start_ms = r.i64()?;
    if !r.0.is_empty() {
        return None;
    }
    Some(TxnMetadata {
        transactional_id: transactional_id.to_string(),
        producer_id,
        producer_epoch,
        timeout_ms,
        state,
        partitions,
        txn_start_ms,
        last_update_ms,
    })
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
}
