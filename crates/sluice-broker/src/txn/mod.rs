//! Transactions.
//!
//! - [`state`]: the coordinator's per-transactional-id state machine, pure and unit-tested.
//! - [`records`]: its `__transaction_state` records in Kafka's format.
//! - [`coordinator`]: the task that owns the transactions of the `__transaction_state`
//!   partitions this broker leads, persists every change and answers the transaction APIs.
//! - [`markers`]: writes a finished transaction's commit/abort markers to its partitions.
//! - [`adder`]: adds partitions to a transactions-v2 client's transaction as it writes them.

pub mod adder;
pub mod coordinator;
pub mod markers;
pub mod records;
pub mod state;

/// PRODUCER_FENCED is new in a request's version `fenced_since`; older clients are told
/// INVALID_PRODUCER_EPOCH.
pub fn fenced_as(
    code: sluice_protocol::ErrorCode,
    version: i16,
    fenced_since: i16,
) -> sluice_protocol::ErrorCode {
    if code == sluice_protocol::ErrorCode::ProducerFenced && version < fenced_since {
        sluice_protocol::ErrorCode::InvalidProducerEpoch
    } else {
        code
    }
}
