//! WAL compaction: the cleaning broker (see [`super::cleaner`]) copies each diskless
//! partition's committed batches out of the shared WAL objects into segment objects of that
//! partition, in Kafka's segment format: the `.log` (the batches, their offsets set), a sparse
//! `.index` and a `.timeindex` as a Kafka log segment has them, under
//! `diskless/segments/<topic>-<topic id>/<partition>/<base offset>-<segment id>.<suffix>`
//! (the tiered-storage layout, so the tiered-storage reader serves them). Then it asks the
//! sequencer to swap the batches' coordinates for the segment's
//! ([`sluice_metadata::MetadataRecord::DisklessSegment`]); a swap that a trim overtook is
//! refused and its objects deleted. What the swap frees (WAL objects no batch refers to) is
//! deleted by the garbage collection after `diskless.wal.delete.delay.ms`, which also keeps
//! readers holding an older image safe.
//!
//! A segment is built in memory, so it holds at most [`SEGMENT_MAX_BYTES`] (or the topic's
//! `segment.bytes`, when smaller). Each round makes at least one segment of every partition
//! that has batches: the image then holds one entry per segment, at most one a
//! `diskless.wal.compaction.interval.ms` per partition, instead of one per batch.

use std::sync::Arc;

use bytes::Bytes;
use sluice_metadata::diskless::{BatchCoord, SegmentCoord};
use sluice_metadata::{MetadataImage, Uuid};
use sluice_protocol::batch::{set_base_offset, set_partition_leader_epoch, verify_crc};
use sluice_remote::layout::SegmentKey;
use sluice_remote::RemoteError;
use tracing::{debug, warn};

use super::{wal_key, Diskless};

/// Where segment objects are, under the store's prefix.
pub const SEGMENT_PREFIX: &str = "diskless/segments";
/// The largest segment object compaction makes (it is built in memory).
pub const SEGMENT_MAX_BYTES: u64 = 128 << 20;
/// An offset and time index entry per this many bytes (Kafka's `index.interval.bytes`).
const INDEX_INTERVAL_BYTES: u64 = 4096;

/// The objects of segment `seg` of a partition of `topic`.
pub fn segment_key(topic: &str, topic_id: &Uuid, partition: i32, seg: &SegmentCoord) -> SegmentKey {
    SegmentKey {
        topic: format!("{SEGMENT_PREFIX}/{topic}"),
        topic_id: *topic_id.as_bytes(),
        partition,
        base_offset: seg.base_offset,
        segment_id: *seg.segment_id.as_bytes(),
    }
}

/// A segment made of a run of batches: its coordinates and its three files.
pub struct Built {
    pub coord: SegmentCoord,
    pub log: Vec<u8>,
    pub index: Vec<u8>,
    pub time_index: Vec<u8>,
}

/// Kafka's segment files of `batches` (each the bytes of one batch, offsets set, with its
/// coordinates), as one segment: an index entry (last offset, position) before each batch
/// that starts more than [`INDEX_INTERVAL_BYTES`] after the previous entry, and a time index
/// entry (largest timestamp so far, its offset) with each index entry and at the end, when
/// that timestamp grew.
pub fn build_segment(batches: &[(&BatchCoord, &[u8])], segment_id: Uuid) -> Option<Built> {
    let (first, _) = batches.first()?;
    let (last, _) = batches.last()?;
    let base = first.base_offset;
    let mut log = Vec::with_capacity(batches.iter().map(|(_, b)| b.len()).sum());
    let (mut index, mut time_index) = (Vec::new(), Vec::new());
    let mut since_entry = 0u64;
    let (mut max_ts, mut max_ts_offset) = (i64::MIN, base);
    let mut last_time_entry = i64::MIN;
    let mut time_entry = |max_ts: i64, offset: i64, out: &mut Vec<u8>| {
        if max_ts > last_time_entry {
            out.extend_from_slice(&max_ts.to_be_bytes());
            out.extend_from_slice(&((offset - base) as u32).to_be_bytes());
            last_time_entry = max_ts;
        }
    };
    for (b, bytes) in batches {
        let position = log.len();
        if since_entry > INDEX_INTERVAL_BYTES {
            index.extend_from_slice(&((b.last_offset - base) as u32).to_be_bytes());
            index.extend_from_slice(&(position as u32).to_be_bytes());
            since_entry = 0;
        }
        if b.max_timestamp_ms > max_ts {
            (max_ts, max_ts_offset) = (b.max_timestamp_ms, b.last_offset);
        }
        if since_entry == 0 && position > 0 {
            time_entry(max_ts, max_ts_offset, &mut time_index);
        }
        log.extend_from_slice(bytes);
        set_base_offset(&mut log[position..], b.base_offset);
        set_partition_leader_epoch(&mut log[position..], 0);
        since_entry += bytes.len() as u64;
    }
    time_entry(max_ts, max_ts_offset, &mut time_index);
    Some(Built {
        coord: SegmentCoord {
            segment_id,
            base_offset: base,
            last_offset: last.last_offset,
            size: log.len() as u64,
            max_timestamp_ms: max_ts,
            max_timestamp_offset: max_ts_offset,
        },
        log,
        index,
        time_index,
    })
}

/// A partition's batches cut into runs of at most `max_bytes` (at least one batch each).
fn runs(batches: &[BatchCoord], max_bytes: u64) -> Vec<&[BatchCoord]> {
    let mut out = Vec::new();
    let (mut from, mut size) = (0, 0u64);
    for (i, b) in batches.iter().enumerate() {
        if i > from && size + u64::from(b.size) > max_bytes {
            out.push(&batches[from..i]);
            (from, size) = (i, 0);
        }
        size += u64::from(b.size);
    }
    if from < batches.len() {
        out.push(&batches[from..]);
    }
    out
}

impl Diskless {
    /// A whole WAL object, read from the store once per broker however many want it.
    pub(super) async fn wal_object(&self, id: &Uuid) -> Result<Arc<Bytes>, RemoteError> {
        let key = wal_key(id);
        self.metrics.object_reads.increment(1);
        self.objects
            .get_or_fill(&key, || async {
                self.metrics.gets.increment(1);
                let got = self.store()?.get(&key).await?;
                let bytes = got.ok_or_else(|| RemoteError::Corrupt {
                    key: key.clone(),
                    reason: "the WAL object is missing".into(),
                })?;
                self.metrics.get_bytes.increment(bytes.len() as u64);
                Ok::<Bytes, RemoteError>(bytes)
            })
            .await
    }

    /// The bytes of batch `b` in its WAL object, its CRC checked.
    pub(super) fn batch_bytes<'a>(
        object: &'a Bytes,
        b: &BatchCoord,
    ) -> Result<&'a [u8], RemoteError> {
        let (from, to) = (b.position as usize, b.position as usize + b.size as usize);
        let corrupt = |reason: String| RemoteError::Corrupt {
            key: wal_key(&b.object_id),
            reason,
        };
        let bytes = object
            .get(from..to)
            .ok_or_else(|| corrupt(format!("{from}..{to} is past its end")))?;
        verify_crc(bytes).map_err(|e| corrupt(format!("batch at {from}: {e}")))?;
        Ok(bytes)
    }

    /// Build and upload the segment of `run` (batches of one partition of `topic`).
    async fn upload_segment(
        &self,
        topic: &str,
        topic_id: &Uuid,
        partition: i32,
        run: &[BatchCoord],
    ) -> Result<SegmentCoord, RemoteError> {
        let mut objects = std::collections::HashMap::new();
        for b in run {
            if let std::collections::hash_map::Entry::Vacant(e) = objects.entry(b.object_id) {
                e.insert(self.wal_object(&b.object_id).await?);
            }
        }
        let parts = run
            .iter()
            .map(|b| Ok((b, Self::batch_bytes(&objects[&b.object_id], b)?)))
            .collect::<Result<Vec<_>, RemoteError>>()?;
        let id = Uuid::from_u128(sluice_rt::random_u128());
        let built = build_segment(&parts, id)
            .ok_or_else(|| RemoteError::Unavailable("nothing to compact".into()))?;
        drop(parts);
        drop(objects);
        let key = segment_key(topic, topic_id, partition, &built.coord);
        let store = self.store()?;
        for (suffix, bytes) in [
            ("log", built.log),
            ("index", built.index),
            ("timeindex", built.time_index),
        ] {
            let len = bytes.len() as u64;
            store.put(&key.object(suffix), Bytes::from(bytes)).await?;
            self.metrics.puts.increment(1);
            self.metrics.put_bytes.increment(len);
        }
        Ok(built.coord)
    }

    /// One round of WAL compaction over every diskless partition of `image`;
    /// `segment_bytes` gives a topic's `segment.bytes`. Segments made and swapped in.
    pub async fn compact(
        &self,
        image: &MetadataImage,
        segment_bytes: impl Fn(&str) -> u64,
    ) -> usize {
        let mut swapped = 0;
        for ((topic_id, partition), log) in &image.diskless {
            let Some(topic) = image.topic_by_id(topic_id) else {
                continue;
            };
            if log.batch_count() == 0 {
                continue;
            }
            let batches: Vec<BatchCoord> = log.batches().cloned().collect();
            let max = segment_bytes(&topic.name).clamp(1, SEGMENT_MAX_BYTES);
            let mut made = Vec::new();
            for run in runs(&batches, max) {
                match self
                    .upload_segment(&topic.name, topic_id, *partition, run)
                    .await
                {
                    Ok(seg) => made.push((*topic_id, *partition, seg)),
                    Err(e) => {
                        warn!(topic = %topic.name, partition, error = %e, "diskless WAL compaction: cannot make a segment");
                        break;
                    }
                }
            }
            if made.is_empty() {
                continue;
            }
            let answers = match self.controller.diskless_compact(&made).await {
                Ok(a) => a,
                Err(e) => {
                    // Unknown whether it was taken: garbage collection deletes the objects
                    // if not.
                    warn!(topic = %topic.name, partition, error = %e, "diskless WAL compaction: no answer from the controller");
                    continue;
                }
            };
            for (r, (_, _, seg)) in answers.iter().zip(&made) {
                match r {
                    Ok(()) => swapped += 1,
                    Err(e) => {
                        debug!(topic = %topic.name, partition, error = ?e, "diskless WAL compaction: segment refused");
                        self.delete_segment(&topic.name, topic_id, *partition, seg)
                            .await;
                    }
                }
            }
        }
        swapped
    }

    /// Delete a segment's objects (refused or no longer referred to); what fails is left to
    /// the next garbage collection.
    async fn delete_segment(
        &self,
        topic: &str,
        topic_id: &Uuid,
        partition: i32,
        seg: &SegmentCoord,
    ) {
        let key = segment_key(topic, topic_id, partition, seg);
        if let Ok(store) = self.store() {
            for suffix in ["log", "index", "timeindex"] {
                let _ = store.delete(&key.object(suffix)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_metadata::diskless::BatchKind;

    fn coord(base: i64, count: i64, ts: i64, size: u32) -> BatchCoord {
        BatchCoord {
            base_offset: base,
            last_offset: base + count - 1,
            object_id: Uuid::nil(),
            position: 0,
            size,
            max_timestamp_ms: ts,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            kind: BatchKind::Data,
        }
    }

    #[test]
    fn runs_are_cut_at_the_size_and_hold_a_batch_at_least() {
        let b: Vec<_> = (0..5).map(|i| coord(i * 2, 2, 0, 100)).collect();
        let sizes: Vec<usize> = runs(&b, 250).iter().map(|r| r.len()).collect();
        assert_eq!(sizes, vec![2, 2, 1]);
        let sizes: Vec<usize> = runs(&b, 10).iter().map(|r| r.len()).collect();
        assert_eq!(sizes, vec![1; 5]);
        assert!(runs(&[], 10).is_empty());
    }

    #[test]
    fn a_segment_has_kafkas_sparse_indexes() {
        // Batches of 3000 bytes (only their header matters to the builder).
        let coords: Vec<_> = (0..6)
            .map(|i| coord(10 + i * 4, 4, [5, 9, 7, 20, 3, 21][i as usize], 3000))
            .collect();
        let bytes = vec![0u8; 3000];
        let parts: Vec<_> = coords.iter().map(|c| (c, &bytes[..])).collect();
        let built = build_segment(&parts, Uuid::nil()).unwrap();
        assert_eq!(built.log.len(), 18_000);
        let c = &built.coord;
        assert_eq!((c.base_offset, c.last_offset, c.size), (10, 33, 18_000));
        assert_eq!((c.max_timestamp_ms, c.max_timestamp_offset), (21, 33));
        // More than 4096 bytes since the last entry before batches 2 and 4: (last offset
        // relative to 10, position).
        let entries: Vec<(u32, u32)> = built
            .index
            .chunks(8)
            .map(|e| {
                (
                    u32::from_be_bytes(e[..4].try_into().unwrap()),
                    u32::from_be_bytes(e[4..].try_into().unwrap()),
                )
            })
            .collect();
        assert_eq!(entries, vec![(11, 6000), (19, 12_000)]);
        // The time index: largest timestamp so far and where, with each index entry, then
        // at the end.
        let times: Vec<(i64, u32)> = built
            .time_index
            .chunks(12)
            .map(|e| {
                (
                    i64::from_be_bytes(e[..8].try_into().unwrap()),
                    u32::from_be_bytes(e[8..].try_into().unwrap()),
                )
            })
            .collect();
        assert_eq!(times, vec![(9, 7), (20, 15), (21, 23)]);
        // Each batch got its offset.
        assert_eq!(
            i64::from_be_bytes(built.log[6000..6008].try_into().unwrap()),
            18
        );
    }
}
