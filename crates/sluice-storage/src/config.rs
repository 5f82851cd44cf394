use sluice_protocol::batch::TimestampType;
use sluice_protocol::compression::Compression;

/// What `compression.type` asks of the broker: keep the producer's codec, or re-encode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompressionTarget {
    Producer,
    Codec(Compression),
}

/// Settings of one partition log, resolved from topic overrides and broker defaults.
/// Field names are the topic config names with units last.
#[derive(Clone, Debug, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`
    pub segment_bytes: u64,
    /// `segment.ms`
    pub segment_ms: i64,
    /// `segment.jitter.ms`
    pub segment_jitter_ms: i64,
    /// `segment.index.bytes`
    pub segment_index_bytes: u64,
    /// `index.interval.bytes`
    pub index_interval_bytes: u64,
    /// `retention.ms`; negative means unlimited.
    pub retention_ms: i64,
    /// `retention.bytes`; negative means unlimited.
    pub retention_bytes: i64,
    /// `flush.messages`: fsync after this many unflushed records.
    pub flush_messages: u64,
    /// `flush.ms`: fsync when the oldest unflushed data is this old.
    pub flush_ms: i64,
    /// `max.message.bytes`: largest batch accepted.
    pub max_message_bytes: usize,
    /// `message.timestamp.type`
    pub message_timestamp_type: TimestampType,
    /// `message.timestamp.before.max.ms`
    pub message_timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms`
    pub message_timestamp_after_max_ms: i64,
    /// `compression.type`
    pub compression: CompressionTarget,
    /// `cleanup.policy` contains `delete`
    pub cleanup_delete: bool,
    /// `cleanup.policy` contains `compact`
    pub cleanup_compact: bool,
    /// `preallocate`
    pub preallocate: bool,
    /// `delete.retention.ms`: how long tombstones survive compaction.
    pub delete_retention_ms: i64,
    /// `min.compaction.lag.ms`: records younger than this are not compacted.
    pub min_compaction_lag_ms: i64,
    /// `min.cleanable.dirty.ratio`
    pub min_cleanable_dirty_ratio: f64,
    /// `producer.id.expiration.ms` (a broker config): idempotent producers silent this long
    /// are forgotten.
    pub producer_id_expiration_ms: i64,
    /// `remote.storage.enable` (and the broker's `remote.log.storage.system.enable`): closed
    /// segments are copied to the object store, and local retention applies.
    pub remote_storage: bool,
    /// `remote.log.copy.disable`: no more copies; local segments follow the total retention.
    pub remote_copy_disable: bool,
    /// `local.retention.ms`, -2 resolved to `retention.ms`.
    pub local_retention_ms: i64,
    /// `local.retention.bytes`, -2 resolved to `retention.bytes`.
    pub local_retention_bytes: i64,
}

impl LogConfig {
    /// Whether local retention applies: segments leave local disk once copied and past
    /// `local.retention.*`, the remote tier keeps them for `retention.*`.
    pub fn local_retention_applies(&self) -> bool {
        self.remote_storage && !self.remote_copy_disable
    }
}

impl Default for LogConfig {
    /// Kafka's defaults.
    fn default() -> Self {
        Self {
            segment_bytes: 1024 * 1024 * 1024,
            segment_ms: 7 * 24 * 60 * 60 * 1000,
            segment_jitter_ms: 0,
            segment_index_bytes: 10 * 1024 * 1024,
            index_interval_bytes: 4096,
            retention_ms: 7 * 24 * 60 * 60 * 1000,
            retention_bytes: -1,
            flush_messages: i64::MAX as u64,
            flush_ms: i64::MAX,
            max_message_bytes: 1_048_588,
            message_timestamp_type: TimestampType::CreateTime,
            message_timestamp_before_max_ms: i64::MAX,
            message_timestamp_after_max_ms: 3_600_000,
            compression: CompressionTarget::Producer,
            cleanup_delete: true,
            cleanup_compact: false,
            preallocate: false,
            delete_retention_ms: 86_400_000,
            min_compaction_lag_ms: 0,
            min_cleanable_dirty_ratio: 0.5,
            producer_id_expiration_ms: 86_400_000,
            remote_storage: false,
            remote_copy_disable: false,
            local_retention_ms: 7 * 24 * 60 * 60 * 1000,
            local_retention_bytes: -1,
        }
    }
}
