//! Transactions.
//!
//! - [`state`]: the coordinator's per-transactional-id state machine, pure and unit-tested.
//! - [`records`]: its `__transaction_state` records in Kafka's format.
//! - [`coordinator`]: the task that owns the transactions of the `__transaction_state`
//!   partitions this broker leads, persists every change and answers the transaction APIs.
//! - [`markers`]: writes a finished transaction's commit/abort markers to its partitions.

pub mod coordinator;
pub mod markers;
pub mod records;
pub mod state;
