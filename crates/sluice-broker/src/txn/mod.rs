//! Transactions. [`state`]: the transaction coordinator's per-transactional-id state machine,
//! pure and unit-tested. The coordinator around it (`__transaction_state`, the transaction
//! APIs and the commit/abort markers) is still to be built.

pub mod state;
