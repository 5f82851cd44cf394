//! [`MetadataImage`]: cluster metadata as of some offset of the metadata log, built by
//! applying [`MetadataRecord`]s in order. Cheap to clone and compare; brokers keep an
//! `Arc<MetadataImage>` and react to [`PartitionDelta`] between two images.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use uuid::Uuid;

use crate::acl::AclBinding;
use crate::diskless::DisklessLog;
use crate::record::{Elr, Endpoint, MetadataRecord, TokenRecord};
use crate::remote::RemoteLog;

/// Batches per snapshot record of a diskless partition's log.
const DISKLESS_SNAPSHOT_BATCHES: usize = 1000;

/// Config resource types (Kafka's `ConfigResource.Type` codes).
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
pub const RESOURCE_BROKER_LOGGER: i8 = 8;
/// A cluster link (Sluice's mirroring; the code Confluent's clients use for the same).
pub const RESOURCE_CLUSTER_LINK: i8 = 64;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerRegistration {
    pub node_id: i32,
    pub epoch: i64,
    pub incarnation_id: Uuid,
    pub endpoints: Vec<Endpoint>,
    pub rack: Option<String>,
    /// Fenced brokers are registered but not live: they lead nothing and clients do not
    /// see them.
    pub fenced: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionRegistration {
    /// Every replica; during a reassignment the targets first, then those being removed.
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    /// Replicas a reassignment is adding / removing (both empty when none is in progress).
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
    /// Eligible leader replicas (KIP-966).
    pub elr: Elr,
}

impl PartitionRegistration {
    pub fn is_reassigning(&self) -> bool {
        !self.adding.is_empty() || !self.removing.is_empty()
    }

    /// The replica set a reassignment is moving to (the current set when none is).
    pub fn target_replicas(&self) -> Vec<i32> {
        self.replicas
            .iter()
            .copied()
            .filter(|r| !self.removing.contains(r))
            .collect()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicImage {
    pub name: String,
    pub id: Uuid,
    pub partitions: BTreeMap<i32, PartitionRegistration>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetadataImage {
    /// Offset of the last applied record in the metadata log; -1 when empty.
    pub offset: i64,
    pub brokers: BTreeMap<i32, BrokerRegistration>,
    pub topics: BTreeMap<String, TopicImage>,
    pub topic_names: HashMap<Uuid, String>,
    /// (resource type, resource name) -> config key -> value.
    pub configs: BTreeMap<(i8, String), BTreeMap<String, String>>,
    /// The first producer id not yet handed out.
    pub next_producer_id: i64,
    /// (user, SCRAM mechanism code) -> the stored credential.
    pub scram: BTreeMap<(String, i8), ScramEntry>,
    /// Every ACL, by id.
    pub acls: BTreeMap<Uuid, AclBinding>,
    /// Client quotas: entity -> quota key (`producer_byte_rate`, ...) -> value.
    pub client_quotas: BTreeMap<QuotaEntity, BTreeMap<String, QuotaValue>>,
    /// Finalized feature levels set in the log (see [`crate::features`]), and the offset of
    /// the last change (-1: none; the finalized features' epoch).
    pub features: BTreeMap<String, i16>,
    pub features_epoch: i64,
    /// Controllers of a dynamic quorum that made themselves known (see
    /// [`MetadataRecord::RegisterController`]).
    pub controllers: BTreeMap<i32, ControllerRegistration>,
    /// Delegation tokens, by token id.
    pub tokens: BTreeMap<String, TokenRecord>,
    /// Remote log metadata (tiered storage) by (topic id, partition). Shared: an image is
    /// cloned for every change, and these lists change once per segment copied or deleted.
    pub remote_logs: BTreeMap<(Uuid, i32), Arc<RemoteLog>>,
    /// Diskless partitions' logs by (topic id, partition): their committed batches. Shared
    /// like the remote logs; a commit copies the partitions it touches.
    pub diskless: BTreeMap<(Uuid, i32), Arc<DisklessLog>>,
    /// Names of the topics with `diskless.enable=true` (from their configs), so the hot
    /// paths route a partition without looking a config up.
    pub diskless_topics: std::collections::BTreeSet<String>,
    /// The topics whose produce the schema registry validates
    /// (`confluent.key.schema.validation`, `confluent.value.schema.validation`), so the
    /// produce path looks no config up for the others.
    pub schema_validated: BTreeMap<String, SchemaValidation>,
}

/// Which parts of a topic's records must carry a schema id registered for the topic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchemaValidation {
    pub key: bool,
    pub value: bool,
}

/// A controller's metadata log directory id and controller listener endpoints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerRegistration {
    pub directory_id: Uuid,
    pub endpoints: Vec<Endpoint>,
}

/// A client quota entity: each part is absent (None), the `<default>` entity (Some(None)),
/// or named.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QuotaEntity {
    pub user: Option<Option<String>>,
    pub client_id: Option<Option<String>>,
}

/// A quota value (compared bit for bit, so images stay `Eq`).
#[derive(Clone, Copy, Debug)]
pub struct QuotaValue(pub f64);

impl PartialEq for QuotaValue {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for QuotaValue {}

/// A user's SCRAM credential for one mechanism, as stored (no password).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScramEntry {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

impl MetadataImage {
    pub fn empty() -> Self {
        Self {
            offset: -1,
            features_epoch: -1,
            ..Self::default()
        }
    }

    /// Apply one record (the metadata log's offset `offset`).
    pub fn apply(&mut self, offset: i64, record: &MetadataRecord) {
        self.offset = offset;
        match record {
            MetadataRecord::RegisterBroker {
                node_id,
                epoch,
                incarnation_id,
                endpoints,
                rack,
                fenced,
            } => {
                self.brokers.insert(
                    *node_id,
                    BrokerRegistration {
                        node_id: *node_id,
                        epoch: *epoch,
                        incarnation_id: *incarnation_id,
                        endpoints: endpoints.clone(),
                        rack: rack.clone(),
                        fenced: *fenced,
                    },
                );
            }
            MetadataRecord::RegisterController {
                node_id,
                directory_id,
                endpoints,
            } => {
                self.controllers.insert(
                    *node_id,
                    ControllerRegistration {
                        directory_id: *directory_id,
                        endpoints: endpoints.clone(),
                    },
                );
            }
            MetadataRecord::UnregisterBroker { node_id, epoch } => {
                if self.brokers.get(node_id).is_some_and(|b| b.epoch == *epoch) {
                    self.brokers.remove(node_id);
                }
            }
            MetadataRecord::FenceBroker { node_id, epoch }
            | MetadataRecord::UnfenceBroker { node_id, epoch } => {
                let fence = matches!(record, MetadataRecord::FenceBroker { .. });
                if let Some(b) = self.brokers.get_mut(node_id).filter(|b| b.epoch == *epoch) {
                    b.fenced = fence;
                }
            }
            MetadataRecord::PartitionChange {
                topic_id,
                partition,
                leader,
                isr,
                assignment,
                elr,
            } => {
                if let Some(p) = self
                    .topic_names
                    .get(topic_id)
                    .and_then(|n| self.topics.get_mut(n))
                    .and_then(|t| t.partitions.get_mut(partition))
                {
                    // A replica leaving the set also moves the leader epoch, so that its
                    // fetches are fenced (as Kafka's PartitionChangeBuilder does).
                    let shrinks = assignment
                        .as_ref()
                        .is_some_and(|a| p.replicas.iter().any(|r| !a.replicas.contains(r)));
                    if p.leader != *leader || shrinks {
                        p.leader_epoch = p.leader_epoch.saturating_add(1);
                    }
                    p.leader = *leader;
                    p.isr = isr.clone();
                    if let Some(a) = assignment {
                        p.replicas = a.replicas.clone();
                        p.adding = a.adding.clone();
                        p.removing = a.removing.clone();
                    }
                    if let Some(e) = elr {
                        p.elr = e.clone();
                    }
                    p.partition_epoch = p.partition_epoch.saturating_add(1);
                }
            }
            MetadataRecord::Topic { name, id } => {
                self.topic_names.insert(*id, name.clone());
                self.topics.insert(
                    name.clone(),
                    TopicImage {
                        name: name.clone(),
                        id: *id,
                        partitions: BTreeMap::new(),
                    },
                );
            }
            MetadataRecord::Partition {
                topic_id,
                partition,
                replicas,
                isr,
                leader,
                leader_epoch,
                partition_epoch,
                adding,
                removing,
                elr,
            } => {
                if let Some(topic) = self
                    .topic_names
                    .get(topic_id)
                    .and_then(|n| self.topics.get_mut(n))
                {
                    topic.partitions.insert(
                        *partition,
                        PartitionRegistration {
                            replicas: replicas.clone(),
                            isr: isr.clone(),
                            leader: *leader,
                            leader_epoch: *leader_epoch,
                            partition_epoch: *partition_epoch,
                            adding: adding.clone(),
                            removing: removing.clone(),
                            elr: elr.clone(),
                        },
                    );
                }
            }
            MetadataRecord::Config {
                resource_type,
                resource_name,
                name,
                value,
            } => {
                if *resource_type == RESOURCE_TOPIC
                    && (name == "confluent.key.schema.validation"
                        || name == "confluent.value.schema.validation")
                {
                    let on = value
                        .as_deref()
                        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
                    let mut v = self
                        .schema_validated
                        .get(resource_name)
                        .copied()
                        .unwrap_or_default();
                    if name == "confluent.key.schema.validation" {
                        v.key = on;
                    } else {
                        v.value = on;
                    }
                    if v == SchemaValidation::default() {
                        self.schema_validated.remove(resource_name);
                    } else {
                        self.schema_validated.insert(resource_name.clone(), v);
                    }
                }
                if *resource_type == RESOURCE_TOPIC && name == "diskless.enable" {
                    if value
                        .as_deref()
                        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
                    {
                        self.diskless_topics.insert(resource_name.clone());
                    } else {
                        self.diskless_topics.remove(resource_name);
                    }
                }
                let key = (*resource_type, resource_name.clone());
                let entry = self.configs.entry(key.clone()).or_default();
                match value {
                    Some(v) => {
                        entry.insert(name.clone(), v.clone());
                    }
                    None => {
                        entry.remove(name);
                        if entry.is_empty() {
                            self.configs.remove(&key);
                        }
                    }
                }
            }
            MetadataRecord::ProducerIds {
                next_producer_id, ..
            } => {
                self.next_producer_id = self.next_producer_id.max(*next_producer_id);
            }
            MetadataRecord::ScramCredential {
                user,
                mechanism,
                salt,
                stored_key,
                server_key,
                iterations,
            } => {
                self.scram.insert(
                    (user.clone(), *mechanism),
                    ScramEntry {
                        salt: salt.clone(),
                        stored_key: stored_key.clone(),
                        server_key: server_key.clone(),
                        iterations: *iterations,
                    },
                );
            }
            MetadataRecord::RemoveScramCredential { user, mechanism } => {
                self.scram.remove(&(user.clone(), *mechanism));
            }
            MetadataRecord::Acl { id, binding } => {
                self.acls.insert(*id, binding.clone());
            }
            MetadataRecord::ClientQuota { entity, key, value } => match value {
                Some(v) => {
                    self.client_quotas
                        .entry(entity.clone())
                        .or_default()
                        .insert(key.clone(), *v);
                }
                None => {
                    if let Some(values) = self.client_quotas.get_mut(entity) {
                        values.remove(key);
                        if values.is_empty() {
                            self.client_quotas.remove(entity);
                        }
                    }
                }
            },
            MetadataRecord::RemoveAcl { id } => {
                self.acls.remove(id);
            }
            MetadataRecord::DelegationToken(t) => {
                self.tokens.insert(t.token_id.clone(), t.clone());
            }
            MetadataRecord::RemoveDelegationToken { token_id } => {
                self.tokens.remove(token_id);
            }
            MetadataRecord::FeatureLevel { name, level } => {
                // 0 is kept: a feature turned off stays off, whatever its default.
                self.features.insert(name.clone(), *level);
                self.features_epoch = offset;
            }
            MetadataRecord::RemoteLogSegment(seg) => {
                let key = (seg.topic_id, seg.partition);
                let log = self.remote_logs.entry(key).or_default();
                Arc::make_mut(log).apply(seg);
                if log.segments.is_empty() {
                    self.remote_logs.remove(&key);
                }
            }
            MetadataRecord::DisklessBatches { batches, .. } => {
                for (topic_id, partition, b) in batches {
                    let log = self.diskless.entry((*topic_id, *partition)).or_default();
                    // A snapshot's log may start past 0 (trimmed): its first batch sets
                    // where a fresh log is.
                    let fresh = *log == Default::default();
                    if b.base_offset == log.end_offset || fresh {
                        Arc::make_mut(log).push_first(b.clone(), fresh);
                    }
                }
            }
            MetadataRecord::DisklessTrim {
                topic_id,
                partition,
                start_offset,
            } => {
                let log = self.diskless.entry((*topic_id, *partition)).or_default();
                if *start_offset > log.start_offset {
                    Arc::make_mut(log).trim(*start_offset);
                }
            }
            MetadataRecord::DisklessSegment {
                topic_id,
                partition,
                segment,
            } => {
                let log = self.diskless.entry((*topic_id, *partition)).or_default();
                Arc::make_mut(log).compact(segment);
            }
            MetadataRecord::DisklessState {
                topic_id,
                partition,
                state,
            } => {
                let log = self.diskless.entry((*topic_id, *partition)).or_default();
                Arc::make_mut(log).set_state(state);
            }
            MetadataRecord::RemoveTopic { topic_id } => {
                self.remote_logs.retain(|(t, _), _| t != topic_id);
                self.diskless.retain(|(t, _), _| t != topic_id);
                if let Some(name) = self.topic_names.remove(topic_id) {
                    self.diskless_topics.remove(&name);
                    self.schema_validated.remove(&name);
                    self.topics.remove(&name);
                    self.configs.remove(&(RESOURCE_TOPIC, name));
                }
            }
        }
    }

    /// Brokers that are registered and not fenced.
    pub fn is_live(&self, node_id: i32) -> bool {
        self.brokers.get(&node_id).is_some_and(|b| !b.fenced)
    }

    pub fn live_brokers(&self) -> impl Iterator<Item = &BrokerRegistration> {
        self.brokers.values().filter(|b| !b.fenced)
    }

    /// The records that rebuild this image from empty (a snapshot's contents).
    pub fn to_records(&self) -> Vec<MetadataRecord> {
        let mut out = Vec::new();
        for b in self.brokers.values() {
            out.push(MetadataRecord::RegisterBroker {
                node_id: b.node_id,
                epoch: b.epoch,
                incarnation_id: b.incarnation_id,
                endpoints: b.endpoints.clone(),
                rack: b.rack.clone(),
                fenced: b.fenced,
            });
        }
        for (node_id, c) in &self.controllers {
            out.push(MetadataRecord::RegisterController {
                node_id: *node_id,
                directory_id: c.directory_id,
                endpoints: c.endpoints.clone(),
            });
        }
        for t in self.topics.values() {
            out.push(MetadataRecord::Topic {
                name: t.name.clone(),
                id: t.id,
            });
            for (p, reg) in &t.partitions {
                out.push(MetadataRecord::Partition {
                    topic_id: t.id,
                    partition: *p,
                    replicas: reg.replicas.clone(),
                    isr: reg.isr.clone(),
                    leader: reg.leader,
                    leader_epoch: reg.leader_epoch,
                    partition_epoch: reg.partition_epoch,
                    adding: reg.adding.clone(),
                    removing: reg.removing.clone(),
                    elr: reg.elr.clone(),
                });
            }
        }
        for ((resource_type, resource_name), entries) in &self.configs {
            for (name, value) in entries {
                out.push(MetadataRecord::Config {
                    resource_type: *resource_type,
                    resource_name: resource_name.clone(),
                    name: name.clone(),
                    value: Some(value.clone()),
                });
            }
        }
        if self.next_producer_id > 0 {
            out.push(MetadataRecord::ProducerIds {
                node_id: -1,
                next_producer_id: self.next_producer_id,
            });
        }
        for ((user, mechanism), c) in &self.scram {
            out.push(MetadataRecord::ScramCredential {
                user: user.clone(),
                mechanism: *mechanism,
                salt: c.salt.clone(),
                stored_key: c.stored_key.clone(),
                server_key: c.server_key.clone(),
                iterations: c.iterations,
            });
        }
        for t in self.tokens.values() {
            out.push(MetadataRecord::DelegationToken(t.clone()));
        }
        for (id, binding) in &self.acls {
            out.push(MetadataRecord::Acl {
                id: *id,
                binding: binding.clone(),
            });
        }
        for (entity, values) in &self.client_quotas {
            for (key, value) in values {
                out.push(MetadataRecord::ClientQuota {
                    entity: entity.clone(),
                    key: key.clone(),
                    value: Some(*value),
                });
            }
        }
        for log in self.remote_logs.values() {
            out.extend(
                log.segments
                    .iter()
                    .map(|s| MetadataRecord::RemoteLogSegment(s.clone())),
            );
        }
        for ((topic_id, partition), log) in &self.diskless {
            out.extend(
                log.segments
                    .iter()
                    .map(|s| MetadataRecord::DisklessSegment {
                        topic_id: *topic_id,
                        partition: *partition,
                        segment: s.clone(),
                    }),
            );
            let all: Vec<_> = log.batches().collect();
            for chunk in all.chunks(DISKLESS_SNAPSHOT_BATCHES) {
                out.push(MetadataRecord::DisklessBatches {
                    broker_id: -1,
                    batches: chunk
                        .iter()
                        .map(|b| (*topic_id, *partition, (*b).clone()))
                        .collect(),
                });
            }
            // Last: offsets, producers and transactions as they are (the segments and
            // batches above do not tell them all).
            out.push(MetadataRecord::DisklessState {
                topic_id: *topic_id,
                partition: *partition,
                state: log.state(),
            });
        }
        for (name, level) in &self.features {
            out.push(MetadataRecord::FeatureLevel {
                name: name.clone(),
                level: *level,
            });
        }
        out
    }

    /// A diskless partition's committed batches, if any.
    pub fn diskless_log(&self, topic_id: &Uuid, partition: i32) -> Option<&Arc<DisklessLog>> {
        self.diskless.get(&(*topic_id, partition))
    }

    /// A partition's remote segments (tiered storage), if any.
    pub fn remote_log(&self, topic_id: &Uuid, partition: i32) -> Option<&Arc<RemoteLog>> {
        self.remote_logs.get(&(*topic_id, partition))
    }

    pub fn topic(&self, name: &str) -> Option<&TopicImage> {
        self.topics.get(name)
    }

    pub fn topic_by_id(&self, id: &Uuid) -> Option<&TopicImage> {
        self.topic_names.get(id).and_then(|n| self.topics.get(n))
    }

    /// A topic's config overrides (empty map when none).
    pub fn topic_configs(&self, name: &str) -> BTreeMap<String, String> {
        self.configs
            .get(&(RESOURCE_TOPIC, name.to_string()))
            .cloned()
            .unwrap_or_default()
    }

    /// Whether cluster link `name` exists (it has its `bootstrap.servers`).
    pub fn link_exists(&self, name: &str) -> bool {
        self.configs
            .get(&(RESOURCE_CLUSTER_LINK, name.to_string()))
            .is_some_and(|c| c.contains_key("bootstrap.servers"))
    }

    /// Every cluster link: its name and configs.
    pub fn links(&self) -> impl Iterator<Item = (&str, &BTreeMap<String, String>)> {
        self.configs
            .range((RESOURCE_CLUSTER_LINK, String::new())..)
            .take_while(|((t, _), _)| *t == RESOURCE_CLUSTER_LINK)
            .filter(|(_, c)| c.contains_key("bootstrap.servers"))
            .map(|((_, n), c)| (n.as_str(), c))
    }
}

/// What changed for partitions between two images.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionDelta {
    /// Partitions that are new or whose registration changed: (topic, id, partition, reg).
    pub changed: Vec<(String, Uuid, i32, PartitionRegistration)>,
    /// Topics that no longer exist: (name, id, partition ids).
    pub deleted: Vec<(String, Uuid, Vec<i32>)>,
    /// Topics whose config overrides changed.
    pub config_changed: Vec<String>,
}

impl PartitionDelta {
    pub fn between(old: &MetadataImage, new: &MetadataImage) -> Self {
        let mut delta = PartitionDelta::default();
        for (name, topic) in &new.topics {
            let old_topic = old.topics.get(name).filter(|t| t.id == topic.id);
            for (p, reg) in &topic.partitions {
                if old_topic.and_then(|t| t.partitions.get(p)) != Some(reg) {
                    delta
                        .changed
                        .push((name.clone(), topic.id, *p, reg.clone()));
                }
            }
            if old_topic.is_some() && old.topic_configs(name) != new.topic_configs(name) {
                delta.config_changed.push(name.clone());
            }
        }
        for (name, topic) in &old.topics {
            if new.topics.get(name).is_none_or(|t| t.id != topic.id) {
                delta.deleted.push((
                    name.clone(),
                    topic.id,
                    topic.partitions.keys().copied().collect(),
                ));
            }
        }
        delta
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apply_and_diff() {
        let id = Uuid::from_bytes([5; 16]);
        let mut a = MetadataImage::empty();
        a.apply(
            0,
            &MetadataRecord::Topic {
                name: "t".into(),
                id,
            },
        );
        a.apply(
            1,
            &MetadataRecord::Partition {
                topic_id: id,
                partition: 0,
                replicas: vec![0],
                isr: vec![0],
                leader: 0,
                leader_epoch: 0,
                partition_epoch: 0,
                adding: vec![],
                removing: vec![],
                elr: Default::default(),
            },
        );
        let d = PartitionDelta::between(&MetadataImage::empty(), &a);
        assert_eq!(d.changed.len(), 1);
        let mut b = a.clone();
        b.apply(
            2,
            &MetadataRecord::Config {
                resource_type: RESOURCE_TOPIC,
                resource_name: "t".into(),
                name: "retention.ms".into(),
                value: Some("1".into()),
            },
        );
        assert_eq!(
            b.topic_configs("t").get("retention.ms").map(String::as_str),
            Some("1")
        );
        let d = PartitionDelta::between(&a, &b);
        assert_eq!((d.changed.len(), d.config_changed.len()), (0, 1));
        b.apply(3, &MetadataRecord::RemoveTopic { topic_id: id });
        let d = PartitionDelta::between(&a, &b);
        assert_eq!(d.deleted, vec![("t".to_string(), id, vec![0])]);
        assert!(b.topics.is_empty() && b.configs.is_empty());
    }

    #[test]
    fn fencing_partition_changes_and_snapshot_records() {
        let id = Uuid::from_bytes([5; 16]);
        let mut a = MetadataImage::empty();
        let recs = [
            MetadataRecord::RegisterBroker {
                node_id: 1,
                epoch: 3,
                incarnation_id: Uuid::from_bytes([1; 16]),
                endpoints: vec![],
                rack: None,
                fenced: true,
            },
            MetadataRecord::Topic {
                name: "t".into(),
                id,
            },
            MetadataRecord::Partition {
                topic_id: id,
                partition: 0,
                replicas: vec![1, 2],
                isr: vec![1, 2],
                leader: 1,
                leader_epoch: 0,
                partition_epoch: 0,
                adding: vec![],
                removing: vec![],
                elr: Default::default(),
            },
            MetadataRecord::Config {
                resource_type: RESOURCE_TOPIC,
                resource_name: "t".into(),
                name: "retention.ms".into(),
                value: Some("1".into()),
            },
            MetadataRecord::ProducerIds {
                node_id: 1,
                next_producer_id: 1000,
            },
        ];
        for (i, r) in recs.iter().enumerate() {
            a.apply(i as i64, r);
        }
        assert!(!a.is_live(1));
        // An unfence for an older registration is ignored.
        a.apply(
            5,
            &MetadataRecord::UnfenceBroker {
                node_id: 1,
                epoch: 2,
            },
        );
        assert!(!a.is_live(1));
        a.apply(
            6,
            &MetadataRecord::UnfenceBroker {
                node_id: 1,
                epoch: 3,
            },
        );
        assert!(a.is_live(1));
        let change = |leader, isr: Vec<i32>| MetadataRecord::PartitionChange {
            topic_id: id,
            partition: 0,
            leader,
            isr,
            assignment: None,
            elr: None,
        };
        a.apply(7, &change(1, vec![1]));
        let p = &a.topic("t").unwrap().partitions[&0];
        assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (1, 0, 1));
        a.apply(8, &change(2, vec![2]));
        let p = &a.topic("t").unwrap().partitions[&0];
        assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (2, 1, 2));
        // A reassignment adding 3: the leader stays, so does its epoch.
        let reassign = |isr: Vec<i32>, replicas: Vec<i32>, adding: Vec<i32>, removing| {
            MetadataRecord::PartitionChange {
                topic_id: id,
                partition: 0,
                leader: 2,
                isr,
                assignment: Some(crate::record::Assignment {
                    replicas,
                    adding,
                    removing,
                }),
                elr: None,
            }
        };
        a.apply(9, &reassign(vec![2], vec![2, 3, 1], vec![3], vec![1]));
        let p = &a.topic("t").unwrap().partitions[&0];
        assert!(p.is_reassigning());
        assert_eq!(p.target_replicas(), vec![2, 3]);
        assert_eq!((p.leader_epoch, p.partition_epoch), (1, 3));
        let mut rebuilt = MetadataImage::empty();
        for r in a.to_records() {
            rebuilt.apply(9, &r);
        }
        assert_eq!(rebuilt, a);
        // Completing it drops 1 from the set: the leader epoch moves although 2 still leads.
        a.apply(10, &reassign(vec![2, 3], vec![2, 3], vec![], vec![]));
        let p = &a.topic("t").unwrap().partitions[&0];
        assert!(!p.is_reassigning());
        assert_eq!(
            (p.replicas.clone(), p.leader_epoch, p.partition_epoch),
            (vec![2, 3], 2, 4)
        );
        let mut rebuilt = MetadataImage::empty();
        for r in a.to_records() {
            rebuilt.apply(10, &r);
        }
        assert_eq!(rebuilt, a);
    }

    #[test]
    fn scram_credentials_are_set_replaced_removed_and_snapshotted() {
        let cred = |iterations| MetadataRecord::ScramCredential {
            user: "alice".into(),
            mechanism: 2,
            salt: vec![1],
            stored_key: vec![2],
            server_key: vec![3],
            iterations,
        };
        let mut a = MetadataImage::empty();
        a.apply(0, &cred(4096));
        a.apply(1, &cred(8192));
        assert_eq!(a.scram[&("alice".to_string(), 2)].iterations, 8192);
        let mut rebuilt = MetadataImage::empty();
        for r in a.to_records() {
            rebuilt.apply(1, &r);
        }
        assert_eq!(rebuilt, a);
        a.apply(
            2,
            &MetadataRecord::RemoveScramCredential {
                user: "alice".into(),
                mechanism: 2,
            },
        );
        assert!(a.scram.is_empty());
    }

    #[test]
    fn delegation_tokens_are_set_renewed_removed_and_snapshotted() {
        let token = |expiry_ms| {
            MetadataRecord::DelegationToken(TokenRecord {
                token_id: "tok".into(),
                owner: "User:alice".into(),
                requester: "User:alice".into(),
                renewers: vec!["User:bob".into()],
                issue_ms: 1,
                max_ms: 100,
                expiry_ms,
            })
        };
        let mut a = MetadataImage::empty();
        a.apply(0, &token(10));
        a.apply(1, &token(20));
        assert_eq!(a.tokens["tok"].expiry_ms, 20);
        let mut rebuilt = MetadataImage::empty();
        for r in a.to_records() {
            rebuilt.apply(1, &r);
        }
        assert_eq!(rebuilt, a);
        a.apply(
            2,
            &MetadataRecord::RemoveDelegationToken {
                token_id: "tok".into(),
            },
        );
        assert!(a.tokens.is_empty());
    }
}
