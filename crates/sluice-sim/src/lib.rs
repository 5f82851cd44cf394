//! See `tests/simulation.rs` and the README section "What each test covers".
