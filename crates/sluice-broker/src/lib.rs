//! sluice-broker
