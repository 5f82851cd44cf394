//! Consumer groups: the classic group protocol and committed offsets.
//!
//! - [`state`]: the pure group state machine.
//! - [`records`]: `__consumer_offsets` record formats (Kafka's).
//! - [`coordinator`]: the task that owns the state machine and the offsets, persists to
//!   `__consumer_offsets`, and answers the group APIs.

pub mod coordinator;
pub mod records;
pub mod state;
