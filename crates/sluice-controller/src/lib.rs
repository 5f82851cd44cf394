//! sluice-controller
