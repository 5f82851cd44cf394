//! Transactions. [`state`]: the transaction coordinator's per-transactional-id state machine,
//! pure and unit-tested; [`records`]: its `__transaction_state` records in Kafka's format.
//! The coordinator around them (loading and writing `__transaction_state`, the transaction
//! APIs and the commit/abort markers) is still to be built.

pub mod records;
pub mod state;
