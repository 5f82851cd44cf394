use sluice_protocol::ErrorCode;
use thiserror::Error;

/// Everything a client call can fail with.
#[derive(Debug, Clone, Error)]
pub enum Error {
    /// The broker answered with a Kafka error code.
    #[error("{code:?} ({}){}", code.code(), message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    Kafka {
        code: ErrorCode,
        message: Option<String>,
    },
    /// No broker could be reached, or a connection broke.
    #[error("cannot reach {addr}: {reason}")]
    Connection { addr: String, reason: String },
    /// SASL or TLS authentication was refused (wrong credentials, an unoffered mechanism).
    #[error("authentication failed: {0}")]
    Authentication(String),
    /// An operation did not finish in time.
    #[error("timed out: {0}")]
    Timeout(String),
    /// The producer's `buffer.memory` stayed full for `max.block.ms`.
    #[error("buffer.memory exhausted for max.block.ms ({0} ms)")]
    BufferExhausted(u64),
    /// The broker speaks no version of an API this client can use.
    #[error("the broker does not support {0}")]
    UnsupportedVersion(String),
    /// A response could not be decoded, or made no sense.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// A configuration key or value is wrong.
    #[error("invalid configuration {key}: {message}")]
    Config { key: String, message: String },
    /// The client was closed.
    #[error("client closed")]
    Closed,
    /// The call is not possible in this state or with this broker.
    #[error("{0}")]
    Unsupported(String),
}

impl Error {
    pub fn kafka(code: i16, message: Option<String>) -> Option<Error> {
        ErrorCode::try_from_code(code).map(|code| Error::Kafka { code, message })
    }

    /// The Kafka error code, if the broker gave one.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Kafka { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Worth retrying after a metadata refresh or a backoff.
    pub fn is_retriable(&self) -> bool {
        match self {
            Error::Kafka { code, .. } => code.is_retriable(),
            Error::Connection { .. } | Error::Timeout(_) => true,
            _ => false,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `Ok(())` for code 0, else the error.
pub fn check(code: i16, message: Option<String>) -> Result<()> {
    match Error::kafka(code, message) {
        None => Ok(()),
        Some(e) => Err(e),
    }
}
