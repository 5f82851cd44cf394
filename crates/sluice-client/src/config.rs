//! Client configuration, typed, and settable with Kafka's property names so existing
//! configs paste in: `ClientConfig::new("host:9092").set("linger.ms", "10")?`.

use std::time::Duration;

use sluice_protocol::compression::Compression;

use crate::consumer::OffsetReset;
use crate::error::{Error, Result};
use crate::group::assignor::Assignor;
use crate::security::SecurityConfig;

/// How records without an explicit partition are spread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartitionerKind {
    /// Kafka's default: murmur2 of the key; keyless records stick to a partition per batch
    /// (KIP-480).
    Default,
    /// Keyless records go round-robin; keyed ones still hash.
    RoundRobin,
}

#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// `bootstrap.servers`
    pub bootstrap_servers: Vec<String>,
    /// `client.id`
    pub client_id: String,
    /// `request.timeout.ms`
    pub request_timeout: Duration,
    /// `socket.connection.setup.timeout.ms`
    pub connect_timeout: Duration,
    /// `retry.backoff.ms`
    pub retry_backoff: Duration,
    /// `metadata.max.age.ms`
    pub metadata_max_age: Duration,

    /// `acks`: 0, 1 or -1 (`all`).
    pub acks: i16,
    /// `linger.ms`
    pub linger: Duration,
    /// `batch.size`
    pub batch_size: usize,
    /// `buffer.memory`
    pub buffer_memory: usize,
    /// `max.block.ms`
    pub max_block: Duration,
    /// `compression.type`
    pub compression: Compression,
    /// `retries`
    pub retries: u32,
    /// `delivery.timeout.ms`
    pub delivery_timeout: Duration,
    /// `max.in.flight.requests.per.connection`
    pub max_in_flight: usize,
    /// `max.request.size`
    pub max_request_size: usize,
    /// `partitioner.class` (`default` / `round-robin`)
    pub partitioner: PartitionerKind,
    /// `enable.idempotence`; unset means on when `acks=all` (Kafka 3+ behaviour).
    pub enable_idempotence: Option<bool>,
    /// `transactional.id`: makes the producer transactional.
    pub transactional_id: Option<String>,
    /// `transaction.timeout.ms`
    pub transaction_timeout: Duration,

    /// `group.id`
    pub group_id: Option<String>,
    /// `auto.offset.reset`
    pub auto_offset_reset: OffsetReset,
    /// `fetch.min.bytes`
    pub fetch_min_bytes: i32,
    /// `fetch.max.wait.ms`
    pub fetch_max_wait: Duration,
    /// `max.partition.fetch.bytes`
    pub max_partition_fetch_bytes: i32,
    /// `fetch.max.bytes`
    pub fetch_max_bytes: i32,
    /// `max.poll.records`
    pub max_poll_records: usize,
    /// `isolation.level` (`read_committed` = true)
    pub read_committed: bool,
    /// `check.crcs`
    pub check_crcs: bool,
    /// `group.instance.id` (static membership, KIP-345)
    pub group_instance_id: Option<String>,
    /// `enable.auto.commit`
    pub enable_auto_commit: bool,
    /// `auto.commit.interval.ms`
    pub auto_commit_interval: Duration,
    /// `session.timeout.ms`
    pub session_timeout: Duration,
    /// `heartbeat.interval.ms`
    pub heartbeat_interval: Duration,
    /// `max.poll.interval.ms` (also the rebalance timeout sent in JoinGroup)
    pub max_poll_interval: Duration,
    /// `partition.assignment.strategy`, in order of preference (classic protocol).
    pub assignors: Vec<Assignor>,
    /// `group.protocol`: `classic` (JoinGroup/SyncGroup, a member assigns) or `consumer`
    /// (KIP-848: ConsumerGroupHeartbeat, the coordinator assigns; `session.timeout.ms`,
    /// `heartbeat.interval.ms` and `partition.assignment.strategy` are then the group's).
    pub group_protocol: GroupProtocol,
    /// `group.remote.assignor`: the coordinator's assignor a consumer-protocol member asks
    /// for (`uniform`, `range`); unset, the group's default.
    pub group_remote_assignor: Option<String>,
    /// `share.acknowledgement.mode` (a [`crate::ShareConsumer`]): `implicit` (records a poll
    /// returned are accepted by the next poll, `commit_sync` or `close`) or `explicit` (the
    /// application acknowledges each one).
    pub share_acknowledgement_mode: crate::share_consumer::AcknowledgementMode,

    /// `security.protocol`, `ssl.*`, `sasl.*`.
    pub security: SecurityConfig,
}

/// The group protocol a consumer speaks (`group.protocol`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupProtocol {
    Classic,
    Consumer,
}

impl ClientConfig {
    /// Kafka's defaults (Kafka 4: `acks=all`, `linger.ms=5`).
    pub fn new(bootstrap_servers: &str) -> Self {
        Self {
            bootstrap_servers: split_list(bootstrap_servers),
            client_id: "sluice-client".into(),
            request_timeout: Duration::from_millis(30_000),
            connect_timeout: Duration::from_millis(10_000),
            retry_backoff: Duration::from_millis(100),
            metadata_max_age: Duration::from_millis(300_000),
            acks: -1,
            linger: Duration::from_millis(5),
            batch_size: 16_384,
            buffer_memory: 32 * 1024 * 1024,
            max_block: Duration::from_millis(60_000),
            compression: Compression::None,
            retries: i32::MAX as u32,
            delivery_timeout: Duration::from_millis(120_000),
            max_in_flight: 5,
            max_request_size: 1_048_576,
            partitioner: PartitionerKind::Default,
            enable_idempotence: None,
            transactional_id: None,
            transaction_timeout: Duration::from_secs(60),
            group_id: None,
            auto_offset_reset: OffsetReset::Latest,
            fetch_min_bytes: 1,
            fetch_max_wait: Duration::from_millis(500),
            max_partition_fetch_bytes: 1_048_576,
            fetch_max_bytes: 52_428_800,
            max_poll_records: 500,
            read_committed: false,
            check_crcs: true,
            group_instance_id: None,
            enable_auto_commit: true,
            auto_commit_interval: Duration::from_millis(5_000),
            session_timeout: Duration::from_millis(45_000),
            heartbeat_interval: Duration::from_millis(3_000),
            max_poll_interval: Duration::from_millis(300_000),
            assignors: vec![Assignor::Range, Assignor::CooperativeSticky],
            group_protocol: GroupProtocol::Classic,
            group_remote_assignor: None,
            share_acknowledgement_mode: crate::share_consumer::AcknowledgementMode::Implicit,
            security: SecurityConfig::default(),
        }
    }

    /// Set one property by its Kafka name. Unknown names are an error; settings Sluice
    /// accepts but does not act on are listed in [`IGNORED_KEYS`].
    pub fn set(mut self, key: &str, value: &str) -> Result<Self> {
        let v = value.trim();
        let bad = |m: &str| Error::Config {
            key: key.to_string(),
            message: format!("'{value}' {m}"),
        };
        let ms = |v: &str| -> Result<Duration> {
            v.parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| bad("is not a number of milliseconds"))
        };
        let num = |v: &str| -> Result<usize> {
            v.parse::<usize>()
                .map_err(|_| bad("is not a non-negative number"))
        };
        let int = |v: &str| -> Result<i32> { v.parse::<i32>().map_err(|_| bad("is not a number")) };
        let flag = |v: &str| -> Result<bool> {
            match v.to_ascii_lowercase().as_str() {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(bad("is not true or false")),
            }
        };
        match key {
            "bootstrap.servers" => self.bootstrap_servers = split_list(v),
            "client.id" => self.client_id = v.to_string(),
            "request.timeout.ms" => self.request_timeout = ms(v)?,
            "socket.connection.setup.timeout.ms" => self.connect_timeout = ms(v)?,
            "retry.backoff.ms" => self.retry_backoff = ms(v)?,
            "metadata.max.age.ms" => self.metadata_max_age = ms(v)?,
            "acks" => {
                self.acks = match v {
                    "all" | "-1" => -1,
                    "0" => 0,
                    "1" => 1,
                    _ => return Err(bad("must be all, -1, 0 or 1")),
                }
            }
            "linger.ms" => self.linger = ms(v)?,
            "batch.size" => self.batch_size = num(v)?,
            "buffer.memory" => self.buffer_memory = num(v)?,
            "max.block.ms" => self.max_block = ms(v)?,
            "compression.type" | "compression.codec" => {
                self.compression = Compression::from_name(v)
                    .ok_or_else(|| bad("must be none, gzip, snappy, lz4 or zstd"))?
            }
            "retries" => {
                self.retries = v.parse().map_err(|_| bad("is not a non-negative number"))?
            }
            "delivery.timeout.ms" => self.delivery_timeout = ms(v)?,
            "enable.idempotence" => self.enable_idempotence = Some(flag(v)?),
            "transactional.id" => {
                self.transactional_id = Some(v.to_string()).filter(|t| !t.is_empty())
            }
            "transaction.timeout.ms" => self.transaction_timeout = ms(v)?,
            "max.in.flight.requests.per.connection" => {
                self.max_in_flight = num(v)?.max(1);
            }
            "max.request.size" => self.max_request_size = num(v)?,
            "partitioner.class" | "partitioner" => {
                self.partitioner = match v {
                    "default"
                    | "murmur2"
                    | "murmur2_random"
                    | "org.apache.kafka.clients.producer.internals.DefaultPartitioner" => {
                        PartitionerKind::Default
                    }
                    "round-robin"
                    | "roundrobin"
                    | "org.apache.kafka.clients.producer.RoundRobinPartitioner" => {
                        PartitionerKind::RoundRobin
                    }
                    _ => return Err(bad("must be default or round-robin")),
                }
            }
            "group.id" => self.group_id = Some(v.to_string()).filter(|g| !g.is_empty()),
            "auto.offset.reset" => {
                self.auto_offset_reset = match v {
                    "earliest" => OffsetReset::Earliest,
                    "latest" => OffsetReset::Latest,
                    "none" => OffsetReset::None,
                    _ => return Err(bad("must be earliest, latest or none")),
                }
            }
            "fetch.min.bytes" => self.fetch_min_bytes = int(v)?,
            "fetch.max.wait.ms" => self.fetch_max_wait = ms(v)?,
            "max.partition.fetch.bytes" => self.max_partition_fetch_bytes = int(v)?,
            "fetch.max.bytes" => self.fetch_max_bytes = int(v)?,
            "max.poll.records" => self.max_poll_records = num(v)?.max(1),
            "isolation.level" => {
                self.read_committed = match v {
                    "read_committed" => true,
                    "read_uncommitted" => false,
                    _ => return Err(bad("must be read_committed or read_uncommitted")),
                }
            }
            "check.crcs" => self.check_crcs = flag(v)?,
            "group.instance.id" => {
                self.group_instance_id = Some(v.to_string()).filter(|g| !g.is_empty())
            }
            "enable.auto.commit" => self.enable_auto_commit = flag(v)?,
            "auto.commit.interval.ms" => self.auto_commit_interval = ms(v)?,
            "session.timeout.ms" => self.session_timeout = ms(v)?,
            "heartbeat.interval.ms" => self.heartbeat_interval = ms(v)?,
            "max.poll.interval.ms" => self.max_poll_interval = ms(v)?,
            "partition.assignment.strategy" => {
                let mut assignors = Vec::new();
                for name in v.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                    let a = Assignor::from_name(name)
                        .ok_or_else(|| bad("must list range, roundrobin or cooperative-sticky"))?;
                    if !assignors.contains(&a) {
                        assignors.push(a);
                    }
                }
                if assignors.is_empty() {
                    return Err(bad("must name at least one assignor"));
                }
                self.assignors = assignors;
            }
            "group.protocol" => {
                self.group_protocol = match v.to_ascii_lowercase().as_str() {
                    "classic" => GroupProtocol::Classic,
                    "consumer" => GroupProtocol::Consumer,
                    _ => return Err(bad("must be classic or consumer")),
                }
            }
            "group.remote.assignor" => {
                self.group_remote_assignor = Some(v.to_string()).filter(|a| !a.is_empty())
            }
            "share.acknowledgement.mode" => {
                use crate::share_consumer::AcknowledgementMode;
                self.share_acknowledgement_mode = match v.to_ascii_lowercase().as_str() {
                    "implicit" => AcknowledgementMode::Implicit,
                    "explicit" => AcknowledgementMode::Explicit,
                    _ => return Err(bad("must be implicit or explicit")),
                }
            }
            k if IGNORED_KEYS.contains(&k) => {}
            k => {
                // Security settings (their messages never repeat a value: it may be secret).
                let known = self
                    .security
                    .set(k, value)
                    .map_err(|message| Error::Config {
                        key: key.to_string(),
                        message,
                    })?;
                if !known {
                    return Err(Error::Config {
                        key: key.to_string(),
                        message: "unknown configuration".into(),
                    });
                }
            }
        }
        Ok(self)
    }

    /// Apply many `key=value` properties.
    pub fn set_all<'a>(
        mut self,
        props: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self> {
        for (k, v) in props {
            self = self.set(k, v)?;
        }
        Ok(self)
    }
}

/// Java-client settings accepted so pasted configs work, with no effect here (the client
/// takes bytes; serializers are Rust types).
pub const IGNORED_KEYS: &[&str] = &[
    "key.serializer",
    "value.serializer",
    "key.deserializer",
    "value.deserializer",
    "send.buffer.bytes",
    "receive.buffer.bytes",
    "reconnect.backoff.ms",
    "reconnect.backoff.max.ms",
];

fn split_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_property_names_set_typed_fields() {
        let c = ClientConfig::new("a:1, b:2")
            .set_all([
                ("acks", "all"),
                ("linger.ms", "20"),
                ("compression.type", "zstd"),
                ("key.serializer", "x"),
            ])
            .unwrap();
        assert_eq!(c.bootstrap_servers, vec!["a:1", "b:2"]);
        assert_eq!(
            (c.acks, c.linger, c.compression),
            (-1, Duration::from_millis(20), Compression::Zstd)
        );
        assert!(ClientConfig::new("a:1").set("acks", "2").is_err());
        assert!(ClientConfig::new("a:1").set("linger.ms", "soon").is_err());
        assert!(ClientConfig::new("a:1").set("no.such.key", "1").is_err());
        let c = ClientConfig::new("a:1")
            .set(
                "partition.assignment.strategy",
                "org.apache.kafka.clients.consumer.RoundRobinAssignor, cooperative-sticky",
            )
            .unwrap();
        assert_eq!(
            c.assignors,
            vec![Assignor::RoundRobin, Assignor::CooperativeSticky]
        );
        assert!(ClientConfig::new("a:1")
            .set("partition.assignment.strategy", "sticky-ish")
            .is_err());
    }
}
