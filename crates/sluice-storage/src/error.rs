use std::io;
use std::path::PathBuf;

use sluice_protocol::batch::BatchError;
use thiserror::Error;

/// Errors of the storage layer. The broker maps each to one Kafka error code.
#[derive(Debug, Error)]
pub enum LogError {
    /// A batch failed its CRC or its framing is broken (CORRUPT_MESSAGE).
    #[error("corrupt batch: {0}")]
    Corrupt(BatchError),
    /// A well-framed batch holds an invalid record (INVALID_RECORD).
    #[error("invalid record: {0}")]
    InvalidRecord(String),
    /// A batch larger than `max.message.bytes` (MESSAGE_TOO_LARGE).
    #[error("batch of {size} bytes exceeds max.message.bytes={max}")]
    MessageTooLarge { size: usize, max: usize },
    /// A CreateTime timestamp outside the allowed window (INVALID_TIMESTAMP).
    #[error("timestamp {timestamp} of record is out of the acceptable range [{low}, {high}]")]
    InvalidTimestamp { timestamp: i64, low: i64, high: i64 },
    /// A batch of a message format we do not accept (UNSUPPORTED_FOR_MESSAGE_FORMAT).
    #[error("unsupported message format: {0}")]
    UnsupportedFormat(String),
    /// A read outside `[log start, log end]` (OFFSET_OUT_OF_RANGE).
    #[error("offset {offset} is out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        offset: i64,
        log_start: i64,
        log_end: i64,
    },
    /// An idempotent producer's batch does not continue its sequence
    /// (OUT_OF_ORDER_SEQUENCE_NUMBER).
    #[error("{0}")]
    OutOfOrderSequence(String),
    /// A batch from an older epoch of its producer (INVALID_PRODUCER_EPOCH).
    #[error("{0}")]
    InvalidProducerEpoch(String),
    /// A transaction marker from an older coordinator epoch (TRANSACTION_COORDINATOR_FENCED).
    #[error("{0}")]
    CoordinatorFenced(String),
    /// The disk failed us (KAFKA_STORAGE_ERROR).
    #[error("I/O error on {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

impl LogError {
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        LogError::Io {
            path: path.into(),
            source,
        }
    }
}

/// Attach a path to an I/O result.
pub(crate) trait IoContext<T> {
    fn at(self, path: &std::path::Path) -> Result<T, LogError>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn at(self, path: &std::path::Path) -> Result<T, LogError> {
        self.map_err(|e| LogError::io(path, e))
    }
}
