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

use std::collections::{BTreeMap, HashMap, VecDeque};

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

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerEntry {
    pub epoch: i16,
    /// Oldest first.
    pub batches: VecDeque<BatchMeta>,
    /// Timestamp of the producer's last write (batch or marker), for expiry.
    pub last_timestamp: i64,
    /// Epoch of the transaction coordinator that wrote this producer's last marker (-1: none).
    pub coordinator_epoch: i32,
    /// First offset of the producer's open transaction in this partition.
    pub txn_first_offset: Option<i64>,
}

impl Default for ProducerEntry {
    fn default() -> Self {
        Self {
            epoch: 0,
            batches: VecDeque::new(),
            last_timestamp: -1,
            coordinator_epoch: -1,
            txn_first_offset: None,
        }
    }
}

/// A transaction that a marker ended in this partition: its producer and offsets (the data
/// from `first_offset`, the marker at `last_offset`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub aborted: bool,
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
    /// Part of a transaction.
    pub transactional: bool,
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
    /// Open transactions: first offset -> producer id.
    ongoing: BTreeMap<i64, i64>,
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
        e.last_timestamp = ts;
        if b.transactional && e.txn_first_offset.is_none() {
            e.txn_first_offset = Some(first_offset);
            self.ongoing.insert(first_offset, b.producer_id);
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

    /// Is `epoch` the producer's current epoch or newer?
    pub fn check_epoch(&self, producer_id: i64, epoch: i16) -> Result<(), LogError> {
        match self.producers.get(&producer_id) {
            Some(e) if epoch < e.epoch => Err(LogError::InvalidProducerEpoch(format!(
                "producer {producer_id} epoch {epoch} is older than the current epoch {}",
                e.epoch
            ))),
            _ => Ok(()),
        }
    }

    /// May the coordinator write a marker for this producer? An older producer epoch or an
    /// older coordinator epoch than the last marker's is fenced.
    pub fn check_marker(
        &self,
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
    ) -> Result<(), LogError> {
        let Some(e) = self.producers.get(&producer_id) else {
            return Ok(());
        };
        if epoch < e.epoch {
            return Err(LogError::InvalidProducerEpoch(format!(
                "marker epoch {epoch} of producer {producer_id} is older than the current epoch {}",
                e.epoch
            )));
        }
        if coordinator_epoch < e.coordinator_epoch {
            return Err(LogError::CoordinatorFenced(format!(
                "marker for producer {producer_id} from coordinator epoch {coordinator_epoch}, \
                 older than {}",
                e.coordinator_epoch
            )));
        }
        Ok(())
    }

    /// Record a commit/abort marker written at `offset`: the producer's open transaction (if
    /// any) ends there. A marker may carry a newer epoch (a fenced producer's transaction
    /// aborted by its coordinator): the producer's sequences start over.
    pub fn record_marker(
        &mut self,
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
        commit: bool,
        offset: i64,
        ts: i64,
    ) -> Option<CompletedTxn> {
        let e = self.producers.entry(producer_id).or_default();
        if epoch != e.epoch {
            e.epoch = epoch;
            e.batches.clear();
        }
        e.coordinator_epoch = coordinator_epoch;
        e.last_timestamp = ts;
        let first = e.txn_first_offset.take()?;
        self.ongoing.remove(&first);
        Some(CompletedTxn {
            producer_id,
            first_offset: first,
            last_offset: offset,
            aborted: !commit,
        })
    }

    /// The first offset of the oldest open transaction.
    pub fn first_ongoing_offset(&self) -> Option<i64> {
        self.ongoing.keys().next().copied()
    }

    /// Forget producers whose last write is older than `producer.id.expiration.ms` (never
    /// one with an open transaction).
    pub fn expire(&mut self, now_ms: i64, expiration_ms: i64) {
        self.producers.retain(|_, e| {
            e.txn_first_offset.is_some() || now_ms.saturating_sub(e.last_timestamp) < expiration_ms
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
            // A producer whose epoch a marker moved has no batch yet: Kafka's empty entry.
            let (last_seq, last_offset, delta) = match e.batches.back() {
                Some(b) => (
                    b.last_seq,
                    b.last_offset,
                    (b.last_offset - b.first_offset) as i32,
                ),
                None => (-1, -1, 0),
            };
            body.extend_from_slice(&id.to_be_bytes());
            body.extend_from_slice(&e.epoch.to_be_bytes());
            body.extend_from_slice(&last_seq.to_be_bytes());
            body.extend_from_slice(&last_offset.to_be_bytes());
            body.extend_from_slice(&delta.to_be_bytes());
            body.extend_from_slice(&e.last_timestamp.to_be_bytes());
            body.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
            body.extend_from_slice(&e.txn_first_offset.unwrap_or(-1).to_be_bytes());
        }
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
        let mut ongoing = BTreeMap::new();
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
            let coordinator_epoch = i32_at(34);
            let txn_first_offset = Some(i64_at(38)).filter(|o| *o >= 0);
            let mut batches = VecDeque::new();
            if last_offset >= 0 {
                batches.push_back(BatchMeta {
                    first_seq: last_seq.wrapping_sub(delta).max(0),
                    last_seq,
                    first_offset: last_offset - i64::from(delta),
                    last_offset,
                    timestamp,
                });
            }
            if let Some(first) = txn_first_offset {
                ongoing.insert(first, id);
            }
            producers.insert(
                id,
                ProducerEntry {
                    epoch,
                    batches,
                    last_timestamp: timestamp,
                    coordinator_epoch,
                    txn_first_offset,
                },
            );
        }
        Ok(Self { producers, ongoing })
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
            transactional: false,
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
