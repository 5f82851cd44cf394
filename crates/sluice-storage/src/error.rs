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
    /// Records at fault (KIP-467): (index in the batch, why), in batch order. INVALID_TIMESTAMP
    /// when any is a timestamp out of the topic's window, else INVALID_RECORD.
    #[error("{}", record_errors_message(*timestamp, errors))]
    RecordErrors {
        timestamp: bool,
        errors: Vec<(i32, String)>,
    },
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

/// The produce error message Kafka gives with per-record errors.
fn record_errors_message(timestamp: bool, errors: &[(i32, String)]) -> String {
    if timestamp {
        return "One or more records have been rejected due to invalid timestamp".into();
    }
    let shown: Vec<String> = errors
        .iter()
        .take(3)
        .map(|(i, m)| format!("RecordError(batchIndex={i}, message='{m}')"))
        .collect();
    format!(
        "One or more records have been rejected due to {} record errors in total, and only \
         showing the first three errors at most: [{}]",
        errors.len(),
        shown.join(", ")
    )
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
