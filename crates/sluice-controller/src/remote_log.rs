//! Remote log metadata changes (tiered storage), as pure decisions: a leader asks to record
//! a segment's copy starting or finishing, or its deletion starting or finishing, and the
//! controller accepts it only from the partition's current leader at its current leader
//! epoch, along Kafka's state transitions. A leader deposed mid-upload therefore cannot
//! finish it (its successor finds the segment still `CopyStarted` and deletes its objects),
//! and two leaders can never both extend the remote log.
//!
//! A finished copy must continue the remote log: start at or before the offset after the
//! last copied one (no gap) and end past it (no duplicate). Overlap is allowed: a new leader
//! whose segments are cut at other offsets than its predecessor's copies its first segment
//! whole, as Kafka does.

use sluice_metadata::image::MetadataImage;
use sluice_metadata::remote::{RemoteSegment, RemoteSegmentState};
use sluice_metadata::MetadataRecord;
use sluice_protocol::ErrorCode;

use crate::error::ApiError;

/// The record for `seg`'s new state, if `broker` may write it.
pub fn remote_log_segment(
    image: &MetadataImage,
    broker: i32,
    seg: &RemoteSegment,
) -> Result<Vec<MetadataRecord>, ApiError> {
    let reg = image
        .topic_by_id(&seg.topic_id)
        .and_then(|t| t.partitions.get(&seg.partition))
        .ok_or_else(|| ApiError::new(ErrorCode::UnknownTopicOrPartition, "no such partition"))?;
    if reg.leader != broker {
        return Err(ApiError::new(
            ErrorCode::NotLeaderOrFollower,
            format!("broker {broker} does not lead this partition"),
        ));
    }
    if seg.leader_epoch != reg.leader_epoch {
        return Err(ApiError::new(
            ErrorCode::FencedLeaderEpoch,
            format!(
                "leader epoch {} is not {}",
                seg.leader_epoch, reg.leader_epoch
            ),
        ));
    }
    let invalid = |m: String| Err(ApiError::new(ErrorCode::InvalidRequest, m));
    if seg.base_offset < 0 || seg.end_offset < seg.base_offset || seg.size_bytes < 0 {
        return invalid(format!(
            "remote segment offsets {}..={} (size {}) are not a segment",
            seg.base_offset, seg.end_offset, seg.size_bytes
        ));
    }
    let log = image.remote_log(&seg.topic_id, seg.partition);
    let current = log.and_then(|l| l.get(&seg.segment_id));
    match (current, seg.state) {
        (None, RemoteSegmentState::CopyStarted) => {}
        (None, _) => {
            return invalid(format!("remote segment {} is not known", seg.segment_id));
        }
        (Some(c), next) => {
            if !c.state.may_become(next) {
                return invalid(format!(
                    "remote segment {} cannot go from {:?} to {next:?}",
                    seg.segment_id, c.state
                ));
            }
            if (c.base_offset, c.end_offset) != (seg.base_offset, seg.end_offset) {
                return invalid(format!(
                    "remote segment {} holds {}..={}, not {}..={}",
                    seg.segment_id, c.base_offset, c.end_offset, seg.base_offset, seg.end_offset
                ));
            }
        }
    }
    if seg.state == RemoteSegmentState::CopyFinished {
        let highest = log.map_or(-1, |l| l.highest_offset());
        if highest >= 0 && (seg.base_offset > highest + 1 || seg.end_offset <= highest) {
            return invalid(format!(
                "remote segment {}..={} does not continue the remote log, which ends at {highest}",
                seg.base_offset, seg.end_offset
            ));
        }
    }
    Ok(vec![MetadataRecord::RemoteLogSegment(seg.clone())])
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_metadata::Uuid;

    fn image() -> MetadataImage {
        let mut image = MetadataImage::empty();
        let id = Uuid::from_bytes([1; 16]);
        image.apply(
            0,
            &MetadataRecord::Topic {
                name: "t".into(),
                id,
            },
        );
        image.apply(
            1,
            &MetadataRecord::Partition {
                topic_id: id,
                partition: 0,
                replicas: vec![1, 2],
                isr: vec![1, 2],
                leader: 1,
                leader_epoch: 3,
                partition_epoch: 0,
                adding: vec![],
                removing: vec![],
                elr: Default::default(),
            },
        );
        image
    }

    fn seg(id: u8, base: i64, end: i64, state: RemoteSegmentState) -> RemoteSegment {
        RemoteSegment {
            topic_id: Uuid::from_bytes([1; 16]),
            partition: 0,
            segment_id: Uuid::from_bytes([id; 16]),
            base_offset: base,
            end_offset: end,
            max_timestamp_ms: 0,
            size_bytes: 10,
            broker_id: 1,
            leader_epoch: 3,
            epochs: vec![(3, base)],
            state,
        }
    }

    /// Ask as broker 1 and apply what is accepted.
    fn apply(image: &mut MetadataImage, s: RemoteSegment) {
        for rec in remote_log_segment(image, 1, &s).unwrap() {
            image.apply(image.offset + 1, &rec);
        }
    }

    #[test]
    fn only_the_current_leader_at_its_epoch_changes_the_remote_log() {
        use RemoteSegmentState::*;
        let mut image = image();
        let e = remote_log_segment(&image, 2, &seg(1, 0, 9, CopyStarted)).unwrap_err();
        assert_eq!(e.code, ErrorCode::NotLeaderOrFollower);
        let mut stale = seg(1, 0, 9, CopyStarted);
        stale.leader_epoch = 2;
        let e = remote_log_segment(&image, 1, &stale).unwrap_err();
        assert_eq!(e.code, ErrorCode::FencedLeaderEpoch);
        apply(&mut image, seg(1, 0, 9, CopyStarted));
        apply(&mut image, seg(1, 0, 9, CopyFinished));
        // Not backwards, not a gap, not a duplicate; an overlap that goes further is fine.
        let e = remote_log_segment(&image, 1, &seg(1, 0, 9, CopyStarted)).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidRequest);
        apply(&mut image, seg(2, 12, 19, CopyStarted));
        assert!(remote_log_segment(&image, 1, &seg(2, 12, 19, CopyFinished)).is_err());
        apply(&mut image, seg(3, 0, 9, CopyStarted));
        assert!(remote_log_segment(&image, 1, &seg(3, 0, 9, CopyFinished)).is_err());
        apply(&mut image, seg(4, 5, 19, CopyStarted));
        apply(&mut image, seg(4, 5, 19, CopyFinished));
        let log = image.remote_log(&Uuid::from_bytes([1; 16]), 0).unwrap();
        assert_eq!(log.highest_offset(), 19);
        // Unknown segments cannot finish or be deleted; a known one is deleted in two steps.
        assert!(remote_log_segment(&image, 1, &seg(9, 20, 29, CopyFinished)).is_err());
        apply(&mut image, seg(1, 0, 9, DeleteStarted));
        apply(&mut image, seg(1, 0, 9, DeleteFinished));
        let log = image.remote_log(&Uuid::from_bytes([1; 16]), 0).unwrap();
        assert_eq!(log.start_offset(), Some(5));
    }
}
