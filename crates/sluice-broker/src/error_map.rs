//! The one place storage errors become Kafka error codes.

use sluice_protocol::ErrorCode;
use sluice_storage::LogError;

pub fn log_error_code(e: &LogError) -> ErrorCode {
    match e {
        LogError::Corrupt(_) => ErrorCode::CorruptMessage,
        LogError::InvalidRecord(_) => ErrorCode::InvalidRecord,
        LogError::MessageTooLarge { .. } => ErrorCode::MessageTooLarge,
        LogError::RecordErrors {
            timestamp: true, ..
        } => ErrorCode::InvalidTimestamp,
        LogError::RecordErrors { .. } => ErrorCode::InvalidRecord,
        LogError::UnsupportedFormat(_) => ErrorCode::UnsupportedForMessageFormat,
        LogError::OffsetOutOfRange { .. } => ErrorCode::OffsetOutOfRange,
        LogError::Io { .. } => ErrorCode::KafkaStorageError,
        LogError::OutOfOrderSequence(_) => ErrorCode::OutOfOrderSequenceNumber,
        LogError::InvalidProducerEpoch(_) => ErrorCode::InvalidProducerEpoch,
        LogError::CoordinatorFenced(_) => ErrorCode::TransactionCoordinatorFenced,
    }
}
