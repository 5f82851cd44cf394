use thiserror::Error;

#[derive(Debug, Error)]
pub enum RemoteError {
    /// The store refused or could not be reached (after its retries).
    #[error("object store: {0}")]
    Store(#[from] object_store::Error),
    /// Local file work (the cache, reading a segment to upload).
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// A remote object is not what was uploaded: refused, never served.
    #[error("corrupt remote object {key}: {reason}")]
    Corrupt { key: String, reason: String },
    /// A configuration the store cannot be built from.
    #[error("{0}")]
    Config(String),
    /// What the work needs is not there now (tried again later).
    #[error("{0}")]
    Unavailable(String),
    /// Another reader's fetch of the same range failed.
    #[error("{0}")]
    Shared(String),
}

impl RemoteError {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        RemoteError::Io {
            path: path.display().to_string(),
            source,
        }
    }

    pub fn is_corrupt(&self) -> bool {
        matches!(self, RemoteError::Corrupt { .. })
    }
}
