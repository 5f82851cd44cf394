//! The replica layer: every partition this broker hosts, and the only way the rest of the
//! broker reads or writes one.
//!
//! # Layout
//! - [`manager`]: [`ReplicaManager`], the hosted partitions and their lifecycle (created,
//!   led, followed, deleted as metadata changes), plus the log-wide chores.
//! - [`append`]: `ReplicaManager::append` / `await_replication` / `append_markers`: leader
//!   appends from clients, coordinators and transaction markers, disk work on blocking
//!   threads, acks=all completed by the purgatory.
//! - [`read`]: `ReplicaManager::fetch`: consumers' and followers' reads as whole-batch file
//!   ranges, completed by the purgatory when `min_bytes` are not there yet, with the leader
//!   side of replication throttling.
//! - [`queries`]: what the offset and admin APIs ask of partitions (ListOffsets,
//!   OffsetForLeaderEpoch, DescribeProducers, DeleteRecords, DescribeLogDirs).
//! - [`partition`]: [`partition::Partition`], one hosted partition: log, replica state,
//!   watchers.
//! - [`state`]: the pure LEO/HW/ISR state machine of one partition.
//! - [`purgatory`]: delayed operations parked on partitions until they change or expire.
//! - [`fetcher`]: followers pulling from leaders.
//! - [`isr`]: the leader's ISR upkeep (AlterPartition through the controller).
//! - [`diskless`]: diskless partitions are hosted nowhere: their produce, fetch and
//!   ListOffsets are routed to [`crate::diskless`].
//! - [`tier`]: tiered storage: copying closed segments to the object store, remote
//!   retention, and reads below the local log start.

pub mod append;
pub mod diskless;
pub mod fetcher;
pub mod isr;
pub mod manager;
pub(crate) mod partition;
pub mod purgatory;
pub mod queries;
pub mod read;
pub mod state;
pub mod tier;

pub use append::{Acks, AppendOrigin, Appended, ReplicationOutcome};
pub use manager::ReplicaManager;
pub use partition::AppendError;
pub use read::{FetchParams, FetchPartitionRequest, FetchedPartition};
