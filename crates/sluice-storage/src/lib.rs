//! The partition log on disk: segments, sparse indexes, recovery, retention, checkpoints.
//! Plain file I/O; no async runtime, no networking. Time is passed in (`now_ms`).
//!
//! # Layout
//! - [`log`]: [`Log`], one partition's ordered segments: append as leader, read, look up by
//!   offset or timestamp, roll, retention, recovery after a crash.
//! - [`segment`]: [`segment::LogSegment`], one `.log` file with its `.index`/`.timeindex`.
//! - [`index`]: the memory-mapped sparse offset index and time index (Kafka's byte formats).
//! - [`validator`]: checks a producer's batches and assigns offsets in place.
//! - [`log_manager`]: [`LogManager`] owns every partition log of a log dir, the checkpoint
//!   files and the clean-shutdown marker.
//! - [`pending_io`]: fsyncs a log change leaves for its caller to run without the log's
//!   lock.
//! - [`cleaner`]: log compaction for `cleanup.policy=compact`.
//! - [`checkpoint`]: Kafka's offset checkpoint files, `partition.metadata`, `meta.properties`,
//!   and atomic file replacement.
//! - [`epoch_cache`]: the `leader-epoch-checkpoint` (epoch -> start offset).
//! - [`config`]: [`LogConfig`], the per-log settings resolved from topic/broker configs.

pub mod checkpoint;
pub mod cleaner;
pub mod config;
pub mod epoch_cache;
pub mod error;
pub mod index;
pub mod log;
pub mod log_manager;
pub mod pending_io;
pub mod producer_state;
pub mod segment;
pub mod txn_index;
pub mod validator;

pub use config::LogConfig;
pub use error::LogError;
pub use log::{FetchDataInfo, FileSlice, Log, LogAppendInfo, Marker};
pub use log_manager::LogManager;
pub use pending_io::PendingIo;
