//! [`BrokerSettings`]: what the broker reads while it serves, parsed once when a
//! [`BrokerConfig`] is built (and again for each config with dynamic values applied), so a
//! request reads a field instead of looking a key up and parsing its value. Values were
//! validated when the config was built; the clamps here only keep arithmetic sane.

use super::*;

/// A rate measured over `samples` windows of `size_ms` (`*.quota.window.*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QuotaWindow {
    pub samples: usize,
    pub size_ms: i64,
}

/// Followers fetching from leaders (`replica.*`, `num.replica.fetchers`, the replication
/// throttles).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplicaSettings {
    /// `replica.fetch.max.bytes`
    pub fetch_max_bytes: i32,
    /// `replica.fetch.response.max.bytes`
    pub fetch_response_max_bytes: i32,
    /// `replica.fetch.wait.max.ms`
    pub fetch_wait_max_ms: i32,
    /// `replica.fetch.backoff.ms`
    pub fetch_backoff_ms: u64,
    /// `replica.socket.timeout.ms`
    pub socket_timeout_ms: u64,
    /// `replica.lag.time.max.ms`
    pub lag_time_max_ms: i64,
    /// `num.replica.fetchers`
    pub fetchers: usize,
    /// `leader.replication.throttled.rate` (bytes/s; `i64::MAX`: unbounded)
    pub leader_throttled_rate: i64,
    /// `follower.replication.throttled.rate`
    pub follower_throttled_rate: i64,
    /// `replication.quota.window.*`
    pub quota_window: QuotaWindow,
}

/// Consumer groups and their offsets (`group.*`, `offsets.*`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupSettings {
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub initial_rebalance_delay_ms: i64,
    pub max_size: usize,
    /// `offsets.topic.num.partitions`
    pub offsets_partitions: i32,
    /// `offsets.retention.minutes`, in ms
    pub offsets_retention_ms: i64,
    pub offsets_retention_check_ms: u64,
    pub offset_metadata_max_bytes: usize,
}

/// Transactions (`transaction.*`, `transactional.id.expiration.ms`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxnSettings {
    /// `transaction.state.log.num.partitions`
    pub partitions: i32,
    pub max_timeout_ms: i64,
    pub id_expiration_ms: i64,
    pub abort_check_interval_ms: i64,
}

/// Tiered storage (`remote.log.*`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TierSettings {
    /// `remote.log.storage.system.enable`
    pub enabled: bool,
    /// `remote.log.storage.uri` (None: `remote/` beside the first log dir).
    pub uri: Option<String>,
    /// `remote.log.storage.s3.*`
    pub s3_endpoint: Option<String>,
    pub s3_region: Option<String>,
    pub s3_access_key_id: Option<String>,
    pub s3_secret_access_key: Option<String>,
    pub s3_path_style_access: bool,
    /// `remote.log.storage.request.timeout.ms`
    pub request_timeout_ms: u64,
    /// `remote.log.storage.retries`
    pub retries: usize,
    /// `remote.log.storage.cache.bytes`
    pub cache_bytes: u64,
    /// `remote.log.storage.cache.chunk.bytes`
    pub chunk_bytes: u64,
    /// `remote.log.storage.index.cache.bytes`
    pub index_cache_bytes: u64,
    /// `remote.log.manager.task.interval.ms`
    pub task_interval_ms: u64,
    /// `diskless.append.linger.ms`
    pub diskless_linger_ms: u64,
    /// `diskless.append.buffer.max.bytes`
    pub diskless_buffer_bytes: usize,
    /// `diskless.wal.delete.delay.ms`
    pub diskless_delete_delay_ms: i64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BrokerSettings {
    pub node_id: i32,
    /// `fetch.max.bytes`: the most a fetch answer holds.
    pub fetch_max_bytes: u64,
    /// `request.timeout.ms`
    pub request_timeout_ms: u64,
    /// `auto.create.topics.enable`
    pub auto_create_topics: bool,
    /// `socket.request.max.bytes`: the largest frame.
    pub socket_request_max_bytes: usize,
    /// `queued.max.requests`
    pub queued_max_requests: usize,
    /// `max.request.partition.size.limit`: the most partitions per DescribeTopicPartitions.
    pub max_request_partition_size_limit: i32,
    /// `replica.selector.class` is the rack-aware selector: leaders send consumers to an
    /// in-sync replica in their rack (KIP-392).
    pub rack_aware_replica_selector: bool,
    /// `queued.max.request.bytes` (-1: no byte bound)
    pub queued_max_request_bytes: i64,
    /// `connections.max.idle.ms`
    pub connections_max_idle_ms: u64,
    /// `sasl.server.max.receive.size`: the largest frame before authentication.
    pub sasl_max_receive_bytes: usize,
    /// `max.incremental.fetch.session.cache.slots`
    pub fetch_session_cache_slots: usize,
    /// `producer.id.expiration.ms`
    pub producer_id_expiration_ms: i64,
    /// `quota.window.*`
    pub quota_window: QuotaWindow,
    /// `controller.quota.window.*`
    pub controller_quota_window: QuotaWindow,
    pub replica: ReplicaSettings,
    pub group: GroupSettings,
    pub txn: TxnSettings,
    pub tier: TierSettings,
}

fn window(c: &BrokerConfig, samples: &str, seconds: &str) -> QuotaWindow {
    QuotaWindow {
        samples: c.number(samples).max(1) as usize,
        size_ms: c.number(seconds).clamp(1, 3600) * 1000,
    }
}

fn clamp_i32(v: i64, low: i64) -> i32 {
    v.clamp(low, i64::from(i32::MAX)) as i32
}

impl BrokerSettings {
    pub(crate) fn parse(c: &BrokerConfig) -> Self {
        let n = |k: &str| c.number(k);
        Self {
            node_id: c.node_id(),
            fetch_max_bytes: n("fetch.max.bytes").max(0) as u64,
            request_timeout_ms: n("request.timeout.ms").max(1) as u64,
            auto_create_topics: c.auto_create_topics(),
            socket_request_max_bytes: n("socket.request.max.bytes").max(1) as usize,
            queued_max_requests: n("queued.max.requests").max(1) as usize,
            max_request_partition_size_limit: clamp_i32(n("max.request.partition.size.limit"), 1),
            rack_aware_replica_selector: c.explicit("replica.selector.class")
                == Some(super::RACK_AWARE_REPLICA_SELECTOR),
            queued_max_request_bytes: n("queued.max.request.bytes"),
            connections_max_idle_ms: n("connections.max.idle.ms").max(1) as u64,
            sasl_max_receive_bytes: n("sasl.server.max.receive.size").max(1) as usize,
            fetch_session_cache_slots: n("max.incremental.fetch.session.cache.slots").max(0)
                as usize,
            producer_id_expiration_ms: n("producer.id.expiration.ms"),
            quota_window: window(c, "quota.window.num", "quota.window.size.seconds"),
            controller_quota_window: window(
                c,
                "controller.quota.window.num",
                "controller.quota.window.size.seconds",
            ),
            replica: ReplicaSettings {
                fetch_max_bytes: clamp_i32(n("replica.fetch.max.bytes"), 1),
                fetch_response_max_bytes: clamp_i32(n("replica.fetch.response.max.bytes"), 1),
                fetch_wait_max_ms: n("replica.fetch.wait.max.ms").clamp(0, 60_000) as i32,
                fetch_backoff_ms: n("replica.fetch.backoff.ms").clamp(10, 60_000) as u64,
                socket_timeout_ms: n("replica.socket.timeout.ms").max(1) as u64,
                lag_time_max_ms: n("replica.lag.time.max.ms").max(1),
                fetchers: n("num.replica.fetchers").max(1) as usize,
                leader_throttled_rate: n("leader.replication.throttled.rate"),
                follower_throttled_rate: n("follower.replication.throttled.rate"),
                quota_window: window(
                    c,
                    "replication.quota.window.num",
                    "replication.quota.window.size.seconds",
                ),
            },
            group: GroupSettings {
                min_session_timeout_ms: clamp_i32(n("group.min.session.timeout.ms"), 0),
                max_session_timeout_ms: clamp_i32(n("group.max.session.timeout.ms"), 0),
                initial_rebalance_delay_ms: n("group.initial.rebalance.delay.ms"),
                max_size: n("group.max.size").max(1) as usize,
                offsets_partitions: clamp_i32(n("offsets.topic.num.partitions"), 1),
                offsets_retention_ms: n("offsets.retention.minutes").saturating_mul(60_000),
                offsets_retention_check_ms: n("offsets.retention.check.interval.ms").max(1) as u64,
                offset_metadata_max_bytes: n("offset.metadata.max.bytes").max(0) as usize,
            },
            txn: TxnSettings {
                partitions: clamp_i32(n("transaction.state.log.num.partitions"), 1),
                max_timeout_ms: n("transaction.max.timeout.ms"),
                id_expiration_ms: n("transactional.id.expiration.ms"),
                abort_check_interval_ms: n(
                    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                ),
            },
            tier: TierSettings {
                enabled: c.remote_storage_enabled(),
                uri: c.explicit("remote.log.storage.uri").map(str::to_string),
                s3_endpoint: c
                    .explicit("remote.log.storage.s3.endpoint")
                    .map(str::to_string),
                s3_region: c
                    .explicit("remote.log.storage.s3.region")
                    .map(str::to_string),
                s3_access_key_id: c
                    .explicit("remote.log.storage.s3.access.key.id")
                    .map(str::to_string),
                s3_secret_access_key: c
                    .explicit("remote.log.storage.s3.secret.access.key")
                    .map(str::to_string),
                s3_path_style_access: c
                    .explicit("remote.log.storage.s3.path.style.access")
                    .is_some_and(|v| v.eq_ignore_ascii_case("true")),
                request_timeout_ms: n("remote.log.storage.request.timeout.ms").max(1) as u64,
                retries: n("remote.log.storage.retries").max(0) as usize,
                cache_bytes: n("remote.log.storage.cache.bytes").max(0) as u64,
                chunk_bytes: n("remote.log.storage.cache.chunk.bytes").max(65_536) as u64,
                index_cache_bytes: n("remote.log.storage.index.cache.bytes").max(0) as u64,
                task_interval_ms: n("remote.log.manager.task.interval.ms").max(1) as u64,
                diskless_linger_ms: n("diskless.append.linger.ms").max(1) as u64,
                diskless_buffer_bytes: n("diskless.append.buffer.max.bytes").max(1024) as usize,
                diskless_delete_delay_ms: n("diskless.wal.delete.delay.ms").max(1000),
            },
        }
    }
}
