//! The object-store layer under tiered storage (and, later, diskless topics). It knows
//! nothing of replicas, leaders or groups: it stores and reads objects, caches ranges of them
//! on local disk, and reads Kafka-format batches out of a remote segment.
//!
//! # Layout
//! - [`store`]: [`RemoteStore`], the store handle (`object_store`: a local directory or an
//!   S3-compatible bucket), with timeouts, retries and multipart uploads of large files.
//! - [`layout`]: where a remote segment's files live in the store ([`SegmentKey`]).
//! - [`cache`]: [`cache::RangeCache`], a bounded local-disk cache of remote byte ranges with
//!   single-flight fetches (concurrent readers of one range cost one GET), and an in-memory
//!   cache of remote offset indexes.
//! - [`reader`]: [`reader::RemoteReader`], whole batches from a remote segment at an offset,
//!   checked (framing, CRC32C, offsets) before they are cached or served.
//! - [`error`]: the crate's error type, [`RemoteError`].

pub mod cache;
pub mod error;
pub mod layout;
pub mod reader;
pub mod store;

pub use error::RemoteError;
pub use layout::SegmentKey;
pub use store::{RemoteStore, StoreConfig};
