//! Consumer groups from the member's side: the embedded consumer protocol, the assignors,
//! coordinator lookup and offset calls, and a member's join/heartbeat/leave life cycle.

pub mod assignor;
mod consumer_protocol;
pub mod coordinator;
pub mod member;
pub mod protocol;

pub use assignor::Assignor;
pub use coordinator::{CommittedOffset, OffsetAndMetadata};

use sluice_protocol::types::TopicPartition;

/// Told about partitions as rebalances move them. Called from within `poll` (and `close`
/// / `unsubscribe`), on the task that polls, before records of a newly assigned partition
/// are returned and after the last record of a revoked one was.
///
/// With `enable.auto.commit`, the consumer has committed the positions of revoked partitions
/// before `on_revoked` runs.
pub trait RebalanceListener: Send {
    /// Partitions newly assigned to this member (with cooperative rebalancing, only the
    /// added ones; may be empty).
    fn on_assigned(&mut self, _partitions: &[TopicPartition]) {}
    /// Partitions taken away in an orderly rebalance; their offsets can still be committed.
    fn on_revoked(&mut self, _partitions: &[TopicPartition]) {}
    /// Partitions this member lost without a rebalance (its session expired, it was fenced):
    /// they may already be another member's, so committing them would fail. Defaults to
    /// `on_revoked`, as in the Java client.
    fn on_lost(&mut self, partitions: &[TopicPartition]) {
        self.on_revoked(partitions)
    }
}
