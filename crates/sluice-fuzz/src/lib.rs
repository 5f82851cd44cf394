//! Fuzz targets for every decoder that reads bytes from outside the process, and a seeded
//! driver that runs them on stable Rust.
//!
//! Each target is a plain `fn(&[u8])` that feeds the bytes to the project's real decoder
//! the way the broker, controller or client does, and panics only on a bug (the decoders
//! themselves must return errors). The same functions back the coverage-guided
//! `cargo fuzz` targets in `fuzz/` (nightly); on stable, [`driver::fuzz`] mutates each
//! target's seeds and kept corpus, under a time budget, checking three things per input:
//! no panic, no hang, and no more memory held than the target's bound (a constant factor
//! of the input's size: see [`Target::memory_bound`]).
//!
//! # Layout
//! - [`targets`]: the targets and their seeds (well-formed inputs built with the project's
//!   own encoders), by the format they read: Kafka frames, record batches, controller and
//!   Raft messages, log and metadata directories, SASL messages.
//! - [`driver`]: the seeded loop, failure reports and replay.
//! - [`mutate`], [`rng`]: the mutations and the generator behind them (fixed forever by the
//!   seed, so a printed seed replays).
//! - [`meter`]: the global allocator that measures what an input holds.

pub mod driver;
pub mod meter;
pub mod mutate;
pub mod rng;
pub mod targets;

/// One fuzz target.
pub struct Target {
    pub name: &'static str,
    /// Feed one input to the decoder under test.
    pub run: fn(&[u8]),
    /// Well-formed inputs to start mutating from.
    pub seeds: fn() -> Vec<Vec<u8>>,
    /// Longest input worth trying.
    pub max_len: usize,
    /// Most bytes one input may hold at once, given its length.
    pub memory_bound: fn(usize) -> usize,
}

/// A Kafka frame decodes into structs a few times its size (each element of an array
/// becomes a struct; an unknown tagged field a map entry), never more.
fn frame_bound(len: usize) -> usize {
    64 * len + (64 << 10)
}

/// Pushed metrics may inflate to 16 × the push bound, plus the frame bound.
fn telemetry_bound(len: usize) -> usize {
    frame_bound(len) + 32 * 4096
}

/// A record batch may inflate to the decompression limit, plus the frame bound.
fn records_bound(len: usize) -> usize {
    frame_bound(len) + 2 * targets::records::DECOMPRESSED_MAX as usize
}

/// Opening a directory holds its files' contents and the structures they rebuild (indexes
/// are mapped, not counted here), plus fixed per-log overheads.
fn dir_bound(len: usize) -> usize {
    16 * len + (4 << 20)
}

pub fn targets() -> Vec<Target> {
    use targets::*;
    vec![
        Target {
            name: "request",
            run: wire::request,
            seeds: wire::request_seeds,
            max_len: 4096,
            memory_bound: frame_bound,
        },
        Target {
            name: "response",
            run: wire::response,
            seeds: wire::response_seeds,
            max_len: 4096,
            memory_bound: frame_bound,
        },
        Target {
            name: "records",
            run: records::records,
            seeds: records::seeds,
            max_len: 8192,
            memory_bound: records_bound,
        },
        Target {
            name: "controller_rpc",
            run: controller::rpc,
            seeds: controller::rpc_seeds,
            max_len: 4096,
            memory_bound: frame_bound,
        },
        Target {
            name: "log_dir",
            run: files::log_dir,
            seeds: files::log_dir_seeds,
            max_len: 64 << 10,
            memory_bound: dir_bound,
        },
        Target {
            name: "metadata_dir",
            run: controller::metadata_dir,
            seeds: controller::metadata_dir_seeds,
            max_len: 64 << 10,
            memory_bound: dir_bound,
        },
        Target {
            name: "sasl",
            run: sasl::sasl,
            seeds: sasl::seeds,
            max_len: 1024,
            memory_bound: frame_bound,
        },
        Target {
            name: "telemetry",
            run: telemetry::telemetry,
            seeds: telemetry::seeds,
            max_len: 4096,
            memory_bound: telemetry_bound,
        },
    ]
}

pub fn target(name: &str) -> Option<Target> {
    targets().into_iter().find(|t| t.name == name)
}
