//! The disk seam: the points where Sluice's storage makes data durable (fsync) or grows a
//! file. A server process calls the OS directly (after one check that no simulated world is
//! installed). A simulated world decides instead: it records how much of each file an fsync
//! made durable (so that a simulated power loss can tear what was not), and it can fail a
//! node's writes (a full disk, ENOSPC) or its fsyncs (EIO).
//!
//! Reads, and writes into a memory-mapped index, need no seam: a crash loses or keeps
//! those pages as the simulator decides when it tears the files, and recovery rebuilds the
//! indexes past the recovery point anyway.

use std::fs::File;
use std::io;
use std::path::Path;

use crate::simulated;

/// What the storage is about to do, as a simulated world sees it.
#[derive(Clone, Copy, Debug)]
pub enum DiskOp<'a> {
    /// Write `len` bytes into the file at `path` (growing it, or replacing its contents).
    Write { path: &'a Path, len: u64 },
    /// fsync the file at `path`, which is `len` bytes long: everything in it is durable once
    /// this succeeds.
    Sync { path: &'a Path, len: u64 },
    /// fsync the directory at `path`: its entries (new, renamed, removed files) are durable.
    SyncDir { path: &'a Path },
    /// The file at `from` was renamed to `to` (what was durable of it moves along).
    Renamed { from: &'a Path, to: &'a Path },
}

/// Ask the simulated world, if any, whether `op` may go ahead. Always `Ok` in a server.
#[inline]
pub fn check(op: DiskOp<'_>) -> io::Result<()> {
    match simulated() {
        None => Ok(()),
        Some(w) => w.disk(op),
    }
}

/// `File::sync_data` of `file` (at `path`). Simulated: the world records the file durable
/// at its current length, or fails the fsync; no real fsync happens.
pub fn sync_data(file: &File, path: &Path) -> io::Result<()> {
    match simulated() {
        None => file.sync_data(),
        Some(w) => w.disk(DiskOp::Sync {
            path,
            len: file.metadata()?.len(),
        }),
    }
}

/// `File::sync_all` of `file` (at `path`); simulated as [`sync_data`].
pub fn sync_all(file: &File, path: &Path) -> io::Result<()> {
    match simulated() {
        None => file.sync_all(),
        Some(w) => w.disk(DiskOp::Sync {
            path,
            len: file.metadata()?.len(),
        }),
    }
}

/// `std::fs::rename`, told to the simulated world (whose record of what is durable follows the
/// file).
pub fn rename(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::rename(from, to)?;
    match simulated() {
        None => Ok(()),
        Some(w) => w.disk(DiskOp::Renamed { from, to }),
    }
}

/// fsync the directory `dir` so that a create, rename or delete inside it is durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    match simulated() {
        None => File::open(dir).and_then(|d| d.sync_all()),
        Some(w) => w.disk(DiskOp::SyncDir { path: dir }),
    }
}
