//! Record batch v2 (magic 2): the unit of the produce path, the log, and the fetch path.
//!
//! ```text
//! offset  size  field
//!      0     8  baseOffset            (i64 BE)  set by the leader on append
//!      8     4  batchLength           (i32 BE)  bytes after this field
//!     12     4  partitionLeaderEpoch  (i32 BE)  set by the leader on append
//!     16     1  magic                 (i8)      always 2
//!     17     4  crc                   (u32 BE)  CRC-32C of bytes 21..end
//!     21     2  attributes            (i16 BE)  bits 0-2 codec, 3 LogAppendTime,
//!                                               4 transactional, 5 control, 6 delete horizon
//!     23     4  lastOffsetDelta       (i32 BE)
//!     27     8  baseTimestamp         (i64 BE)
//!     35     8  maxTimestamp          (i64 BE)
//!     43     8  producerId            (i64 BE)
//!     51     2  producerEpoch         (i16 BE)
//!     53     4  baseSequence          (i32 BE)
//!     57     4  recordCount           (i32 BE)
//!     61     …  records, compressed as a whole when the codec is not none
//! ```
//!
//! A record: `length varint, attributes i8, timestampDelta varlong, offsetDelta varint,
//! keyLength varint (-1 = null), key, valueLength varint, value, headerCount varint,
//! headers (keyLength varint, key utf-8, valueLength varint, value)`.
//!
//! Because baseOffset and partitionLeaderEpoch sit before the CRC'd range, the leader assigns
//! offsets by patching them in place without re-checksumming.

use std::io::{BufRead, BufReader, Read};

use bytes::Bytes;
use thiserror::Error;

use crate::compression::{self, Compression, CompressionError};
use crate::varint::{self, read_varint, read_varlong};

pub const MAGIC_V2: i8 = 2;
/// baseOffset + batchLength: the bytes before `batchLength` starts counting.
pub const LOG_OVERHEAD: usize = 12;
/// The fixed header of a v2 batch, up to the first record.
pub const BATCH_HEADER_LEN: usize = 61;

const PARTITION_LEADER_EPOCH_AT: usize = 12;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
const ATTRIBUTES_AT: usize = 21;
const MAX_TIMESTAMP_AT: usize = 35;

pub mod attributes {
    pub const COMPRESSION_MASK: i16 = 0x07;
    pub const LOG_APPEND_TIME: i16 = 0x08;
    pub const TRANSACTIONAL: i16 = 0x10;
    pub const CONTROL: i16 = 0x20;
    pub const DELETE_HORIZON: i16 = 0x40;
}

/// Sentinels for batches without an idempotent producer.
pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_PRODUCER_EPOCH: i16 = -1;
pub const NO_SEQUENCE: i32 = -1;

#[derive(Debug, Error)]
pub enum BatchError {
    #[error("batch truncated: need {needed} bytes, have {available}")]
    Truncated { needed: usize, available: usize },
    #[error("invalid batch length {0}")]
    InvalidLength(i32),
    #[error("unsupported record batch magic {0}")]
    UnsupportedMagic(i8),
    #[error("batch CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("invalid record: {0}")]
    InvalidRecord(String),
    #[error(transparent)]
    Compression(#[from] CompressionError),
}

impl BatchError {
    fn record(msg: impl Into<String>) -> Self {
        BatchError::InvalidRecord(msg.into())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

/// The decoded fixed header of a v2 batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

/// Base offset and total size (`LOG_OVERHEAD + batchLength`) of the batch starting `buf`,
/// from its first 12 bytes. None if fewer than 12 bytes; an error if the length is absurd.
pub fn peek_offset_and_size(buf: &[u8]) -> Result<Option<(i64, usize)>, BatchError> {
    if buf.len() < LOG_OVERHEAD {
        return Ok(None);
    }
    let length = be_i32(buf, 8);
    // A v2 batch is at least its header; anything shorter is corrupt, not merely short.
    if length < (BATCH_HEADER_LEN - LOG_OVERHEAD) as i32 {
        return Err(BatchError::InvalidLength(length));
    }
    Ok(Some((be_i64(buf, 0), LOG_OVERHEAD + length as usize)))
}

impl BatchHeader {
    /// Parse the fixed header; `buf` must hold at least [`BATCH_HEADER_LEN`] bytes but need
    /// not hold the whole batch.
    pub fn parse(buf: &[u8]) -> Result<Self, BatchError> {
        if buf.len() < BATCH_HEADER_LEN {
            return Err(BatchError::Truncated {
                needed: BATCH_HEADER_LEN,
                available: buf.len(),
            });
        }
        let magic = buf[MAGIC_AT] as i8;
        if magic != MAGIC_V2 {
            return Err(BatchError::UnsupportedMagic(magic));
        }
        let batch_length = be_i32(buf, 8);
        if batch_length < (BATCH_HEADER_LEN - LOG_OVERHEAD) as i32 {
            return Err(BatchError::InvalidLength(batch_length));
        }
        Ok(Self {
            base_offset: be_i64(buf, 0),
            batch_length,
            partition_leader_epoch: be_i32(buf, PARTITION_LEADER_EPOCH_AT),
            magic,
            crc: u32::from_be_bytes([buf[17], buf[18], buf[19], buf[20]]),
            attributes: be_i16(buf, ATTRIBUTES_AT),
            last_offset_delta: be_i32(buf, 23),
            base_timestamp: be_i64(buf, 27),
            max_timestamp: be_i64(buf, MAX_TIMESTAMP_AT),
            producer_id: be_i64(buf, 43),
            producer_epoch: be_i16(buf, 51),
            base_sequence: be_i32(buf, 53),
            record_count: be_i32(buf, 57),
        })
    }

    /// Bytes the whole batch occupies, including the offset and length fields.
    pub fn total_size(&self) -> usize {
        LOG_OVERHEAD + self.batch_length as usize
    }

    pub fn last_offset(&self) -> i64 {
        // Wrapping, as Kafka's Java does: the base offset is outside the CRC, so a damaged
        // one must not panic; offset checks downstream refuse the result.
        self.base_offset
            .wrapping_add(i64::from(self.last_offset_delta))
    }

    pub fn next_offset(&self) -> i64 {
        self.last_offset().wrapping_add(1)
    }

    pub fn compression(&self) -> Result<Compression, CompressionError> {
        Compression::from_id((self.attributes & attributes::COMPRESSION_MASK) as u8)
    }

    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & attributes::LOG_APPEND_TIME != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & attributes::TRANSACTIONAL != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & attributes::CONTROL != 0
    }

    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }
}

/// CRC-32C over the checksummed part of a batch (attributes to the end).
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(&batch[ATTRIBUTES_AT..])
}

/// Check the stored CRC of a whole batch.
pub fn verify_crc(batch: &[u8]) -> Result<(), BatchError> {
    let header = BatchHeader::parse(batch)?;
    if batch.len() != header.total_size() {
        return Err(BatchError::Truncated {
            needed: header.total_size(),
            available: batch.len(),
        });
    }
    let computed = compute_crc(batch);
    if computed != header.crc {
        return Err(BatchError::CrcMismatch {
            stored: header.crc,
            computed,
        });
    }
    Ok(())
}

/// Assign the batch's base offset (outside the CRC'd range).
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[0..8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Stamp the leader epoch (outside the CRC'd range).
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[PARTITION_LEADER_EPOCH_AT..PARTITION_LEADER_EPOCH_AT + 4]
        .copy_from_slice(&epoch.to_be_bytes());
}

/// Stamp the leader epoch of every whole batch in `batches` (a fetched run of batches; a
/// partial batch at the end, as a fetch may return, is left alone). Stops at a length
/// that cannot be a batch: the append that follows checks what is there.
pub fn set_leader_epochs(batches: &mut [u8], epoch: i32) {
    let mut at = 0usize;
    while let Ok(Some((_, size))) = peek_offset_and_size(&batches[at..]) {
        if at + size > batches.len() || size < BATCH_HEADER_LEN {
            return;
        }
        set_partition_leader_epoch(&mut batches[at..at + size], epoch);
        at += size;
    }
}

/// Write the timestamp type and max timestamp into a batch header (not the CRC).
fn stamp_max_timestamp(header: &mut [u8], timestamp_type: TimestampType, max_timestamp: i64) {
    let mut attrs = be_i16(header, ATTRIBUTES_AT);
    match timestamp_type {
        TimestampType::LogAppendTime => attrs |= attributes::LOG_APPEND_TIME,
        TimestampType::CreateTime => attrs &= !attributes::LOG_APPEND_TIME,
    }
    header[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attrs.to_be_bytes());
    header[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&max_timestamp.to_be_bytes());
}

/// Rewrite the timestamp type and max timestamp, then the CRC (both are in the CRC'd range).
pub fn set_max_timestamp(batch: &mut [u8], timestamp_type: TimestampType, max_timestamp: i64) {
    stamp_max_timestamp(batch, timestamp_type, max_timestamp);
    let crc = compute_crc(batch);
    batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
}

/// [`set_max_timestamp`] for a batch held as its header and the rest of it: only the header
/// changes; the CRC is computed over both.
pub fn set_max_timestamp_split(
    header: &mut [u8; BATCH_HEADER_LEN],
    body: &[u8],
    timestamp_type: TimestampType,
    max_timestamp: i64,
) {
    stamp_max_timestamp(header, timestamp_type, max_timestamp);
    let crc = crc32c::crc32c_append(crc32c::crc32c(&header[ATTRIBUTES_AT..]), body);
    header[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Iterates over the whole batches in a buffer of concatenated batches. A trailing partial
/// batch is an error (`Truncated`), so callers can tell "clean end" from "torn tail".
pub struct BatchIter<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> BatchIter<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes consumed by the batches yielded so far.
    pub fn position(&self) -> usize {
        self.pos
    }
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<(BatchHeader, &'a [u8]), BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = &self.buf[self.pos..];
        if rest.is_empty() {
            return None;
        }
        let result = (|| {
            let header = BatchHeader::parse(rest)?;
            let size = header.total_size();
            if rest.len() < size {
                return Err(BatchError::Truncated {
                    needed: size,
                    available: rest.len(),
                });
            }
            Ok((header, &rest[..size]))
        })();
        match &result {
            Ok((h, _)) => self.pos += h.total_size(),
            Err(_) => self.pos = self.buf.len(),
        }
        Some(result)
    }
}

/// One record, borrowed from a batch's (decompressed) record bytes.
#[derive(Clone, Copy, Debug)]
pub struct RecordView<'a> {
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub header_count: usize,
    headers: &'a [u8],
}

impl<'a> RecordView<'a> {
    /// Parse one record body (the bytes after its length varint), which must be consumed
    /// exactly.
    pub fn parse(body: &'a [u8]) -> Result<Self, BatchError> {
        let mut cur = Cursor { buf: body, pos: 0 };
        let attributes = cur.byte()? as i8;
        let timestamp_delta = cur.varlong()?;
        let offset_delta = cur.varint()?;
        let key = cur.nullable_bytes()?;
        let value = cur.nullable_bytes()?;
        let header_count = cur.varint()?;
        if header_count < 0 {
            return Err(BatchError::record(format!(
                "negative header count {header_count}"
            )));
        }
        let headers_start = cur.pos;
        for _ in 0..header_count {
            let header_key = cur.nullable_bytes()?;
            let Some(header_key) = header_key else {
                return Err(BatchError::record("null header key"));
            };
            if std::str::from_utf8(header_key).is_err() {
                return Err(BatchError::record("header key is not UTF-8"));
            }
            cur.nullable_bytes()?;
        }
        if cur.pos != body.len() {
            return Err(BatchError::record(format!(
                "record length {} but fields use {}",
                body.len(),
                cur.pos
            )));
        }
        Ok(Self {
            attributes,
            timestamp_delta,
            offset_delta,
            key,
            value,
            header_count: header_count as usize,
            headers: &body[headers_start..],
        })
    }

    /// The record's headers as (key, value) pairs; already validated by [`RecordView::parse`].
    pub fn headers(&self) -> impl Iterator<Item = (&'a str, Option<&'a [u8]>)> + 'a {
        let mut cur = Cursor {
            buf: self.headers,
            pos: 0,
        };
        (0..self.header_count).filter_map(move |_| {
            let key = cur.nullable_bytes().ok()??;
            let value = cur.nullable_bytes().ok()?;
            Some((std::str::from_utf8(key).ok()?, value))
        })
    }
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn byte(&mut self) -> Result<u8, BatchError> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or_else(|| BatchError::record("record truncated"))?;
        self.pos += 1;
        Ok(b)
    }
    fn varint(&mut self) -> Result<i32, BatchError> {
        let (v, n) =
            read_varint(&self.buf[self.pos..]).map_err(|e| BatchError::record(e.to_string()))?;
        self.pos += n;
        Ok(v)
    }
    fn varlong(&mut self) -> Result<i64, BatchError> {
        let (v, n) =
            read_varlong(&self.buf[self.pos..]).map_err(|e| BatchError::record(e.to_string()))?;
        self.pos += n;
        Ok(v)
    }
    fn nullable_bytes(&mut self) -> Result<Option<&'a [u8]>, BatchError> {
        let len = self.varint()?;
        if len < 0 {
            if len != -1 {
                return Err(BatchError::record(format!("invalid length {len}")));
            }
            return Ok(None);
        }
        let end = self.pos + len as usize;
        if end > self.buf.len() {
            return Err(BatchError::record("record field truncated"));
        }
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(Some(out))
    }
}

/// Caps applied while walking the records of a batch.
#[derive(Clone, Copy, Debug)]
pub struct RecordLimits {
    /// Most bytes a compressed batch may inflate to.
    pub decompressed_bytes_max: u64,
}

impl Default for RecordLimits {
    fn default() -> Self {
        Self {
            decompressed_bytes_max: 256 * 1024 * 1024,
        }
    }
}

/// Call `visit` for every record of a whole, CRC-checked batch, decompressing as a stream
/// (memory is bounded by the largest record, not the batch). Verifies that the record count
/// matches the header and that every record is well formed.
pub fn for_each_record<F>(
    batch: &[u8],
    limits: RecordLimits,
    mut visit: F,
) -> Result<(), BatchError>
where
    F: FnMut(&RecordView<'_>) -> Result<(), BatchError>,
{
    let header = BatchHeader::parse(batch)?;
    if batch.len() < header.total_size() {
        return Err(BatchError::Truncated {
            needed: header.total_size(),
            available: batch.len(),
        });
    }
    let payload = &batch[BATCH_HEADER_LEN..header.total_size()];
    let count = header.record_count;
    if count < 0 {
        return Err(BatchError::record(format!("negative record count {count}")));
    }
    let codec = header.compression()?;
    if codec == Compression::None {
        let mut pos = 0;
        for _ in 0..count {
            let (len, n) = read_varint(&payload[pos..])
                .map_err(|e| BatchError::record(format!("record length: {e}")))?;
            pos += n;
            if len < 0 || pos + len as usize > payload.len() {
                return Err(BatchError::record(format!(
                    "record length {len} out of bounds"
                )));
            }
            let record = RecordView::parse(&payload[pos..pos + len as usize])?;
            pos += len as usize;
            visit(&record)?;
        }
        if pos != payload.len() {
            return Err(BatchError::record(format!(
                "{} bytes after the last of {count} records",
                payload.len() - pos
            )));
        }
        return Ok(());
    }
    let reader = compression::decompressing_reader(codec, payload, limits.decompressed_bytes_max)?;
    let mut reader = BufReader::with_capacity(16 * 1024, reader);
    let mut body = Vec::new();
    let io_err =
        |e: std::io::Error| BatchError::Compression(compression::into_compression_error(codec, e));
    for _ in 0..count {
        let len = read_stream_varint(&mut reader).map_err(io_err)?;
        let Some(len) = len else {
            return Err(BatchError::record(format!("fewer than {count} records")));
        };
        if len < 0 || len as u64 > limits.decompressed_bytes_max {
            return Err(BatchError::record(format!(
                "record length {len} out of bounds"
            )));
        }
        body.clear();
        let got = (&mut reader)
            .take(len as u64)
            .read_to_end(&mut body)
            .map_err(io_err)?;
        if got != len as usize {
            return Err(BatchError::record("record truncated"));
        }
        visit(&RecordView::parse(&body)?)?;
    }
    if !reader.fill_buf().map_err(io_err)?.is_empty() {
        return Err(BatchError::record(format!(
            "bytes after the last of {count} records"
        )));
    }
    Ok(())
}

/// Read a zig-zag varint from a stream; None at a clean end of stream.
fn read_stream_varint<R: BufRead>(reader: &mut R) -> std::io::Result<Option<i32>> {
    let mut raw: u32 = 0;
    for i in 0..5 {
        let mut b = [0u8; 1];
        if reader.read(&mut b)? == 0 {
            if i == 0 {
                return Ok(None);
            }
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "varint truncated",
            ));
        }
        raw |= u32::from(b[0] & 0x7f) << (7 * i);
        if b[0] & 0x80 == 0 {
            return Ok(Some(((raw >> 1) as i32) ^ -((raw & 1) as i32)));
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "varint too long",
    ))
}

/// A record with owned fields, as a consumer sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
}

/// Decode every record of a whole batch into owned records with absolute offsets and
/// timestamps (LogAppendTime batches report the batch's max timestamp for every record).
pub fn decode_records(batch: &[u8], limits: RecordLimits) -> Result<Vec<Record>, BatchError> {
    let header = BatchHeader::parse(batch)?;
    let mut out = Vec::with_capacity((header.record_count.max(0) as usize).min(batch.len()));
    for_each_record(batch, limits, |r| {
        out.push(Record {
            offset: header.base_offset.wrapping_add(i64::from(r.offset_delta)),
            timestamp: match header.timestamp_type() {
                TimestampType::LogAppendTime => header.max_timestamp,
                TimestampType::CreateTime => header.base_timestamp.wrapping_add(r.timestamp_delta),
            },
            key: r.key.map(Bytes::copy_from_slice),
            value: r.value.map(Bytes::copy_from_slice),
            headers: r
                .headers()
                .map(|(k, v)| (k.to_owned(), v.map(Bytes::copy_from_slice)))
                .collect(),
        });
        Ok(())
    })?;
    Ok(out)
}

/// Builds one v2 batch. Records are encoded as they are appended; `build` compresses and
/// checksums.
#[derive(Clone, Debug)]
pub struct BatchBuilder {
    compression: Compression,
    timestamp_type: TimestampType,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
    control: bool,
    base_timestamp: Option<i64>,
    max_timestamp: i64,
    count: i32,
    /// Largest offset delta written; may exceed `count - 1` when a compacted batch keeps
    /// its original offsets (gaps allowed).
    last_offset_delta: i32,
    records: Vec<u8>,
}

impl BatchBuilder {
    pub fn new(compression: Compression) -> Self {
        Self {
            compression,
            timestamp_type: TimestampType::CreateTime,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            base_sequence: NO_SEQUENCE,
            transactional: false,
            control: false,
            base_timestamp: None,
            max_timestamp: -1,
            count: 0,
            last_offset_delta: -1,
            records: Vec::new(),
        }
    }

    pub fn with_timestamp_type(mut self, t: TimestampType) -> Self {
        self.timestamp_type = t;
        self
    }

    pub fn with_producer(mut self, id: i64, epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = id;
        self.producer_epoch = epoch;
        self.base_sequence = base_sequence;
        self
    }

    /// Stamp the producer id, epoch and first sequence (an idempotent producer's batch).
    pub fn set_producer(&mut self, id: i64, epoch: i16, base_sequence: i32) {
        self.producer_id = id;
        self.producer_epoch = epoch;
        self.base_sequence = base_sequence;
    }

    pub fn set_transactional(&mut self, transactional: bool) {
        self.transactional = transactional;
    }

    pub fn with_transactional(mut self, transactional: bool) -> Self {
        self.transactional = transactional;
        self
    }

    pub fn with_control(mut self, control: bool) -> Self {
        self.control = control;
        self
    }

    pub fn record_count(&self) -> i32 {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Uncompressed size so far, header included: an upper bound for `batch.size` checks.
    pub fn estimated_size(&self) -> usize {
        BATCH_HEADER_LEN + self.records.len()
    }

    /// Append a record; offsets are assigned in order from delta 0.
    pub fn append(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&str, Option<&[u8]>)],
    ) {
        let offset_delta = self.last_offset_delta + 1;
        self.append_at(offset_delta, timestamp, key, value, headers);
    }

    /// Append a record at an explicit offset delta, larger than every earlier one (the log
    /// cleaner keeps the offsets of the records it retains).
    pub fn append_at(
        &mut self,
        offset_delta: i32,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&str, Option<&[u8]>)],
    ) {
        debug_assert!(
            offset_delta > self.last_offset_delta,
            "offset deltas increase"
        );
        let base = *self.base_timestamp.get_or_insert(timestamp);
        let ts_delta = timestamp.wrapping_sub(base);
        let field_len = |b: Option<&[u8]>| match b {
            Some(b) => varint::varint_len(b.len() as i32) + b.len(),
            None => 1,
        };
        let mut len = 1
            + varint::varlong_len(ts_delta)
            + varint::varint_len(offset_delta)
            + field_len(key)
            + field_len(value)
            + varint::varint_len(headers.len() as i32);
        for (k, v) in headers {
            len += field_len(Some(k.as_bytes())) + field_len(*v);
        }
        let out = &mut self.records;
        varint::write_varint(out, len as i32);
        out.push(0);
        varint::write_varlong(out, ts_delta);
        varint::write_varint(out, offset_delta);
        write_nullable(out, key);
        write_nullable(out, value);
        varint::write_varint(out, headers.len() as i32);
        for (k, v) in headers {
            write_nullable(out, Some(k.as_bytes()));
            write_nullable(out, *v);
        }
        self.count += 1;
        self.last_offset_delta = offset_delta;
        self.max_timestamp = self.max_timestamp.max(timestamp);
    }

    /// Keep the batch's last offset at `delta` even if its last records were removed, so
    /// the batch still spans its original offsets.
    pub fn extend_last_offset_delta(&mut self, delta: i32) {
        self.last_offset_delta = self.last_offset_delta.max(delta);
    }

    /// Finish the batch with the given base offset (0 for a producer).
    pub fn build(&self, base_offset: i64) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(BATCH_HEADER_LEN + self.records.len());
        out.resize(BATCH_HEADER_LEN, 0);
        compression::compress(self.compression, &self.records, &mut out)?;
        let mut attrs = self.compression as i16;
        if self.timestamp_type == TimestampType::LogAppendTime {
            attrs |= attributes::LOG_APPEND_TIME;
        }
        if self.transactional {
            attrs |= attributes::TRANSACTIONAL;
        }
        if self.control {
            attrs |= attributes::CONTROL;
        }
        let batch_length = (out.len() - LOG_OVERHEAD) as i32;
        let base_ts = self.base_timestamp.unwrap_or(-1);
        let h = &mut out[..BATCH_HEADER_LEN];
        h[0..8].copy_from_slice(&base_offset.to_be_bytes());
        h[8..12].copy_from_slice(&batch_length.to_be_bytes());
        h[12..16].copy_from_slice(&(-1i32).to_be_bytes());
        h[16] = MAGIC_V2 as u8;
        h[21..23].copy_from_slice(&attrs.to_be_bytes());
        h[23..27].copy_from_slice(&self.last_offset_delta.max(0).to_be_bytes());
        h[27..35].copy_from_slice(&base_ts.to_be_bytes());
        h[35..43].copy_from_slice(&self.max_timestamp.to_be_bytes());
        h[43..51].copy_from_slice(&self.producer_id.to_be_bytes());
        h[51..53].copy_from_slice(&self.producer_epoch.to_be_bytes());
        h[53..57].copy_from_slice(&self.base_sequence.to_be_bytes());
        h[57..61].copy_from_slice(&self.count.to_be_bytes());
        let crc = compute_crc(&out);
        out[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
        Ok(out)
    }
}

fn write_nullable(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        Some(b) => {
            varint::write_varint(out, b.len() as i32);
            out.extend_from_slice(b);
        }
        None => varint::write_varint(out, -1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CODECS: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    fn sample(codec: Compression, n: usize) -> Vec<u8> {
        let mut b = BatchBuilder::new(codec);
        for i in 0..n {
            let key = format!("key-{i}");
            let hv = [7u8; 3];
            let headers: [(&str, Option<&[u8]>); 2] = [("h", Some(&hv[..])), ("n", None)];
            let value = if i % 5 == 4 {
                None
            } else {
                Some(format!("value-{i}").into_bytes())
            };
            b.append(
                1_000 + i as i64,
                Some(key.as_bytes()),
                value.as_deref(),
                &headers,
            );
        }
        b.build(100).unwrap()
    }

    #[test]
    fn leader_epochs_are_stamped_on_whole_batches_without_touching_the_crc() {
        let mut run = sample(Compression::None, 3);
        let second = sample(Compression::Zstd, 2);
        run.extend_from_slice(&second);
        let whole = run.len();
        run.extend_from_slice(&second[..20]); // a partial batch, as a fetch may end
        set_leader_epochs(&mut run, 42);
        let first = BatchHeader::parse(&run).unwrap();
        assert_eq!(first.partition_leader_epoch, 42);
        verify_crc(&run[..first.total_size()]).unwrap();
        let next = BatchHeader::parse(&run[first.total_size()..]).unwrap();
        assert_eq!(next.partition_leader_epoch, 42);
        assert_eq!(
            &run[whole..],
            &second[..20],
            "the partial tail is left alone"
        );
        // Garbage stops it quietly; the append that follows reports it.
        let mut junk = vec![0u8; 30];
        set_leader_epochs(&mut junk, 1);
    }

    #[test]
    fn builder_output_round_trips_for_every_codec() {
        for codec in CODECS {
            let batch = sample(codec, 50);
            verify_crc(&batch).unwrap();
            let h = BatchHeader::parse(&batch).unwrap();
            assert_eq!(h.compression().unwrap(), codec);
            assert_eq!(
                (h.base_offset, h.record_count, h.last_offset()),
                (100, 50, 149)
            );
            assert_eq!((h.base_timestamp, h.max_timestamp), (1_000, 1_049));
            let records = decode_records(&batch, RecordLimits::default()).unwrap();
            assert_eq!(records.len(), 50);
            assert_eq!(records[7].offset, 107);
            assert_eq!(records[7].timestamp, 1_007);
            assert_eq!(records[7].key.as_deref(), Some(&b"key-7"[..]));
            assert_eq!(records[4].value, None);
            assert_eq!(records[3].headers.len(), 2);
            assert_eq!(records[3].headers[1], ("n".to_string(), None));
        }
    }

    #[test]
    fn offsets_and_epoch_patch_without_breaking_the_crc() {
        let mut batch = sample(Compression::None, 3);
        set_base_offset(&mut batch, 42);
        set_partition_leader_epoch(&mut batch, 7);
        verify_crc(&batch).unwrap();
        let h = BatchHeader::parse(&batch).unwrap();
        assert_eq!((h.base_offset, h.partition_leader_epoch), (42, 7));
        set_max_timestamp(&mut batch, TimestampType::LogAppendTime, 9_999);
        verify_crc(&batch).unwrap();
        let records = decode_records(&batch, RecordLimits::default()).unwrap();
        assert!(records.iter().all(|r| r.timestamp == 9_999));
    }

    /// Found by the `records` fuzz target: the base offset is outside the CRC, so a damaged
    /// one near i64::MAX still passes the check, and adding the deltas overflowed (a panic
    /// with overflow checks on). Offsets wrap as in Kafka's Java; nothing panics.
    #[test]
    fn a_base_offset_at_the_end_of_the_range_does_not_panic() {
        let mut batch = sample(Compression::None, 3);
        set_base_offset(&mut batch, i64::MAX);
        verify_crc(&batch).unwrap();
        let h = BatchHeader::parse(&batch).unwrap();
        assert_eq!(h.last_offset(), i64::MIN + 1);
        let records = decode_records(&batch, RecordLimits::default()).unwrap();
        assert_eq!(records[1].offset, i64::MIN);
    }

    #[test]
    fn flipped_bit_is_a_crc_mismatch() {
        let mut batch = sample(Compression::Lz4, 10);
        let last = batch.len() - 1;
        batch[last] ^= 1;
        assert!(matches!(
            verify_crc(&batch),
            Err(BatchError::CrcMismatch { .. })
        ));
    }

    #[test]
    fn record_count_must_match() {
        for codec in CODECS {
            let mut batch = sample(codec, 4);
            batch[57..61].copy_from_slice(&5i32.to_be_bytes());
            assert!(for_each_record(&batch, RecordLimits::default(), |_| Ok(())).is_err());
            batch[57..61].copy_from_slice(&3i32.to_be_bytes());
            assert!(for_each_record(&batch, RecordLimits::default(), |_| Ok(())).is_err());
        }
    }

    #[test]
    fn batch_iter_reports_torn_tail() {
        let a = sample(Compression::None, 2);
        let b = sample(Compression::Gzip, 2);
        let mut buf = [a.clone(), b.clone()].concat();
        let all: Vec<_> = BatchIter::new(&buf).collect::<Result<_, _>>().unwrap();
        assert_eq!(all.len(), 2);
        buf.truncate(a.len() + 20);
        let mut it = BatchIter::new(&buf);
        assert!(it.next().unwrap().is_ok());
        assert_eq!(it.position(), a.len());
        assert!(matches!(it.next(), Some(Err(BatchError::Truncated { .. }))));
    }

    proptest! {
        #[test]
        fn garbage_batches_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = verify_crc(&bytes);
            let _ = decode_records(&bytes, RecordLimits { decompressed_bytes_max: 1 << 16 });
            for r in BatchIter::new(&bytes) { let _ = r; }
        }

        #[test]
        fn corrupted_valid_batches_never_panic(idx in 0usize..400, val in any::<u8>(), codec in 0usize..5) {
            let mut batch = sample(CODECS[codec], 5);
            let i = idx % batch.len();
            batch[i] = val;
            let _ = decode_records(&batch, RecordLimits { decompressed_bytes_max: 1 << 16 });
        }
    }
}
