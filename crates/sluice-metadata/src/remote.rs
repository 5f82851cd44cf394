//! Remote log metadata (tiered storage, KIP-405): the segments a partition's leaders copied
//! to the object store, kept in the metadata log as Kafka keeps them in
//! `__remote_log_metadata`: one record per state change of a segment, the full metadata each
//! time.
//!
//! Why the metadata log and not a topic of its own: every node already follows it, so a new
//! leader, a follower and a reader all see the same segments without a consumer of their
//! own; the controller checks each change against the partition's current leader epoch, so a
//! fenced leader can neither finish an upload nor delete; and a snapshot keeps it compact.
//! The cost is a record per segment and state (four over a segment's life): with Kafka's
//! 1 GiB segments that is a few records per partition per GiB written.

use uuid::Uuid;

/// Kafka's `RemoteLogSegmentState` ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RemoteSegmentState {
    CopyStarted = 0,
    CopyFinished = 1,
    DeleteStarted = 2,
    DeleteFinished = 3,
}

impl RemoteSegmentState {
    pub fn from_i8(v: i8) -> Option<Self> {
        Some(match v {
            0 => Self::CopyStarted,
            1 => Self::CopyFinished,
            2 => Self::DeleteStarted,
            3 => Self::DeleteFinished,
            _ => return None,
        })
    }

    /// Kafka's valid transitions (a state to itself is a retry).
    pub fn may_become(self, next: Self) -> bool {
        use RemoteSegmentState::*;
        self == next
            || matches!(
                (self, next),
                (CopyStarted, CopyFinished)
                    | (CopyStarted, DeleteStarted)
                    | (CopyFinished, DeleteStarted)
                    | (DeleteStarted, DeleteFinished)
            )
    }
}

/// One remote segment of one partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteSegment {
    pub topic_id: Uuid,
    pub partition: i32,
    /// Drawn by the uploader; names the segment's objects.
    pub segment_id: Uuid,
    pub base_offset: i64,
    /// The last offset in it.
    pub end_offset: i64,
    /// Its largest record timestamp (time retention).
    pub max_timestamp_ms: i64,
    /// Size of its `.log` object.
    pub size_bytes: i64,
    /// The broker that copied it and its leader epoch when it did.
    pub broker_id: i32,
    pub leader_epoch: i32,
    /// The leader epochs inside it: (epoch, first offset).
    pub epochs: Vec<(i32, i64)>,
    pub state: RemoteSegmentState,
}

impl RemoteSegment {
    /// Readable: copied and not being deleted.
    pub fn is_readable(&self) -> bool {
        self.state == RemoteSegmentState::CopyFinished
    }
}

/// The remote segments of one partition, ordered by base offset (then id).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RemoteLog {
    pub segments: Vec<RemoteSegment>,
}

impl RemoteLog {
    /// Insert or replace (by id); a finished deletion removes it.
    pub fn apply(&mut self, seg: &RemoteSegment) {
        self.segments.retain(|s| s.segment_id != seg.segment_id);
        if seg.state != RemoteSegmentState::DeleteFinished {
            let at = self.segments.partition_point(|s| {
                (s.base_offset, s.segment_id) < (seg.base_offset, seg.segment_id)
            });
            self.segments.insert(at, seg.clone());
        }
    }

    pub fn get(&self, id: &Uuid) -> Option<&RemoteSegment> {
        self.segments.iter().find(|s| s.segment_id == *id)
    }

    /// Copied segments, in offset order.
    pub fn readable(&self) -> impl Iterator<Item = &RemoteSegment> {
        self.segments.iter().filter(|s| s.is_readable())
    }

    /// The last offset copied (Kafka's highest offset in remote storage); -1 when none.
    pub fn highest_offset(&self) -> i64 {
        self.readable().map(|s| s.end_offset).max().unwrap_or(-1)
    }

    /// The first offset held remotely; None when nothing is.
    pub fn start_offset(&self) -> Option<i64> {
        self.readable().map(|s| s.base_offset).min()
    }

    /// The readable segment holding `offset` (the one starting latest, where two overlap).
    pub fn segment_for(&self, offset: i64) -> Option<&RemoteSegment> {
        self.readable()
            .filter(|s| s.base_offset <= offset && offset <= s.end_offset)
            .max_by_key(|s| s.base_offset)
    }

    /// Bytes of the readable segments.
    pub fn size_bytes(&self) -> i64 {
        self.readable().map(|s| s.size_bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(id: u8, base: i64, end: i64, state: RemoteSegmentState) -> RemoteSegment {
        RemoteSegment {
            topic_id: Uuid::from_bytes([1; 16]),
            partition: 0,
            segment_id: Uuid::from_bytes([id; 16]),
            base_offset: base,
            end_offset: end,
            max_timestamp_ms: 0,
            size_bytes: 100,
            broker_id: 1,
            leader_epoch: 0,
            epochs: vec![(0, base)],
            state,
        }
    }

    #[test]
    fn segments_move_through_their_states() {
        use RemoteSegmentState::*;
        let mut log = RemoteLog::default();
        log.apply(&seg(2, 100, 199, CopyStarted));
        log.apply(&seg(1, 0, 99, CopyFinished));
        assert_eq!(log.highest_offset(), 99);
        assert_eq!(log.start_offset(), Some(0));
        log.apply(&seg(2, 100, 199, CopyFinished));
        assert_eq!(log.highest_offset(), 199);
        assert_eq!(
            log.segment_for(150).unwrap().segment_id,
            Uuid::from_bytes([2; 16])
        );
        assert!(log.segment_for(200).is_none());
        log.apply(&seg(1, 0, 99, DeleteStarted));
        assert_eq!(log.start_offset(), Some(100));
        assert_eq!(log.size_bytes(), 100);
        log.apply(&seg(1, 0, 99, DeleteFinished));
        assert_eq!(log.segments.len(), 1);
        assert!(CopyStarted.may_become(DeleteStarted));
        assert!(!CopyFinished.may_become(CopyStarted));
        assert!(!DeleteStarted.may_become(CopyFinished));
    }
}
