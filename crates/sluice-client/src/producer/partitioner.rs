//! Choosing a partition: an explicit one wins; then a custom [`Partitioner`]; then the
//! key's murmur2 hash (the Java client's and librdkafka's `murmur2_random` choice); keyless
//! records stick to one partition until its batch is sent (KIP-480), or go round-robin.

use sluice_protocol::murmur2::partition_for_key;

/// A user-supplied partition choice for records without an explicit partition.
pub trait Partitioner: Send + Sync {
    fn partition(&self, topic: &str, key: Option<&[u8]>, num_partitions: i32) -> i32;
}

/// The default choice for a key.
pub fn for_key(key: &[u8], num_partitions: i32) -> i32 {
    partition_for_key(key, num_partitions)
}

/// A cheap, process-unique random start for sticky/round-robin choices.
pub fn random_start(num_partitions: i32) -> i32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    (nanos % num_partitions.max(1) as u32) as i32
}
