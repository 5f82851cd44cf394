//! Reads of diskless partitions, on any broker. The image says which WAL object holds an
//! offset; a fetch reads the run of the partition's batches in that object from there on.
//! An object is read from the store once per broker however many partitions and consumers
//! want it (single-flight, kept in memory while the cache has room); the run is cut out of
//! it with the offsets the sequencer assigned written into each batch header (outside the
//! CRC, as a leader's append does), checked, and kept as a local file, so the connection
//! sends it like a log range.

use std::sync::Arc;

use bytes::Bytes;
use sluice_metadata::diskless::BatchCoord;
use sluice_metadata::{MetadataImage, Uuid};
use sluice_protocol::batch::{set_base_offset, set_partition_leader_epoch, verify_crc};
use sluice_protocol::types::Offset;
use sluice_protocol::ErrorCode;
use sluice_remote::cache::CachedRange;
use sluice_remote::RemoteError;
use sluice_storage::FileSlice;
use tracing::warn;

use super::{wal_key, Diskless};
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
        let mut batches = log.from_offset(offset);
        let Some(first) = batches.next().cloned() else {
            return answer;
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
        let range = match self.ranges.get_or_fill(&key, || self.cut(&run)).await {
            Ok(r) => r,
            Err(e) => {
                self.metrics.get_errors.increment(1);
                warn!(object = %first.object_id, partition, offset, error = %e, "cannot read a WAL object");
                // A store that is away for a moment: the consumer retries; a corrupt object
                // is an error it sees.
                if e.is_corrupt() {
                    answer.error = Some(ErrorCode::KafkaStorageError);
                }
                return answer;
            }
        };
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
        if len > 0 {
            answer.records = Some(FileSlice {
                file: Arc::clone(&range.file),
                position: 0,
                len,
            });
        }
        answer
    }

    /// The batches of `run` (one partition's, in one object, in offset order) as a cache
    /// file with their offsets set.
    async fn cut(&self, run: &[BatchCoord]) -> Result<CachedRange, RemoteError> {
        let id = run[0].object_id;
        let key = wal_key(&id);
        self.metrics.object_reads.increment(1);
        let object = self
            .objects
            .get_or_fill(&key, || async {
                self.metrics.gets.increment(1);
                let got = self.store.get()?.get(&key).await?;
                let bytes = got.ok_or_else(|| RemoteError::Corrupt {
                    key: key.clone(),
                    reason: "the WAL object is missing".into(),
                })?;
                self.metrics.get_bytes.increment(bytes.len() as u64);
                Ok::<Bytes, RemoteError>(bytes)
            })
            .await?;
        let mut out = Vec::with_capacity(run.iter().map(|b| b.size as usize).sum());
        let mut index = Vec::with_capacity(run.len());
        for b in run {
            let (from, to) = (b.position as usize, b.position as usize + b.size as usize);
            let corrupt = |reason: String| RemoteError::Corrupt {
                key: key.clone(),
                reason,
            };
            let bytes = object
                .get(from..to)
                .ok_or_else(|| corrupt(format!("{from}..{to} is past its end")))?;
            verify_crc(bytes).map_err(|e| corrupt(format!("batch at {from}: {e}")))?;
            let at = out.len();
            out.extend_from_slice(bytes);
            set_base_offset(&mut out[at..], b.base_offset);
            set_partition_leader_epoch(&mut out[at..], 0);
            index.push((b.last_offset, at as u32));
        }
        self.cache_dir.store(Bytes::from(out), index).await
    }
}
