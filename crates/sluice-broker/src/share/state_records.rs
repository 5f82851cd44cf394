//! The `__share_group_state` records (KIP-932) in Kafka 4.4's byte formats: where a share
//! coordinator keeps each share partition's state (start offset and the delivery state of
//! the in-flight records), so a restarted or new partition leader resumes the window.
//!
//! ```text
//! key   (record type i16, then version 0, classic encoding):
//!       0 ShareSnapshot / 1 ShareUpdate: group string, topic_id uuid, partition i32
//! value (version i16 = 0, then flexible encoding):
//!       ShareSnapshot: snapshot_epoch i32, state_epoch i32, leader_epoch i32, start_offset i64,
//!                      create_timestamp i64, write_timestamp i64, state_batches [StateBatch],
//!                      tag 0: delivery_complete_count i32 (default -1)
//!       ShareUpdate:   snapshot_epoch i32, leader_epoch i32, start_offset i64 (-1: unchanged),
//!                      state_batches [StateBatch], tag 0: delivery_complete_count i32
//! StateBatch: first_offset i64, last_offset i64, delivery_state i8, delivery_count i16, tags
//! ```
//! A snapshot is the whole state; an update carries only the batches that changed since, to be
//! merged over the snapshot of its epoch (later batches win). A ShareSnapshot key with a null
//! value is a tombstone (the share partition's state deleted). Tagged fields this broker does
//! not know are kept as read on the top-level struct.

use crate::group::consumer_records::{
    done, read_len, read_tags, tags, uvarint, value_reader, Tags,
};
use crate::group::records::{R, W};
use sluice_metadata::Uuid;

/// The kinds of `__share_group_state` records (their key's record type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShareStateRecord {
    Snapshot = 0,
    Update = 1,
}

/// A share partition's key: group, topic id and partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareStateKey {
    pub kind: ShareStateRecord,
    pub group: String,
    pub topic_id: Uuid,
    pub partition: i32,
}

impl ShareStateKey {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W(Vec::with_capacity(32 + self.group.len()));
        w.i16(self.kind as i16);
        w.str(&self.group);
        w.0.extend_from_slice(self.topic_id.as_bytes());
        w.i32(self.partition);
        w.0
    }

    /// None for other record types and for malformed keys.
    pub fn decode(buf: &[u8]) -> Option<Self> {
        let mut r = R(buf);
        let kind = match r.i16()? {
            0 => ShareStateRecord::Snapshot,
            1 => ShareStateRecord::Update,
            _ => return None,
        };
        let group = r.str()?;
        let topic_id = Uuid::from_slice(r.take(16)?).ok()?;
        let partition = r.i32()?;
        done(
            &r,
            ShareStateKey {
                kind,
                group,
                topic_id,
                partition,
            },
        )
    }
}

/// A run of offsets with one delivery state (0 available, 2 acknowledged, 4 archived) and
/// delivery count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PersistedBatch {
    pub first_offset: i64,
    pub last_offset: i64,
    pub delivery_state: i8,
    pub delivery_count: i16,
}

/// The tag of `delivery_complete_count` (Kafka 4.2+).
const DELIVERY_COMPLETE_COUNT: u32 = 0;

fn write_batches(w: &mut W, batches: &[PersistedBatch]) {
    uvarint(w, batches.len() as u32 + 1);
    for b in batches {
        w.i64(b.first_offset);
        w.i64(b.last_offset);
        w.i8(b.delivery_state);
        w.i16(b.delivery_count);
        uvarint(w, 0);
    }
}

fn read_batches(r: &mut R<'_>) -> Option<Vec<PersistedBatch>> {
    let n = read_len(r)?;
    let mut out = Vec::with_capacity(n.min(4096));
    for _ in 0..n {
        let b = PersistedBatch {
            first_offset: r.i64()?,
            last_offset: r.i64()?,
            delivery_state: r.i8()?,
            delivery_count: r.i16()?,
        };
        read_tags(r)?;
        out.push(b);
    }
    Some(out)
}

/// Split the known tag off the others.
fn take_count(mut t: Tags) -> Option<(i32, Tags)> {
    let mut count = -1;
    if let Some(i) = t
        .iter()
        .position(|(tag, _)| *tag == DELIVERY_COMPLETE_COUNT)
    {
        let (_, bytes) = t.remove(i);
        count = i32::from_be_bytes(bytes.as_slice().try_into().ok()?);
    }
    Some((count, t))
}

fn put_count(count: i32, other: &Tags) -> Tags {
    let mut t = other.clone();
    if count != -1 {
        t.push((DELIVERY_COMPLETE_COUNT, count.to_be_bytes().to_vec()));
        t.sort_by_key(|(tag, _)| *tag);
    }
    t
}

/// The whole state of a share partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareSnapshotValue {
    pub snapshot_epoch: i32,
    pub state_epoch: i32,
    pub leader_epoch: i32,
    pub start_offset: i64,
    pub create_timestamp: i64,
    pub write_timestamp: i64,
    pub state_batches: Vec<PersistedBatch>,
    /// Offsets past the start already acknowledged or archived (-1: unknown).
    pub delivery_complete_count: i32,
    pub tags: Tags,
}

impl ShareSnapshotValue {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W(vec![0, 0]);
        w.i32(self.snapshot_epoch);
        w.i32(self.state_epoch);
        w.i32(self.leader_epoch);
        w.i64(self.start_offset);
        w.i64(self.create_timestamp);
        w.i64(self.write_timestamp);
        write_batches(&mut w, &self.state_batches);
        tags(&mut w, &put_count(self.delivery_complete_count, &self.tags));
        w.0
    }

    pub fn decode(buf: &[u8]) -> Option<Self> {
        let mut r = value_reader(buf)?;
        let snapshot_epoch = r.i32()?;
        let state_epoch = r.i32()?;
        let leader_epoch = r.i32()?;
        let start_offset = r.i64()?;
        let create_timestamp = r.i64()?;
        let write_timestamp = r.i64()?;
        let state_batches = read_batches(&mut r)?;
        let (delivery_complete_count, tags) = take_count(read_tags(&mut r)?)?;
        done(
            &r,
            ShareSnapshotValue {
                snapshot_epoch,
                state_epoch,
                leader_epoch,
                start_offset,
                create_timestamp,
                write_timestamp,
                state_batches,
                delivery_complete_count,
                tags,
            },
        )
    }
}

/// What changed since the snapshot of `snapshot_epoch`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareUpdateValue {
    pub snapshot_epoch: i32,
    pub leader_epoch: i32,
    /// -1: unchanged.
    pub start_offset: i64,
    pub state_batches: Vec<PersistedBatch>,
    pub delivery_complete_count: i32,
    pub tags: Tags,
}

impl ShareUpdateValue {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W(vec![0, 0]);
        w.i32(self.snapshot_epoch);
        w.i32(self.leader_epoch);
        w.i64(self.start_offset);
        write_batches(&mut w, &self.state_batches);
        tags(&mut w, &put_count(self.delivery_complete_count, &self.tags));
        w.0
    }

    pub fn decode(buf: &[u8]) -> Option<Self> {
        let mut r = value_reader(buf)?;
        let snapshot_epoch = r.i32()?;
        let leader_epoch = r.i32()?;
        let start_offset = r.i64()?;
        let state_batches = read_batches(&mut r)?;
        let (delivery_complete_count, tags) = take_count(read_tags(&mut r)?)?;
        done(
            &r,
            ShareUpdateValue {
                snapshot_epoch,
                leader_epoch,
                start_offset,
                state_batches,
                delivery_complete_count,
                tags,
            },
        )
    }
}

/// Merge `update` over `base` (batches sorted by first offset, not overlapping): where they
/// overlap the update wins, and what lies below `start_offset` is dropped (Kafka's
/// PersisterStateBatchCombiner).
pub fn merge_batches(
    base: &[PersistedBatch],
    update: &[PersistedBatch],
    start_offset: i64,
) -> Vec<PersistedBatch> {
    let mut out: Vec<PersistedBatch> = Vec::new();
    for b in base {
        // The parts of `b` no update batch covers.
        let mut pieces = vec![(b.first_offset, b.last_offset)];
        for u in update {
            pieces = pieces
                .into_iter()
                .flat_map(|(f, l)| {
                    let mut keep = Vec::new();
                    if u.last_offset < f || u.first_offset > l {
                        keep.push((f, l));
                    } else {
                        if f < u.first_offset {
                            keep.push((f, u.first_offset - 1));
                        }
                        if l > u.last_offset {
                            keep.push((u.last_offset + 1, l));
                        }
                    }
                    keep
                })
                .collect();
        }
        out.extend(pieces.into_iter().map(|(f, l)| PersistedBatch {
            first_offset: f,
            last_offset: l,
            ..*b
        }));
    }
    out.extend(update.iter().copied());
    out.retain(|b| b.last_offset >= start_offset);
    for b in &mut out {
        b.first_offset = b.first_offset.max(start_offset);
    }
    out.sort_by_key(|b| b.first_offset);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(first: i64, last: i64, state: i8, count: i16) -> PersistedBatch {
        PersistedBatch {
            first_offset: first,
            last_offset: last,
            delivery_state: state,
            delivery_count: count,
        }
    }

    #[test]
    fn keys_and_values_round_trip_in_kafkas_bytes() {
        let key = ShareStateKey {
            kind: ShareStateRecord::Snapshot,
            group: "g".into(),
            topic_id: Uuid::from_u128(0x0102),
            partition: 3,
        };
        let bytes = key.encode();
        // type 0, "g" as int16 length + byte, 16 id bytes, partition.
        assert_eq!(&bytes[..5], &[0, 0, 0, 1, b'g']);
        assert_eq!(bytes.len(), 2 + 3 + 16 + 4);
        assert_eq!(ShareStateKey::decode(&bytes), Some(key));
        assert_eq!(ShareStateKey::decode(&[0, 9, 0, 0]), None);

        let snap = ShareSnapshotValue {
            snapshot_epoch: 2,
            state_epoch: 1,
            leader_epoch: 5,
            start_offset: 100,
            create_timestamp: 7,
            write_timestamp: 8,
            state_batches: vec![batch(100, 104, 2, 1), batch(105, 105, 0, 3)],
            delivery_complete_count: 5,
            tags: vec![(9, vec![1])],
        };
        let bytes = snap.encode();
        assert_eq!(&bytes[..2], &[0, 0], "version 0");
        assert_eq!(ShareSnapshotValue::decode(&bytes), Some(snap.clone()));
        for cut in 0..bytes.len() {
            assert_eq!(
                ShareSnapshotValue::decode(&bytes[..cut]),
                None,
                "cut at {cut}"
            );
        }
        let update = ShareUpdateValue {
            snapshot_epoch: 2,
            leader_epoch: 5,
            start_offset: -1,
            state_batches: vec![batch(106, 110, 4, 5)],
            delivery_complete_count: -1,
            tags: Vec::new(),
        };
        let bytes = update.encode();
        assert_eq!(ShareUpdateValue::decode(&bytes), Some(update));
        // No tag written for an unknown count: the value ends with an empty tag buffer.
        assert_eq!(bytes.last(), Some(&0));
    }

    #[test]
    fn updates_win_over_the_snapshot_and_the_start_cuts_below() {
        let base = [batch(0, 9, 0, 1), batch(10, 19, 2, 1)];
        let update = [batch(5, 12, 4, 2)];
        assert_eq!(
            merge_batches(&base, &update, 2),
            vec![batch(2, 4, 0, 1), batch(5, 12, 4, 2), batch(13, 19, 2, 1)]
        );
        assert_eq!(merge_batches(&base, &[], 15), vec![batch(15, 19, 2, 1)]);
    }
}
