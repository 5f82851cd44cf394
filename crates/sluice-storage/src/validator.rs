//! Validation of a producer's batch and offset assignment (Kafka's `LogValidator`), in one
//! pass and without copying the batch.
//!
//! [`check`] looks at the batch once: one batch per append (as Kafka requires of Produce
//! v3+), size, CRC, magic, the header's counts and producer fields, then every record —
//! decompressing a compressed batch once, as a stream — for its structure and offset delta,
//! a key on compacted topics and a timestamp inside the topic's window, and the largest
//! timestamp. Records at fault are all reported (KIP-467), as Kafka words them. When the
//! topic forces a codec, the batch is re-encoded in the same pass.
//!
//! [`assign`] then patches a copy of the 61-byte header only: base offset and leader epoch
//! (outside the CRC'd range), and the max timestamp (+ CRC) when it must change. The body
//! stays the bytes the request arrived in; the segment writes header and body with one
//! vectored write.

use bytes::Bytes;
use sluice_protocol::batch::{
    self, BatchBuilder, BatchError, BatchHeader, RecordLimits, TimestampType, BATCH_HEADER_LEN,
};
use sluice_protocol::compression::Compression;
use sluice_protocol::types::TopicPartition;

use crate::config::{CompressionTarget, LogConfig};
use crate::error::LogError;

/// A batch that passed [`check`], waiting for its offset.
#[derive(Debug)]
pub struct CheckedBatch {
    /// The header as sent (or as re-encoded).
    pub header: BatchHeader,
    /// The whole batch: the request's bytes, or the re-encoded batch.
    pub bytes: Bytes,
    /// Largest record timestamp and the offset delta of its first holder (CreateTime).
    max_timestamp: (i64, i32),
}

/// A batch ready to append: its patched header and the rest of it.
#[derive(Debug)]
pub struct AssignedBatch {
    pub header_bytes: [u8; BATCH_HEADER_LEN],
    pub header: BatchHeader,
    /// Everything after the header.
    pub body: Bytes,
    pub info: ValidatedAppend,
}

impl AssignedBatch {
    pub fn len(&self) -> usize {
        BATCH_HEADER_LEN + self.body.len()
    }

    pub fn is_empty(&self) -> bool {
        false
    }
}

/// Facts about a validated append, for the log, the indexes and the produce response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValidatedAppend {
    pub first_offset: i64,
    pub last_offset: i64,
    pub record_count: u64,
    /// Largest record timestamp in the append (after LogAppendTime stamping).
    pub max_timestamp: i64,
    /// Offset of the record holding `max_timestamp`.
    pub offset_of_max_timestamp: i64,
    /// `now_ms` when the topic uses LogAppendTime, else -1.
    pub log_append_time_ms: i64,
}

fn corrupt(e: BatchError) -> LogError {
    match e {
        BatchError::UnsupportedMagic(m) => {
            LogError::UnsupportedFormat(format!("record batch magic {m}; only magic 2 is accepted"))
        }
        BatchError::InvalidRecord(msg) => LogError::InvalidRecord(msg),
        other => LogError::Corrupt(other),
    }
}

fn invalid(msg: String) -> LogError {
    LogError::InvalidRecord(msg)
}

/// Check one client batch (see the module docs). `records` is one partition's records from a
/// produce request; `tp` names the partition in messages.
pub fn check(
    records: Bytes,
    tp: &TopicPartition,
    now_ms: i64,
    config: &LogConfig,
) -> Result<CheckedBatch, LogError> {
    let header = framing(&records)?;
    if records.len() > config.max_message_bytes {
        return Err(LogError::MessageTooLarge {
            size: records.len(),
            max: config.max_message_bytes,
        });
    }
    batch::verify_crc(&records).map_err(corrupt)?;
    header_rules(&header, tp)?;
    let codec = header.compression().map_err(|e| corrupt(e.into()))?;
    let rebuild = match config.compression {
        CompressionTarget::Codec(c) if c != codec => Some(c),
        _ => None,
    };
    let walk = walk_records(&records, &header, tp, now_ms, config, rebuild)?;
    let (header, bytes) = match walk.rebuilt {
        Some(b) => (BatchHeader::parse(&b).map_err(corrupt)?, Bytes::from(b)),
        None => (header, records),
    };
    Ok(CheckedBatch {
        header,
        bytes,
        max_timestamp: walk.max_timestamp,
    })
}

/// Exactly one whole batch: more is refused as Kafka refuses it (Produce v3+), less is a
/// truncated request.
fn framing(records: &[u8]) -> Result<BatchHeader, LogError> {
    if records.is_empty() {
        return Err(invalid("the produce request holds no record batch".into()));
    }
    let header = BatchHeader::parse(records).map_err(|e| match e {
        BatchError::Truncated { .. } => invalid("the record batch is truncated".into()),
        other => corrupt(other),
    })?;
    match records.len().cmp(&header.total_size()) {
        std::cmp::Ordering::Less => Err(invalid(format!(
            "the record batch is truncated: {} of {} bytes",
            records.len(),
            header.total_size()
        ))),
        std::cmp::Ordering::Greater => Err(invalid(
            "produce requests must contain exactly one record batch per partition".into(),
        )),
        std::cmp::Ordering::Equal => Ok(header),
    }
}

/// What the header must say, checked before any record (Kafka checks these first too, and
/// reports them without per-record errors).
fn header_rules(h: &BatchHeader, tp: &TopicPartition) -> Result<(), LogError> {
    if h.is_control() {
        return Err(invalid(
            "clients are not allowed to write control records".into(),
        ));
    }
    if h.record_count <= 0 {
        return Err(invalid(format!(
            "invalid reported count for record batch: {} in topic partition {tp}",
            h.record_count
        )));
    }
    if i64::from(h.last_offset_delta) + 1 != i64::from(h.record_count) {
        return Err(invalid(format!(
            "inconsistent batch offset range [0, {}] and count of records {} in topic partition {tp}",
            h.last_offset_delta, h.record_count
        )));
    }
    if h.base_offset != 0 {
        return Err(invalid(format!(
            "the base offset of the record batch in the append to {tp} should be 0, but it is {}",
            h.base_offset
        )));
    }
    if h.has_producer_id() && h.base_sequence < 0 {
        return Err(invalid(format!(
            "invalid sequence number {} for producer {}",
            h.base_sequence, h.producer_id
        )));
    }
    Ok(())
}

struct Walk {
    max_timestamp: (i64, i32),
    rebuilt: Option<Vec<u8>>,
}

/// The one pass over the records: structure, offset deltas, keys, timestamps, the largest
/// timestamp, and the re-encoding when the topic forces a codec.
fn walk_records(
    records: &[u8],
    h: &BatchHeader,
    tp: &TopicPartition,
    now_ms: i64,
    config: &LogConfig,
    rebuild: Option<Compression>,
) -> Result<Walk, LogError> {
    let check_time = config.message_timestamp_type == TimestampType::CreateTime
        && h.timestamp_type() == TimestampType::CreateTime;
    let low = now_ms.saturating_sub(config.message_timestamp_before_max_ms);
    let high = now_ms.saturating_add(config.message_timestamp_after_max_ms);
    let mut builder = rebuild.map(|codec| {
        BatchBuilder::new(codec)
            .with_producer(h.producer_id, h.producer_epoch, h.base_sequence)
            .with_transactional(h.is_transactional())
            .with_timestamp_type(h.timestamp_type())
    });
    let mut headers: Vec<(String, Option<Vec<u8>>)> = Vec::new();
    let mut expected_delta = 0i32;
    let mut bad_delta: Option<(i32, i32)> = None;
    let mut errors: Vec<(i32, String)> = Vec::new();
    let mut time_error = false;
    let mut max = (-1i64, 0i32);
    batch::for_each_record(records, RecordLimits::default(), |r| {
        let index = expected_delta;
        expected_delta += 1;
        if r.offset_delta != index {
            bad_delta.get_or_insert((r.offset_delta, index));
            return Ok(());
        }
        let ts = match h.timestamp_type() {
            TimestampType::LogAppendTime => h.max_timestamp,
            TimestampType::CreateTime => h.base_timestamp.wrapping_add(r.timestamp_delta),
        };
        if config.cleanup_compact && r.key.is_none() {
            errors.push((
                index,
                format!("Compacted topic cannot accept message without key in topic partition {tp}"),
            ));
        }
        if check_time && (ts < low || ts > high) {
            time_error = true;
            errors.push((
                index,
                format!(
                    "Timestamp {ts} of message with offset {index} is out of range. The timestamp should be within [{low}, {high}]"
                ),
            ));
        }
        if ts > max.0 {
            max = (ts, r.offset_delta);
        }
        if let Some(b) = builder.as_mut() {
            headers.clear();
            headers.extend(
                r.headers()
                    .map(|(k, v)| (k.to_owned(), v.map(<[u8]>::to_vec))),
            );
            let refs: Vec<(&str, Option<&[u8]>)> = headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_deref()))
                .collect();
            b.append(ts, r.key, r.value, &refs);
        }
        Ok(())
    })
    .map_err(|e| match e {
        // A record count that disagrees with the records is the batch's fault, not a record's.
        BatchError::InvalidRecord(m) => invalid(format!("{m} in topic partition {tp}")),
        other => corrupt(other),
    })?;
    if let Some((got, want)) = bad_delta {
        return Err(invalid(format!(
            "inner record offset delta {got} where {want} was expected in topic partition {tp}"
        )));
    }
    if !errors.is_empty() {
        return Err(LogError::RecordErrors {
            timestamp: time_error,
            errors,
        });
    }
    let rebuilt = match builder {
        Some(b) => Some(
            b.build(0)
                .map_err(|e| invalid(format!("re-compression failed: {e}")))?,
        ),
        None => None,
    };
    Ok(Walk {
        max_timestamp: if h.timestamp_type() == TimestampType::LogAppendTime {
            (h.max_timestamp, 0)
        } else {
            max
        },
        rebuilt,
    })
}

/// Give a checked batch its offsets from `next_offset` and its leader epoch; stamp
/// LogAppendTime or correct the max timestamp where needed. Only the header is copied.
pub fn assign(
    checked: CheckedBatch,
    next_offset: i64,
    leader_epoch: i32,
    now_ms: i64,
    config: &LogConfig,
) -> AssignedBatch {
    let mut header_bytes = [0u8; BATCH_HEADER_LEN];
    header_bytes.copy_from_slice(&checked.bytes[..BATCH_HEADER_LEN]);
    let body = checked.bytes.slice(BATCH_HEADER_LEN..);
    batch::set_base_offset(&mut header_bytes, next_offset);
    batch::set_partition_leader_epoch(&mut header_bytes, leader_epoch);
    let h = &checked.header;
    let log_append = config.message_timestamp_type == TimestampType::LogAppendTime;
    let (max_ts, max_delta) = if log_append {
        batch::set_max_timestamp_split(
            &mut header_bytes,
            &body,
            TimestampType::LogAppendTime,
            now_ms,
        );
        (now_ms, 0)
    } else {
        let (max_ts, delta) = checked.max_timestamp;
        if max_ts != h.max_timestamp || h.timestamp_type() != TimestampType::CreateTime {
            batch::set_max_timestamp_split(
                &mut header_bytes,
                &body,
                TimestampType::CreateTime,
                max_ts,
            );
        }
        (max_ts, delta)
    };
    let header = BatchHeader::parse(&header_bytes).expect("a checked header parses");
    let count = i64::from(h.record_count);
    AssignedBatch {
        header_bytes,
        header,
        body,
        info: ValidatedAppend {
            first_offset: next_offset,
            last_offset: next_offset + count - 1,
            record_count: count as u64,
            max_timestamp: max_ts,
            offset_of_max_timestamp: next_offset + i64::from(max_delta),
            log_append_time_ms: if log_append { now_ms } else { -1 },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_protocol::batch::{decode_records, BatchBuilder};

    const NOW: i64 = 1_700_000_000_000;

    fn tp() -> TopicPartition {
        TopicPartition::new("t", 0)
    }

    fn batch(codec: Compression, n: usize, ts: i64) -> Bytes {
        let mut b = BatchBuilder::new(codec);
        for i in 0..n {
            b.append(
                ts + i as i64,
                Some(b"k"),
                Some(format!("v{i}").as_bytes()),
                &[],
            );
        }
        b.build(0).unwrap().into()
    }

    fn whole(a: &AssignedBatch) -> Vec<u8> {
        [&a.header_bytes[..], &a.body[..]].concat()
    }

    fn validate(
        records: Bytes,
        next: i64,
        epoch: i32,
        cfg: &LogConfig,
    ) -> Result<AssignedBatch, LogError> {
        check(records, &tp(), NOW, cfg).map(|c| assign(c, next, epoch, NOW, cfg))
    }

    #[test]
    fn assigns_offsets_epoch_and_max_timestamp() {
        for codec in [Compression::None, Compression::Zstd] {
            let a = validate(batch(codec, 3, NOW), 40, 5, &LogConfig::default()).unwrap();
            assert_eq!(
                (a.info.first_offset, a.info.last_offset, a.info.record_count),
                (40, 42, 3)
            );
            assert_eq!(
                (a.info.max_timestamp, a.info.offset_of_max_timestamp),
                (NOW + 2, 42)
            );
            let bytes = whole(&a);
            batch::verify_crc(&bytes).unwrap();
            let h = BatchHeader::parse(&bytes).unwrap();
            assert_eq!((h.base_offset, h.partition_leader_epoch), (40, 5));
            assert_eq!(h, a.header);
        }
    }

    #[test]
    fn the_body_is_the_requests_own_bytes() {
        let records = batch(Compression::Lz4, 10, NOW);
        let a = validate(records.clone(), 7, 1, &LogConfig::default()).unwrap();
        // Not a copy: the same allocation, past the header.
        assert_eq!(a.body.as_ptr(), records[BATCH_HEADER_LEN..].as_ptr());
    }

    #[test]
    fn a_wrong_max_timestamp_is_corrected_with_a_new_crc() {
        let mut raw = batch(Compression::Gzip, 3, NOW).to_vec();
        batch::set_max_timestamp(&mut raw, TimestampType::CreateTime, NOW - 5);
        let a = validate(raw.into(), 0, 0, &LogConfig::default()).unwrap();
        let bytes = whole(&a);
        batch::verify_crc(&bytes).unwrap();
        assert_eq!(a.header.max_timestamp, NOW + 2);
    }

    #[test]
    fn rejects_bad_batches_with_kafkas_codes() {
        let cfg = LogConfig::default();
        let mut bad_crc = batch(Compression::None, 2, NOW).to_vec();
        let n = bad_crc.len();
        bad_crc[n - 1] ^= 0xff;
        assert!(matches!(
            validate(bad_crc.into(), 0, 0, &cfg),
            Err(LogError::Corrupt(_))
        ));
        let small = LogConfig {
            max_message_bytes: 10,
            ..LogConfig::default()
        };
        assert!(matches!(
            validate(batch(Compression::None, 2, NOW), 0, 0, &small),
            Err(LogError::MessageTooLarge { .. })
        ));
        let mut torn = batch(Compression::None, 2, NOW).to_vec();
        torn.truncate(torn.len() - 3);
        assert!(matches!(
            validate(torn.into(), 0, 0, &cfg),
            Err(LogError::InvalidRecord(_))
        ));
        assert!(matches!(
            validate(Bytes::new(), 0, 0, &cfg),
            Err(LogError::InvalidRecord(_))
        ));
        // Two batches for one partition: refused whole, as Kafka does.
        let two = [
            batch(Compression::None, 1, NOW),
            batch(Compression::None, 1, NOW),
        ]
        .concat();
        assert!(matches!(
            validate(two.into(), 0, 0, &cfg),
            Err(LogError::InvalidRecord(_))
        ));
        // A base offset other than 0.
        let mut based = batch(Compression::None, 2, NOW).to_vec();
        batch::set_base_offset(&mut based, 100);
        assert!(matches!(
            validate(based.into(), 0, 0, &cfg),
            Err(LogError::InvalidRecord(_))
        ));
    }

    #[test]
    fn names_every_record_at_fault_as_kafka_does() {
        let compacted = LogConfig {
            cleanup_compact: true,
            ..LogConfig::default()
        };
        for codec in [Compression::None, Compression::Gzip] {
            let mut b = BatchBuilder::new(codec);
            for i in 0..5 {
                let key = (i % 2 == 0).then_some(&b"k"[..]);
                b.append(NOW, key, Some(b"v"), &[]);
            }
            let err = validate(b.build(0).unwrap().into(), 0, 0, &compacted).unwrap_err();
            let LogError::RecordErrors { timestamp, errors } = err else {
                panic!("{err:?}");
            };
            assert!(!timestamp);
            let msg = "Compacted topic cannot accept message without key in topic partition t-0";
            assert_eq!(errors, vec![(1, msg.to_string()), (3, msg.to_string())]);
        }
        // A timestamp out of range makes it INVALID_TIMESTAMP, key errors still listed.
        let mut b = BatchBuilder::new(Compression::None);
        b.append(NOW, Some(b"k"), Some(b"v"), &[]);
        b.append(NOW, None, Some(b"v"), &[]);
        b.append(NOW + 2 * 3_600_000, Some(b"k"), Some(b"v"), &[]);
        let err = validate(b.build(0).unwrap().into(), 0, 0, &compacted).unwrap_err();
        let LogError::RecordErrors { timestamp, errors } = err else {
            panic!("{err:?}");
        };
        assert!(timestamp);
        assert_eq!(errors.iter().map(|e| e.0).collect::<Vec<_>>(), vec![1, 2]);
        assert!(errors[1].1.starts_with(&format!(
            "Timestamp {} of message with offset 2 is out of range.",
            NOW + 2 * 3_600_000
        )));
    }

    #[test]
    fn log_append_time_and_forced_codec() {
        let cfg = LogConfig {
            message_timestamp_type: TimestampType::LogAppendTime,
            compression: CompressionTarget::Codec(Compression::Gzip),
            ..LogConfig::default()
        };
        let a = validate(batch(Compression::Snappy, 4, 5), 0, 0, &cfg).unwrap();
        assert_eq!(a.info.log_append_time_ms, NOW);
        let out = whole(&a);
        let h = BatchHeader::parse(&out).unwrap();
        assert_eq!(h.compression().unwrap(), Compression::Gzip);
        batch::verify_crc(&out).unwrap();
        let recs = decode_records(&out, RecordLimits::default()).unwrap();
        assert_eq!(recs.len(), 4);
        assert!(recs.iter().all(|r| r.timestamp == NOW));
        assert_eq!(recs[3].value.as_deref(), Some(&b"v3"[..]));
    }
}
