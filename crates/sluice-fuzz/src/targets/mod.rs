//! The targets, by the format they read.
pub mod controller;
pub mod files;
pub mod records;
pub mod sasl;
pub mod telemetry;
pub mod wire;
