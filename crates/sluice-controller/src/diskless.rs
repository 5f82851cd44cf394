//! The sequencer of diskless topics: a broker wrote a WAL object and asks for its batches'
//! offsets. The active controller decides them against the image (it handles one request at
//! a time, and each write is applied before the next is planned) and writes the outcome as
//! one [`MetadataRecord::DisklessBatches`]; the broker answers its producers once that
//! record is committed. See [`sluice_metadata::diskless`].

use sluice_metadata::diskless::{sequence_object, SegmentCoord, SeqError, Sequenced, WalBatch};
use sluice_metadata::image::MetadataImage;
use sluice_metadata::{MetadataRecord, Uuid};
use sluice_protocol::ErrorCode;

use crate::error::ApiError;

/// Whether a topic's configs make it diskless.
pub fn is_diskless_topic(image: &MetadataImage, name: &str) -> bool {
    image.diskless_topics.contains(name)
}

/// Whether a partition exists and belongs to a diskless topic.
fn check_partition(image: &MetadataImage, topic_id: &Uuid, partition: i32) -> Result<(), SeqError> {
    let topic = image
        .topic_by_id(topic_id)
        .filter(|t| t.partitions.contains_key(&partition))
        .ok_or(SeqError::UnknownPartition)?;
    if is_diskless_topic(image, &topic.name) {
        Ok(())
    } else {
        Err(SeqError::NotDiskless)
    }
}

fn api_error(e: SeqError) -> ApiError {
    let (code, message) = match e {
        SeqError::UnknownPartition => (
            ErrorCode::UnknownTopicOrPartition,
            "This server does not host this topic-partition.",
        ),
        SeqError::NotDiskless => (ErrorCode::InvalidRequest, "The topic is not diskless."),
        SeqError::OutOfOrderSequence => (
            ErrorCode::OutOfOrderSequenceNumber,
            "Out of order sequence number for the producer.",
        ),
        SeqError::InvalidProducerEpoch => (
            ErrorCode::InvalidProducerEpoch,
            "The producer's epoch is older than the latest one written.",
        ),
        SeqError::InvalidRecord => (ErrorCode::InvalidRecord, "The batch holds no records."),
    };
    ApiError::new(code, message)
}

/// Sequence the batches of WAL object `object_id` written by `broker`: per batch its
/// outcome, and the record that commits the new ones (none when nothing is new).
pub fn commit(
    image: &MetadataImage,
    broker: i32,
    object_id: Uuid,
    batches: &[WalBatch],
) -> (Vec<Result<Sequenced, ApiError>>, Vec<MetadataRecord>) {
    if !image.brokers.contains_key(&broker) {
        let e = ApiError::new(
            ErrorCode::BrokerIdNotRegistered,
            format!("broker {broker} is not registered"),
        );
        return (vec![Err(e); batches.len()], Vec::new());
    }
    let check = |topic_id: &Uuid, partition: i32| check_partition(image, topic_id, partition);
    let (out, coords) = sequence_object(&image.diskless, check, object_id, batches);
    let records = if coords.is_empty() {
        Vec::new()
    } else {
        vec![MetadataRecord::DisklessBatches {
            broker_id: broker,
            batches: coords,
        }]
    };
    (
        out.into_iter().map(|r| r.map_err(api_error)).collect(),
        records,
    )
}

/// Move diskless partitions' log starts: per (topic id, partition, start) its outcome, and
/// the records for those that move. A start past the partition's end is
/// OFFSET_OUT_OF_RANGE (as DeleteRecords past the high watermark); one at or below the
/// current start changes nothing.
pub fn trim(
    image: &MetadataImage,
    trims: &[(Uuid, i32, i64)],
) -> (Vec<Result<(), ApiError>>, Vec<MetadataRecord>) {
    let mut records = Vec::new();
    let out = trims
        .iter()
        .map(|(topic_id, partition, start)| {
            check_partition(image, topic_id, *partition).map_err(api_error)?;
            let (current, end) = image
                .diskless
                .get(&(*topic_id, *partition))
                .map_or((0, 0), |l| (l.start_offset, l.end_offset));
            if *start < 0 || *start > end {
                return Err(ApiError::new(
                    ErrorCode::OffsetOutOfRange,
                    format!("start offset {start} is outside 0..={end}"),
                ));
            }
            if *start > current {
                records.push(MetadataRecord::DisklessTrim {
                    topic_id: *topic_id,
                    partition: *partition,
                    start_offset: *start,
                });
            }
            Ok(())
        })
        .collect();
    (out, records)
}

/// WAL compaction: per (topic id, partition, segment) whether the segment replaces the
/// batches it was made of, and the records of those that do. A compaction that a trim or
/// another compaction overtook is refused (INVALID_REQUEST: the broker deletes its segment
/// object and tries again on the next round). One already in the log is taken again with
/// nothing written: a request retried after its answer was lost must not be refused, or the
/// broker would delete the objects of a segment in use (seen in the simulator, seed 61).
pub fn compact(
    image: &MetadataImage,
    segments: &[(Uuid, i32, SegmentCoord)],
) -> (Vec<Result<(), ApiError>>, Vec<MetadataRecord>) {
    let mut records = Vec::new();
    // Two segments of one partition in one request: the second sees the first.
    let mut logs = std::collections::HashMap::new();
    let out = segments
        .iter()
        .map(|(topic_id, partition, seg)| {
            check_partition(image, topic_id, *partition).map_err(api_error)?;
            let log = logs.entry((*topic_id, *partition)).or_insert_with(|| {
                image
                    .diskless
                    .get(&(*topic_id, *partition))
                    .map(|l| (**l).clone())
                    .unwrap_or_default()
            });
            if log.segments.iter().any(|s| s == seg) {
                return Ok(());
            }
            log.can_compact(seg)
                .map_err(|e| ApiError::new(ErrorCode::InvalidRequest, e))?;
            log.compact(seg);
            records.push(MetadataRecord::DisklessSegment {
                topic_id: *topic_id,
                partition: *partition,
                segment: seg.clone(),
            });
            Ok(())
        })
        .collect();
    (out, records)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(diskless: bool) -> MetadataImage {
        let mut image = MetadataImage::empty();
        let id = Uuid::from_bytes([1; 16]);
        let records = [
            MetadataRecord::RegisterBroker {
                node_id: 1,
                epoch: 0,
                incarnation_id: Uuid::nil(),
                endpoints: vec![],
                rack: None,
                fenced: false,
            },
            MetadataRecord::Topic {
                name: "t".into(),
                id,
            },
            MetadataRecord::Config {
                resource_type: sluice_metadata::image::RESOURCE_TOPIC,
                resource_name: "t".into(),
                name: "diskless.enable".into(),
                value: Some(diskless.to_string()),
            },
            MetadataRecord::Partition {
                topic_id: id,
                partition: 0,
                replicas: vec![1],
                isr: vec![1],
                leader: 1,
                leader_epoch: 0,
                partition_epoch: 0,
                adding: vec![],
                removing: vec![],
                elr: Default::default(),
            },
        ];
        for (i, r) in records.iter().enumerate() {
            image.apply(i as i64, r);
        }
        image
    }

    fn batch(partition: i32, seq: i32) -> WalBatch {
        WalBatch {
            topic_id: Uuid::from_bytes([1; 16]),
            partition,
            position: 0,
            size: 80,
            record_count: 2,
            max_timestamp_ms: 1,
            producer_id: 5,
            producer_epoch: 0,
            base_sequence: seq,
            kind: Default::default(),
        }
    }

    #[test]
    fn every_node_applies_what_the_sequencer_decided() {
        let mut image = image(true);
        let (out, records) = commit(&image, 1, Uuid::new_v4(), &[batch(0, 0), batch(1, 0)]);
        assert_eq!(out[0], Ok(Sequenced::New(0)));
        assert_eq!(
            out[1].as_ref().unwrap_err().code,
            ErrorCode::UnknownTopicOrPartition
        );
        for r in &records {
            image.apply(image.offset + 1, r);
        }
        let (out, records) = commit(&image, 1, Uuid::new_v4(), &[batch(0, 0), batch(0, 2)]);
        assert_eq!(
            out,
            vec![Ok(Sequenced::Duplicate(0)), Ok(Sequenced::New(2))]
        );
        for r in &records {
            image.apply(image.offset + 1, r);
        }
        let log = image.diskless_log(&Uuid::from_bytes([1; 16]), 0).unwrap();
        assert_eq!(log.end_offset, 4);
        // A snapshot rebuilds the same logs, producers included.
        let mut copy = MetadataImage::empty();
        for (i, r) in image.to_records().iter().enumerate() {
            copy.apply(i as i64, r);
        }
        assert_eq!(copy.diskless, image.diskless);
        let e = commit(&image, 9, Uuid::new_v4(), &[batch(0, 4)]).0;
        assert_eq!(
            e[0].as_ref().unwrap_err().code,
            ErrorCode::BrokerIdNotRegistered
        );
    }

    #[test]
    fn a_compaction_retried_after_it_was_taken_is_taken_again_and_a_stale_one_refused() {
        let mut image = image(true);
        let tid = Uuid::from_bytes([1; 16]);
        let (_, records) = commit(&image, 1, Uuid::new_v4(), &[batch(0, 0), batch(0, 2)]);
        for r in &records {
            image.apply(image.offset + 1, r);
        }
        let seg = |id: u8, last| SegmentCoord {
            segment_id: Uuid::from_bytes([id; 16]),
            base_offset: 0,
            last_offset: last,
            size: 160,
            max_timestamp_ms: 1,
            max_timestamp_offset: last,
        };
        let (out, records) = compact(&image, &[(tid, 0, seg(7, 1))]);
        assert_eq!((out, records.len()), (vec![Ok(())], 1));
        for r in &records {
            image.apply(image.offset + 1, r);
        }
        // The same request again (its answer lost): taken, nothing written.
        let (out, records) = compact(&image, &[(tid, 0, seg(7, 1))]);
        assert_eq!((out, records.len()), (vec![Ok(())], 0));
        // Another segment of the same batches (a second broker's, made from a stale view):
        // refused.
        let (out, records) = compact(&image, &[(tid, 0, seg(8, 1))]);
        assert_eq!(out[0].as_ref().unwrap_err().code, ErrorCode::InvalidRequest);
        assert!(records.is_empty());
        // The next batches: a segment that follows the first.
        let next = SegmentCoord {
            base_offset: 2,
            ..seg(9, 3)
        };
        let (out, records) = compact(&image, &[(tid, 0, next)]);
        assert_eq!((out, records.len()), (vec![Ok(())], 1));
    }

    #[test]
    fn classic_topics_are_not_sequenced() {
        let image = image(false);
        let (out, records) = commit(&image, 1, Uuid::new_v4(), &[batch(0, 0)]);
        assert_eq!(out[0].as_ref().unwrap_err().code, ErrorCode::InvalidRequest);
        assert!(records.is_empty());
    }
}
