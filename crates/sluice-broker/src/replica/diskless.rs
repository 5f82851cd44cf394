//! The replica layer's routing of diskless partitions ([`crate::diskless`]): they are hosted
//! nowhere, so produce, fetch and ListOffsets for them go to the broker's diskless handle,
//! with the metadata image as their log's index.

use sluice_metadata::image::PartitionRegistration;
use sluice_metadata::{MetadataImage, Uuid};
use sluice_protocol::types::{LeaderEpoch, Offset, TopicPartition};
use sluice_protocol::ErrorCode;
use sluice_storage::producer_state::{BatchMeta, ProducerEntry};

use super::append::AppendEntry;
use super::manager::ReplicaManager;
use super::queries::{FoundOffset, OffsetSpec};
use super::read::{FetchParams, FetchPartitionRequest, FetchedPartition};
use super::AppendError;
use crate::diskless::read::ReadAt;
use crate::diskless::{is_diskless, DisklessAppended};

/// The topic id and registration of diskless partition `tp` in `image`: None when its
/// topic is not diskless, UNKNOWN_TOPIC_OR_PARTITION when the partition is not there.
fn diskless_partition<'a>(
    image: &'a MetadataImage,
    tp: &TopicPartition,
) -> Option<Result<(Uuid, &'a PartitionRegistration), ErrorCode>> {
    if !is_diskless(image, &tp.topic) {
        return None;
    }
    Some(
        image
            .topic(&tp.topic)
            .and_then(|t| t.partitions.get(&tp.partition.0).map(|r| (t.id, r)))
            .ok_or(ErrorCode::UnknownTopicOrPartition),
    )
}

impl ReplicaManager {
    /// Whether `topic` is a diskless topic.
    pub fn is_diskless(&self, topic: &str) -> bool {
        is_diskless(&self.metadata().current(), topic)
    }

    /// Append to diskless partitions: answers in entry order, once durable in the store and
    /// committed by the sequencer (whatever `acks`).
    pub async fn append_diskless(
        &self,
        entries: Vec<AppendEntry>,
    ) -> Vec<Result<DisklessAppended, AppendError>> {
        match self.diskless() {
            Some(d) => {
                d.append(entries.into_iter().map(|e| (e.tp, e.records)).collect())
                    .await
            }
            None => entries
                .iter()
                .map(|_| {
                    Err(AppendError::Code(
                        ErrorCode::UnknownTopicOrPartition,
                        "this broker does not serve diskless topics".into(),
                    ))
                })
                .collect(),
        }
    }

    /// A consumer fetch naming diskless partitions: those are read from the store (waiting,
    /// when nothing is there, for the metadata image to change), the others as usual.
    pub(super) async fn fetch_with_diskless(
        &self,
        params: FetchParams,
        partitions: Vec<FetchPartitionRequest>,
    ) -> Vec<FetchedPartition> {
        let Some(d) = self.diskless().cloned() else {
            return self.fetch_local(params, partitions).await;
        };
        let deadline = tokio::time::Instant::now() + params.max_wait;
        let (dl, classic): (Vec<usize>, Vec<usize>) = {
            let image = self.metadata().current();
            (0..partitions.len()).partition(|i| is_diskless(&image, &partitions[*i].tp.topic))
        };
        loop {
            let image = self.metadata().current();
            let last_look = tokio::time::Instant::now() >= deadline;
            let mut total = 0u64;
            let mut answers = Vec::with_capacity(dl.len());
            for &i in &dl {
                let p = &partitions[i];
                let budget = p.max_bytes.min(params.max_bytes.saturating_sub(total));
                let topic_id = image
                    .topic(&p.tp.topic)
                    .filter(|t| t.partitions.contains_key(&p.tp.partition.0))
                    .map(|t| t.id);
                let a = match topic_id {
                    None => FetchedPartition::error(ErrorCode::UnknownTopicOrPartition),
                    Some(id) => {
                        let at = ReadAt {
                            topic_id: id,
                            partition: p.tp.partition.0,
                            offset: p.fetch_offset.0,
                            max_bytes: budget,
                            min_one: total == 0,
                            read_committed: params.read_committed,
                        };
                        let mut a = d.read(&image, at).await;
                        // Past the end here may be an image a moment behind the one the
                        // offset came from: out of range only once the wait is over.
                        if a.error == Some(ErrorCode::OffsetOutOfRange)
                            && p.fetch_offset.0 > a.high_watermark.0
                            && !last_look
                        {
                            a.error = None;
                        }
                        a
                    }
                };
                total += a.records_len();
                answers.push(a);
            }
            let done =
                total >= params.min_bytes || answers.iter().any(|a| a.error.is_some()) || last_look;
            if classic.is_empty() && !done {
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                self.metadata()
                    .wait_for_offset(image.offset + 1, left)
                    .await;
                continue;
            }
            let mut out: Vec<Option<FetchedPartition>> = vec![None; partitions.len()];
            if !classic.is_empty() {
                let now = tokio::time::Instant::now();
                let sub = FetchParams {
                    min_bytes: params.min_bytes.saturating_sub(total),
                    max_bytes: params.max_bytes.saturating_sub(total).max(1),
                    max_wait: if done {
                        std::time::Duration::ZERO
                    } else {
                        deadline.saturating_duration_since(now)
                    },
                    ..params
                };
                let reqs = classic.iter().map(|i| partitions[*i].clone()).collect();
                for (i, a) in classic.iter().zip(self.fetch_local(sub, reqs).await) {
                    out[*i] = Some(a);
                }
            }
            for (i, a) in dl.iter().zip(answers) {
                out[*i] = Some(a);
            }
            return out
                .into_iter()
                .map(|a| {
                    a.unwrap_or_else(|| FetchedPartition::error(ErrorCode::UnknownServerError))
                })
                .collect();
        }
    }

    /// ListOffsets of a diskless partition; None when `tp` is not one. Timestamps are
    /// found to the batch (the first batch holding a record at or after the time); in a
    /// segment object, [`Self::diskless_offset_for_timestamp`] finds the record.
    pub fn list_diskless_offset(
        &self,
        tp: &TopicPartition,
        spec: OffsetSpec,
        read_committed: bool,
    ) -> Option<Result<FoundOffset, ErrorCode>> {
        let image = self.metadata().current();
        let (id, reg) = match diskless_partition(&image, tp)? {
            Ok(found) => found,
            Err(code) => return Some(Err(code)),
        };
        let epoch = LeaderEpoch(reg.leader_epoch);
        let log = image.diskless_log(&id, tp.partition.0);
        let (start, end) = log.map_or((0, 0), |l| (l.start_offset, l.end_offset));
        let visible = match log {
            Some(l) if read_committed => l.last_stable_offset(),
            _ => end,
        };
        let none = (Offset::NONE, -1, LeaderEpoch::NONE);
        Some(Ok(match spec {
            OffsetSpec::Latest => (Offset(visible), -1, epoch),
            OffsetSpec::Earliest | OffsetSpec::EarliestLocal => (Offset(start), -1, epoch),
            OffsetSpec::LatestTiered => none,
            OffsetSpec::MaxTimestamp => log.and_then(|l| l.max_timestamp()).map_or(none, |b| {
                (Offset(b.max_timestamp_offset), b.max_timestamp_ms, epoch)
            }),
            OffsetSpec::Timestamp(t) => log
                .and_then(|l| l.first_at_or_after(t))
                .filter(|b| b.base_offset < visible)
                .map_or(none, |b| (Offset(b.base_offset), b.max_timestamp_ms, epoch)),
        }))
    }

    /// ListOffsets by timestamp of a diskless partition whose answer is in a segment object:
    /// the first record there at or after `target`, read through the segment's time index
    /// (as a tiered segment is searched). None when `tp` is not diskless; Some(None) when
    /// the batch-level answer stands.
    pub async fn diskless_offset_for_timestamp(
        &self,
        tp: &TopicPartition,
        target: i64,
        read_committed: bool,
    ) -> Option<Option<(i64, i64, i32)>> {
        let image = self.metadata().current();
        let Ok((id, reg)) = diskless_partition(&image, tp)? else {
            return Some(None);
        };
        let d = self.diskless()?;
        let log = image.diskless_log(&id, tp.partition.0)?;
        let visible = if read_committed {
            log.last_stable_offset()
        } else {
            log.end_offset
        };
        let span = log.first_at_or_after(target)?;
        let seg = log
            .segment_for(span.base_offset)
            .filter(|s| s.base_offset == span.base_offset && s.last_offset == span.last_offset)?;
        let seg = sluice_remote::reader::RemoteSegmentRef {
            key: crate::diskless::compact::segment_key(&tp.topic, &id, tp.partition.0, seg),
            base_offset: seg.base_offset,
            end_offset: seg.last_offset,
            size_bytes: seg.size,
        };
        let found = match d.segment_reader() {
            Ok(r) => {
                let found = r.offset_for_timestamp(&seg, target, log.start_offset).await;
                d.count_segment_gets(&r);
                found
            }
            Err(e) => Err(e),
        };
        match found {
            Ok(Some((offset, ts))) if offset < visible => {
                Some(Some((offset, ts, reg.leader_epoch)))
            }
            Ok(_) => Some(None),
            Err(e) => {
                tracing::warn!(partition = %tp, target, error = %e, "cannot search a diskless segment by time");
                Some(None)
            }
        }
    }

    /// Where retention moves diskless partitions' log starts: the topic's `retention.ms`
    /// (a segment or batch whose newest record is older goes) and `retention.bytes` (the
    /// oldest go while the rest is at least that big), as for any log, and never past the
    /// last stable offset. (topic id, partition, new start) of those that move.
    pub fn diskless_retention(&self, image: &MetadataImage, now_ms: i64) -> Vec<(Uuid, i32, i64)> {
        let effective = self.metadata().config_for(image).1;
        let mut out = Vec::new();
        for name in &image.diskless_topics {
            let Some(t) = image.topic(name) else {
                continue;
            };
            let (config, _) = super::manager::log_config(&effective, &image.topic_configs(name));
            if !config.cleanup_delete {
                continue;
            }
            for p in t.partitions.keys() {
                let Some(log) = image.diskless_log(&t.id, *p) else {
                    continue;
                };
                let stable = log.last_stable_offset();
                let mut size = log.size_bytes() as i64;
                let mut start = log.start_offset;
                for b in log.spans() {
                    let old = config.retention_ms >= 0
                        && now_ms.saturating_sub(b.max_timestamp_ms) > config.retention_ms;
                    let over = config.retention_bytes >= 0
                        && size - b.size as i64 >= config.retention_bytes;
                    if b.last_offset >= stable || !(old || over) {
                        break;
                    }
                    size -= b.size as i64;
                    start = b.last_offset + 1;
                }
                if start > log.start_offset {
                    out.push((t.id, *p, start));
                }
            }
        }
        out
    }

    /// Diskless retention and WAL garbage (see [`crate::diskless::cleaner`]), when this broker
    /// is the one that cleans.
    pub async fn clean_diskless(&self, now_ms: i64) {
        let Some(d) = self.diskless().cloned() else {
            return;
        };
        let image = self.metadata().current();
        if !crate::diskless::Diskless::cleans(&image, self.node_id()) {
            return;
        }
        let trims = self.diskless_retention(&image, now_ms);
        d.clean(trims).await;
    }

    /// Diskless WAL compaction (see [`crate::diskless::compact`]), then the garbage it
    /// leaves, when this broker is the one that cleans.
    pub async fn compact_diskless(&self) {
        let Some(d) = self.diskless().cloned() else {
            return;
        };
        let image = self.metadata().current();
        if image.diskless.is_empty() || !crate::diskless::Diskless::cleans(&image, self.node_id()) {
            return;
        }
        let effective = self.metadata().config_for(&image).1;
        let segment_bytes = |topic: &str| {
            let (config, _) = super::manager::log_config(&effective, &image.topic_configs(topic));
            config.segment_bytes
        };
        let made = d.compact(&image, segment_bytes).await;
        if made > 0 {
            tracing::info!(
                segments = made,
                "diskless WAL compaction made segment objects"
            );
        }
        if let Err(e) = d.collect_garbage().await {
            tracing::warn!(error = %e, "diskless garbage collection failed");
        }
    }

    /// DeleteRecords of a diskless partition (`offset` -1: its end); None when `tp` is not
    /// one. The new low watermark once the controller took it.
    pub async fn diskless_delete_records(
        &self,
        tp: &TopicPartition,
        offset: i64,
    ) -> Option<Result<Offset, ErrorCode>> {
        let image = self.metadata().current();
        let id = match diskless_partition(&image, tp)? {
            Ok((id, _)) => id,
            Err(code) => return Some(Err(code)),
        };
        let d = self.diskless().cloned()?;
        let (start, end) = image
            .diskless_log(&id, tp.partition.0)
            .map_or((0, 0), |l| (l.start_offset, l.end_offset));
        let offset = if offset == -1 { end } else { offset };
        if offset < 0 || offset > end {
            return Some(Err(ErrorCode::OffsetOutOfRange));
        }
        Some(match d.trim(&[(id, tp.partition.0, offset)]).await.pop() {
            Some(Ok(())) => Ok(Offset(offset.max(start))),
            Some(Err(e)) => Err(e.code),
            None => Err(ErrorCode::UnknownServerError),
        })
    }

    /// DescribeProducers of a diskless partition, from the sequencer's state in the image;
    /// None when `tp` is not one. A batch's offsets and timestamp come from its coordinates
    /// (a batch gone by retention keeps its sequences, with no timestamp).
    pub fn diskless_producers(
        &self,
        tp: &TopicPartition,
    ) -> Option<Result<Vec<(i64, ProducerEntry)>, ErrorCode>> {
        let image = self.metadata().current();
        let id = match diskless_partition(&image, tp)? {
            Ok((id, _)) => id,
            Err(code) => return Some(Err(code)),
        };
        let Some(log) = image.diskless_log(&id, tp.partition.0) else {
            return Some(Ok(Vec::new()));
        };
        let mut out: Vec<(i64, ProducerEntry)> = log
            .producers
            .iter()
            .map(|(pid, seqs)| {
                let batches = seqs
                    .recent
                    .iter()
                    .map(|(first_seq, last_seq, base)| {
                        let b = log
                            .from_offset(*base)
                            .next()
                            .filter(|b| b.base_offset == *base);
                        BatchMeta {
                            first_seq: *first_seq,
                            last_seq: *last_seq,
                            first_offset: *base,
                            last_offset: b.map_or(*base, |b| b.last_offset),
                            timestamp: b.map_or(-1, |b| b.max_timestamp_ms),
                        }
                    })
                    .collect();
                let entry = ProducerEntry {
                    epoch: seqs.epoch,
                    last_timestamp: seqs
                        .recent
                        .back()
                        .and_then(|(_, _, base)| {
                            log.from_offset(*base)
                                .next()
                                .filter(|b| b.base_offset == *base)
                        })
                        .map_or(-1, |b| b.max_timestamp_ms),
                    batches,
                    coordinator_epoch: -1,
                    txn_first_offset: log.ongoing.get(pid).copied(),
                };
                (*pid, entry)
            })
            .collect();
        out.sort_by_key(|(pid, _)| *pid);
        Some(Ok(out))
    }

    /// OffsetForLeaderEpoch of a diskless partition; None when `tp` is not one. Its log is
    /// never truncated (offsets come from the sequencer), so whatever epoch a consumer asks
    /// about, up to the partition's current one, ends at the log end: a position never lies
    /// beyond it (KIP-320 finds no truncation). `current_leader_epoch` is checked as a
    /// leader checks it, against the epoch Metadata shows.
    pub fn diskless_epoch_end(
        &self,
        tp: &TopicPartition,
        current_leader_epoch: LeaderEpoch,
        epoch: LeaderEpoch,
    ) -> Option<Result<Option<(LeaderEpoch, Offset)>, ErrorCode>> {
        let image = self.metadata().current();
        let (id, reg) = match diskless_partition(&image, tp)? {
            Ok(found) => found,
            Err(code) => return Some(Err(code)),
        };
        let current = current_leader_epoch.0;
        if current >= 0 && current < reg.leader_epoch {
            return Some(Err(ErrorCode::FencedLeaderEpoch));
        }
        if current > reg.leader_epoch {
            return Some(Err(ErrorCode::UnknownLeaderEpoch));
        }
        if epoch.0 < 0 {
            return Some(Ok(None));
        }
        let end = image
            .diskless_log(&id, tp.partition.0)
            .map_or(0, |l| l.end_offset);
        Some(Ok(Some((
            LeaderEpoch(epoch.0.min(reg.leader_epoch)),
            Offset(end),
        ))))
    }

    /// Transactions v2 for a diskless partition: whether the producer's transaction is open
    /// there (at `epoch`); None when `tp` is not diskless.
    pub fn diskless_in_open_txn(
        &self,
        tp: &TopicPartition,
        producer_id: i64,
        epoch: i16,
    ) -> Option<bool> {
        let image = self.metadata().current();
        if !is_diskless(&image, &tp.topic) {
            return None;
        }
        let open = image
            .topic(&tp.topic)
            .and_then(|t| image.diskless_log(&t.id, tp.partition.0))
            .is_some_and(|l| {
                l.in_open_txn(producer_id)
                    && l.producers
                        .get(&producer_id)
                        .is_some_and(|p| p.epoch == epoch)
            });
        Some(open)
    }

    /// WriteTxnMarkers for diskless partitions: each marker's offset, once committed.
    pub async fn append_diskless_markers(
        &self,
        targets: Vec<(TopicPartition, sluice_storage::Marker)>,
    ) -> Vec<Result<DisklessAppended, AppendError>> {
        match self.diskless() {
            Some(d) => d.append_markers(targets).await,
            None => targets
                .iter()
                .map(|_| {
                    Err(AppendError::Code(
                        ErrorCode::UnknownTopicOrPartition,
                        "this broker does not serve diskless topics".into(),
                    ))
                })
                .collect(),
        }
    }
}
