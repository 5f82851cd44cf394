//! Diskless topics (`diskless.enable=true`): the object store is the partition's log. Any
//! broker takes produce for any partition, writes the batches of many partitions into one
//! shared WAL object, then asks the active controller (the sequencer) to commit them: the
//! controller assigns each batch its offsets, checks idempotent producers' sequences, and
//! appends the result to the metadata log as [`crate::MetadataRecord::DisklessBatches`].
//! Every node applies it to its image, so any broker can serve a fetch: the image says which
//! object and byte range holds which offsets.
//!
//! Why the metadata log: it is already replicated, ordered and durable on every node, the
//! controller serializes writes (so offsets are assigned without a second consensus), and
//! snapshots bound its replay. Its limits: each commit is one Raft entry (a few hundred per
//! second on loopback, far above one per broker per `diskless.append.linger.ms`), and the
//! image holds every batch's coordinates (about 80 bytes each) until WAL compaction
//! replaces them with segment objects.
//!
//! WAL compaction: the cleaning broker copies a partition's committed batches out of the
//! shared WAL objects into one per-partition segment object in Kafka's segment format (with
//! its `.index` and `.timeindex`, read by the tiered-storage reader), then asks the sequencer
//! to swap them: [`crate::MetadataRecord::DisklessSegment`] replaces the batches' coordinates
//! with the segment's, one entry however many batches. A partition's log is its segments,
//! then the batches not compacted yet. Producer state and transactions do not depend on
//! them: the sequencer's state is kept as is (a snapshot writes it whole,
//! [`crate::MetadataRecord::DisklessState`]).
//!
//! Idempotence follows Kafka's `ProducerAppendInfo`: per producer the epoch and the last five
//! batches' sequence ranges; a retried batch is answered with the offset it got the first
//! time, a gap is OUT_OF_ORDER_SEQUENCE_NUMBER, an old epoch INVALID_PRODUCER_EPOCH.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use uuid::Uuid;

/// Batches kept per producer for duplicate detection (Kafka's `NUM_BATCHES_TO_RETAIN`).
pub const PRODUCER_BATCHES_KEPT: usize = 5;
/// Batch coordinates per shared chunk of a partition's list (an image is cloned on every
/// change: a commit copies the last chunk only).
const CHUNK: usize = 512;

/// What a batch is, for transactions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BatchKind {
    #[default]
    Data,
    /// Records of a producer's transaction.
    TxnData,
    /// A transaction marker (a control batch the coordinator asked for).
    Abort,
    Commit,
}

impl BatchKind {
    pub fn code(self) -> u8 {
        match self {
            BatchKind::Data => 0,
            BatchKind::TxnData => 1,
            BatchKind::Abort => 2,
            BatchKind::Commit => 3,
        }
    }

    pub fn from_code(c: u8) -> Option<Self> {
        Some(match c {
            0 => BatchKind::Data,
            1 => BatchKind::TxnData,
            2 => BatchKind::Abort,
            3 => BatchKind::Commit,
            _ => return None,
        })
    }

    pub fn is_marker(self) -> bool {
        matches!(self, BatchKind::Abort | BatchKind::Commit)
    }
}

/// An aborted transaction of one partition: its producer and its first and last offsets
/// (the abort marker's), what read_committed fetches list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
}

/// Where one committed batch is, and what the sequencer needs to know of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchCoord {
    pub base_offset: i64,
    pub last_offset: i64,
    /// The WAL object holding it, and its byte range there.
    pub object_id: Uuid,
    pub position: u32,
    pub size: u32,
    pub max_timestamp_ms: i64,
    /// -1 when not idempotent.
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub kind: BatchKind,
}

impl BatchCoord {
    pub fn record_count(&self) -> i64 {
        self.last_offset - self.base_offset + 1
    }
}

/// A batch a broker wrote to a WAL object and asks to commit (offsets not yet assigned).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalBatch {
    pub topic_id: Uuid,
    pub partition: i32,
    pub position: u32,
    pub size: u32,
    /// Records in it (the batch's last offset delta + 1).
    pub record_count: i32,
    pub max_timestamp_ms: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub kind: BatchKind,
}

/// What the sequencer answers for one batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sequenced {
    /// Committed at this base offset.
    New(i64),
    /// A retry of a batch committed before at this base offset: not written again.
    Duplicate(i64),
}

/// Why the sequencer refused a batch (the produce error for its partition).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqError {
    UnknownPartition,
    NotDiskless,
    OutOfOrderSequence,
    InvalidProducerEpoch,
    InvalidRecord,
}

/// One producer's state in one partition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerSeqs {
    pub epoch: i16,
    /// (first sequence, last sequence, base offset) of its last batches, oldest first.
    pub recent: VecDeque<(i32, i32, i64)>,
}

impl ProducerSeqs {
    fn last_sequence(&self) -> Option<i32> {
        self.recent.back().map(|(_, last, _)| *last)
    }

    fn duplicate_of(&self, epoch: i16, first: i32, last: i32) -> Option<i64> {
        (epoch == self.epoch)
            .then(|| {
                self.recent
                    .iter()
                    .find(|(f, l, _)| (*f, *l) == (first, last))
                    .map(|(_, _, o)| *o)
            })
            .flatten()
    }

    /// Kafka's `ProducerAppendInfo.checkProducerEpoch` and `checkSequence` for a client's
    /// batch (after the duplicate check).
    fn check(&self, known: bool, epoch: i16, first: i32) -> Result<(), SeqError> {
        if known && epoch < self.epoch {
            return Err(SeqError::InvalidProducerEpoch);
        }
        if !known || epoch != self.epoch {
            // A new epoch starts at sequence 0; a producer never seen (or whose state was
            // removed) may start anywhere.
            return if first != 0 && known {
                Err(SeqError::OutOfOrderSequence)
            } else {
                Ok(())
            };
        }
        match self.last_sequence() {
            None if first != 0 => Err(SeqError::OutOfOrderSequence),
            None => Ok(()),
            Some(last) if next_sequence(last) == first => Ok(()),
            Some(_) => Err(SeqError::OutOfOrderSequence),
        }
    }

    fn record(&mut self, epoch: i16, first: i32, last: i32, base_offset: i64) {
        if epoch != self.epoch {
            self.recent.clear();
            self.epoch = epoch;
        }
        self.recent.push_back((first, last, base_offset));
        while self.recent.len() > PRODUCER_BATCHES_KEPT {
            self.recent.pop_front();
        }
    }
}

/// The sequence after `seq` (wrapping at i32::MAX to 0, as Kafka).
fn next_sequence(seq: i32) -> i32 {
    if seq == i32::MAX {
        0
    } else {
        seq + 1
    }
}

/// The last sequence of a batch of `count` records starting at `first`.
fn last_sequence(first: i32, count: i32) -> i32 {
    ((first as i64 + count as i64 - 1) % (i32::MAX as i64 + 1)) as i32
}

/// A segment object WAL compaction made of a run of one partition's batches: Kafka's
/// segment format, offsets set, under [`SegmentCoord::key`]'s name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentCoord {
    /// Drawn at each compaction, so two attempts at the same range never share a name.
    pub segment_id: Uuid,
    pub base_offset: i64,
    pub last_offset: i64,
    /// Bytes of its `.log` object.
    pub size: u64,
    pub max_timestamp_ms: i64,
    /// The last offset of the batch holding the largest timestamp.
    pub max_timestamp_offset: i64,
}

/// What retention and ListOffsets see of a log: a segment or a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub base_offset: i64,
    pub last_offset: i64,
    pub size: u64,
    pub max_timestamp_ms: i64,
    /// Where the largest timestamp is (a batch: its last offset).
    pub max_timestamp_offset: i64,
}

impl From<&SegmentCoord> for Span {
    fn from(s: &SegmentCoord) -> Self {
        Span {
            base_offset: s.base_offset,
            last_offset: s.last_offset,
            size: s.size,
            max_timestamp_ms: s.max_timestamp_ms,
            max_timestamp_offset: s.max_timestamp_offset,
        }
    }
}

impl From<&BatchCoord> for Span {
    fn from(b: &BatchCoord) -> Self {
        Span {
            base_offset: b.base_offset,
            last_offset: b.last_offset,
            size: u64::from(b.size),
            max_timestamp_ms: b.max_timestamp_ms,
            max_timestamp_offset: b.last_offset,
        }
    }
}

/// One diskless partition's log as the metadata says it: its segment objects, then the
/// batches still in WAL objects, in offset order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DisklessLog {
    pub start_offset: i64,
    /// The next offset to assign (the high watermark: what is committed is readable).
    pub end_offset: i64,
    pub segments: Vec<SegmentCoord>,
    chunks: Vec<Arc<Vec<BatchCoord>>>,
    pub producers: HashMap<i64, ProducerSeqs>,
    /// Open transactions: producer id -> the first offset it wrote in it.
    pub ongoing: BTreeMap<i64, i64>,
    /// Aborted transactions, in the order their markers were written.
    pub aborted: Vec<AbortedTxn>,
}

impl DisklessLog {
    pub fn batch_count(&self) -> usize {
        self.chunks.iter().map(|c| c.len()).sum()
    }

    pub fn batches(&self) -> impl Iterator<Item = &BatchCoord> {
        self.chunks.iter().flat_map(|c| c.iter())
    }

    /// Its segments and batches, in offset order.
    pub fn spans(&self) -> impl Iterator<Item = Span> + '_ {
        self.segments
            .iter()
            .map(Span::from)
            .chain(self.batches().map(Span::from))
    }

    /// Bytes of its segments and batches.
    pub fn size_bytes(&self) -> u64 {
        self.spans().map(|s| s.size).sum()
    }

    /// The segment holding `offset`, if a segment does.
    pub fn segment_for(&self, offset: i64) -> Option<&SegmentCoord> {
        // Segments are contiguous: the first ending at or after `offset` holds it.
        let i = self.segments.partition_point(|s| s.last_offset < offset);
        self.segments.get(i)
    }

    /// Whether `seg` can replace the batches it was made of: the log's batches start at
    /// its base offset and one of them ends at its last. (A trim or another compaction in
    /// between makes it stale.)
    pub fn can_compact(&self, seg: &SegmentCoord) -> Result<(), String> {
        let first = self.batches().next().map(|b| b.base_offset);
        if first != Some(seg.base_offset) {
            return Err(format!(
                "the log's first batch not compacted starts at {first:?}, not {}",
                seg.base_offset
            ));
        }
        if self
            .from_offset(seg.last_offset)
            .next()
            .is_none_or(|b| b.last_offset != seg.last_offset)
        {
            return Err(format!("no batch ends at {}", seg.last_offset));
        }
        Ok(())
    }

    /// Apply a compaction: `seg` replaces the batches it was made of when it still can
    /// ([`Self::can_compact`]), or, on a log with no batches, follows its segments (a
    /// snapshot read back). Anything else is stale and changes nothing.
    pub fn compact(&mut self, seg: &SegmentCoord) {
        if self.can_compact(seg).is_ok() {
            let kept: Vec<BatchCoord> = self.from_offset(seg.last_offset + 1).cloned().collect();
            self.chunks = kept.chunks(CHUNK).map(|c| Arc::new(c.to_vec())).collect();
            self.segments.push(seg.clone());
        } else if self.batch_count() == 0
            && (seg.base_offset == self.end_offset || *self == DisklessLog::default())
        {
            if *self == DisklessLog::default() {
                self.start_offset = seg.base_offset;
            }
            self.end_offset = seg.last_offset + 1;
            self.segments.push(seg.clone());
        }
    }

    /// Distinct WAL objects its batches are in.
    pub fn object_count(&self) -> usize {
        let mut ids: Vec<Uuid> = self.batches().map(|b| b.object_id).collect();
        ids.sort_unstable();
        ids.dedup();
        ids.len()
    }

    /// The batches from the one holding `offset` on, in offset order.
    pub fn from_offset(&self, offset: i64) -> impl Iterator<Item = &BatchCoord> {
        let chunk = self
            .chunks
            .partition_point(|c| c.last().is_some_and(|b| b.last_offset < offset));
        self.chunks[chunk..]
            .iter()
            .flat_map(|c| c.iter())
            .skip_while(move |b| b.last_offset < offset)
    }

    /// The first segment or batch whose largest timestamp is at least `ts` (ListOffsets by
    /// time).
    pub fn first_at_or_after(&self, ts: i64) -> Option<Span> {
        self.spans().find(|b| b.max_timestamp_ms >= ts)
    }

    /// The segment or batch with the largest timestamp (ListOffsets MAX_TIMESTAMP): the
    /// first of equals.
    pub fn max_timestamp(&self) -> Option<Span> {
        self.spans().fold(None, |best: Option<Span>, b| match best {
            Some(x) if x.max_timestamp_ms >= b.max_timestamp_ms => Some(x),
            _ => Some(b),
        })
    }

    /// The last stable offset: below the first open transaction, else the end.
    pub fn last_stable_offset(&self) -> i64 {
        self.ongoing
            .values()
            .copied()
            .min()
            .unwrap_or(self.end_offset)
    }

    /// Whether `producer_id` has a transaction open here.
    pub fn in_open_txn(&self, producer_id: i64) -> bool {
        self.ongoing.contains_key(&producer_id)
    }

    /// The aborted transactions a read of `from..to` must know of.
    pub fn aborted_between(&self, from: i64, to: i64) -> Vec<AbortedTxn> {
        self.aborted
            .iter()
            .filter(|a| a.last_offset >= from && a.first_offset < to)
            .copied()
            .collect()
    }

    /// Append a batch; `fresh`: the first of an empty log read from a snapshot, which starts
    /// where that batch does.
    pub fn push_first(&mut self, b: BatchCoord, fresh: bool) {
        if fresh {
            self.start_offset = b.base_offset;
            self.end_offset = b.base_offset;
        }
        self.push(b);
    }

    /// This log from `start` on: the segments and batches wholly below it dropped, and the
    /// aborted transactions that end below it. Producers' state and open transactions stay
    /// (as Kafka keeps a producer's state when its batches are deleted). Nothing ends past
    /// the end: a `start` beyond it moves the end there.
    pub fn trim(&mut self, start: i64) {
        if start <= self.start_offset {
            return;
        }
        self.start_offset = start;
        self.end_offset = self.end_offset.max(start);
        self.segments.retain(|s| s.last_offset >= start);
        if self.batches().next().is_some_and(|b| b.last_offset < start) {
            let kept: Vec<BatchCoord> = self.from_offset(start).cloned().collect();
            self.chunks = kept.chunks(CHUNK).map(|c| Arc::new(c.to_vec())).collect();
        }
        self.aborted.retain(|a| a.last_offset >= start);
    }

    /// The sequencer's state (a snapshot's [`crate::MetadataRecord::DisklessState`]).
    pub fn state(&self) -> LogState {
        let mut producers: Vec<_> = self
            .producers
            .iter()
            .map(|(pid, p)| (*pid, p.clone()))
            .collect();
        producers.sort_by_key(|(pid, _)| *pid);
        LogState {
            start_offset: self.start_offset,
            end_offset: self.end_offset,
            producers,
            ongoing: self.ongoing.iter().map(|(p, o)| (*p, *o)).collect(),
            aborted: self.aborted.clone(),
        }
    }

    /// Take the sequencer's state as a snapshot wrote it (after its segments and batches).
    pub fn set_state(&mut self, s: &LogState) {
        self.start_offset = s.start_offset;
        self.end_offset = s.end_offset;
        self.producers = s.producers.iter().cloned().collect();
        self.ongoing = s.ongoing.iter().copied().collect();
        self.aborted = s.aborted.clone();
    }

    /// Append a committed batch (the sequencer's decision, applied by every node).
    pub fn push(&mut self, b: BatchCoord) {
        debug_assert_eq!(
            b.base_offset, self.end_offset,
            "diskless offsets are contiguous"
        );
        self.end_offset = b.last_offset + 1;
        match b.kind {
            BatchKind::TxnData => {
                self.ongoing.entry(b.producer_id).or_insert(b.base_offset);
            }
            BatchKind::Abort | BatchKind::Commit => {
                let first = self.ongoing.remove(&b.producer_id);
                if let (BatchKind::Abort, Some(first_offset)) = (b.kind, first) {
                    self.aborted.push(AbortedTxn {
                        producer_id: b.producer_id,
                        first_offset,
                        last_offset: b.last_offset,
                    });
                }
                let p = self.producers.entry(b.producer_id).or_default();
                if b.producer_epoch > p.epoch {
                    p.epoch = b.producer_epoch;
                    p.recent.clear();
                }
            }
            BatchKind::Data => {}
        }
        if b.producer_id >= 0 && !b.kind.is_marker() {
            let count = b.record_count() as i32;
            self.producers.entry(b.producer_id).or_default().record(
                b.producer_epoch,
                b.base_sequence,
                last_sequence(b.base_sequence, count),
                b.base_offset,
            );
        }
        match self.chunks.last_mut() {
            Some(c) if c.len() < CHUNK => Arc::make_mut(c).push(b),
            _ => self.chunks.push(Arc::new(vec![b])),
        }
    }

    /// Decide `b`'s offsets as the next batch of this log.
    pub fn sequence(&self, b: &WalBatch) -> Result<Sequenced, SeqError> {
        if b.record_count <= 0 {
            return Err(SeqError::InvalidRecord);
        }
        if b.kind.is_marker() {
            // The coordinator's marker: fenced only by a newer epoch already written.
            return match self.producers.get(&b.producer_id) {
                Some(p) if b.producer_epoch < p.epoch => Err(SeqError::InvalidProducerEpoch),
                _ => Ok(Sequenced::New(self.end_offset)),
            };
        }
        if b.producer_id < 0 {
            return Ok(Sequenced::New(self.end_offset));
        }
        let last = last_sequence(b.base_sequence, b.record_count);
        let known = self.producers.get(&b.producer_id);
        if let Some(o) = known.and_then(|p| p.duplicate_of(b.producer_epoch, b.base_sequence, last))
        {
            return Ok(Sequenced::Duplicate(o));
        }
        let empty = ProducerSeqs::default();
        known
            .unwrap_or(&empty)
            .check(known.is_some(), b.producer_epoch, b.base_sequence)?;
        Ok(Sequenced::New(self.end_offset))
    }
}

/// A diskless log's offsets, producers and transactions, as a snapshot writes them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogState {
    pub start_offset: i64,
    pub end_offset: i64,
    pub producers: Vec<(i64, ProducerSeqs)>,
    pub ongoing: Vec<(i64, i64)>,
    pub aborted: Vec<AbortedTxn>,
}

/// The coordinates of the batches `b` as committed at `base_offset`.
pub fn coord(b: &WalBatch, object_id: Uuid, base_offset: i64) -> BatchCoord {
    BatchCoord {
        base_offset,
        last_offset: base_offset + b.record_count as i64 - 1,
        object_id,
        position: b.position,
        size: b.size,
        max_timestamp_ms: b.max_timestamp_ms,
        producer_id: b.producer_id,
        producer_epoch: b.producer_epoch,
        base_sequence: b.base_sequence,
        kind: b.kind,
    }
}

/// Batches to commit: (topic id, partition, coordinates).
pub type Commit = Vec<(Uuid, i32, BatchCoord)>;

/// Sequence one WAL object's batches against `logs` (the image's diskless logs), in order:
/// per batch its outcome, and the batches to commit as (topic id, partition, coordinates).
/// `is_diskless` says whether a partition exists and belongs to a diskless topic.
pub fn sequence_object(
    logs: &std::collections::BTreeMap<(Uuid, i32), Arc<DisklessLog>>,
    is_diskless: impl Fn(&Uuid, i32) -> Result<(), SeqError>,
    object_id: Uuid,
    batches: &[WalBatch],
) -> (Vec<Result<Sequenced, SeqError>>, Commit) {
    // Later batches of the same partition see the earlier ones of this object.
    let mut scratch: HashMap<(Uuid, i32), DisklessLog> = HashMap::new();
    let mut out = Vec::with_capacity(batches.len());
    let mut commit = Vec::new();
    for b in batches {
        if let Err(e) = is_diskless(&b.topic_id, b.partition) {
            out.push(Err(e));
            continue;
        }
        let key = (b.topic_id, b.partition);
        let log = scratch.entry(key).or_insert_with(|| {
            logs.get(&key)
                .map(|l| DisklessLog {
                    start_offset: l.start_offset,
                    end_offset: l.end_offset,
                    segments: Vec::new(),
                    chunks: Vec::new(),
                    producers: l.producers.clone(),
                    ongoing: l.ongoing.clone(),
                    aborted: Vec::new(),
                })
                .unwrap_or_default()
        });
        let r = log.sequence(b);
        if let Ok(Sequenced::New(base)) = r {
            let c = coord(b, object_id, base);
            log.push(c.clone());
            commit.push((b.topic_id, b.partition, c));
        }
        out.push(r);
    }
    (out, commit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn batch(pid: i64, epoch: i16, seq: i32, count: i32) -> WalBatch {
        WalBatch {
            topic_id: Uuid::from_bytes([1; 16]),
            partition: 0,
            position: 0,
            size: 100,
            record_count: count,
            max_timestamp_ms: 5,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            kind: BatchKind::Data,
        }
    }

    fn commit(
        logs: &mut BTreeMap<(Uuid, i32), Arc<DisklessLog>>,
        batches: &[WalBatch],
    ) -> Vec<Result<Sequenced, SeqError>> {
        let (out, coords) = sequence_object(logs, |_, _| Ok(()), Uuid::new_v4(), batches);
        for (t, p, c) in coords {
            Arc::make_mut(logs.entry((t, p)).or_default()).push(c);
        }
        out
    }

    #[test]
    fn offsets_are_contiguous_and_retries_get_their_first_offset() {
        let mut logs = BTreeMap::new();
        let out = commit(
            &mut logs,
            &[batch(-1, -1, -1, 3), batch(7, 0, 0, 2), batch(7, 0, 2, 2)],
        );
        assert_eq!(
            out,
            vec![
                Ok(Sequenced::New(0)),
                Ok(Sequenced::New(3)),
                Ok(Sequenced::New(5))
            ]
        );
        // A retry of both idempotent batches, then the next one.
        let out = commit(
            &mut logs,
            &[batch(7, 0, 0, 2), batch(7, 0, 2, 2), batch(7, 0, 4, 1)],
        );
        assert_eq!(
            out,
            vec![
                Ok(Sequenced::Duplicate(3)),
                Ok(Sequenced::Duplicate(5)),
                Ok(Sequenced::New(7))
            ]
        );
        let log = &logs[&(Uuid::from_bytes([1; 16]), 0)];
        assert_eq!(log.end_offset, 8);
        assert_eq!(log.batch_count(), 4);
        assert_eq!(log.from_offset(4).next().unwrap().base_offset, 3);
        assert_eq!(log.from_offset(8).count(), 0);
    }

    #[test]
    fn gaps_and_old_epochs_are_refused_and_a_new_epoch_starts_at_zero() {
        let mut logs = BTreeMap::new();
        // A producer never seen may start anywhere (its state may have expired).
        assert_eq!(
            commit(&mut logs, &[batch(7, 1, 10, 2)]),
            vec![Ok(Sequenced::New(0))]
        );
        assert_eq!(
            commit(&mut logs, &[batch(7, 1, 13, 1)]),
            vec![Err(SeqError::OutOfOrderSequence)]
        );
        assert_eq!(
            commit(&mut logs, &[batch(7, 0, 12, 1)]),
            vec![Err(SeqError::InvalidProducerEpoch)]
        );
        assert_eq!(
            commit(&mut logs, &[batch(7, 2, 5, 1)]),
            vec![Err(SeqError::OutOfOrderSequence)]
        );
        assert_eq!(
            commit(&mut logs, &[batch(7, 2, 0, 1), batch(7, 1, 12, 1)]),
            vec![Ok(Sequenced::New(2)), Err(SeqError::InvalidProducerEpoch)]
        );
        assert_eq!(
            commit(&mut logs, &[batch(7, 2, 1, 0)]),
            vec![Err(SeqError::InvalidRecord)]
        );
    }

    #[test]
    fn sequences_wrap_and_only_five_batches_are_remembered() {
        let mut logs = BTreeMap::new();
        commit(&mut logs, &[batch(9, 0, i32::MAX - 1, 2)]);
        assert_eq!(
            commit(&mut logs, &[batch(9, 0, 0, 1)]),
            vec![Ok(Sequenced::New(2))]
        );
        for seq in 1..7 {
            commit(&mut logs, &[batch(9, 0, seq, 1)]);
        }
        // The batch at sequence 1 is six batches back: no longer known as a duplicate.
        assert_eq!(
            commit(&mut logs, &[batch(9, 0, 1, 1)]),
            vec![Err(SeqError::OutOfOrderSequence)]
        );
        assert_eq!(
            commit(&mut logs, &[batch(9, 0, 2, 1)]),
            vec![Ok(Sequenced::Duplicate(4))]
        );
    }

    #[test]
    fn transactions_hold_the_last_stable_offset_and_aborts_are_listed() {
        let mut logs = BTreeMap::new();
        let txn = |seq, kind| WalBatch {
            kind,
            ..batch(4, 0, seq, 2)
        };
        let marker = |kind| WalBatch {
            record_count: 1,
            base_sequence: -1,
            kind,
            ..batch(4, 0, -1, 1)
        };
        commit(
            &mut logs,
            &[batch(-1, -1, -1, 3), txn(0, BatchKind::TxnData)],
        );
        commit(
            &mut logs,
            &[batch(-1, -1, -1, 1), txn(2, BatchKind::TxnData)],
        );
        let key = (Uuid::from_bytes([1; 16]), 0);
        assert_eq!(logs[&key].last_stable_offset(), 3);
        assert!(logs[&key].in_open_txn(4));
        commit(&mut logs, &[marker(BatchKind::Abort)]);
        let log = &logs[&key];
        assert_eq!(log.last_stable_offset(), 9);
        assert_eq!(
            log.aborted_between(0, 9),
            vec![AbortedTxn {
                producer_id: 4,
                first_offset: 3,
                last_offset: 8
            }]
        );
        assert!(log.aborted_between(9, 10).is_empty());
        // A marker of an older epoch than the producer's is fenced; the next transaction
        // (epoch bumped by the coordinator) starts at sequence 0.
        let newer = WalBatch {
            producer_epoch: 1,
            ..marker(BatchKind::Commit)
        };
        commit(&mut logs, &[newer]);
        assert_eq!(
            commit(&mut logs, &[marker(BatchKind::Commit)]),
            vec![Err(SeqError::InvalidProducerEpoch)]
        );
        let next = WalBatch {
            producer_epoch: 1,
            ..txn(0, BatchKind::TxnData)
        };
        assert_eq!(commit(&mut logs, &[next]), vec![Ok(Sequenced::New(10))]);
    }

    #[test]
    fn a_trimmed_log_equals_its_snapshot_read_back() {
        use crate::image::MetadataImage;
        use crate::MetadataRecord;
        let mut logs = BTreeMap::new();
        let txn = |seq, kind| WalBatch {
            kind,
            ..batch(4, 0, seq, 2)
        };
        let abort = WalBatch {
            record_count: 1,
            base_sequence: -1,
            kind: BatchKind::Abort,
            ..batch(4, 0, -1, 1)
        };
        for i in 0..3 {
            let out = commit(
                &mut logs,
                &[batch(-1, -1, -1, 3), txn(i * 4, BatchKind::TxnData)],
            );
            assert!(out.iter().all(|o| matches!(o, Ok(Sequenced::New(_)))));
            commit(
                &mut logs,
                &[txn(i * 4 + 2, BatchKind::TxnData), abort.clone()],
            );
        }
        let key = (Uuid::from_bytes([1; 16]), 0);
        let mut image = MetadataImage::empty();
        let batches: Vec<_> = logs[&key]
            .batches()
            .map(|b| (key.0, key.1, b.clone()))
            .collect();
        image.apply(
            1,
            &MetadataRecord::DisklessBatches {
                broker_id: 1,
                batches,
            },
        );
        let before = image.diskless[&key].clone();
        assert_eq!(before.end_offset, 24);
        // Into the second transaction's first batch (offsets 11..=12): that batch stays, the
        // first transaction's abort goes with it, the second's is still known.
        image.apply(
            2,
            &MetadataRecord::DisklessTrim {
                topic_id: key.0,
                partition: 0,
                start_offset: 12,
            },
        );
        let log = image.diskless[&key].clone();
        assert_eq!((log.start_offset, log.end_offset), (12, 24));
        assert_eq!(log.from_offset(0).next().unwrap().base_offset, 11);
        assert_eq!(log.aborted_between(0, 24).len(), 2);
        assert_eq!(log.aborted_between(0, 24)[0].first_offset, 11);
        // A lower start changes nothing.
        image.apply(
            3,
            &MetadataRecord::DisklessTrim {
                topic_id: key.0,
                partition: 0,
                start_offset: 5,
            },
        );
        assert_eq!(image.diskless[&key], log);
        // The snapshot reads back to the same log.
        let mut back = MetadataImage::empty();
        for (i, r) in image.to_records().iter().enumerate() {
            back.apply(i as i64, r);
        }
        assert_eq!(back.diskless[&key], log);
        // Trimmed to the end: no batch left, the end stays, and the snapshot keeps both.
        image.apply(
            4,
            &MetadataRecord::DisklessTrim {
                topic_id: key.0,
                partition: 0,
                start_offset: 24,
            },
        );
        let empty = image.diskless[&key].clone();
        assert_eq!(
            (empty.start_offset, empty.end_offset, empty.batch_count()),
            (24, 24, 0)
        );
        let mut back = MetadataImage::empty();
        for (i, r) in image.to_records().iter().enumerate() {
            back.apply(i as i64, r);
        }
        assert_eq!(back.diskless[&key], empty);
    }

    #[test]
    fn a_segment_replaces_its_batches_and_a_snapshot_keeps_both() {
        use crate::image::MetadataImage;
        use crate::MetadataRecord;
        let key = (Uuid::from_bytes([1; 16]), 0);
        let mut image = MetadataImage::empty();
        let txn = |seq| WalBatch {
            kind: BatchKind::TxnData,
            ..batch(4, 0, seq, 2)
        };
        let mut logs = BTreeMap::new();
        // Offsets 0..=2, 3..=4 (an open transaction), 5..=7, 8..=9 (idempotent).
        commit(
            &mut logs,
            &[batch(-1, -1, -1, 3), txn(0), batch(-1, -1, -1, 3)],
        );
        commit(&mut logs, &[batch(9, 0, 0, 2)]);
        let batches: Vec<_> = logs[&key]
            .batches()
            .map(|b| (key.0, key.1, b.clone()))
            .collect();
        image.apply(
            1,
            &MetadataRecord::DisklessBatches {
                broker_id: 1,
                batches,
            },
        );
        let seg = |base, last, id| SegmentCoord {
            segment_id: Uuid::from_bytes([id; 16]),
            base_offset: base,
            last_offset: last,
            size: 300,
            max_timestamp_ms: 5,
            max_timestamp_offset: last,
        };
        let log = image.diskless[&key].clone();
        // Not at a batch's end, not at the first batch: stale, refused, nothing changes.
        assert!(log.can_compact(&seg(0, 3, 2)).is_err());
        assert!(log.can_compact(&seg(3, 4, 2)).is_err());
        for (i, bad) in [seg(0, 3, 2), seg(3, 4, 2)].into_iter().enumerate() {
            image.apply(
                2 + i as i64,
                &MetadataRecord::DisklessSegment {
                    topic_id: key.0,
                    partition: 0,
                    segment: bad,
                },
            );
            assert_eq!(image.diskless[&key], log);
        }
        image.apply(
            4,
            &MetadataRecord::DisklessSegment {
                topic_id: key.0,
                partition: 0,
                segment: seg(0, 7, 3),
            },
        );
        let log = image.diskless[&key].clone();
        assert_eq!((log.segments.len(), log.batch_count()), (1, 1));
        assert_eq!(log.segment_for(4), Some(&seg(0, 7, 3)));
        assert_eq!(log.segment_for(8), None);
        assert_eq!(log.from_offset(0).next().unwrap().base_offset, 8);
        assert_eq!(
            log.spans().map(|s| s.base_offset).collect::<Vec<_>>(),
            vec![0, 8]
        );
        // The sequencer's state is untouched: the transaction is open, the producer known.
        assert_eq!(log.last_stable_offset(), 3);
        assert_eq!(
            log.sequence(&batch(9, 0, 0, 2)),
            Ok(Sequenced::Duplicate(8))
        );
        // The same compaction again is stale.
        image.apply(
            5,
            &MetadataRecord::DisklessSegment {
                topic_id: key.0,
                partition: 0,
                segment: seg(0, 7, 3),
            },
        );
        assert_eq!(image.diskless[&key], log);
        // Trimmed into the segment: it stays; the producers' state too.
        image.apply(
            6,
            &MetadataRecord::DisklessTrim {
                topic_id: key.0,
                partition: 0,
                start_offset: 6,
            },
        );
        let log = image.diskless[&key].clone();
        assert_eq!((log.start_offset, log.segments.len()), (6, 1));
        assert_eq!(
            log.sequence(&batch(9, 0, 2, 1)),
            Ok(Sequenced::New(log.end_offset))
        );
        let mut back = MetadataImage::empty();
        for (i, r) in image.to_records().iter().enumerate() {
            back.apply(i as i64, r);
        }
        assert_eq!(back.diskless[&key], log);
        // Past the segment: it goes.
        image.apply(
            7,
            &MetadataRecord::DisklessTrim {
                topic_id: key.0,
                partition: 0,
                start_offset: 9,
            },
        );
        let log = image.diskless[&key].clone();
        assert!(log.segments.is_empty());
        assert_eq!(log.batch_count(), 1);
    }

    #[test]
    fn a_long_log_is_chunked_and_searched() {
        let mut log = DisklessLog::default();
        for i in 0..2000 {
            log.push(coord(&batch(-1, -1, -1, 2), Uuid::nil(), i * 2));
        }
        assert_eq!(log.batch_count(), 2000);
        assert!(log.chunks.len() > 1);
        assert_eq!(log.from_offset(1025).next().unwrap().base_offset, 1024);
        assert_eq!(log.from_offset(3999).count(), 1);
        assert_eq!(log.end_offset, 4000);
    }
}
