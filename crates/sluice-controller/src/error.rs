pub use sluice_metadata::controller_types::ApiError;
use sluice_storage::LogError;
use thiserror::Error;

/// A controller failure that is not the request's fault.
#[derive(Debug, Error)]
pub enum ControllerError {
    #[error("metadata log: {0}")]
    Log(#[from] LogError),
    #[error("metadata log is corrupt at offset {offset}: {reason}")]
    Corrupt { offset: i64, reason: String },
}
