//! Per-partition producer state, for idempotent producers: for each producer id its epoch
//! and the last batches it wrote (up to five, the most a producer keeps in flight), so that a
//! retried batch is recognised and answered with its original offsets, a gap in sequence
//! numbers is refused, and a fenced (older) epoch is refused.
//!
//! The leader checks each batch ([`ProducerStateManager::check`]) before it appends; every
//! replica records what it appends, leader or follower ([`ProducerStateManager::record`]),
//! so a new leader already knows the producers. Snapshots (`<offset>.snapshot`, Kafka's
//! byte format: the last batch of each producer) let a restart replay only the log after
//! the newest snapshot.

use std::collections::{HashMap, VecDeque};

use crate::error::LogError;

/// Batches remembered per producer (Kafka's `max.in.flight.requests.per.connection` cap for
/// idempotence).
pub const BATCHES_PER_PRODUCER: usize = 5;

const SNAPSHOT_VERSION: i16 = 1;
const ENTRY_BYTES: usize = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8;

/// One batch a producer wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMeta {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub timestamp: i64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerEntry {
    pub epoch: i16,
    /// Oldest first.
    pub batches: VecDeque<BatchMeta>,
}

/// What the leader should do with a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqCheck {
    Append,
    /// Already written: answer with where it went.
    Duplicate(BatchMeta),
}

/// A batch's producer fields, as read from its header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerBatch {
    pub producer_id: i64,
    pub epoch: i16,
    pub first_seq: i32,
    pub last_seq: i32,
}

fn next_seq(seq: i32) -> i32 {
    if seq == i32::MAX {
        0
    } else {
        seq + 1
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerStateManager {
    producers: HashMap<i64, ProducerEntry>,
}

impl ProducerStateManager {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn get(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&i64, &ProducerEntry)> {
        self.producers.iter()
    }

    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Leader side: may this batch be appended? Kafka's rules: an older epoch is fenced; a
    /// newer epoch must start at sequence 0; within an epoch a batch already written is a
    /// duplicate and any other must continue the sequence. A producer with no state here (new,
    /// or expired) may start anywhere.
    pub fn check(&self, b: &ProducerBatch) -> Result<SeqCheck, LogError> {
        let Some(e) = self.producers.get(&b.producer_id) else {
            return Ok(SeqCheck::Append);
        };
        if b.epoch < e.epoch {
            return Err(LogError::InvalidProducerEpoch(format!(
                "producer {} epoch {} is older than the current epoch {}",
                b.producer_id, b.epoch, e.epoch
            )));
        }
        if b.epoch > e.epoch {
            if b.first_seq != 0 {
                return Err(LogError::OutOfOrderSequence(format!(
                    "invalid sequence number {} for the new epoch {} of producer {} (expected 0)",
                    b.first_seq, b.epoch, b.producer_id
                )));
            }
            return Ok(SeqCheck::Append);
        }
        if let Some(dup) = e
            .batches
            .iter()
            .find(|m| m.first_seq == b.first_seq && m.last_seq == b.last_seq)
        {
            return Ok(SeqCheck::Duplicate(*dup));
        }
        match e.batches.back() {
            Some(last) if next_seq(last.last_seq) != b.first_seq => {
                Err(LogError::OutOfOrderSequence(format!(
                    "out of order sequence number for producer {}: {} (incoming seq), {} (last seq)",
                    b.producer_id, b.first_seq, last.last_seq
                )))
            }
            _ => Ok(SeqCheck::Append),
        }
    }

    /// Record an appended batch (leader, follower, or replay after a restart).
    pub fn record(&mut self, b: &ProducerBatch, first_offset: i64, last_offset: i64, ts: i64) {
        let e = self.producers.entry(b.producer_id).or_default();
        if b.epoch != e.epoch {
            e.epoch = b.epoch;
            e.batches.clear();
        }
        e.batches.push_back(BatchMeta {
            first_seq: b.first_seq,
            last_seq: b.last_seq,
            first_offset,
            last_offset,
            timestamp: ts,
        });
        while e.batches.len() > BATCHES_PER_PRODUCER {
            e.batches.pop_front();
        }
    }

    /// Forget producers whose last write is older than `producer.id.expiration.ms`.
    pub fn expire(&mut self, now_ms: i64, expiration_ms: i64) {
        self.producers.retain(|_, e| {
            e.batches
                .back()
                .is_none_or(|b| now_ms.saturating_sub(b.timestamp) < expiration_ms)
        });
    }

    /// Kafka's snapshot bytes: version, CRC32C of the rest, then per producer its last batch.
    pub fn to_snapshot(&self) -> Vec<u8> {
        let mut ids: Vec<&i64> = self.producers.keys().collect();
        ids.sort_unstable();
        let mut body = Vec::with_capacity(4 + ids.len() * ENTRY_BYTES);
        body.extend_from_slice(&(ids.len() as i32).to_be_bytes());
        for id in ids {
            let e = &self.producers[id];
            let Some(last) = e.batches.back() else {
                continue;
            };
            body.extend_from_slice(&id.to_be_bytes());
            body.extend_from_slice(&e.epoch.to_be_bytes());
            body.extend_from_slice(&last.last_seq.to_be_bytes());
            body.extend_from_slice(&last.last_offset.to_be_bytes());
            body.extend_from_slice(&((last.last_offset - last.first_offset) as i32).to_be_bytes());
            body.extend_from_slice(&last.timestamp.to_be_bytes());
            body.extend_from_slice(&(-1i32).to_be_bytes()); // coordinator epoch
            body.extend_from_slice(&(-1i64).to_be_bytes()); // current txn first offset
        }
        // Entries without a batch were skipped: fix the count.
        let count = ((body.len() - 4) / ENTRY_BYTES) as i32;
        body[..4].copy_from_slice(&count.to_be_bytes());
        let mut out = Vec::with_capacity(6 + body.len());
        out.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        out.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    pub fn from_snapshot(bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() < 10 {
            return Err("snapshot truncated".into());
        }
        let version = i16::from_be_bytes([bytes[0], bytes[1]]);
        if version != SNAPSHOT_VERSION {
            return Err(format!("unknown snapshot version {version}"));
        }
        let crc = u32::from_be_bytes([bytes[2], bytes[3], bytes[4], bytes[5]]);
        let body = &bytes[6..];
        if crc32c::crc32c(body) != crc {
            return Err("snapshot CRC mismatch".into());
        }
        let count = i32::from_be_bytes([body[0], body[1], body[2], body[3]]);
        let entries = &body[4..];
        if count < 0 || entries.len() != count as usize * ENTRY_BYTES {
            return Err("snapshot length does not match its entry count".into());
        }
        let mut producers = HashMap::with_capacity(count as usize);
        for e in entries.chunks_exact(ENTRY_BYTES) {
            let i64_at = |at: usize| {
                let mut a = [0u8; 8];
                a.copy_from_slice(&e[at..at + 8]);
                i64::from_be_bytes(a)
            };
            let i32_at = |at: usize| i32::from_be_bytes([e[at], e[at + 1], e[at + 2], e[at + 3]]);
            let id = i64_at(0);
            let epoch = i16::from_be_bytes([e[8], e[9]]);
            let last_seq = i32_at(10);
            let last_offset = i64_at(14);
            let delta = i32_at(22);
            let timestamp = i64_at(26);
            let first_seq = last_seq.wrapping_sub(delta).max(0);
            let mut batches = VecDeque::new();
            batches.push_back(BatchMeta {
                first_seq,
                last_seq,
                first_offset: last_offset - i64::from(delta),
                last_offset,
                timestamp,
            });
            producers.insert(id, ProducerEntry { epoch, batches });
        }
        Ok(Self { producers })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(pid: i64, epoch: i16, first_seq: i32, n: i32) -> ProducerBatch {
        ProducerBatch {
            producer_id: pid,
            epoch,
            first_seq,
            last_seq: first_seq + (n - 1),
        }
    }

    #[test]
    fn sequences_duplicates_and_epochs() {
        let mut s = ProducerStateManager::new();
        // Unknown producers start anywhere.
        assert_eq!(s.check(&b(7, 0, 5, 2)).unwrap(), SeqCheck::Append);
        s.record(&b(7, 0, 0, 3), 10, 12, 100);
        s.record(&b(7, 0, 3, 2), 13, 14, 101);
        // A retry of either batch is a duplicate with its original offsets.
        match s.check(&b(7, 0, 0, 3)).unwrap() {
            SeqCheck::Duplicate(m) => assert_eq!((m.first_offset, m.last_offset), (10, 12)),
            other => panic!("{other:?}"),
        }
        assert_eq!(s.check(&b(7, 0, 5, 1)).unwrap(), SeqCheck::Append);
        assert!(matches!(
            s.check(&b(7, 0, 6, 1)),
            Err(LogError::OutOfOrderSequence(_))
        ));
        // A new epoch starts at 0; an old one is fenced.
        assert!(matches!(
            s.check(&b(7, 1, 5, 1)),
            Err(LogError::OutOfOrderSequence(_))
        ));
        assert_eq!(s.check(&b(7, 1, 0, 1)).unwrap(), SeqCheck::Append);
        s.record(&b(7, 1, 0, 1), 15, 15, 102);
        assert!(matches!(
            s.check(&b(7, 0, 5, 1)),
            Err(LogError::InvalidProducerEpoch(_))
        ));
        // Only the last five batches are remembered.
        for i in 1..=5 {
            s.record(&b(7, 1, i, 1), 15 + i64::from(i), 15 + i64::from(i), 103);
        }
        assert!(matches!(
            s.check(&b(7, 1, 0, 1)),
            Err(LogError::OutOfOrderSequence(_))
        ));
        assert!(matches!(
            s.check(&b(7, 1, 1, 1)).unwrap(),
            SeqCheck::Duplicate(_)
        ));
        // Sequences wrap.
        s.record(&b(8, 0, i32::MAX, 1), 30, 30, 104);
        assert_eq!(s.check(&b(8, 0, 0, 1)).unwrap(), SeqCheck::Append);
    }

    #[test]
    fn snapshots_round_trip_the_last_batch_and_expiry_forgets() {
        let mut s = ProducerStateManager::new();
        s.record(&b(1, 2, 0, 3), 0, 2, 1_000);
        s.record(&b(1, 2, 3, 4), 3, 6, 2_000);
        s.record(&b(9, 0, 0, 1), 7, 7, 5_000);
        let bytes = s.to_snapshot();
        assert_eq!(bytes.len(), 2 + 4 + 4 + 2 * ENTRY_BYTES);
        let back = ProducerStateManager::from_snapshot(&bytes).unwrap();
        assert_eq!(back.get(1).unwrap().epoch, 2);
        assert_eq!(
            back.get(1).unwrap().batches.back().copied(),
            s.get(1).unwrap().batches.back().copied()
        );
        assert!(matches!(
            back.check(&b(1, 2, 3, 4)).unwrap(),
            SeqCheck::Duplicate(_)
        ));
        let mut bad = bytes.clone();
        bad[12] ^= 1;
        assert!(ProducerStateManager::from_snapshot(&bad).is_err());
        for cut in 0..bytes.len() {
            assert!(ProducerStateManager::from_snapshot(&bytes[..cut]).is_err());
        }
        let mut s = back;
        s.expire(6_000, 3_000);
        assert!(s.get(1).is_none() && s.get(9).is_some());
    }
}
