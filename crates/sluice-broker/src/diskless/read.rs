//! Reads of diskless partitions, on any broker. The image says which segment object or WAL
//! object holds an offset. A segment (see [`super::compact`]) is read through the
//! tiered-storage reader (its offset index, chunks cached on local disk); in a WAL object, a
//! fetch reads the run of the partition's batches in that object from there on.
//! An object is read from the store once per broker however many partitions and consumers
//! want it (single-flight, kept in memory while the cache has room); the run is cut out of
//! it with the offsets the sequencer assigned written into each batch header (outside the
//! CRC, as a leader's append does), checked, and kept as a local file, so the connection
//! sends it like a log range.

use std::sync::Arc;

use bytes::Bytes;
use sluice_metadata::diskless::BatchCoord;
use sluice_metadata::{MetadataImage, Uuid};
use sluice_protocol::batch::{set_base_offset, set_partition_leader_epoch};
use sluice_protocol::types::Offset;
use sluice_protocol::ErrorCode;
use sluice_remote::cache::CachedRange;
use sluice_remote::reader::RemoteSegmentRef;
use sluice_remote::RemoteError;
use sluice_storage::FileSlice;
use tracing::warn;

use super::compact::segment_key;
use super::Diskless;
use crate::replica::read::FetchedPartition;

/// A partition's offsets, no records.
fn offsets(start: i64, end: i64, lso: i64, error: Option<ErrorCode>) -> FetchedPartition {
    FetchedPartition {
        error,
        high_watermark: Offset(end),
        last_stable_offset: Offset(lso),
        log_start_offset: Offset(start),
        records: None,
        aborted: None,
        bytes_out: None,
        preferred_read_replica: None,
    }
}

/// A diskless partition's offsets, no records, sending its reader to broker `to` (KIP-392's
/// preferred read replica).
pub fn redirect(
    image: &MetadataImage,
    topic_id: &Uuid,
    partition: i32,
    to: i32,
) -> FetchedPartition {
    let (start, end, lso) = image
        .diskless_log(topic_id, partition)
        .map_or((0, 0, 0), |l| {
            (l.start_offset, l.end_offset, l.last_stable_offset())
        });
    FetchedPartition {
        preferred_read_replica: Some(to),
        ..offsets(start, end, lso, None)
    }
}

/// One partition of a consumer's fetch.
pub struct ReadAt {
    pub topic_id: Uuid,
    pub partition: i32,
    pub offset: i64,
    /// At most this many bytes, but a whole first batch when `min_one`.
    pub max_bytes: u64,
    pub min_one: bool,
    pub read_committed: bool,
}

impl Diskless {
    /// A consumer's read of a diskless partition, from one WAL object.
    pub async fn read(&self, image: &MetadataImage, at: ReadAt) -> FetchedPartition {
        let ReadAt {
            topic_id,
            partition,
            offset,
            max_bytes,
            min_one,
            read_committed,
        } = at;
        let log = image.diskless_log(&topic_id, partition);
        let (start, end, lso) = log.map_or((0, 0, 0), |l| {
            (l.start_offset, l.end_offset, l.last_stable_offset())
        });
        if offset < start || offset > end {
            return offsets(start, end, lso, Some(ErrorCode::OffsetOutOfRange));
        }
        let mut answer = offsets(start, end, lso, None);
        if read_committed {
            answer.aborted = Some(Vec::new());
        }
        // read_committed reads below the last stable offset only.
        let upper = if read_committed { lso } else { end };
        let Some(log) = log.filter(|_| offset < upper) else {
            return answer;
        };
        let read = match log.segment_for(offset) {
            Some(seg) => {
                let name = image.topic_by_id(&topic_id).map(|t| t.name.as_str());
                let seg = RemoteSegmentRef {
                    key: segment_key(name.unwrap_or_default(), &topic_id, partition, seg),
                    base_offset: seg.base_offset,
                    end_offset: seg.last_offset,
                    size_bytes: seg.size,
                };
                let r = self.segment_reader();
                match r {
                    Ok(r) => {
                        let read = r.read(&seg, offset, max_bytes, upper, min_one).await;
                        self.count_segment_gets(&r);
                        read.map(|r| r.map(|r| (r.slice, r.next_offset)))
                    }
                    Err(e) => Err(e),
                }
            }
            None => {
                self.read_wal(log, topic_id, partition, offset, upper, max_bytes, min_one)
                    .await
            }
        };
        let (records, read_end) = match read {
            Ok(Some(r)) => r,
            Ok(None) => return answer,
            Err(e) => {
                self.metrics.get_errors.increment(1);
                warn!(%topic_id, partition, offset, error = %e, "cannot read a diskless partition from the store");
                // A store that is away for a moment: the consumer retries; a corrupt object
                // is an error it sees.
                if e.is_corrupt() {
                    answer.error = Some(ErrorCode::KafkaStorageError);
                }
                return answer;
            }
        };
        if read_committed {
            answer.aborted = Some(
                log.aborted_between(offset, read_end)
                    .into_iter()
                    .map(|a| sluice_storage::txn_index::AbortedTxn {
                        producer_id: a.producer_id,
                        first_offset: a.first_offset,
                        last_offset: a.last_offset,
                        last_stable_offset: lso,
                    })
                    .collect(),
            );
        }
        if records.len > 0 {
            answer.records = Some(records);
        }
        answer
    }

    /// The partition's batches from the one holding `offset`, of the WAL object that holds
    /// it, up to `upper`, at most `max_bytes` (but one batch when `min_one`): the bytes and
    /// the offset after them. None when nothing is there.
    #[allow(clippy::too_many_arguments)]
    async fn read_wal(
        &self,
        log: &sluice_metadata::diskless::DisklessLog,
        topic_id: Uuid,
        partition: i32,
        offset: i64,
        upper: i64,
        max_bytes: u64,
        min_one: bool,
    ) -> Result<Option<(FileSlice, i64)>, RemoteError> {
        let mut batches = log.from_offset(offset);
        let Some(first) = batches.next().cloned() else {
            return Ok(None);
        };
        let mut run = vec![first.clone()];
        run.extend(
            batches
                .take_while(|b| b.object_id == first.object_id)
                .cloned(),
        );
        let key = format!(
            "{}/{topic_id}/{partition}/{}",
            first.object_id, first.base_offset
        );
        let range = self.ranges.get_or_fill(&key, || self.cut(&run)).await?;
        let mut len = 0u64;
        let mut read_end = offset;
        for (i, (last, at)) in range.batches.iter().enumerate() {
            if *last >= upper {
                break;
            }
            let next = range
                .batches
                .get(i + 1)
                .map_or(range.len, |(_, p)| *p as u64);
            let size = next - *at as u64;
            if len + size > max_bytes && !(len == 0 && min_one) {
                break;
            }
            len += size;
            read_end = last + 1;
        }
        Ok((len > 0).then(|| {
            (
                FileSlice {
                    file: Arc::clone(&range.file),
                    position: 0,
                    len,
                },
                read_end,
            )
        }))
    }

    /// The batches of `run` (one partition's, in one object, in offset order) as a cache
    /// file with their offsets set.
    async fn cut(&self, run: &[BatchCoord]) -> Result<CachedRange, RemoteError> {
        let object = self.wal_object(&run[0].object_id).await?;
        let mut out = Vec::with_capacity(run.iter().map(|b| b.size as usize).sum());
        let mut index = Vec::with_capacity(run.len());
        for b in run {
            let bytes = Self::batch_bytes(&object, b)?;
            let at = out.len();
            out.extend_from_slice(bytes);
            set_base_offset(&mut out[at..], b.base_offset);
            set_partition_leader_epoch(&mut out[at..], 0);
            index.push((b.last_offset, at as u32));
        }
        self.cache_dir.store(Bytes::from(out), index).await
    }
}
