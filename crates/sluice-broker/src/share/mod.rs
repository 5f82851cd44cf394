//! Share groups (KIP-932) at the partition leader: what ShareFetch and ShareAcknowledge
//! reach.
//!
//! - [`partition_state`]: one share group's in-flight window over one partition, a pure
//!   state machine (acquire, acknowledge, lock expiry, delivery limit).
//! - [`session`]: the share sessions of this broker (epochs and partition sets).
//! - [`state_records`]: the `__share_group_state` record formats (Kafka's), for persisting
//!   share-partition state.
//! - [`coordinator`]: the share coordinator, keeping share-partition states in
//!   `__share_group_state`; [`persister`]: how leaders reach it (here or on another broker).
//! - [`manager`]: [`manager::SharePartitionManager`], the service owning both, which reads
//!   the log through the replica layer and hands records out.

pub mod coordinator;
pub mod manager;
pub mod partition_state;
pub mod persister;
pub mod session;
pub mod state_records;

pub use manager::SharePartitionManager;

/// A hash of (group, member), to key a connection's close hook by.
pub fn session_hash(group: &str, member: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (group, member).hash(&mut h);
    h.finish()
}
