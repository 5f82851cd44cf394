use sluice_protocol::ErrorCode;
use sluice_storage::LogError;
use thiserror::Error;

/// A per-item failure answered to the client: the Kafka error code and a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// A controller failure that is not the request's fault.
#[derive(Debug, Error)]
pub enum ControllerError {
    #[error("metadata log: {0}")]
    Log(#[from] LogError),
    #[error("metadata log is corrupt at offset {offset}: {reason}")]
    Corrupt { offset: i64, reason: String },
}
