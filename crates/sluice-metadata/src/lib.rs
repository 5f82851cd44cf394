//! sluice-metadata
