//! Wire glue over the `kafka-protocol` crate. Performs no I/O; operates only on bytes.
//!
//! # Layout
//! - [`frame`]: size-prefixed frames, the request header peek, and response framing.
//! - [`fetch_frame`]: Fetch responses as parts, with record sets spliced in by the writer.
//! - [`batch`]: the record batch v2 view (validate, patch offsets in place, iterate
//!   records) and [`batch::BatchBuilder`] for writing batches.
//! - [`compression`]: the five Kafka codecs, with a cap on every decompression.
//! - [`varint`]: zig-zag varints as used inside record batches.
//! - [`murmur2`]: Kafka's key hash, for partitioning identical to the Java client.
//! - [`alloc`]: a global allocator wrapper that keeps absurd length prefixes from
//!   aborting the process (see its docs for why).
//! - [`types`]: newtypes for the numbers that must not be mixed.
//! - [`base64`]: the URL-safe base64 Kafka prints topic ids in, and the padded form SCRAM uses.
//! - [`acl`]: Kafka's ACL codes, bindings, filters and the authorization decision.
//! - [`jaas`]: JAAS login-module entries (`sasl.jaas.config`).
//! - [`scram`]: the SCRAM-SHA-256/512 exchange (server and client halves) for SASL.

pub mod acl;
pub mod alloc;
pub mod base64;
pub mod batch;
pub mod compression;
pub mod fetch_frame;
pub mod frame;
pub mod jaas;
pub mod murmur2;
pub mod scram;
pub mod types;
pub mod varint;

pub use kafka_protocol;
pub use kafka_protocol::error::ResponseError as ErrorCode;
