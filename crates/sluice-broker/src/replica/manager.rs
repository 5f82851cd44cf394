//! [`ReplicaManager`]: every partition this broker hosts, created and removed as metadata
//! changes, plus the log-wide chores (retention, flush, checkpoints).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use sluice_metadata::config::{names_replica, topic_value, BrokerConfig, DynamicBrokerConfigs};
use sluice_metadata::image::{MetadataImage, PartitionDelta};
use sluice_metadata::Uuid;
use sluice_protocol::batch::TimestampType;
use sluice_protocol::compression::Compression;
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;
use sluice_storage::config::CompressionTarget;
use sluice_storage::{LogConfig, LogError, LogManager};
use tracing::{info, warn};

use crate::diskless::{is_diskless, Diskless};
use crate::metadata_cache::MetadataCache;
use crate::quota::{ReplicationQuotas, Window};
use crate::replica::partition::{Partition, PartitionSettings};
use crate::replica::purgatory::Purgatory;
use crate::replica::tier::Tier;

pub struct ReplicaManager {
    node_id: i32,
    logs: Arc<LogManager>,
    metadata: Arc<MetadataCache>,
    partitions: RwLock<HashMap<TopicPartition, Arc<Partition>>>,
    /// Replicas whose log directory failed, with their topic ids: answered
    /// KAFKA_STORAGE_ERROR, reported to the controller in every heartbeat (which moves their
    /// leadership away and takes them out of the ISR), never recreated until a restart.
    offline: RwLock<HashMap<TopicPartition, Uuid>>,
    /// acks=all appends waiting for their high watermark.
    pub(super) produce_purgatory: Purgatory,
    /// Fetches waiting for `min_bytes`.
    pub(super) fetch_purgatory: Purgatory,
    /// `leader/follower.replication.throttled.rate`, kept current with dynamic configs.
    replication_quotas: Arc<ReplicationQuotas>,
    /// `num.replica.fetchers`, kept current with dynamic configs.
    replica_fetchers: std::sync::atomic::AtomicUsize,
    /// Tiered storage, when `remote.log.storage.system.enable` is on.
    tier: std::sync::OnceLock<Arc<Tier>>,
    /// Diskless topics: their partitions are not hosted here but served through it.
    diskless: std::sync::OnceLock<Arc<Diskless>>,
}

/// `settings` for one replica: whether the topic's throttled-replica lists name it.
fn replica_settings(
    settings: PartitionSettings,
    overrides: &BTreeMap<String, String>,
    tp: &TopicPartition,
    node: i32,
) -> PartitionSettings {
    let named = |key: &str| {
        overrides
            .get(key)
            .is_some_and(|list| names_replica(list, tp.partition.0, node))
    };
    PartitionSettings {
        leader_throttled: named("leader.replication.throttled.replicas"),
        follower_throttled: named("follower.replication.throttled.replicas"),
        ..settings
    }
}

fn num<T: std::str::FromStr>(v: Option<String>, fallback: T) -> T {
    v.and_then(|s| s.trim().parse().ok()).unwrap_or(fallback)
}

/// Resolve a topic's log settings: overrides, then broker synonyms, then Kafka defaults.
pub fn log_config(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
) -> (LogConfig, PartitionSettings) {
    let get = |k: &str| topic_value(broker, overrides, k);
    let flag = |k: &str| get(k).is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    let d = LogConfig::default();
    let policy = get("cleanup.policy").unwrap_or_default();
    let codec = get("compression.type").unwrap_or_default();
    let compression = match codec.as_str() {
        "producer" | "" => CompressionTarget::Producer,
        other => {
            CompressionTarget::Codec(Compression::from_name(other).unwrap_or(Compression::None))
        }
    };
    let log = LogConfig {
        segment_bytes: num(get("segment.bytes"), d.segment_bytes),
        segment_ms: num(get("segment.ms"), d.segment_ms),
        segment_jitter_ms: num(get("segment.jitter.ms"), d.segment_jitter_ms),
        segment_index_bytes: num(get("segment.index.bytes"), d.segment_index_bytes),
        index_interval_bytes: num(get("index.interval.bytes"), d.index_interval_bytes),
        retention_ms: num(get("retention.ms"), d.retention_ms),
        retention_bytes: num(get("retention.bytes"), d.retention_bytes),
        flush_messages: num(get("flush.messages"), d.flush_messages),
        flush_ms: num(get("flush.ms"), d.flush_ms),
        max_message_bytes: num(get("max.message.bytes"), d.max_message_bytes),
        message_timestamp_type: if get("message.timestamp.type").as_deref() == Some("LogAppendTime")
        {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        },
        message_timestamp_before_max_ms: num(
            get("message.timestamp.before.max.ms"),
            d.message_timestamp_before_max_ms,
        ),
        message_timestamp_after_max_ms: num(
            get("message.timestamp.after.max.ms"),
            d.message_timestamp_after_max_ms,
        ),
        compression,
        cleanup_delete: policy.split(',').any(|p| p.trim() == "delete"),
        cleanup_compact: policy.split(',').any(|p| p.trim() == "compact"),
        preallocate: flag("preallocate"),
        delete_retention_ms: num(get("delete.retention.ms"), d.delete_retention_ms),
        min_compaction_lag_ms: num(get("min.compaction.lag.ms"), d.min_compaction_lag_ms),
        min_cleanable_dirty_ratio: num(
            get("min.cleanable.dirty.ratio"),
            d.min_cleanable_dirty_ratio,
        ),
        producer_id_expiration_ms: broker.settings().producer_id_expiration_ms,
        remote_storage: broker.settings().tier.enabled
            && flag("remote.storage.enable")
            && !policy.split(',').any(|p| p.trim() == "compact"),
        remote_copy_disable: flag("remote.log.copy.disable"),
        local_retention_ms: 0,
        local_retention_bytes: 0,
    };
    // -2: follow the total retention.
    let local_ms = num(get("local.retention.ms"), -2);
    let local_bytes = num(get("local.retention.bytes"), -2);
    let log = LogConfig {
        local_retention_ms: if local_ms == -2 {
            log.retention_ms
        } else {
            local_ms
        },
        local_retention_bytes: if local_bytes == -2 {
            log.retention_bytes
        } else {
            local_bytes
        },
        ..log
    };
    let settings = PartitionSettings {
        min_insync_replicas: num(get("min.insync.replicas"), 1),
        leader_throttled: false,
        follower_throttled: false,
        read_only_mirror: overrides.contains_key(sluice_metadata::config::MIRROR_LINK)
            && overrides
                .get(sluice_metadata::config::MIRROR_STATE)
                .and_then(|s| sluice_metadata::config::MirrorState::parse(s))
                .is_none_or(|s| s.read_only()),
        writable_from_epoch: overrides
            .get(sluice_metadata::config::MIRROR_PROMOTED_EPOCH)
            .and_then(|e| e.parse().ok())
            .unwrap_or(0),
    };
    (log, settings)
}

impl ReplicaManager {
    pub fn new(
        node_id: i32,
        logs: Arc<LogManager>,
        broker_config: Arc<BrokerConfig>,
        metadata: Arc<MetadataCache>,
    ) -> Self {
        let r = &broker_config.settings().replica;
        let window = Window {
            samples: r.quota_window.samples,
            size_ms: r.quota_window.size_ms,
        };
        let replication_quotas = Arc::new(ReplicationQuotas::new(window));
        let fetchers = r.fetchers;
        Self {
            node_id,
            logs,
            metadata,
            partitions: RwLock::new(HashMap::new()),
            offline: RwLock::new(HashMap::new()),
            produce_purgatory: Purgatory::new("produce"),
            fetch_purgatory: Purgatory::new("fetch"),
            replication_quotas,
            replica_fetchers: std::sync::atomic::AtomicUsize::new(fetchers),
            tier: std::sync::OnceLock::new(),
            diskless: std::sync::OnceLock::new(),
        }
    }

    /// Serve diskless topics through `diskless` (set once, at startup).
    pub fn set_diskless(&self, diskless: Arc<Diskless>) {
        let _ = self.diskless.set(diskless);
    }

    pub fn diskless(&self) -> Option<&Arc<Diskless>> {
        self.diskless.get()
    }

    pub(super) fn metadata(&self) -> &Arc<MetadataCache> {
        &self.metadata
    }

    /// Serve tiered storage through `tier` (set once, at startup).
    pub fn set_tier(&self, tier: Arc<Tier>) {
        let _ = self.tier.set(tier);
    }

    pub fn tier(&self) -> Option<&Arc<Tier>> {
        self.tier.get()
    }

    /// Tell hosted partitions what the remote tier holds of them: every partition named in
    /// `new`'s remote log metadata that differs from `old`'s (all of them when `old` is None).
    fn refresh_remote_logs(&self, old: Option<&MetadataImage>, new: &MetadataImage) {
        let mut keys: Vec<(Uuid, i32)> = new
            .remote_logs
            .iter()
            .filter(|(k, v)| {
                old.and_then(|o| o.remote_logs.get(k))
                    .is_none_or(|ov| !Arc::ptr_eq(ov, v))
            })
            .map(|(k, _)| *k)
            .collect();
        if let Some(o) = old {
            keys.extend(
                o.remote_logs
                    .keys()
                    .filter(|k| !new.remote_logs.contains_key(k)),
            );
        }
        for (topic_id, partition) in keys {
            let Some(name) = new.topic_names.get(&topic_id) else {
                continue;
            };
            if let Some(p) = self.get(&TopicPartition::new(name.clone(), partition)) {
                p.set_remote_log(new.remote_log(&topic_id, partition).cloned());
            }
        }
    }

    /// Fetchers per leader broker (`num.replica.fetchers`).
    pub fn replica_fetchers(&self) -> usize {
        self.replica_fetchers
            .load(std::sync::atomic::Ordering::Relaxed)
            .max(1)
    }

    pub fn replication_quotas(&self) -> &Arc<ReplicationQuotas> {
        &self.replication_quotas
    }

    /// Apply the replication settings of `config` (static and dynamic together): the
    /// throttle rates and the number of fetchers per leader.
    fn apply_broker_settings(&self, config: &BrokerConfig) {
        let r = &config.settings().replica;
        self.replica_fetchers
            .store(r.fetchers, std::sync::atomic::Ordering::Relaxed);
        let q = &self.replication_quotas;
        q.leader.set_bound(r.leader_throttled_rate);
        q.follower.set_bound(r.follower_throttled_rate);
    }

    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    pub fn log_manager(&self) -> &Arc<LogManager> {
        &self.logs
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<TopicPartition, Arc<Partition>>> {
        self.partitions
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<TopicPartition, Arc<Partition>>> {
        self.partitions
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn get(&self, tp: &TopicPartition) -> Option<Arc<Partition>> {
        self.read().get(tp).cloned()
    }

    /// The partition if this broker hosts it; else why not, as Kafka answers: a partition
    /// metadata knows is led elsewhere (NOT_LEADER_OR_FOLLOWER), otherwise it does not exist.
    pub(crate) fn hosted(&self, tp: &TopicPartition) -> Result<Arc<Partition>, ErrorCode> {
        if let Some(p) = self.get(tp) {
            return Ok(p);
        }
        if self.is_offline(tp) {
            return Err(ErrorCode::KafkaStorageError);
        }
        let image = self.metadata.current();
        if image
            .topic(&tp.topic)
            .is_some_and(|t| t.partitions.contains_key(&tp.partition.0))
        {
            Err(ErrorCode::NotLeaderOrFollower)
        } else if sluice_metadata::topic::validate_name(&tp.topic).is_err() {
            Err(ErrorCode::InvalidTopicException)
        } else {
            Err(ErrorCode::UnknownTopicOrPartition)
        }
    }

    /// Whether `tp`'s replica here is offline (its log directory failed).
    pub fn is_offline(&self, tp: &TopicPartition) -> bool {
        self.offline
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains_key(tp)
    }

    /// The offline replicas (topic id, partition), for the controller.
    pub fn offline_replicas(&self) -> Vec<(Uuid, i32)> {
        let mut all: Vec<(Uuid, i32)> = self
            .offline
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|(tp, id)| (*id, tp.partition.0))
            .collect();
        all.sort();
        all
    }

    /// Log directory `dir` failed (see `LogManager::fail_on`): its replicas go offline here.
    /// They stop serving (KAFKA_STORAGE_ERROR), leading and fetching, and their logs are
    /// forgotten. Returns how many.
    pub fn take_dir_offline(&self, dir: usize) -> usize {
        let gone = self.logs.forget_offline(dir);
        for tp in &gone {
            let removed = self.write().remove(tp);
            if let Some(p) = removed {
                self.offline
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(tp.clone(), p.topic_id);
                p.go_offline();
                warn!(partition = %tp, "replica offline: its log directory failed");
            }
        }
        gone.len()
    }

    /// The partition to append to (the leader check itself happens under the log lock).
    pub(super) fn leader_partition(
        &self,
        tp: &TopicPartition,
    ) -> Result<Arc<Partition>, ErrorCode> {
        self.hosted(tp)
    }

    /// Coordinators following an internal topic: the partitions (of `0..count`) whose
    /// leadership here differs from what the coordinator `known`s, with the leader epoch this
    /// broker now leads them in (None: no longer led here).
    pub fn leadership_changes(
        &self,
        topic: &str,
        count: i32,
        known: impl Fn(i32) -> Option<i32>,
    ) -> Vec<(i32, Option<i32>)> {
        (0..count)
            .filter_map(|partition| {
                let led = self
                    .get(&TopicPartition::new(topic, partition))
                    .filter(|p| p.is_leader())
                    .map(|p| p.leader_epoch());
                (led != known(partition)).then_some((partition, led))
            })
            .collect()
    }

    /// The static broker config with the image's dynamic broker configs applied.
    pub(crate) fn all(&self) -> Vec<Arc<Partition>> {
        self.read().values().cloned().collect()
    }

    /// At startup: open the logs on disk that metadata still knows (with the same topic id);
    /// delete the strays (topics deleted or re-created while this node was down).
    pub fn load_existing(&self, image: &MetadataImage, now_ms: i64) -> Result<(), LogError> {
        let effective = self.metadata.config_for(image).1;
        self.apply_broker_settings(&effective);
        for found in self.logs.scan()? {
            let topic = image.topic(&found.tp.topic);
            let hosted =
                topic.and_then(|t| t.partitions.get(&found.tp.partition.0).map(|p| (t, p)));
            match hosted {
                Some((t, reg))
                    if found.topic_id.is_none_or(|id| id == *t.id.as_bytes())
                        && reg.replicas.contains(&self.node_id)
                        && !is_diskless(image, &t.name) =>
                {
                    let overrides = image.topic_configs(&t.name);
                    let (config, settings) = log_config(&effective, &overrides);
                    let settings = replica_settings(settings, &overrides, &found.tp, self.node_id);
                    let log = self.logs.load(&found.tp, config, now_ms)?;
                    let p = Arc::new(
                        Partition::new(found.tp.clone(), t.id, log, self.node_id, settings)
                            .reporting_to(Arc::clone(&self.logs)),
                    );
                    p.update_registration(reg);
                    p.set_remote_log(image.remote_log(&t.id, found.tp.partition.0).cloned());
                    self.write().insert(found.tp, p);
                }
                _ => {
                    warn!(partition = %found.tp, "deleting a log that metadata no longer knows");
                    self.logs.delete(&found.tp)?;
                }
            }
        }
        Ok(())
    }

    /// React to a metadata change: create logs for new partitions hosted here, update
    /// leadership and configs, delete logs of deleted topics and of replicas moved away.
    /// `effective` is the broker configuration in effect with `new`.
    pub fn apply_delta(
        &self,
        old: &MetadataImage,
        new: &MetadataImage,
        effective: &BrokerConfig,
        now_ms: i64,
    ) -> Result<(), LogError> {
        let delta = PartitionDelta::between(old, new);
        for (name, id, partitions) in &delta.deleted {
            for p in partitions {
                let tp = TopicPartition::new(name.clone(), *p);
                if let (Some(tier), Some(_)) = (self.tier(), old.remote_log(id, *p)) {
                    if self.get(&tp).is_some() {
                        tier.forget_partition(name, *id.as_bytes(), *p);
                    }
                }
                self.write().remove(&tp);
                self.forget_offline(&tp);
                self.logs.delete(&tp)?;
            }
        }
        // Configs before registrations: a promoted mirror stops taking copied batches before
        // its new leader epoch arrives, and takes local writes only once it has (see
        // `PartitionSettings::writable_from_epoch`). Dynamic broker configs changed: every
        // topic's defaults may have.
        let broker_changed = DynamicBrokerConfigs::from_image(old, self.node_id)
            .differs(&DynamicBrokerConfigs::from_image(new, self.node_id));
        let mut changed_topics = delta.config_changed.clone();
        if broker_changed {
            self.apply_broker_settings(effective);
            changed_topics = new.topics.keys().cloned().collect();
        }
        for name in &changed_topics {
            let overrides = new.topic_configs(name);
            let (config, settings) = log_config(effective, &overrides);
            for p in self.all().into_iter().filter(|p| &p.tp.topic == name) {
                p.set_settings(replica_settings(settings, &overrides, &p.tp, self.node_id));
                p.log
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .set_config(config.clone())?;
            }
        }
        for (name, id, index, reg) in &delta.changed {
            if is_diskless(new, name) {
                // No broker holds a diskless partition's data.
                continue;
            }
            let tp = TopicPartition::new(name.clone(), *index);
            if !reg.replicas.contains(&self.node_id) {
                self.forget_offline(&tp);
                // Reassigned away: stop serving it (waiting requests learn the new
                // leader) and delete the replica, as Kafka's StopReplica with delete does.
                let removed = self.write().remove(&tp);
                if let Some(p) = removed {
                    p.update_registration(reg);
                    info!(partition = %tp, "replica reassigned away; deleting its log");
                    self.logs.delete(&tp)?;
                }
                continue;
            }
            if self.offline_topic_id(&tp) == Some(*id) {
                // Its log is on a failed disk: not recreated empty elsewhere (it may be the
                // last copy the ISR promises), whatever metadata says.
                continue;
            }
            let partition = match self.get(&tp) {
                Some(p) => p,
                None => self.create_partition(&tp, *id, new, effective, now_ms)?,
            };
            let isr_before = partition.state().isr().len();
            partition.update_registration(reg);
            if reg.leader == self.node_id && reg.isr.len() == 1 && isr_before > 1 {
                // This leader's disk now holds the only copy the cluster promises to keep.
                if let Err(e) = partition.flush_log(now_ms) {
                    warn!(partition = %tp, error = %e, "cannot fsync the log of a leader left alone in its ISR");
                }
            }
            // A replica new here of a partition the remote tier already holds.
            if let (Some(remote), None) = (new.remote_log(id, *index), partition.remote_log()) {
                partition.set_remote_log(Some(Arc::clone(remote)));
            }
        }
        self.refresh_remote_logs(Some(old), new);
        Ok(())
    }

    fn offline_topic_id(&self, tp: &TopicPartition) -> Option<Uuid> {
        self.offline
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(tp)
            .copied()
    }

    fn forget_offline(&self, tp: &TopicPartition) {
        self.offline
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(tp);
    }

    fn create_partition(
        &self,
        tp: &TopicPartition,
        id: Uuid,
        image: &MetadataImage,
        effective: &BrokerConfig,
        now_ms: i64,
    ) -> Result<Arc<Partition>, LogError> {
        let overrides = image.topic_configs(&tp.topic);
        let (config, settings) = log_config(effective, &overrides);
        let settings = replica_settings(settings, &overrides, tp, self.node_id);
        let log = self
            .logs
            .get_or_create(tp, *id.as_bytes(), config, now_ms)?;
        let p = Arc::new(
            Partition::new(tp.clone(), id, log, self.node_id, settings)
                .reporting_to(Arc::clone(&self.logs)),
        );
        self.write().insert(tp.clone(), Arc::clone(&p));
        info!(partition = %tp, "created partition");
        Ok(p)
    }

    /// One retention pass; returns segments deleted.
    pub fn run_retention(&self, now_ms: i64) -> usize {
        let hws: HashMap<TopicPartition, i64> = self
            .all()
            .iter()
            .map(|p| (p.tp.clone(), p.high_watermark()))
            .collect();
        self.logs
            .cleanup(now_ms, |tp| hws.get(tp).copied().unwrap_or(0))
    }

    /// One log-cleaner pass over compacted topics.
    pub fn run_cleaner(&self, now_ms: i64) -> usize {
        self.logs.clean(now_ms)
    }

    pub fn flush_due(&self, now_ms: i64) {
        self.logs.flush_due(now_ms);
    }

    pub fn checkpoint(&self) -> Result<(), LogError> {
        self.logs.checkpoint()
    }

    /// Close every log cleanly (flush, checkpoints, clean-shutdown marker).
    pub fn shutdown(&self, now_ms: i64) -> Result<(), LogError> {
        self.logs.shutdown(now_ms)
    }
}
