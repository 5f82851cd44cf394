//! Disk work a log change leaves to be done after the log's lock is released: fsyncs
//! (`flush.messages`, a rolled segment) and the directory entry of a new segment. Readers of
//! the partition never wait for an fsync this way, and the caller chooses the thread that
//! does (never an async worker). (A roll's producer-state snapshot is written under the lock:
//! it is small, goes to the page cache, and must never outlive a truncation.)
//!
//! Crash safety does not depend on when (or whether) the work runs: the recovery point moves
//! only once the fsyncs behind it are done ([`crate::Log::complete_io`]), and everything past
//! the recovery point is re-validated after an unclean shutdown.

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

use crate::checkpoint;
use crate::error::{IoContext, LogError};

#[derive(Debug, Default)]
pub struct PendingIo {
    /// Files to fsync.
    pub(crate) files: Vec<(PathBuf, Arc<File>)>,
    /// A directory whose entries changed (a new segment).
    pub(crate) dir_sync: Option<PathBuf>,
    /// The recovery point the fsyncs establish, and the log's truncation count when it was
    /// planned (a truncation since makes it void).
    pub(crate) recovery_point: Option<(i64, u64)>,
}

impl PendingIo {
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.dir_sync.is_none()
    }

    /// Add `other`'s work to this one.
    pub(crate) fn merge(&mut self, other: PendingIo) {
        for f in other.files {
            if !self.files.iter().any(|(_, g)| Arc::ptr_eq(g, &f.1)) {
                self.files.push(f);
            }
        }
        self.dir_sync = self.dir_sync.take().or(other.dir_sync);
        self.recovery_point = match (self.recovery_point, other.recovery_point) {
            (Some(a), Some(b)) if b.1 == a.1 => Some((a.0.max(b.0), a.1)),
            (_, Some(b)) => Some(b),
            (a, None) => a,
        };
    }

    /// Do the work: fsync the files, then the directory.
    pub fn run(&self) -> Result<(), LogError> {
        for (path, file) in &self.files {
            sluice_rt::disk::sync_data(file, path).at(path)?;
        }
        if let Some(dir) = &self.dir_sync {
            checkpoint::sync_dir(dir)?;
        }
        Ok(())
    }
}
