//! Every fuzz target, run by the seeded driver: its kept corpus and seeds, then mutations
//! from seed 1 for a few seconds each (the CI run; the same inputs every time). A longer
//! run, or another seed:
//!
//!   SLUICE_FUZZ_SECONDS=600 SLUICE_FUZZ_SEED=7 cargo test --release -p sluice-fuzz --test fuzz
//!
//! `SLUICE_FUZZ_TARGET=<name>` runs one target; a failure prints the seed and target that
//! replay it and saves the input under `target/fuzz-failures/`, which
//! `SLUICE_FUZZ_TARGET=<name> SLUICE_FUZZ_REPLAY=<file>` runs alone.

use std::path::PathBuf;
use std::time::Duration;

use sluice_fuzz::driver::{fuzz, Budget};

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn run(name: &str) {
    if std::env::var("SLUICE_FUZZ_TARGET").is_ok_and(|t| t != name) {
        return;
    }
    let target = sluice_fuzz::target(name).expect("a target of that name");
    if let Ok(path) = std::env::var("SLUICE_FUZZ_REPLAY") {
        let input = std::fs::read(&path).expect("the input to replay");
        match sluice_fuzz::driver::replay(&target, &input) {
            Ok(r) => eprintln!(
                "{name}: {path} passes (peak held {} bytes)",
                r.max_peak_bytes
            ),
            Err(what) => panic!("{name}: {path}: {what}"),
        }
        return;
    }
    // A fixed seed by default: the test suite runs the same inputs every time (as far as its
    // few seconds reach), so it fails only when a change breaks something. Exploring new
    // inputs is the long run's job, with seeds of its own.
    let seed = env_u64("SLUICE_FUZZ_SEED").unwrap_or(1);
    let budget = Budget {
        seed,
        time: Duration::from_secs(env_u64("SLUICE_FUZZ_SECONDS").unwrap_or(4)),
        inputs: env_u64("SLUICE_FUZZ_INPUTS").unwrap_or(u64::MAX),
    };
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = root.join("../../target/fuzz-failures");
    match fuzz(&target, &budget, &root.join("corpus"), &out) {
        Ok(r) => eprintln!(
            "{name}: seed {seed}: {} starting inputs, {} mutated, in {:.1?}; peak held {} bytes, reserved {}",
            r.starting_inputs, r.mutated_inputs, r.elapsed, r.max_peak_bytes, r.max_reserved_bytes
        ),
        Err(f) => panic!("{f}"),
    }
}

#[test]
fn request() {
    run("request");
}

#[test]
fn response() {
    run("response");
}

#[test]
fn records() {
    run("records");
}

#[test]
fn controller_rpc() {
    run("controller_rpc");
}

#[test]
fn log_dir() {
    run("log_dir");
}

#[test]
fn metadata_dir() {
    run("metadata_dir");
}

#[test]
fn sasl() {
    run("sasl");
}

#[test]
fn telemetry() {
    run("telemetry");
}

/// Every target has seeds, and every seed passes as it is.
#[test]
fn every_target_has_seeds() {
    for t in sluice_fuzz::targets() {
        assert!(!(t.seeds)().is_empty(), "{} has no seeds", t.name);
    }
}
