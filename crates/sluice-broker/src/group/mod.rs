//! Consumer groups: the classic group protocol and committed offsets.
//!
//! - [`assignor`]: the server-side assignors of the consumer group protocol (KIP-848).
//! - [`consumer_group`]: one consumer group (KIP-848) as a pure state machine.
//! - [`consumer_records`]: `__consumer_offsets` records of consumer groups (KIP-848).
//! - [`reconcile`]: a consumer group member's way to its target assignment (KIP-848).
//! - [`state`]: the pure group state machine.
//! - [`share_group`]: one share group (KIP-932) as a pure state machine.
//! - [`streams_group`]: one streams group (KIP-1071) as a pure state machine.
//! - [`records`]: `__consumer_offsets` record formats (Kafka's).
//! - [`coordinator`]: the task that owns the state machine and the offsets, persists to
//!   `__consumer_offsets`, and answers the group APIs.

pub mod assignor;
pub mod consumer_group;
pub mod consumer_records;
pub mod coordinator;
pub mod reconcile;
pub mod records;
pub mod share_group;
pub mod state;
pub mod streams_group;
pub mod streams_records;
