//! Validation of a producer's records and in-place offset assignment (Kafka's
//! `LogValidator`). Batches are checked whole: framing, magic, CRC, record count against the
//! offset range, every record's structure (decompressing as a stream, size-capped),
//! timestamps against the topic's window, and keys for compacted topics. Then each batch gets
//! its base offset and leader epoch patched in place; only LogAppendTime, a corrected max
//! timestamp or a broker-side codec change touch the CRC'd range.

use sluice_protocol::batch::{
    self, BatchBuilder, BatchError, BatchHeader, BatchIter, RecordLimits, TimestampType,
    BATCH_HEADER_LEN,
};
use sluice_protocol::compression::Compression;

use crate::config::{CompressionTarget, LogConfig};
use crate::error::LogError;

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

/// Validate `records` (one or more batches from a produce request) and assign offsets from
/// `next_offset`. Returns the possibly re-encoded bytes to append (unchanged length unless the
/// topic forces a codec) and what was appended.
pub fn validate_and_assign(
    mut records: Vec<u8>,
    next_offset: i64,
    leader_epoch: i32,
    now_ms: i64,
    config: &LogConfig,
) -> Result<(Vec<u8>, ValidatedAppend), LogError> {
    if records.is_empty() {
        return Err(LogError::InvalidRecord(
            "produce request holds no record batch".into(),
        ));
    }
    // First pass: validate every batch, decide whether any must be rebuilt.
    let mut headers = Vec::new();
    for item in BatchIter::new(&records) {
        let (header, bytes) = item.map_err(corrupt)?;
        validate_batch(&header, bytes, now_ms, config)?;
        headers.push(header);
    }
    let needs_rebuild = |h: &BatchHeader| match config.compression {
        CompressionTarget::Codec(c) => h.compression().ok() != Some(c),
        CompressionTarget::Producer => false,
    };
    if headers.iter().any(needs_rebuild) {
        let CompressionTarget::Codec(codec) = config.compression else {
            unreachable!("rebuild only happens with a target codec");
        };
        records = rebuild_with_codec(&records, codec)?;
    }
    assign(records, next_offset, leader_epoch, now_ms, config)
}

fn validate_batch(
    header: &BatchHeader,
    bytes: &[u8],
    now_ms: i64,
    config: &LogConfig,
) -> Result<(), LogError> {
    if bytes.len() > config.max_message_bytes {
        return Err(LogError::MessageTooLarge {
            size: bytes.len(),
            max: config.max_message_bytes,
        });
    }
    batch::verify_crc(bytes).map_err(corrupt)?;
    if header.is_control() {
        return Err(LogError::InvalidRecord(
            "clients are not allowed to write control records".into(),
        ));
    }
    if header.record_count <= 0 {
        return Err(LogError::InvalidRecord(format!(
            "invalid reported count for record batch: {}",
            header.record_count
        )));
    }
    if i64::from(header.last_offset_delta) + 1 != i64::from(header.record_count) {
        return Err(LogError::InvalidRecord(format!(
            "inconsistent batch offset range (last offset delta {}) and record count {}",
            header.last_offset_delta, header.record_count
        )));
    }
    if header.has_producer_id() && header.base_sequence < 0 {
        return Err(LogError::InvalidRecord(format!(
            "invalid sequence number {} for producer {}",
            header.base_sequence, header.producer_id
        )));
    }
    header.compression().map_err(|e| corrupt(e.into()))?;
    let check_time = config.message_timestamp_type == TimestampType::CreateTime;
    let low = now_ms.saturating_sub(config.message_timestamp_before_max_ms);
    let high = now_ms.saturating_add(config.message_timestamp_after_max_ms);
    let mut expected_delta = 0i32;
    let mut failure: Option<LogError> = None;
    batch::for_each_record(bytes, RecordLimits::default(), |r| {
        if failure.is_some() {
            return Ok(());
        }
        if r.offset_delta != expected_delta {
            failure = Some(LogError::InvalidRecord(format!(
                "inner record offset delta {} where {} was expected",
                r.offset_delta, expected_delta
            )));
        } else if config.cleanup_compact && r.key.is_none() {
            failure = Some(LogError::InvalidRecord(
                "compacted topic cannot accept a record without a key".into(),
            ));
        } else if check_time && header.timestamp_type() == TimestampType::CreateTime {
            let ts = header.base_timestamp.wrapping_add(r.timestamp_delta);
            if ts < low || ts > high {
                failure = Some(LogError::InvalidTimestamp {
                    timestamp: ts,
                    low,
                    high,
                });
            }
        }
        expected_delta += 1;
        Ok(())
    })
    .map_err(corrupt)?;
    match failure {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Re-encode every batch with `codec`, keeping records, timestamps and producer fields.
fn rebuild_with_codec(records: &[u8], codec: Compression) -> Result<Vec<u8>, LogError> {
    let mut out = Vec::with_capacity(records.len());
    for item in BatchIter::new(records) {
        let (h, bytes) = item.map_err(corrupt)?;
        let mut builder = BatchBuilder::new(codec)
            .with_producer(h.producer_id, h.producer_epoch, h.base_sequence)
            .with_transactional(h.is_transactional())
            .with_timestamp_type(h.timestamp_type());
        let mut headers: Vec<(String, Option<Vec<u8>>)> = Vec::new();
        batch::for_each_record(bytes, RecordLimits::default(), |r| {
            headers.clear();
            headers.extend(
                r.headers()
                    .map(|(k, v)| (k.to_owned(), v.map(<[u8]>::to_vec))),
            );
            let refs: Vec<(&str, Option<&[u8]>)> = headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_deref()))
                .collect();
            let ts = match h.timestamp_type() {
                TimestampType::LogAppendTime => h.max_timestamp,
                TimestampType::CreateTime => h.base_timestamp.wrapping_add(r.timestamp_delta),
            };
            builder.append(ts, r.key, r.value, &refs);
            Ok(())
        })
        .map_err(corrupt)?;
        let rebuilt = builder
            .build(h.base_offset)
            .map_err(|e| LogError::InvalidRecord(format!("re-compression failed: {e}")))?;
        out.extend_from_slice(&rebuilt);
    }
    Ok(out)
}

/// Patch offsets, epoch and timestamps of validated batches; compute the append's facts.
fn assign(
    mut records: Vec<u8>,
    next_offset: i64,
    leader_epoch: i32,
    now_ms: i64,
    config: &LogConfig,
) -> Result<(Vec<u8>, ValidatedAppend), LogError> {
    let log_append = config.message_timestamp_type == TimestampType::LogAppendTime;
    let mut offset = next_offset;
    let mut pos = 0usize;
    let mut info = ValidatedAppend {
        first_offset: next_offset,
        last_offset: next_offset,
        record_count: 0,
        max_timestamp: -1,
        offset_of_max_timestamp: -1,
        log_append_time_ms: if log_append { now_ms } else { -1 },
    };
    while pos < records.len() {
        let header = BatchHeader::parse(&records[pos..]).map_err(corrupt)?;
        let end = pos + header.total_size();
        let batch_bytes = &mut records[pos..end];
        batch::set_base_offset(batch_bytes, offset);
        batch::set_partition_leader_epoch(batch_bytes, leader_epoch);
        let (max_ts, max_ts_delta) = if log_append {
            batch::set_max_timestamp(batch_bytes, TimestampType::LogAppendTime, now_ms);
            (now_ms, 0)
        } else {
            let (max_ts, delta) = max_record_timestamp(&header, batch_bytes)?;
            if max_ts != header.max_timestamp
                || header.timestamp_type() != TimestampType::CreateTime
            {
                batch::set_max_timestamp(batch_bytes, TimestampType::CreateTime, max_ts);
            }
            (max_ts, delta)
        };
        if max_ts > info.max_timestamp {
            info.max_timestamp = max_ts;
            info.offset_of_max_timestamp = offset + i64::from(max_ts_delta);
        }
        info.record_count += header.record_count as u64;
        offset += i64::from(header.record_count);
        pos = end;
    }
    info.last_offset = offset - 1;
    debug_assert!(records.len() >= BATCH_HEADER_LEN);
    Ok((records, info))
}

/// The largest record timestamp in a batch and the offset delta of its first holder.
fn max_record_timestamp(header: &BatchHeader, bytes: &[u8]) -> Result<(i64, i32), LogError> {
    if header.timestamp_type() == TimestampType::LogAppendTime {
        return Ok((header.max_timestamp, 0));
    }
    let mut best = (-1i64, 0i32);
    batch::for_each_record(bytes, RecordLimits::default(), |r| {
        let ts = header.base_timestamp.wrapping_add(r.timestamp_delta);
        if ts > best.0 {
            best = (ts, r.offset_delta);
        }
        Ok(())
    })
    .map_err(corrupt)?;
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_protocol::batch::{decode_records, BatchBuilder};

    fn batch(codec: Compression, n: usize, ts: i64) -> Vec<u8> {
        let mut b = BatchBuilder::new(codec);
        for i in 0..n {
            b.append(
                ts + i as i64,
                Some(b"k"),
                Some(format!("v{i}").as_bytes()),
                &[],
            );
        }
        b.build(0).unwrap()
    }

    #[test]
    fn assigns_offsets_and_epoch_across_batches() {
        let now = 1_700_000_000_000;
        let records = [
            batch(Compression::None, 3, now),
            batch(Compression::Zstd, 2, now + 10),
        ]
        .concat();
        let (out, info) = validate_and_assign(records, 40, 5, now, &LogConfig::default()).unwrap();
        assert_eq!(
            (info.first_offset, info.last_offset, info.record_count),
            (40, 44, 5)
        );
        assert_eq!(
            (info.max_timestamp, info.offset_of_max_timestamp),
            (now + 11, 44)
        );
        let batches: Vec<_> = BatchIter::new(&out).map(|b| b.unwrap().0).collect();
        assert_eq!(batches[0].base_offset, 40);
        assert_eq!(batches[1].base_offset, 43);
        assert!(batches.iter().all(|h| h.partition_leader_epoch == 5));
    }

    #[test]
    fn rejects_bad_input_with_the_right_error() {
        let now = 1_700_000_000_000;
        let cfg = LogConfig::default();
        let mut bad_crc = batch(Compression::None, 2, now);
        let n = bad_crc.len();
        bad_crc[n - 1] ^= 0xff;
        assert!(matches!(
            validate_and_assign(bad_crc, 0, 0, now, &cfg),
            Err(LogError::Corrupt(_))
        ));

        let small = LogConfig {
            max_message_bytes: 10,
            ..LogConfig::default()
        };
        assert!(matches!(
            validate_and_assign(batch(Compression::None, 2, now), 0, 0, now, &small),
            Err(LogError::MessageTooLarge { .. })
        ));

        let future = now + 2 * 3_600_000;
        assert!(matches!(
            validate_and_assign(batch(Compression::None, 1, future), 0, 0, now, &cfg),
            Err(LogError::InvalidTimestamp { .. })
        ));

        let compacted = LogConfig {
            cleanup_compact: true,
            ..LogConfig::default()
        };
        let mut b = BatchBuilder::new(Compression::None);
        b.append(now, None, Some(b"v"), &[]);
        assert!(matches!(
            validate_and_assign(b.build(0).unwrap(), 0, 0, now, &compacted),
            Err(LogError::InvalidRecord(_))
        ));

        let mut torn = batch(Compression::None, 2, now);
        torn.truncate(torn.len() - 3);
        assert!(matches!(
            validate_and_assign(torn, 0, 0, now, &cfg),
            Err(LogError::Corrupt(_))
        ));
        assert!(validate_and_assign(Vec::new(), 0, 0, now, &cfg).is_err());
    }

    #[test]
    fn log_append_time_and_forced_codec() {
        let now = 1_700_000_000_000;
        let cfg = LogConfig {
            message_timestamp_type: TimestampType::LogAppendTime,
            compression: CompressionTarget::Codec(Compression::Gzip),
            ..LogConfig::default()
        };
        let (out, info) =
            validate_and_assign(batch(Compression::Snappy, 4, 5), 0, 0, now, &cfg).unwrap();
        assert_eq!(info.log_append_time_ms, now);
        let h = BatchHeader::parse(&out).unwrap();
        assert_eq!(h.compression().unwrap(), Compression::Gzip);
        batch::verify_crc(&out).unwrap();
        let recs = decode_records(&out, RecordLimits::default()).unwrap();
        assert_eq!(recs.len(), 4);
        assert!(recs.iter().all(|r| r.timestamp == now));
        assert_eq!(recs[3].value.as_deref(), Some(&b"v3"[..]));
    }
}
