//! [`Controller`]: the planner of metadata changes. It validates a request against the
//! current [`MetadataImage`] and answers with the outcome and the [`MetadataRecord`]s that
//! make the change; it never writes. The quorum (`crate::quorum`) appends those records
//! through Raft as one entry (so each change is atomic) and every node applies them.
//!
//! Keeping planning pure makes every decision unit-testable and means a deposed controller
//! can plan whatever it likes: its entry will not commit.

use std::collections::{BTreeMap, HashSet};

use sluice_metadata::acl::{self, AclBinding, AclFilter};
use sluice_metadata::config::{
    copied_acl_id, is_mirror_key, validate_link_changes, validate_mirror_changes,
    validate_topic_configs, MirrorState, MirrorTopic, MIRROR_PROMOTED_EPOCH, MIRROR_STATE,
    RESOURCE_CLUSTER_LINK,
};
use sluice_metadata::features;
use sluice_metadata::image::RESOURCE_TOPIC;
use sluice_metadata::image::{QuotaEntity, QuotaValue};
use sluice_metadata::record::{Elr, Endpoint};
use sluice_metadata::{topic, MetadataImage, MetadataRecord, Uuid};
use sluice_protocol::ErrorCode;

use crate::election::{elect, isr_without};
use crate::{placement, reassign};
pub use sluice_metadata::controller_types::{
    ApiError, CreateTopicSpec, CreatedTopic, DeleteOutcome, ElectionOutcome, IsrChange,
    PartitionOutcome, QuotaChange, ReassignTarget, ScramChange, TokenReply, TokenRequest,
    TokenSettings, TopicRef, UserOutcome,
};
use sluice_metadata::record::TokenRecord;

/// Most partitions one CreateTopics or CreatePartitions request may ask for (Kafka's
/// `ReplicationControlManager.MAX_PARTITIONS_PER_BATCH`).
pub const MAX_PARTITIONS_PER_REQUEST: u64 = 10_000;

/// Most records one controller operation may write (Kafka's
/// `QuorumController.MAX_RECORDS_PER_USER_OP`), counted as Kafka counts them.
pub const MAX_RECORDS_PER_OPERATION: u64 = 10_000;

/// Cluster-wide defaults for new topics.
#[derive(Clone, Debug)]
pub struct ControllerDefaults {
    pub num_partitions: i32,
    pub replication_factor: i16,
    pub delete_topic_enable: bool,
    /// The broker default of `unclean.leader.election.enable`.
    pub unclean_leader_election: bool,
    /// The broker default of `min.insync.replicas`.
    pub min_insync_replicas: i32,
    /// `delegation.token.*`.
    pub tokens: TokenSettings,
    /// The `group.*` configs group configs take their bounds from (see
    /// `sluice_metadata::config::group::group_broker_keys`).
    pub group_settings: BTreeMap<String, String>,
    /// This node's static config: topic configs' broker defaults, and
    /// `remote.log.storage.system.enable` (Kafka checks tiered topics against the
    /// controller's own).
    pub broker: sluice_metadata::BrokerConfig,
}

pub struct Controller {
    defaults: ControllerDefaults,
}

/// Where a new cluster starts handing out producer ids: a random block boundary between
/// 2^32 and 2^42 rather than 0 (as Kafka), so that a mirror topic's producer ids, copied
/// with its batches from another cluster (which, Kafka or Sluice, counts from its own start),
/// do not collide with the ids this cluster gives its own producers once the mirror is
/// promoted. A producer id whose state a partition already holds at a later sequence would
/// otherwise be refused (OUT_OF_ORDER_SEQUENCE, which librdkafka treats as fatal).
fn first_producer_id(random: u128) -> i64 {
    // 2^32 rounded up to a whole block.
    const LOW: i64 = (1 << 32) / 1000 * 1000 + 1000;
    const BLOCKS: u128 = ((1u128 << 42) - LOW as u128) / 1000;
    LOW + (random % BLOCKS) as i64 * 1000
}

/// A random topic id whose printed form does not start with '-' (as Kafka's
/// `Uuid.randomUuid` guarantees, so ids never look like command-line flags).
pub fn random_topic_id() -> Uuid {
    loop {
        let id = sluice_rt::random_uuid();
        if !sluice_protocol::base64::encode(id.as_bytes()).starts_with('-') {
            return id;
        }
    }
}

/// The records that set (Some) or remove (None) configs of one resource.
fn config_records(
    resource_type: i8,
    name: &str,
    changes: &[(String, Option<String>)],
) -> Vec<MetadataRecord> {
    changes
        .iter()
        .map(|(k, v)| MetadataRecord::Config {
            resource_type,
            resource_name: name.to_string(),
            name: k.clone(),
            value: v.clone(),
        })
        .collect()
}

/// Live broker ids, sorted.
fn live(image: &MetadataImage) -> Vec<i32> {
    image.live_brokers().map(|b| b.node_id).collect()
}

/// A partition's ISR, ELR and replicas as [`Controller::settle_elr`] goes through records.
type SettledElr = (Vec<i32>, Elr, Vec<i32>);

/// How a broker's replicas leave their ISRs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Leaving {
    /// Its session expired, it shut down, or its log directory failed.
    Fenced,
    /// A new incarnation registered after a clean shutdown.
    Restart,
    /// A new incarnation registered without a clean-shutdown marker: it may have lost
    /// writes it had not fsynced.
    UncleanRestart,
}

/// The ELR after one partition change (see [`Controller::settle_elr`]): from the ISR and
/// ELR before it, the replicas after it, its leader and ISR.
fn next_elr(
    old_isr: &[i32],
    old: &Elr,
    replicas: &[i32],
    (leader, isr): (i32, &[i32]),
    min_isr: usize,
    unclean_shutdown: Option<i32>,
) -> Elr {
    let was_eligible = |r: i32| old_isr.contains(&r) || old.eligible.contains(&r);
    if leader >= 0 && !was_eligible(leader) {
        // Unclean election: whatever the others held, the new leader's log is the truth.
        return Elr::default();
    }
    if isr.len() >= min_isr {
        return Elr::default();
    }
    let candidates = old.eligible.iter().chain(old_isr).copied();
    let mut eligible: Vec<i32> = Vec::new();
    for r in candidates {
        let keep = !isr.contains(&r) && replicas.contains(&r) && Some(r) != unclean_shutdown;
        if keep && !eligible.contains(&r) {
            eligible.push(r);
        }
    }
    let last_known = if !isr.is_empty() || !eligible.is_empty() {
        Vec::new()
    } else {
        // Nobody is left who is known to hold every committed record: remember who last was.
        let last: Vec<i32> = old
            .eligible
            .iter()
            .chain(old_isr)
            .copied()
            .filter(|r| replicas.contains(r))
            .collect();
        if last.is_empty() {
            old.last_known.clone()
        } else {
            let mut last = last;
            last.dedup();
            last
        }
    };
    Elr {
        eligible,
        last_known,
    }
}

impl Controller {
    pub fn new(defaults: ControllerDefaults) -> Self {
        Self { defaults }
    }

    /// `delegation.token.*` as this controller has them.
    pub fn token_settings(&self) -> &TokenSettings {
        &self.defaults.tokens
    }

    /// A (re)registration: a new incarnation gets a new epoch and starts fenced. A broker
    /// re-registering while it still leads partitions (it restarted faster than its
    /// session expired) is fenced first so those partitions move or go offline.
    ///
    /// With eligible leader replicas (KIP-966, `eligible.leader.replicas.version` 1): a
    /// broker back from a clean shutdown leaves the ISRs as a fenced one does (into the
    /// ELR where the ISR is left below `min.insync.replicas`); one back from an unclean
    /// shutdown (`unclean_shutdown`: no clean-shutdown marker, so it may have lost what it
    /// had not fsynced) leaves every ISR and ELR, even as the last member.
    ///
    /// Without: a new incarnation leaves every ISR it is not the last member of, even below
    /// `min.insync.replicas` (another member holds every committed record, it may not).
    pub fn register_broker(
        &self,
        image: &MetadataImage,
        node_id: i32,
        incarnation_id: Uuid,
        endpoints: Vec<Endpoint>,
        rack: Option<String>,
        unclean_shutdown: bool,
    ) -> Vec<MetadataRecord> {
        let how = if unclean_shutdown {
            Leaving::UncleanRestart
        } else {
            Leaving::Restart
        };
        let mut records = self.fence(image, node_id, how);
        let epoch = image.brokers.get(&node_id).map_or(0, |b| b.epoch + 1);
        records.push(MetadataRecord::RegisterBroker {
            node_id,
            epoch,
            incarnation_id,
            endpoints,
            rack,
            fenced: true,
        });
        records
    }

    fn min_isr(&self, image: &MetadataImage, topic: &str) -> usize {
        image
            .topic_configs(topic)
            .get("min.insync.replicas")
            .and_then(|v| v.parse::<i32>().ok())
            .unwrap_or(self.defaults.min_insync_replicas)
            .max(1) as usize
    }

    fn unclean(&self, image: &MetadataImage, topic: &str) -> bool {
        image
            .topic_configs(topic)
            .get("unclean.leader.election.enable")
            .map_or(self.defaults.unclean_leader_election, |v| {
                v.eq_ignore_ascii_case("true")
            })
    }

    /// Fence `node_id` (session expired, controlled shutdown): each partition it led gets a
    /// new leader from the ISR, or none, and it leaves every ISR that keeps
    /// `min.insync.replicas` members without it. Where it would not, it stays in the ISR,
    /// fenced (leading nothing): the remaining members alone need not hold everything
    /// acknowledged to disk (a leader fsyncs its log only when it shrinks the ISR to itself),
    /// and if they lose power before the leader, alive, takes the fenced replica out itself,
    /// the fenced one is the replica with every committed record (what Kafka's KIP-966
    /// keeps as an eligible leader replica). Found by the simulator (seed 319 of the
    /// batch that found it): a power loss of the last remaining member after the other was
    /// fenced lost acknowledged records.
    pub fn fence_broker(&self, image: &MetadataImage, node_id: i32) -> Vec<MetadataRecord> {
        self.fence(image, node_id, Leaving::Fenced)
    }

    /// [`Self::fence_broker`], for the way `node_id` leaves.
    fn fence(&self, image: &MetadataImage, node_id: i32, how: Leaving) -> Vec<MetadataRecord> {
        let Some(b) = image.brokers.get(&node_id) else {
            return Vec::new();
        };
        let mut records = Vec::new();
        if !b.fenced {
            records.push(MetadataRecord::FenceBroker {
                node_id,
                epoch: b.epoch,
            });
        }
        records.extend(self.leave(image, node_id, how, |_, _| true));
        records
    }

    /// A broker's replicas whose log directory failed there (its heartbeat lists them):
    /// they lose their leadership and leave the ISR as a fenced broker's do, while its other
    /// replicas go on as they are. Nothing when that is already so.
    pub fn take_replicas_offline(
        &self,
        image: &MetadataImage,
        node_id: i32,
        replicas: &[(Uuid, i32)],
    ) -> Vec<MetadataRecord> {
        if !image.brokers.contains_key(&node_id) {
            return Vec::new();
        }
        self.leave(image, node_id, Leaving::Fenced, |topic_id, partition| {
            replicas.contains(&(topic_id, partition))
        })
    }

    /// The replicas of `node_id` that `affected` picks leave their ISRs and their leadership
    /// moves to another live in-sync replica, else to a live eligible leader replica, else
    /// nobody.
    ///
    /// With eligible leader replicas (KIP-966) a replica leaves the ISR even as its last
    /// member; where the ISR is left below `min.insync.replicas` it stays eligible (the
    /// ELR), except after an unclean shutdown, which takes it out of the ELR too.
    ///
    /// Without, the last member stays; a restarted broker leaves even below
    /// `min.insync.replicas`, a fenced one is kept in an ISR it would leave below it,
    /// fenced (leading nothing): the remaining members alone need not hold everything
    /// acknowledged to disk, and if they lose power before the leader, alive, takes the
    /// fenced replica out itself, the fenced one is the replica with every committed record.
    /// Found by the simulator (seed 319 of the batch that found it).
    fn leave(
        &self,
        image: &MetadataImage,
        node_id: i32,
        how: Leaving,
        affected: impl Fn(Uuid, i32) -> bool,
    ) -> Vec<MetadataRecord> {
        let elr_on = features::elr_enabled(image);
        let mut records = Vec::new();
        let is_live = |r: i32| r != node_id && image.is_live(r);
        for t in image.topics.values() {
            let unclean = self.unclean(image, &t.name);
            let min_isr = self.min_isr(image, &t.name);
            for (p, reg) in &t.partitions {
                if !reg.replicas.contains(&node_id) || !affected(t.id, *p) {
                    continue;
                }
                let isr = if elr_on {
                    reg.isr.iter().copied().filter(|r| *r != node_id).collect()
                } else {
                    let rest = isr_without(&reg.isr, node_id);
                    let fenced = how == Leaving::Fenced;
                    if fenced && rest.len() < reg.isr.len() && rest.len() < min_isr {
                        reg.isr.clone()
                    } else {
                        rest
                    }
                };
                let (leader, isr) = if reg.leader == node_id || reg.leader < 0 {
                    let e = elect(&reg.replicas, &isr, &reg.elr.eligible, is_live, unclean);
                    (e.leader, e.isr)
                } else {
                    (reg.leader, isr)
                };
                let forget = how == Leaving::UncleanRestart
                    && (reg.elr.eligible.contains(&node_id)
                        || reg.elr.last_known.contains(&node_id));
                if leader != reg.leader || isr != reg.isr || (elr_on && forget) {
                    records.push(MetadataRecord::PartitionChange {
                        topic_id: t.id,
                        partition: *p,
                        leader,
                        isr,
                        assignment: None,
                        elr: None,
                    });
                }
            }
        }
        let unclean = (how == Leaving::UncleanRestart).then_some(node_id);
        self.settle_elr(image, records, unclean)
    }

    /// KIP-966's bookkeeping of the eligible leader replicas for the partition changes in
    /// `records` (planned against `image`), when `eligible.leader.replicas.version` is 1:
    /// where a change leaves the ISR at least `min.insync.replicas` strong the ELR is
    /// empty; otherwise the replicas that left the ISR join it (the high watermark does not
    /// move while the ISR is that small, so they hold every committed record), and ISR
    /// members and replicas no longer assigned leave it. `unclean_shutdown` names a broker
    /// back from an unclean shutdown, which is not eligible anywhere. When a change leaves
    /// neither an ISR nor an ELR, the last ELR (or ISR) members are remembered as the last
    /// known ELR. An unclean election (a leader from neither) clears both. Every change
    /// then says its ELR; changes that already do, and other records, pass as they are, so
    /// applying this twice changes nothing.
    pub fn settle_elr(
        &self,
        image: &MetadataImage,
        mut records: Vec<MetadataRecord>,
        unclean_shutdown: Option<i32>,
    ) -> Vec<MetadataRecord> {
        if !features::elr_enabled(image) {
            return records;
        }
        // (isr, elr, replicas) as of the records so far.
        let mut state: BTreeMap<(Uuid, i32), SettledElr> = BTreeMap::new();
        for r in &mut records {
            match r {
                MetadataRecord::Partition {
                    topic_id,
                    partition,
                    replicas,
                    isr,
                    elr,
                    ..
                } => {
                    let now = (isr.clone(), elr.clone(), replicas.clone());
                    state.insert((*topic_id, *partition), now);
                }
                MetadataRecord::PartitionChange {
                    topic_id,
                    partition,
                    leader,
                    isr,
                    assignment,
                    elr,
                } => {
                    let key = (*topic_id, *partition);
                    let Some(topic) = image.topic_by_id(topic_id) else {
                        continue;
                    };
                    let entry = match state.entry(key) {
                        std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                        std::collections::btree_map::Entry::Vacant(e) => {
                            let Some(reg) = topic.partitions.get(partition) else {
                                continue;
                            };
                            e.insert((reg.isr.clone(), reg.elr.clone(), reg.replicas.clone()))
                        }
                    };
                    let (old_isr, old_elr, replicas) = entry;
                    if let Some(a) = assignment {
                        *replicas = a.replicas.clone();
                    }
                    let new = match elr {
                        Some(e) => e.clone(),
                        None => {
                            let min_isr = self.min_isr(image, &topic.name);
                            next_elr(
                                old_isr,
                                old_elr,
                                replicas,
                                (*leader, isr),
                                min_isr,
                                unclean_shutdown,
                            )
                        }
                    };
                    if *leader < 0 && isr.is_empty() && new.eligible.is_empty() && *old_elr != new {
                        tracing::warn!(topic = %topic.name, partition, last_known = ?new.last_known, "partition offline: no live replica is known to hold every committed record (unclean.leader.election.enable would elect one that may not)");
                    }
                    tracing::debug!(topic = %topic.name, partition, leader, ?isr, elr = ?new.eligible, last_known = ?new.last_known, ?unclean_shutdown, "partition change");
                    // Said even when unchanged, so a later pass (without this pass's
                    // unclean broker) leaves it as it is.
                    *elr = Some(new.clone());
                    *old_isr = isr.clone();
                    *old_elr = new;
                }
                _ => {}
            }
        }
        records
    }

    /// Unfence a caught-up broker and give it the partitions that had no leader and that
    /// it may lead.
    pub fn unfence_broker(&self, image: &MetadataImage, node_id: i32) -> Vec<MetadataRecord> {
        let Some(b) = image.brokers.get(&node_id) else {
            return Vec::new();
        };
        let mut records = vec![MetadataRecord::UnfenceBroker {
            node_id,
            epoch: b.epoch,
        }];
        let is_live = |r: i32| r == node_id || image.is_live(r);
        for t in image.topics.values() {
            let unclean = self.unclean(image, &t.name);
            for (p, reg) in &t.partitions {
                if reg.leader >= 0 || !reg.replicas.contains(&node_id) {
                    continue;
                }
                let e = elect(&reg.replicas, &reg.isr, &reg.elr.eligible, is_live, unclean);
                if e.leader >= 0 {
                    records.push(MetadataRecord::PartitionChange {
                        topic_id: t.id,
                        partition: *p,
                        leader: e.leader,
                        isr: e.isr,
                        assignment: None,
                        elr: None,
                    });
                }
            }
        }
        records
    }

    /// CreateTopics: each spec gets its own outcome; valid ones are committed together.
    /// As Kafka's controller, a request for more than [`MAX_PARTITIONS_PER_REQUEST`]
    /// partitions, or one that would take more than [`MAX_RECORDS_PER_OPERATION`] of
    /// Kafka's records (a topic, its partitions, its configs), is refused whole
    /// (POLICY_VIOLATION): no request can make the controller allocate without bound.
    pub fn create_topics(
        &self,
        image: &MetadataImage,
        specs: &[CreateTopicSpec],
        validate_only: bool,
    ) -> (Vec<Result<CreatedTopic, ApiError>>, Vec<MetadataRecord>) {
        let partitions_of = |s: &CreateTopicSpec| -> u64 {
            if !s.assignments.is_empty() {
                s.assignments.len() as u64
            } else if s.num_partitions == -1 {
                u64::try_from(self.defaults.num_partitions).unwrap_or(0)
            } else {
                u64::try_from(s.num_partitions).unwrap_or(0)
            }
        };
        let refuse_all = |message: &str| {
            let out = specs
                .iter()
                .map(|_| Err(ApiError::new(ErrorCode::PolicyViolation, message)))
                .collect();
            (out, Vec::new())
        };
        let partitions: u64 = specs.iter().map(partitions_of).sum();
        if partitions > MAX_PARTITIONS_PER_REQUEST {
            return refuse_all("Excessively large number of partitions per request.");
        }
        let kafka_records: u64 = specs
            .iter()
            .map(|s| 1 + partitions_of(s) + s.configs.len() as u64)
            .sum();
        if !validate_only && kafka_records > MAX_RECORDS_PER_OPERATION {
            return refuse_all("Unable to perform excessively large batch operation.");
        }
        let mut seen = BTreeMap::<&str, usize>::new();
        for s in specs {
            *seen.entry(s.name.as_str()).or_default() += 1;
        }
        let mut records = Vec::new();
        let mut outcomes = Vec::with_capacity(specs.len());
        let mut new_names = HashSet::new();
        for spec in specs {
            if seen[spec.name.as_str()] > 1 {
                outcomes.push(Err(ApiError::new(
                    ErrorCode::InvalidRequest,
                    "Duplicate topic name.",
                )));
                continue;
            }
            let outcome = self
                .plan_topic(image, spec, &new_names)
                .map(|(created, recs)| {
                    if !validate_only {
                        records.extend(recs);
                    }
                    new_names.insert(spec.name.clone());
                    created
                });
            outcomes.push(outcome);
        }
        (outcomes, records)
    }

    fn plan_topic(
        &self,
        image: &MetadataImage,
        spec: &CreateTopicSpec,
        pending: &HashSet<String>,
    ) -> Result<(CreatedTopic, Vec<MetadataRecord>), ApiError> {
        let name = spec.name.as_str();
        if name == topic::CLUSTER_METADATA {
            return Err(ApiError::new(
                ErrorCode::InvalidRequest,
                format!("Creation of internal topic {name} is prohibited."),
            ));
        }
        topic::validate_name(name)
            .map_err(|m| ApiError::new(ErrorCode::InvalidTopicException, m))?;
        if image.topics.contains_key(name) || pending.contains(name) {
            return Err(ApiError::new(
                ErrorCode::TopicAlreadyExists,
                format!("Topic '{name}' already exists."),
            ));
        }
        let unified = topic::unify_collision_chars(name);
        if let Some(other) = image
            .topics
            .keys()
            .find(|t| topic::unify_collision_chars(t) == unified)
        {
            return Err(ApiError::new(
                ErrorCode::InvalidTopicException,
                format!("Topic '{name}' collides with existing topic: {other}"),
            ));
        }
        validate_topic_configs(
            spec.configs
                .iter()
                .filter(|(k, _)| !is_mirror_key(k))
                .map(|(k, v)| (k.as_str(), v.as_deref())),
        )
        .map_err(|m| ApiError::new(ErrorCode::InvalidConfig, m))?;
        validate_mirror_changes(image, &BTreeMap::new(), &spec.configs)
            .map_err(|m| ApiError::new(ErrorCode::InvalidConfig, m))?;
        let overrides: BTreeMap<String, String> = spec
            .configs
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.clone()?)))
            .collect();
        self.validate_tiered(&BTreeMap::new(), &overrides)?;
        sluice_metadata::config::validate_diskless(true, &BTreeMap::new(), &overrides)
            .map_err(|m| ApiError::new(ErrorCode::InvalidConfig, m))?;
        let brokers = live(image);
        let assignments = if spec.assignments.is_empty() {
            let rf =
                match spec.replication_factor {
                    -1 => self.defaults.replication_factor,
                    rf if rf <= 0 => return Err(ApiError::new(
                        ErrorCode::InvalidReplicationFactor,
                        "Replication factor must be larger than 0, or -1 to use the default value.",
                    )),
                    rf => rf,
                };
            let partitions = match spec.num_partitions {
                -1 => self.defaults.num_partitions,
                n if n <= 0 => {
                    return Err(ApiError::new(
                        ErrorCode::InvalidPartitions,
                        "Number of partitions was set to an invalid non-positive value.",
                    ))
                }
                n => n,
            };
            if rf as usize > brokers.len() {
                return Err(ApiError::new(
                    ErrorCode::InvalidReplicationFactor,
                    format!(
                        "Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only {} broker(s) are registered and unfenced.",
                        brokers.len()
                    ),
                ));
            }
            let start = placement::random_start(brokers.len());
            placement::place(&brokers, 0, partitions, rf as usize, start)
        } else {
            if spec.replication_factor != -1 || spec.num_partitions != -1 {
                return Err(ApiError::new(
                    ErrorCode::InvalidRequest,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.",
                ));
            }
            validate_assignment(&spec.assignments, 0, &brokers)?
        };
        let id = random_topic_id();
        let mut records = vec![MetadataRecord::Topic {
            name: name.to_string(),
            id,
        }];
        records.extend(partition_records(id, 0, &assignments, 0));
        for (k, v) in &spec.configs {
            records.push(MetadataRecord::Config {
                resource_type: RESOURCE_TOPIC,
                resource_name: name.to_string(),
                name: k.clone(),
                value: v.clone(),
            });
        }
        let created = CreatedTopic {
            id,
            num_partitions: assignments.len() as i32,
            replication_factor: assignments.first().map_or(0, |r| r.len() as i16),
        };
        Ok((created, records))
    }

    /// DeleteTopics by name or id. Returns (name, id) of each deleted topic, or an error.
    pub fn delete_topics(
        &self,
        image: &MetadataImage,
        targets: &[TopicRef],
    ) -> (Vec<DeleteOutcome>, Vec<MetadataRecord>) {
        let mut records = Vec::new();
        let mut outcomes = Vec::with_capacity(targets.len());
        let mut doomed = HashSet::new();
        for t in targets {
            let found = match t {
                TopicRef::Name(n) => image.topic(n).ok_or_else(|| {
                    ApiError::new(
                        ErrorCode::UnknownTopicOrPartition,
                        "This server does not host this topic-partition.",
                    )
                }),
                TopicRef::Id(id) => image.topic_by_id(id).ok_or_else(|| {
                    ApiError::new(
                        ErrorCode::UnknownTopicId,
                        "This server does not host this topic ID.",
                    )
                }),
            };
            let outcome = found.and_then(|topic| {
                if !self.defaults.delete_topic_enable {
                    return Err(ApiError::new(
                        ErrorCode::TopicDeletionDisabled,
                        "Topic deletion is disabled.",
                    ));
                }
                if doomed.insert(topic.id) {
                    records.push(MetadataRecord::RemoveTopic { topic_id: topic.id });
                }
                Ok((topic.name.clone(), topic.id))
            });
            outcomes.push(outcome);
        }
        (outcomes, records)
    }

    /// CreatePartitions: grow `topic` to `count` partitions (never shrink).
    pub fn create_partitions(
        &self,
        image: &MetadataImage,
        name: &str,
        count: i32,
        assignments: Option<&[Vec<i32>]>,
        validate_only: bool,
    ) -> Result<Vec<MetadataRecord>, ApiError> {
        let Some(topic) = image.topic(name) else {
            return Err(ApiError::new(
                ErrorCode::UnknownTopicOrPartition,
                format!("The topic '{name}' does not exist."),
            ));
        };
        let current = topic.partitions.len() as i32;
        if i64::from(count) - i64::from(current) > MAX_PARTITIONS_PER_REQUEST as i64 {
            return Err(ApiError::new(
                ErrorCode::PolicyViolation,
                "Excessively large number of additional partitions per request.",
            ));
        }
        if count == current {
            return Err(ApiError::new(
                ErrorCode::InvalidPartitions,
                format!("Topic already has {current} partitions."),
            ));
        }
        if count < current {
            return Err(ApiError::new(
                ErrorCode::InvalidPartitions,
                format!("The topic {name} currently has {current} partition(s); {count} would not be an increase."),
            ));
        }
        let id = topic.id;
        let rf = topic
            .partitions
            .values()
            .next()
            .map_or(1, |p| p.replicas.len());
        let brokers = live(image);
        let placed = match assignments {
            Some(a) => {
                if a.len() as i32 != count - current {
                    return Err(ApiError::new(
                        ErrorCode::InvalidReplicaAssignment,
                        format!(
                            "Increasing the number of partitions by {} but {} assignments provided.",
                            count - current,
                            a.len()
                        ),
                    ));
                }
                let indexed: Vec<(i32, Vec<i32>)> = a
                    .iter()
                    .enumerate()
                    .map(|(i, r)| (current + i as i32, r.clone()))
                    .collect();
                validate_assignment(&indexed, current, &brokers)?
            }
            None => {
                if rf > brokers.len() {
                    return Err(ApiError::new(
                        ErrorCode::InvalidReplicationFactor,
                        format!("Unable to replicate the partition {rf} time(s): only {} broker(s) are registered.", brokers.len()),
                    ));
                }
                let start = placement::random_start(brokers.len());
                placement::place(&brokers, current, count - current, rf, start)
            }
        };
        if validate_only {
            return Ok(Vec::new());
        }
        let epoch = MirrorTopic::of(name, &image.topic_configs(name))
            .and_then(|m| m.promoted_epoch)
            .unwrap_or(0);
        Ok(partition_records(id, current, &placed, epoch))
    }

    /// Set or remove topic config overrides.
    pub fn alter_topic_configs(
        &self,
        image: &MetadataImage,
        name: &str,
        changes: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Result<Vec<MetadataRecord>, ApiError> {
        if image.topic(name).is_none() {
            return Err(ApiError::new(
                ErrorCode::UnknownTopicOrPartition,
                format!("Topic {name} does not exist."),
            ));
        }
        let sets = changes
            .iter()
            .filter(|(k, _)| !is_mirror_key(k))
            .filter_map(|(k, v)| v.as_deref().map(|v| (k.as_str(), Some(v))));
        validate_topic_configs(sets).map_err(|m| ApiError::new(ErrorCode::InvalidConfig, m))?;
        validate_mirror_changes(image, &image.topic_configs(name), changes)
            .map_err(|m| ApiError::new(ErrorCode::InvalidConfig, m))?;
        let old = image.topic_configs(name);
        let mut new = old.clone();
        for (k, v) in changes {
            match v {
                Some(v) => new.insert(k.clone(), v.clone()),
                None => new.remove(k),
            };
        }
        self.validate_tiered(&old, &new)?;
        sluice_metadata::config::validate_diskless(false, &old, &new)
            .map_err(|m| ApiError::new(ErrorCode::InvalidConfig, m))?;
        // Removing a config this broker does not know is a no-op, as in Kafka (MirrorMaker 2
        // removes every config that is at its default on its source, newer ones included);
        // setting one is refused.
        let known = |k: &str| sluice_metadata::config::topic_def(k).is_some() || is_mirror_key(k);
        if let Some((k, _)) = changes.iter().find(|(k, v)| v.is_some() && !known(k)) {
            return Err(ApiError::new(
                ErrorCode::InvalidConfig,
                format!("Unknown topic config name: {k}"),
            ));
        }
        if validate_only {
            return Ok(Vec::new());
        }
        let mut records: Vec<MetadataRecord> = changes
            .iter()
            .filter(|(k, _)| known(k))
            .map(|(k, v)| MetadataRecord::Config {
                resource_type: RESOURCE_TOPIC,
                resource_name: name.to_string(),
                name: k.clone(),
                value: v.clone(),
            })
            .collect();
        records.extend(promotion_records(image, name, changes));
        Ok(records)
    }

    /// Kafka's tiered-storage config rules, with this node's flag and broker defaults.
    fn validate_tiered(
        &self,
        old: &BTreeMap<String, String>,
        new: &BTreeMap<String, String>,
    ) -> Result<(), ApiError> {
        let broker = &self.defaults.broker;
        let default = |k: &str| broker.topic_default(k).map(|(v, _)| v);
        sluice_metadata::config::validate_tiered_storage(
            broker.remote_storage_enabled(),
            &default,
            old,
            new,
        )
        .map_err(|m| ApiError::new(ErrorCode::InvalidConfig, m))
    }

    /// UnregisterBroker: as Kafka, the broker leaves every ISR (but one it is the last member
    /// of: an ISR never empties), gives up what it led, and its registration is removed. A
    /// broker that still runs registers anew with its next heartbeat, fenced until caught up.
    pub fn unregister_broker(
        &self,
        image: &MetadataImage,
        node_id: i32,
    ) -> Result<Vec<MetadataRecord>, ApiError> {
        let Some(b) = image.brokers.get(&node_id) else {
            return Err(ApiError::new(
                ErrorCode::BrokerIdNotRegistered,
                format!("Broker ID {node_id} is not currently registered"),
            ));
        };
        let mut records = self.fence(image, node_id, Leaving::UncleanRestart);
        records.push(MetadataRecord::UnregisterBroker {
            node_id,
            epoch: b.epoch,
        });
        Ok(records)
    }

    /// UpdateFeatures: every update checked against the supported range and Kafka's rules
    /// (see [`sluice_metadata::features::check_update`]) and the levels after it against the
    /// features' dependencies (ELR needs 4.0-IV1), all or nothing, as Kafka 4 does.
    pub fn update_features(
        &self,
        image: &MetadataImage,
        updates: &[(String, i16, i8)],
        validate_only: bool,
    ) -> Result<Vec<MetadataRecord>, ApiError> {
        use sluice_metadata::features::{check_update, UpgradeType};
        let invalid = |m: String| ApiError::new(ErrorCode::InvalidUpdateVersion, m);
        for (i, (name, level, how)) in updates.iter().enumerate() {
            if updates[..i].iter().any(|(n, ..)| n == name) {
                return Err(ApiError::new(
                    ErrorCode::InvalidRequest,
                    format!("Feature {name} appears more than once in the request."),
                ));
            }
            let how = UpgradeType::from_code(*how).ok_or_else(|| {
                ApiError::new(
                    ErrorCode::InvalidRequest,
                    format!("Unknown upgrade type {how} for feature {name}."),
                )
            })?;
            check_update(image, name, *level, how).map_err(invalid)?;
        }
        let mut after = sluice_metadata::features::finalized(image);
        for (name, level, _) in updates {
            after.insert(name.clone(), *level);
        }
        let changed: Vec<&str> = updates.iter().map(|(n, ..)| n.as_str()).collect();
        sluice_metadata::features::check_update_dependencies(&after, &changed).map_err(invalid)?;
        if validate_only {
            return Ok(Vec::new());
        }
        Ok(updates
            .iter()
            .filter(|(name, level, _)| {
                sluice_metadata::features::finalized(image)
                    .get(name)
                    .copied()
                    .unwrap_or(0)
                    != *level
            })
            .map(|(name, level, _)| MetadataRecord::FeatureLevel {
                name: name.clone(),
                level: *level,
            })
            .collect())
    }

    /// Set or remove configs of a resource kept in metadata by type: client-metrics
    /// subscriptions (KIP-714) and groups, checked as a whole after the change, as Kafka's
    /// controller checks them (group configs against this node's `group.*` bounds). Removing
    /// every config removes the subscription.
    pub fn alter_resource_configs(
        &self,
        image: &MetadataImage,
        resource_type: i8,
        name: &str,
        changes: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Result<Vec<MetadataRecord>, ApiError> {
        use sluice_metadata::config::client_metrics::{subscription, Refusal};
        use sluice_metadata::config::group::check_group_configs;
        use sluice_metadata::config::{RESOURCE_CLIENT_METRICS, RESOURCE_GROUP};
        if resource_type != RESOURCE_CLIENT_METRICS && resource_type != RESOURCE_GROUP {
            return Err(ApiError::new(
                ErrorCode::InvalidRequest,
                format!("Unsupported resource type {resource_type}"),
            ));
        }
        let mut after = image
            .configs
            .get(&(resource_type, name.to_string()))
            .cloned()
            .unwrap_or_default();
        for (k, v) in changes {
            match v {
                Some(v) => after.insert(k.clone(), v.clone()),
                None => after.remove(k),
            };
        }
        if resource_type == RESOURCE_GROUP {
            let settings = &self.defaults.group_settings;
            check_group_configs(&after, &|k| settings.get(k).cloned())
                .map_err(|m| ApiError::new(ErrorCode::InvalidConfig, m))?;
        } else {
            subscription(name, &after).map_err(|r| match r {
                Refusal::Request(m) => ApiError::new(ErrorCode::InvalidRequest, m),
                Refusal::Config(m) => ApiError::new(ErrorCode::InvalidConfig, m),
            })?;
        }
        if validate_only {
            return Ok(Vec::new());
        }
        Ok(config_records(resource_type, name, changes))
    }

    /// Set or remove configs of cluster link `link` (removing every one deletes the link).
    pub fn alter_link_configs(
        &self,
        image: &MetadataImage,
        link: &str,
        changes: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Result<Vec<MetadataRecord>, ApiError> {
        validate_link_changes(image, link, changes)
            .map_err(|m| ApiError::new(ErrorCode::InvalidConfig, m))?;
        if validate_only {
            return Ok(Vec::new());
        }
        Ok(config_records(RESOURCE_CLUSTER_LINK, link, changes))
    }

    /// Set or remove dynamic broker configs: `broker` is "" for the cluster-wide defaults or
    /// a broker id. Only keys that can change at runtime may be set (Kafka: "Cannot update
    /// these configs dynamically"); removing one that is not set is a no-op.
    pub fn alter_broker_configs(
        &self,
        broker: &str,
        changes: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Result<Vec<MetadataRecord>, ApiError> {
        if !broker.is_empty() && broker.parse::<i32>().is_err() {
            return Err(ApiError::new(
                ErrorCode::InvalidRequest,
                format!("Invalid broker id {broker}"),
            ));
        }
        let unprefixed: Vec<&str> = changes
            .iter()
            .filter(|(k, v)| {
                v.is_some() && sluice_metadata::config::PER_LISTENER_ONLY_KEYS.contains(&k.as_str())
            })
            .map(|(k, _)| k.as_str())
            .collect();
        if !unprefixed.is_empty() {
            return Err(ApiError::new(
                ErrorCode::InvalidRequest,
                format!(
                    "These security configs can be dynamically updated only per-listener using the listener prefix: [{}]",
                    unprefixed.join(", ")
                ),
            ));
        }
        // Keys Kafka reads at startup only; a key no definition knows (a plugin's own
        // setting) is kept, as Kafka keeps it.
        let known = |k: &str| {
            sluice_metadata::config::broker_def(k).is_some()
                || sluice_metadata::config::listener_key(k).is_some()
        };
        let fixed: Vec<&str> = changes
            .iter()
            .filter(|(k, v)| {
                v.is_some() && known(k) && !sluice_metadata::config::dynamic_broker_key(k)
            })
            .map(|(k, _)| k.as_str())
            .collect();
        if !fixed.is_empty() {
            return Err(ApiError::new(
                ErrorCode::InvalidRequest,
                format!(
                    "Cannot update these configs dynamically: [{}]",
                    fixed.join(", ")
                ),
            ));
        }
        let per_broker: Vec<&str> = changes
            .iter()
            .filter(|(k, _)| {
                sluice_metadata::config::listener_key(k).is_some()
                    && !sluice_metadata::config::listener_key_cluster_wide(k)
            })
            .map(|(k, _)| k.as_str())
            .collect();
        if broker.is_empty() && !per_broker.is_empty() {
            return Err(ApiError::new(
                ErrorCode::InvalidRequest,
                format!(
                    "Cannot update these configs at default cluster level, broker id must be specified: [{}]",
                    per_broker.join(", ")
                ),
            ));
        }
        for (k, v) in changes {
            let def = sluice_metadata::config::broker_def(k)
                .or_else(|| sluice_metadata::config::listener_key(k));
            if let (Some(v), Some(def)) = (v, def) {
                sluice_metadata::config::validate(def, v).map_err(|m| {
                    let m = if def.name == k {
                        m
                    } else {
                        format!("{k}: {m}")
                    };
                    ApiError::new(ErrorCode::InvalidRequest, m)
                })?;
            }
        }
        if validate_only {
            return Ok(Vec::new());
        }
        Ok(config_records(
            sluice_metadata::image::RESOURCE_BROKER,
            broker,
            changes,
        ))
    }

    /// AlterPartition: a leader shrinks or expands its ISR. Stale requests (an older leader
    /// or partition epoch) are refused, and only live replicas may join.
    pub fn alter_partition(
        &self,
        image: &MetadataImage,
        c: &IsrChange,
    ) -> Result<Vec<MetadataRecord>, ApiError> {
        let reg = image
            .topic_by_id(&c.topic_id)
            .and_then(|t| t.partitions.get(&c.partition))
            .ok_or_else(|| {
                ApiError::new(ErrorCode::UnknownTopicOrPartition, "no such partition")
            })?;
        if reg.leader != c.leader {
            return Err(ApiError::new(
                ErrorCode::NotLeaderOrFollower,
                format!("broker {} does not lead this partition", c.leader),
            ));
        }
        if c.leader_epoch != reg.leader_epoch {
            return Err(ApiError::new(
                ErrorCode::FencedLeaderEpoch,
                format!(
                    "leader epoch {} is not {}",
                    c.leader_epoch, reg.leader_epoch
                ),
            ));
        }
        if c.partition_epoch != reg.partition_epoch {
            return Err(ApiError::new(
                ErrorCode::InvalidUpdateVersion,
                format!(
                    "partition epoch {} is not {}",
                    c.partition_epoch, reg.partition_epoch
                ),
            ));
        }
        let ineligible = c
            .isr
            .iter()
            .find(|r| !reg.replicas.contains(r) || (!reg.isr.contains(r) && !image.is_live(**r)));
        if let Some(r) = ineligible {
            return Err(ApiError::new(
                ErrorCode::IneligibleReplica,
                format!("replica {r} cannot join the ISR"),
            ));
        }
        if !c.isr.contains(&c.leader) {
            return Err(ApiError::new(
                ErrorCode::InvalidRequest,
                "the ISR must contain the leader",
            ));
        }
        let mut old = reg.isr.clone();
        let mut new = c.isr.clone();
        old.sort_unstable();
        new.sort_unstable();
        new.dedup();
        if old == new {
            return Ok(Vec::new());
        }
        if reg.is_reassigning() {
            // The ISR may now hold every target: then this change also completes the
            // reassignment (and may move leadership off a removed leader).
            let topic = image
                .topic_names
                .get(&c.topic_id)
                .cloned()
                .unwrap_or_default();
            let planned = reassign::plan(
                reg,
                reassign::current(reg),
                c.isr.clone(),
                |r| image.is_live(r),
                self.unclean(image, &topic),
            );
            if !planned.assignment.adding.is_empty() || !planned.assignment.removing.is_empty() {
                return Ok(vec![MetadataRecord::PartitionChange {
                    topic_id: c.topic_id,
                    partition: c.partition,
                    leader: planned.leader,
                    isr: planned.isr,
                    assignment: None,
                    elr: None,
                }]);
            }
            tracing::info!(topic = %topic, partition = c.partition, replicas = ?planned.assignment.replicas, leader = planned.leader, "partition reassignment completed");
            return Ok(vec![MetadataRecord::PartitionChange {
                topic_id: c.topic_id,
                partition: c.partition,
                leader: planned.leader,
                isr: planned.isr,
                assignment: Some(planned.assignment),
                elr: None,
            }]);
        }
        Ok(vec![MetadataRecord::PartitionChange {
            topic_id: c.topic_id,
            partition: c.partition,
            leader: reg.leader,
            isr: c.isr.clone(),
            assignment: None,
            elr: None,
        }])
    }

    /// AlterPartitionReassignments: per partition, start (or replace) a reassignment to the
    /// given replicas, or cancel the one in progress (None). Targets must be distinct,
    /// registered brokers; `allow_rf_change` false refuses a different replica count.
    pub fn alter_reassignments(
        &self,
        image: &MetadataImage,
        targets: &[ReassignTarget],
        allow_rf_change: bool,
    ) -> (Vec<PartitionOutcome>, Vec<MetadataRecord>) {
        let mut outcomes = Vec::with_capacity(targets.len());
        let mut records = Vec::new();
        for (topic, partition, target) in targets {
            let outcome = self
                .plan_reassignment(image, topic, *partition, target.as_deref(), allow_rf_change)
                .map(|rec| records.extend(rec));
            if let Err(e) = &outcome {
                tracing::info!(topic = %topic, partition, code = ?e.code, message = %e.message, "partition reassignment refused");
            }
            outcomes.push((topic.clone(), *partition, outcome));
        }
        (outcomes, records)
    }

    fn plan_reassignment(
        &self,
        image: &MetadataImage,
        topic: &str,
        partition: i32,
        target: Option<&[i32]>,
        allow_rf_change: bool,
    ) -> Result<Option<MetadataRecord>, ApiError> {
        let t = image.topic(topic).ok_or_else(|| {
            ApiError::new(
                ErrorCode::UnknownTopicOrPartition,
                format!("Unable to find a topic named {topic}."),
            )
        })?;
        let reg = t.partitions.get(&partition).ok_or_else(|| {
            ApiError::new(
                ErrorCode::UnknownTopicOrPartition,
                format!("Unable to find partition {topic}:{partition}."),
            )
        })?;
        let unclean = self.unclean(image, topic);
        let live = |r: i32| image.is_live(r);
        let (assignment, isr) = match target {
            None => {
                if !reg.is_reassigning() {
                    return Err(ApiError::new(
                        ErrorCode::NoReassignmentInProgress,
                        "No partition reassignment is in progress for this topic-partition.",
                    ));
                }
                reassign::revert(reg).ok_or_else(|| {
                    ApiError::new(
                        ErrorCode::InvalidReplicaAssignment,
                        format!("Unable to revert partition assignment for {topic}:{partition} because it would require an unclean leader election."),
                    )
                })?
            }
            Some(target) => {
                let bad = |m: String| ApiError::new(ErrorCode::InvalidReplicaAssignment, m);
                if target.is_empty() {
                    return Err(bad(
                        "The manual partition assignment includes an empty replica list.".into(),
                    ));
                }
                for (i, b) in target.iter().enumerate() {
                    if target[..i].contains(b) {
                        return Err(bad(format!("The manual partition assignment includes the broker {b} more than once.")));
                    }
                    if !image.brokers.contains_key(b) {
                        return Err(bad(format!("The manual partition assignment includes broker {b}, but no such broker is registered.")));
                    }
                }
                let rf = reg.target_replicas().len();
                if !allow_rf_change && target.len() != rf {
                    return Err(ApiError::new(
                        ErrorCode::InvalidReplicationFactor,
                        format!("The replication factor is changed from {rf} to {} but allowReplicationFactorChange is false.", target.len()),
                    ));
                }
                (reassign::start(&reg.replicas, target), reg.isr.clone())
            }
        };
        let planned = reassign::plan(reg, assignment, isr, live, unclean);
        if planned.leader == reg.leader
            && planned.isr == reg.isr
            && planned.assignment == reassign::current(reg)
        {
            return Ok(None);
        }
        Ok(Some(MetadataRecord::PartitionChange {
            topic_id: t.id,
            partition,
            leader: planned.leader,
            isr: planned.isr,
            assignment: Some(planned.assignment),
            elr: None,
        }))
    }

    /// ElectLeaders: `preferred` moves leadership to each partition's first replica when it
    /// is live and in sync; otherwise (unclean) a leaderless partition takes any live
    /// replica. `targets` None means every partition. Per partition: done or why not.
    pub fn elect_leaders(
        &self,
        image: &MetadataImage,
        preferred: bool,
        targets: Option<&[(String, i32)]>,
    ) -> (Vec<ElectionOutcome>, Vec<MetadataRecord>) {
        let all: Vec<(String, i32)>;
        let targets = match targets {
            Some(t) => t,
            None => {
                all = image
                    .topics
                    .values()
                    .flat_map(|t| t.partitions.keys().map(|p| (t.name.clone(), *p)))
                    .collect();
                &all
            }
        };
        let mut outcomes = Vec::with_capacity(targets.len());
        let mut records = Vec::new();
        for (topic, partition) in targets {
            let found = image
                .topic(topic)
                .and_then(|t| t.partitions.get(partition).map(|r| (t.id, r)));
            let outcome = match found {
                None => Err(ApiError::new(
                    ErrorCode::UnknownTopicOrPartition,
                    "no such partition",
                )),
                Some((id, reg)) if preferred => {
                    let want = reg.replicas[0];
                    if reg.leader == want {
                        Err(ApiError::new(
                            ErrorCode::ElectionNotNeeded,
                            "already the preferred leader",
                        ))
                    } else if image.is_live(want) && reg.isr.contains(&want) {
                        records.push(MetadataRecord::PartitionChange {
                            topic_id: id,
                            partition: *partition,
                            leader: want,
                            isr: reg.isr.clone(),
                            assignment: None,
                            elr: None,
                        });
                        Ok(())
                    } else {
                        Err(ApiError::new(
                            ErrorCode::PreferredLeaderNotAvailable,
                            format!("broker {want} is not live and in sync"),
                        ))
                    }
                }
                Some((id, reg)) => {
                    let e = elect(
                        &reg.replicas,
                        &reg.isr,
                        &reg.elr.eligible,
                        |r| image.is_live(r),
                        true,
                    );
                    if reg.leader >= 0 {
                        Err(ApiError::new(
                            ErrorCode::ElectionNotNeeded,
                            "the partition has a leader",
                        ))
                    } else if e.leader < 0 {
                        Err(ApiError::new(
                            ErrorCode::EligibleLeadersNotAvailable,
                            "no replica is live",
                        ))
                    } else {
                        tracing::warn!(topic = %topic, partition, leader = e.leader, "unclean leader election: records the old ISR had may be lost");
                        records.push(MetadataRecord::PartitionChange {
                            topic_id: id,
                            partition: *partition,
                            leader: e.leader,
                            isr: e.isr,
                            assignment: None,
                            elr: None,
                        });
                        Ok(())
                    }
                }
            };
            outcomes.push((topic.clone(), *partition, outcome));
        }
        (outcomes, records)
    }

    /// `auto.leader.rebalance.enable`: the partitions whose preferred leader is live, in
    /// sync and not leading, for brokers whose share of such partitions exceeds
    /// `imbalance_pct` percent of those they prefer.
    pub fn imbalanced(&self, image: &MetadataImage, imbalance_pct: i64) -> Vec<(String, i32)> {
        let mut preferred: BTreeMap<i32, (usize, Vec<(String, i32)>)> = BTreeMap::new();
        for t in image.topics.values() {
            for (p, reg) in &t.partitions {
                let Some(&want) = reg.replicas.first() else {
                    continue;
                };
                let e = preferred.entry(want).or_default();
                e.0 += 1;
                if reg.leader != want && image.is_live(want) && reg.isr.contains(&want) {
                    e.1.push((t.name.clone(), *p));
                }
            }
        }
        preferred
            .into_values()
            .filter(|(total, moved)| {
                !moved.is_empty() && moved.len() * 100 > total * imbalance_pct.max(0) as usize
            })
            .flat_map(|(_, moved)| moved)
            .collect()
    }

    /// Hand out `count` producer ids to `node_id`: the first of the block and its record.
    pub fn allocate_producer_ids(
        &self,
        image: &MetadataImage,
        node_id: i32,
        count: i64,
    ) -> (i64, Vec<MetadataRecord>) {
        let first = match image.next_producer_id {
            0 => first_producer_id(sluice_rt::random_u128()),
            next => next,
        };
        (
            first,
            vec![MetadataRecord::ProducerIds {
                node_id,
                next_producer_id: first + count,
            }],
        )
    }

    /// AlterUserScramCredentials (checked by the broker for duplicates, mechanisms and
    /// iteration counts): store or delete each credential. Deleting one that does not exist
    /// fails that user, as in Kafka; a user's changes apply all or none.
    pub fn alter_scram_credentials(
        &self,
        image: &MetadataImage,
        changes: &[ScramChange],
    ) -> (Vec<UserOutcome>, Vec<MetadataRecord>) {
        let mut users: Vec<&str> = Vec::new();
        for (user, _, _) in changes {
            if !users.contains(&user.as_str()) {
                users.push(user);
            }
        }
        let mut outcomes = Vec::new();
        let mut records = Vec::new();
        for user in users {
            let mine: Vec<&ScramChange> = changes.iter().filter(|c| c.0 == user).collect();
            let missing = mine.iter().find(|(_, mechanism, cred)| {
                cred.is_none() && !image.scram.contains_key(&(user.to_string(), *mechanism))
            });
            if missing.is_some() {
                outcomes.push((
                    user.to_string(),
                    Err(ApiError::new(
                        ErrorCode::ResourceNotFound,
                        "Attempt to delete a user credential that does not exist",
                    )),
                ));
                continue;
            }
            for (_, mechanism, cred) in mine {
                records.push(match cred {
                    Some(c) => MetadataRecord::ScramCredential {
                        user: user.to_string(),
                        mechanism: *mechanism,
                        salt: c.salt.clone(),
                        stored_key: c.stored_key.clone(),
                        server_key: c.server_key.clone(),
                        iterations: c.iterations,
                    },
                    None => MetadataRecord::RemoveScramCredential {
                        user: user.to_string(),
                        mechanism: *mechanism,
                    },
                });
            }
            outcomes.push((user.to_string(), Ok(())));
        }
        (outcomes, records)
    }

    /// Create, Renew or ExpireDelegationToken at `now_ms`, as Kafka's
    /// DelegationTokenControlManager: off without `delegation.token.secret.key`
    /// (DELEGATION_TOKEN_AUTH_DISABLED); a token is found by its HMAC; only its owner or a
    /// renewer may renew or expire it (DELEGATION_TOKEN_OWNER_MISMATCH, checked after expiry
    /// for renew and before it for expire); a new expiry never passes the token's maximum.
    pub fn delegation_token(
        &self,
        image: &MetadataImage,
        now_ms: i64,
        request: &TokenRequest,
    ) -> (Result<TokenReply, ApiError>, Vec<MetadataRecord>) {
        let settings = &self.defaults.tokens;
        let Some(key) = settings.key() else {
            return (
                Err(ApiError::new(
                    ErrorCode::DelegationTokenAuthDisabled,
                    "Delegation Token feature is not enabled.",
                )),
                Vec::new(),
            );
        };
        let reply = |token: TokenRecord| TokenReply {
            hmac: sluice_protocol::scram::token_hmac(key, &token.token_id),
            token,
        };
        let expired = |t: &TokenRecord| t.max_ms < now_ms || t.expiry_ms < now_ms;
        let (hmac, principal, period_ms, renew) = match request {
            TokenRequest::Create {
                owner,
                requester,
                renewers,
                max_lifetime_ms,
            } => {
                if let Some(r) = renewers.iter().find(|r| !r.starts_with("User:")) {
                    return (
                        Err(ApiError::new(
                            ErrorCode::InvalidPrincipalType,
                            format!("Renewer principal type is not supported: {r}"),
                        )),
                        Vec::new(),
                    );
                }
                let max_life = match *max_lifetime_ms {
                    m if m > 0 => m.min(settings.max_lifetime_ms),
                    _ => settings.max_lifetime_ms,
                };
                let max_ms = now_ms.saturating_add(max_life);
                let token = TokenRecord {
                    token_id: sluice_protocol::base64::encode(random_topic_id().as_bytes()),
                    owner: owner.clone(),
                    requester: requester.clone(),
                    renewers: renewers.clone(),
                    issue_ms: now_ms,
                    max_ms,
                    expiry_ms: max_ms.min(now_ms.saturating_add(settings.expiry_time_ms)),
                };
                let record = MetadataRecord::DelegationToken(token.clone());
                return (Ok(reply(token)), vec![record]);
            }
            TokenRequest::Renew {
                hmac,
                principal,
                period_ms,
            } => (hmac, principal, *period_ms, true),
            TokenRequest::Expire {
                hmac,
                principal,
                period_ms,
            } => (hmac, principal, *period_ms, false),
        };
        let found = image.tokens.values().find(|t| {
            let mine = sluice_protocol::scram::token_hmac(key, &t.token_id);
            mine.len() == hmac.len()
                && mine.iter().zip(hmac).fold(0u8, |a, (x, y)| a | (x ^ y)) == 0
        });
        let Some(token) = found else {
            return (
                Err(ApiError::new(
                    ErrorCode::DelegationTokenNotFound,
                    "Delegation Token not found.",
                )),
                Vec::new(),
            );
        };
        let is_expired = expired(token);
        let may = token.owner == *principal || token.renewers.contains(principal);
        let expired_error = || {
            ApiError::new(
                ErrorCode::DelegationTokenExpired,
                "Delegation Token is expired.",
            )
        };
        let refusal = if renew && is_expired {
            Some(expired_error())
        } else if !may {
            Some(ApiError::new(
                ErrorCode::DelegationTokenOwnerMismatch,
                "Delegation Token owner mismatch: only the owner or a renewer may renew or expire it.",
            ))
        } else if !renew && period_ms >= 0 && is_expired {
            Some(expired_error())
        } else {
            None
        };
        if let Some(e) = refusal {
            return (Err(e), Vec::new());
        }
        let mut token = token.clone();
        if !renew && period_ms < 0 {
            token.expiry_ms = now_ms;
            let record = MetadataRecord::RemoveDelegationToken {
                token_id: token.token_id.clone(),
            };
            return (Ok(reply(token)), vec![record]);
        }
        let period = match (renew, period_ms) {
            (true, p) if p > 0 => p.min(settings.expiry_time_ms),
            (true, _) => settings.expiry_time_ms,
            (false, p) => p,
        };
        token.expiry_ms = token.max_ms.min(now_ms.saturating_add(period));
        let record = MetadataRecord::DelegationToken(token.clone());
        (Ok(reply(token)), vec![record])
    }

    /// The controller's sweep (every `delegation.token.expiry.check.interval.ms`): remove
    /// every token past its expiry or maximum, at most 1000 at a time, as Kafka.
    pub fn expired_tokens(&self, image: &MetadataImage, now_ms: i64) -> Vec<MetadataRecord> {
        image
            .tokens
            .values()
            .filter(|t| t.max_ms < now_ms || t.expiry_ms < now_ms)
            .take(1000)
            .map(|t| MetadataRecord::RemoveDelegationToken {
                token_id: t.token_id.clone(),
            })
            .collect()
    }

    /// AlterClientQuotas: validate each entity's changes as Kafka does (known keys, values
    /// above 0, byte rates whole numbers) and turn them into quota records; an entity's
    /// changes apply all or none.
    pub fn alter_client_quotas(
        &self,
        changes: &[QuotaChange],
        validate_only: bool,
    ) -> (Vec<Result<(), ApiError>>, Vec<MetadataRecord>) {
        let mut out = Vec::with_capacity(changes.len());
        let mut records = Vec::new();
        for (entity, ops) in changes {
            match validate_quota_ops(entity, ops) {
                Err(e) => out.push(Err(e)),
                Ok(()) => {
                    if !validate_only {
                        records.extend(ops.iter().map(|(key, value)| {
                            MetadataRecord::ClientQuota {
                                entity: entity.clone(),
                                key: key.clone(),
                                value: value.map(QuotaValue),
                            }
                        }));
                    }
                    out.push(Ok(()));
                }
            }
        }
        (out, records)
    }

    /// CreateAcls: each valid binding not already present becomes an ACL record; an
    /// invalid one fails with INVALID_REQUEST, as in Kafka.
    pub fn create_acls(
        &self,
        image: &MetadataImage,
        bindings: &[AclBinding],
        copied_by_link: Option<&str>,
    ) -> (Vec<Result<(), ApiError>>, Vec<MetadataRecord>) {
        let mut out = Vec::with_capacity(bindings.len());
        let mut records = Vec::new();
        let mut added: Vec<&AclBinding> = Vec::new();
        for b in bindings {
            if let Err(m) = acl::validate(b) {
                out.push(Err(ApiError::new(ErrorCode::InvalidRequest, m)));
                continue;
            }
            if !image.acls.values().any(|a| a == b) && !added.contains(&b) {
                added.push(b);
                records.push(MetadataRecord::Acl {
                    id: copied_by_link
                        .map_or_else(sluice_rt::random_uuid, |link| copied_acl_id(link, b)),
                    binding: b.clone(),
                });
            }
            out.push(Ok(()));
        }
        (out, records)
    }

    /// DeleteAcls: per filter the ACLs it matched (all of them deleted).
    pub fn delete_acls(
        &self,
        image: &MetadataImage,
        filters: &[AclFilter],
    ) -> (Vec<Result<Vec<AclBinding>, ApiError>>, Vec<MetadataRecord>) {
        let mut out = Vec::with_capacity(filters.len());
        let mut removed: HashSet<Uuid> = HashSet::new();
        let mut records = Vec::new();
        for f in filters {
            if let Err(m) = f.validate() {
                out.push(Err(ApiError::new(ErrorCode::InvalidRequest, m)));
                continue;
            }
            let mut matched = Vec::new();
            for (id, b) in &image.acls {
                if f.matches(b) {
                    matched.push(b.clone());
                    if removed.insert(*id) {
                        records.push(MetadataRecord::RemoveAcl { id: *id });
                    }
                }
            }
            out.push(Ok(matched));
        }
        (out, records)
    }
}

/// A mirror topic promoted by `changes` (its state set to `stopped`): every partition's
/// leader epoch is raised to one above the highest (same leader and ISR) and that epoch is
/// recorded as [`MIRROR_PROMOTED_EPOCH`], in the same batch as the state. Copied batches
/// carry the epochs they were copied in, local writes the new ones (brokers take local
/// writes only from this epoch on), so every replica can tell the two apart for good.
fn promotion_records(
    image: &MetadataImage,
    name: &str,
    changes: &[(String, Option<String>)],
) -> Vec<MetadataRecord> {
    let promotes = changes.iter().any(|(k, v)| {
        k == MIRROR_STATE && v.as_deref().and_then(MirrorState::parse) == Some(MirrorState::Stopped)
    });
    let (Some(topic), Some(mirror)) = (
        image.topic(name),
        MirrorTopic::of(name, &image.topic_configs(name)),
    ) else {
        return Vec::new();
    };
    if !promotes || mirror.state == MirrorState::Stopped {
        return Vec::new();
    }
    let epoch = topic
        .partitions
        .values()
        .map(|p| p.leader_epoch)
        .max()
        .unwrap_or(0)
        + 1;
    let mut out: Vec<MetadataRecord> = topic
        .partitions
        .iter()
        .map(|(index, p)| MetadataRecord::Partition {
            topic_id: topic.id,
            partition: *index,
            replicas: p.replicas.clone(),
            isr: p.isr.clone(),
            leader: p.leader,
            leader_epoch: epoch,
            partition_epoch: p.partition_epoch + 1,
            adding: p.adding.clone(),
            removing: p.removing.clone(),
            elr: Default::default(),
        })
        .collect();
    out.push(MetadataRecord::Config {
        resource_type: RESOURCE_TOPIC,
        resource_name: name.to_string(),
        name: MIRROR_PROMOTED_EPOCH.to_string(),
        value: Some(epoch.to_string()),
    });
    out
}

/// Kafka's user and client-id quota keys and whether each is a whole number (LONG).
const QUOTA_KEYS: &[(&str, bool)] = &[
    ("producer_byte_rate", true),
    ("consumer_byte_rate", true),
    ("request_percentage", false),
    ("controller_mutation_rate", false),
];

fn validate_quota_ops(entity: &QuotaEntity, ops: &[(String, Option<f64>)]) -> Result<(), ApiError> {
    let bad = |m: String| Err(ApiError::new(ErrorCode::InvalidRequest, m));
    if entity.user.is_none() && entity.client_id.is_none() {
        return bad("Invalid empty client quota entity".into());
    }
    for (i, (key, value)) in ops.iter().enumerate() {
        if ops[..i].iter().any(|(k, _)| k == key) {
            return bad(format!("Duplicate quota key {key}"));
        }
        let Some((_, integral)) = QUOTA_KEYS.iter().find(|(k, _)| k == key) else {
            return bad(format!("Invalid configuration key {key}"));
        };
        if let Some(v) = value {
            if !v.is_finite() || *v <= 0.0 {
                return bad(format!("Quota {key} must be greater than 0"));
            }
            if *integral && (v % 1.0).abs() > 1e-6 {
                return bad(format!("{key} cannot be a fractional value."));
            }
        }
    }
    Ok(())
}

/// New partitions `first..` of a topic, led by their first replica in `leader_epoch` (0, or
/// a promoted mirror's promotion epoch, so that its new partitions take local writes).
fn partition_records(
    topic_id: Uuid,
    first: i32,
    assignments: &[Vec<i32>],
    leader_epoch: i32,
) -> Vec<MetadataRecord> {
    assignments
        .iter()
        .enumerate()
        .map(|(i, replicas)| MetadataRecord::Partition {
            topic_id,
            partition: first + i as i32,
            replicas: replicas.clone(),
            isr: replicas.clone(),
            leader: replicas[0],
            leader_epoch,
            partition_epoch: 0,
            adding: Vec::new(),
            removing: Vec::new(),
            elr: Default::default(),
        })
        .collect()
}

/// Check a manual assignment: consecutive partitions from `first`, non-empty replica lists of
/// distinct, registered brokers, all the same size.
fn validate_assignment(
    assignments: &[(i32, Vec<i32>)],
    first: i32,
    brokers: &[i32],
) -> Result<Vec<Vec<i32>>, ApiError> {
    let bad = |m: String| ApiError::new(ErrorCode::InvalidReplicaAssignment, m);
    let mut sorted: Vec<&(i32, Vec<i32>)> = assignments.iter().collect();
    sorted.sort_by_key(|(p, _)| *p);
    let rf = sorted.first().map_or(0, |(_, r)| r.len());
    let mut out = Vec::with_capacity(sorted.len());
    for (i, (p, replicas)) in sorted.iter().enumerate() {
        if *p != first + i as i32 {
            return Err(bad(format!(
                "Partitions should be consecutive and start from {first}; found partition {p}."
            )));
        }
        if replicas.is_empty() || replicas.len() != rf {
            return Err(bad(format!(
                "Partition {p} has {} replicas where {rf} are expected.",
                replicas.len()
            )));
        }
        let mut distinct = replicas.clone();
        distinct.sort_unstable();
        distinct.dedup();
        if distinct.len() != replicas.len() {
            return Err(bad(format!("Duplicate brokers are not allowed in replica assignment: {replicas:?} for partition {p}.")));
        }
        if let Some(missing) = replicas.iter().find(|b| !brokers.contains(b)) {
            return Err(bad(format!("The manual partition assignment includes broker {missing}, which is not registered.")));
        }
        out.push(replicas.clone());
    }
    if out.is_empty() {
        return Err(bad("No partitions in the assignment.".into()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn producer_ids_start_at_a_random_block_far_from_zero_and_then_count_up() {
        for r in [0u128, 1, 12_345, u128::MAX] {
            let first = first_producer_id(r);
            assert!((1i64 << 32..1i64 << 42).contains(&first), "{first}");
            assert_eq!(first % 1000, 0);
        }
        let c = Controller::new(ControllerDefaults {
            num_partitions: 1,
            replication_factor: 1,
            delete_topic_enable: true,
            unclean_leader_election: false,
            min_insync_replicas: 1,
            tokens: Default::default(),
            group_settings: Default::default(),
            broker: Default::default(),
        });
        let mut image = MetadataImage::empty();
        let (first, records) = c.allocate_producer_ids(&image, 1, 1000);
        assert!(first >= 1 << 32);
        for r in records {
            image.apply(0, &r);
        }
        let (second, _) = c.allocate_producer_ids(&image, 2, 1000);
        assert_eq!(second, first + 1000);
    }

    /// Kafka's DelegationTokenControlManager rules: lifetimes capped by the settings, only
    /// the owner or a renewer renews or expires (the requester may not), renew refuses an
    /// expired token before checking who asks while expire checks who asks first, a negative
    /// expiry period removes the token, and the sweep removes what has expired.
    #[test]
    fn delegation_tokens_follow_kafkas_rules() {
        use ErrorCode::*;
        let settings = TokenSettings {
            secret_key: Some("key".into()),
            max_lifetime_ms: 10_000,
            expiry_time_ms: 1_000,
            expiry_check_interval_ms: 100,
        };
        let c = Controller::new(ControllerDefaults {
            num_partitions: 1,
            replication_factor: 1,
            delete_topic_enable: true,
            unclean_leader_election: false,
            min_insync_replicas: 1,
            tokens: settings,
            group_settings: Default::default(),
            broker: Default::default(),
        });
        let mut image = MetadataImage::empty();
        let apply = |image: &mut MetadataImage, records: Vec<MetadataRecord>| {
            let offset = image.offset + 1;
            for r in &records {
                image.apply(offset, r);
            }
        };
        let create = TokenRequest::Create {
            owner: "User:o".into(),
            requester: "User:q".into(),
            renewers: vec!["User:r".into()],
            max_lifetime_ms: 99_999,
        };
        let (made, records) = c.delegation_token(&image, 100, &create);
        let made = made.unwrap();
        apply(&mut image, records);
        assert_eq!((made.token.max_ms, made.token.expiry_ms), (10_100, 1_100));
        assert_eq!(
            made.hmac,
            sluice_protocol::scram::token_hmac("key", &made.token.token_id)
        );
        let code = |r: &Result<TokenReply, ApiError>| r.as_ref().err().map(|e| e.code);
        let renew = |who: &str, period_ms| TokenRequest::Renew {
            hmac: made.hmac.clone(),
            principal: who.into(),
            period_ms,
        };
        let expire = |who: &str, period_ms| TokenRequest::Expire {
            hmac: made.hmac.clone(),
            principal: who.into(),
            period_ms,
        };
        assert_eq!(
            code(&c.delegation_token(&image, 200, &renew("User:q", 500)).0),
            Some(DelegationTokenOwnerMismatch)
        );
        let (renewed, records) = c.delegation_token(&image, 200, &renew("User:r", 500));
        assert_eq!(renewed.unwrap().token.expiry_ms, 700);
        apply(&mut image, records);
        // Past its expiry: renew says expired whoever asks; expire asks who first.
        assert_eq!(
            code(&c.delegation_token(&image, 800, &renew("User:q", 500)).0),
            Some(DelegationTokenExpired)
        );
        assert_eq!(
            code(&c.delegation_token(&image, 800, &expire("User:q", 0)).0),
            Some(DelegationTokenOwnerMismatch)
        );
        assert_eq!(
            code(&c.delegation_token(&image, 800, &expire("User:o", 0)).0),
            Some(DelegationTokenExpired)
        );
        assert_eq!(c.expired_tokens(&image, 700), vec![]);
        assert_eq!(c.expired_tokens(&image, 800).len(), 1);
        // A negative period removes it now.
        let (gone, records) = c.delegation_token(&image, 800, &expire("User:o", -1));
        assert_eq!(gone.unwrap().token.expiry_ms, 800);
        apply(&mut image, records);
        assert!(image.tokens.is_empty());
        assert_eq!(
            code(&c.delegation_token(&image, 800, &renew("User:o", 1)).0),
            Some(DelegationTokenNotFound)
        );
        // Off without a secret key.
        let off = Controller::new(ControllerDefaults {
            num_partitions: 1,
            replication_factor: 1,
            delete_topic_enable: true,
            unclean_leader_election: false,
            min_insync_replicas: 1,
            tokens: TokenSettings::default(),
            group_settings: Default::default(),
            broker: Default::default(),
        });
        assert_eq!(
            code(&off.delegation_token(&image, 1, &create).0),
            Some(DelegationTokenAuthDisabled)
        );
    }

    struct Cluster {
        c: Controller,
        image: MetadataImage,
    }

    impl Cluster {
        fn new(brokers: &[i32]) -> Self {
            let mut me = Self {
                c: Controller::new(ControllerDefaults {
                    num_partitions: 2,
                    replication_factor: 1,
                    delete_topic_enable: true,
                    unclean_leader_election: false,
                    min_insync_replicas: 1,
                    tokens: Default::default(),
                    group_settings: Default::default(),
                    broker: Default::default(),
                }),
                image: MetadataImage::empty(),
            };
            for b in brokers {
                let r =
                    me.c.register_broker(&me.image, *b, Uuid::new_v4(), vec![], None, false);
                me.apply(r);
                let r = me.c.unfence_broker(&me.image, *b);
                me.apply(r);
            }
            me
        }

        /// As the quorum writes them: with the ELR settled.
        fn apply(&mut self, records: Vec<MetadataRecord>) {
            let records = self.c.settle_elr(&self.image, records, None);
            let offset = self.image.offset + 1;
            for r in &records {
                self.image.apply(offset, r);
            }
        }

        fn create(&mut self, specs: &[CreateTopicSpec]) -> Vec<Result<CreatedTopic, ApiError>> {
            let (out, records) = self.c.create_topics(&self.image, specs, false);
            self.apply(records);
            out
        }

        fn partition(&self, t: &str, p: i32) -> sluice_metadata::image::PartitionRegistration {
            self.image.topic(t).unwrap().partitions[&p].clone()
        }
    }

    fn spec(name: &str, partitions: i32, rf: i16) -> CreateTopicSpec {
        CreateTopicSpec {
            name: name.into(),
            num_partitions: partitions,
            replication_factor: rf,
            ..CreateTopicSpec::default()
        }
    }

    /// RF 3, min.insync.replicas 2, `eligible.leader.replicas.version` 1: partition 0 of
    /// "t" on brokers 1, 2, 3.
    fn elr_cluster() -> (Cluster, Uuid) {
        let mut k = Cluster::new(&[1, 2, 3]);
        k.apply(vec![MetadataRecord::FeatureLevel {
            name: features::ELR_VERSION.into(),
            level: 1,
        }]);
        let mut t = spec("t", -1, -1);
        t.assignments = vec![(0, vec![1, 2, 3])];
        t.configs = vec![("min.insync.replicas".into(), Some("2".into()))];
        let id = k.create(&[t]).remove(0).unwrap().id;
        (k, id)
    }

    fn leader_isr_elr(k: &Cluster) -> (i32, Vec<i32>, Vec<i32>, Vec<i32>) {
        let p = k.partition("t", 0);
        (p.leader, p.isr, p.elr.eligible, p.elr.last_known)
    }

    fn register(k: &mut Cluster, node: i32, unclean_shutdown: bool) {
        let r = k.c.register_broker(
            &k.image,
            node,
            Uuid::new_v4(),
            vec![],
            None,
            unclean_shutdown,
        );
        k.apply(r);
    }

    /// KIP-966: fenced replicas that leave an ISR below min.insync.replicas stay eligible
    /// and lead when the ISR cannot; the ISR may empty; an ISR of min.insync.replicas
    /// clears the ELR.
    #[test]
    fn fenced_replicas_stay_eligible_and_lead_when_the_isr_cannot() {
        let (mut k, id) = elr_cluster();
        assert_eq!(leader_isr_elr(&k), (1, vec![1, 2, 3], vec![], vec![]));
        let r = k.c.fence_broker(&k.image, 2);
        k.apply(r);
        assert_eq!(leader_isr_elr(&k), (1, vec![1, 3], vec![], vec![]));
        let r = k.c.fence_broker(&k.image, 1);
        k.apply(r);
        assert_eq!(leader_isr_elr(&k), (3, vec![3], vec![1], vec![]));
        // The last ISR member goes too: no leader, both eligible.
        let r = k.c.fence_broker(&k.image, 3);
        k.apply(r);
        assert_eq!(leader_isr_elr(&k), (-1, vec![], vec![1, 3], vec![]));
        // Broker 2 (out of sync, not eligible) comes back: still no leader.
        register(&mut k, 2, false);
        let r = k.c.unfence_broker(&k.image, 2);
        k.apply(r);
        assert_eq!(leader_isr_elr(&k).0, -1);
        // Broker 1 comes back from a clean shutdown and leads from the ELR.
        register(&mut k, 1, false);
        let r = k.c.unfence_broker(&k.image, 1);
        k.apply(r);
        assert_eq!(leader_isr_elr(&k), (1, vec![1], vec![3], vec![]));
        // Broker 2 catches up: the ISR is 2 strong again, the ELR empties.
        let p = k.partition("t", 0);
        let r =
            k.c.alter_partition(
                &k.image,
                &IsrChange {
                    leader: 1,
                    topic_id: id,
                    partition: 0,
                    leader_epoch: p.leader_epoch,
                    partition_epoch: p.partition_epoch,
                    isr: vec![1, 2],
                },
            )
            .unwrap();
        k.apply(r);
        assert_eq!(leader_isr_elr(&k), (1, vec![1, 2], vec![], vec![]));
        // A metadata snapshot keeps the ELR.
        let r = k.c.fence_broker(&k.image, 2);
        k.apply(r);
        let mut copy = MetadataImage::empty();
        for r in k.image.to_records() {
            copy.apply(1, &r);
        }
        assert_eq!(
            copy.topic("t").unwrap().partitions[&0].elr.eligible,
            vec![2]
        );
    }

    /// The simulator's seed 91 (SLUICE_SIM_OVERLAP=1) in the controller alone: the replica
    /// that holds every acknowledged record restarts uncleanly while the other ISR member
    /// loses power. Without ELR the one back from the power loss led as the last ISR member
    /// and the others truncated to it; with it, a broker back from an unclean shutdown is
    /// never elected: the partition stays offline (remembering who was last eligible)
    /// until unclean election is asked for.
    #[test]
    fn a_broker_back_from_an_unclean_shutdown_never_leads() {
        let (mut k, _) = elr_cluster();
        let r = k.c.fence_broker(&k.image, 2);
        k.apply(r);
        // Broker 1 restarts without a clean shutdown: out of the ISR, not eligible.
        register(&mut k, 1, true);
        assert_eq!(leader_isr_elr(&k), (3, vec![3], vec![], vec![]));
        // Broker 3 loses power and comes back: out of the ISR, nobody eligible.
        register(&mut k, 3, true);
        assert_eq!(leader_isr_elr(&k), (-1, vec![], vec![], vec![3]));
        for b in [1, 3, 2] {
            let r = k.c.unfence_broker(&k.image, b);
            k.apply(r);
            assert_eq!(leader_isr_elr(&k).0, -1, "after broker {b} is back");
        }
        // An eligible replica that restarts uncleanly leaves the ELR as well.
        let (mut k, _) = elr_cluster();
        for b in [2, 1] {
            let r = k.c.fence_broker(&k.image, b);
            k.apply(r);
        }
        assert_eq!(leader_isr_elr(&k), (3, vec![3], vec![1], vec![]));
        register(&mut k, 1, true);
        assert_eq!(leader_isr_elr(&k), (3, vec![3], vec![], vec![]));
    }

    /// With the feature off (a cluster formatted for an older release, or downgraded), the
    /// ISR keeps its last member and nobody is eligible beyond it, as before KIP-966.
    #[test]
    fn without_the_feature_there_is_no_elr() {
        let (mut k, _) = elr_cluster();
        k.apply(vec![MetadataRecord::FeatureLevel {
            name: features::ELR_VERSION.into(),
            level: 0,
        }]);
        for b in [2, 1, 3] {
            let r = k.c.fence_broker(&k.image, b);
            k.apply(r);
        }
        let (leader, isr, elr, _) = leader_isr_elr(&k);
        assert_eq!((leader, elr), (-1, vec![]));
        assert!(!isr.is_empty());
    }

    #[test]
    fn requests_for_too_many_partitions_are_refused_whole_as_kafka() {
        let mut k = Cluster::new(&[0]);
        let out = k.create(&[spec("ok", 1, 1), spec("huge", i32::MAX, 1)]);
        for o in &out {
            let e = o.as_ref().unwrap_err();
            assert_eq!(e.code, ErrorCode::PolicyViolation);
            assert_eq!(
                e.message,
                "Excessively large number of partitions per request."
            );
        }
        // 9,998 partitions and two configs are 10,001 of Kafka's records.
        let mut big = spec("big", 9_998, 1);
        big.configs = vec![
            ("retention.ms".into(), Some("1000".into())),
            ("cleanup.policy".into(), Some("delete".into())),
        ];
        let e = k.create(&[big.clone()]).remove(0).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                ErrorCode::PolicyViolation,
                "Unable to perform excessively large batch operation."
            )
        );
        big.configs.pop();
        assert!(k.create(&[big]).remove(0).is_ok());
        assert!(k
            .image
            .topic("big")
            .is_some_and(|t| t.partitions.len() == 9_998));
        let e =
            k.c.create_partitions(&k.image, "big", 20_000, None, false)
                .unwrap_err();
        assert_eq!(
            e.message,
            "Excessively large number of additional partitions per request."
        );
    }

    #[test]
    fn create_validates_each_topic() {
        let mut k = Cluster::new(&[0]);
        let mut with_cfg = spec("c", 1, 1);
        with_cfg.configs = vec![("retention.ms".into(), Some("1000".into()))];
        let out = k.create(&[
            spec("a", -1, -1),
            spec("b.x", 3, 1),
            spec("bad name", 1, 1),
            spec("d", 0, 1),
            spec("e", 1, 2),
            with_cfg,
        ]);
        assert_eq!(out[0].as_ref().unwrap().num_partitions, 2);
        assert_eq!(out[1].as_ref().unwrap().num_partitions, 3);
        let code = |i: usize| out[i].as_ref().unwrap_err().code;
        assert_eq!(code(2), ErrorCode::InvalidTopicException);
        assert_eq!(code(3), ErrorCode::InvalidPartitions);
        assert_eq!(code(4), ErrorCode::InvalidReplicationFactor);
        assert!(out[5].is_ok());
        let (again, records) = k.c.create_topics(
            &k.image,
            &[
                spec("a", 1, 1),
                spec("b_x", 1, 1),
                spec("z", 1, 1),
                spec("z", 1, 1),
            ],
            true,
        );
        assert!(records.is_empty(), "validate_only writes nothing");
        let code = |i: usize| again[i].as_ref().unwrap_err().code;
        assert_eq!(code(0), ErrorCode::TopicAlreadyExists);
        assert_eq!(code(1), ErrorCode::InvalidTopicException);
        assert_eq!(code(2), ErrorCode::InvalidRequest);
        let bad_cfg = CreateTopicSpec {
            configs: vec![("nope".into(), Some("1".into()))],
            ..spec("q", 1, 1)
        };
        assert_eq!(
            k.create(&[bad_cfg])[0].as_ref().unwrap_err().code,
            ErrorCode::InvalidConfig
        );
        assert_eq!(
            k.image
                .topic_configs("c")
                .get("retention.ms")
                .map(String::as_str),
            Some("1000")
        );
    }

    #[test]
    fn replication_factor_counts_only_live_brokers() {
        let mut k = Cluster::new(&[1, 2, 3]);
        let out = k.create(&[spec("t", 6, 3)]);
        assert_eq!(out[0].as_ref().unwrap().replication_factor, 3);
        let mut leaders: Vec<i32> = (0..6).map(|p| k.partition("t", p).leader).collect();
        leaders.sort_unstable();
        assert_eq!(leaders, vec![1, 1, 2, 2, 3, 3]);
        let r = k.c.fence_broker(&k.image, 3);
        k.apply(r);
        let out = k.create(&[spec("u", 1, 3)]);
        assert_eq!(
            out[0].as_ref().unwrap_err().code,
            ErrorCode::InvalidReplicationFactor
        );
        assert!(k.create(&[spec("u", 1, 2)])[0].is_ok());
        for r in &k.partition("u", 0).replicas {
            assert_ne!(*r, 3, "fenced brokers get no new replicas");
        }
    }

    #[test]
    fn fencing_moves_leaders_within_the_isr_and_unfencing_restores_offline_ones() {
        let mut k = Cluster::new(&[1, 2, 3]);
        k.create(&[spec("t", 3, 3), spec("single", 3, 1)]);
        let led_by_2: Vec<i32> = (0..3)
            .filter(|p| k.partition("t", *p).leader == 2)
            .collect();
        assert_eq!(led_by_2.len(), 1);
        let before = k.partition("t", led_by_2[0]);
        let r = k.c.fence_broker(&k.image, 2);
        k.apply(r);
        assert!(!k.image.is_live(2));
        for p in 0..3 {
            let reg = k.partition("t", p);
            assert_ne!(reg.leader, 2);
            assert!(reg.leader >= 0 && !reg.isr.contains(&2));
        }
        let after = k.partition("t", led_by_2[0]);
        assert_eq!(after.leader_epoch, before.leader_epoch + 1);
        let single = (0..3)
            .map(|p| k.partition("single", p))
            .find(|r| r.replicas == [2])
            .unwrap();
        assert_eq!((single.leader, single.isr.clone()), (-1, vec![2]));
        // Back: the offline single-replica partition gets its leader again.
        let r = k.c.unfence_broker(&k.image, 2);
        k.apply(r);
        let single = (0..3)
            .map(|p| k.partition("single", p))
            .find(|r| r.replicas == [2])
            .unwrap();
        assert_eq!(single.leader, 2);
        assert_eq!(single.leader_epoch, 2);
    }

    #[test]
    fn replicas_on_a_failed_log_directory_lose_leadership_and_leave_the_isr() {
        let mut k = Cluster::new(&[1, 2, 3]);
        k.create(&[spec("t", 3, 3), spec("single", 3, 1)]);
        let id = |name: &str| k.image.topic(name).unwrap().id;
        let (t, single) = (id("t"), id("single"));
        let led_by_2 = (0..3).find(|p| k.partition("t", *p).leader == 2).unwrap();
        let followed_by_2 = (0..3).find(|p| *p != led_by_2).unwrap();
        let alone = (0..3)
            .find(|p| k.partition("single", *p).replicas == [2])
            .unwrap();
        let untouched = k.partition("t", 3 - led_by_2 - followed_by_2);
        let before = k.partition("t", led_by_2);
        let offline = [(t, led_by_2), (t, followed_by_2), (single, alone)];
        let r = k.c.take_replicas_offline(&k.image, 2, &offline);
        k.apply(r);
        // The broker stays registered and live; only those replicas are out.
        assert!(k.image.is_live(2));
        let led = k.partition("t", led_by_2);
        assert!(led.leader >= 0 && led.leader != 2 && !led.isr.contains(&2));
        assert_eq!(led.leader_epoch, before.leader_epoch + 1);
        assert!(!k.partition("t", followed_by_2).isr.contains(&2));
        let third = 3 - led_by_2 - followed_by_2;
        assert_eq!(k.partition("t", third), untouched);
        // The only replica keeps its ISR (the last member stays) and has no leader.
        let s = k.partition("single", alone);
        assert_eq!((s.leader, s.isr), (-1, vec![2]));
        // Said again in the next heartbeat: nothing more to change.
        assert!(k.c.take_replicas_offline(&k.image, 2, &offline).is_empty());
        assert!(k.c.take_replicas_offline(&k.image, 9, &offline).is_empty());
    }

    #[test]
    fn unclean_election_is_a_topic_config() {
        let mut k = Cluster::new(&[1, 2]);
        let assign = |name: &str| CreateTopicSpec {
            name: name.into(),
            num_partitions: -1,
            replication_factor: -1,
            assignments: vec![(0, vec![1, 2])],
            configs: vec![],
        };
        let mut unclean = assign("u");
        unclean.configs = vec![("unclean.leader.election.enable".into(), Some("true".into()))];
        k.create(&[assign("c"), unclean]);
        // Broker 2 falls out of the ISRs, then broker 1 dies.
        let r = k.c.fence_broker(&k.image, 2);
        k.apply(r);
        let r = k.c.unfence_broker(&k.image, 2);
        k.apply(r);
        assert_eq!(k.partition("c", 0).isr, vec![1]);
        let r = k.c.fence_broker(&k.image, 1);
        k.apply(r);
        assert_eq!(k.partition("c", 0).leader, -1);
        let u = k.partition("u", 0);
        assert_eq!((u.leader, u.isr), (2, vec![2]));
    }

    #[test]
    fn a_fenced_replica_stays_in_an_isr_at_min_insync_until_a_restart_takes_the_other_out() {
        let mut k = Cluster::new(&[1, 2, 3]);
        k.create(&[CreateTopicSpec {
            name: "t".into(),
            num_partitions: -1,
            replication_factor: -1,
            assignments: vec![(0, vec![1, 2, 3])],
            configs: vec![("min.insync.replicas".into(), Some("2".into()))],
        }]);
        k.create(&[spec("u", 1, 3)]);
        // Broker 2's session expires: the ISR keeps two members without it.
        let r = k.c.fence_broker(&k.image, 2);
        k.apply(r);
        assert_eq!(k.partition("t", 0).isr, vec![1, 3]);
        // With the default min.insync.replicas=1 it leaves as before.
        let r = k.c.fence_broker(&k.image, 3);
        let mut u = k.image.clone();
        for rec in &r {
            u.apply(u.offset + 1, rec);
        }
        assert_eq!(u.topic("u").unwrap().partitions[&0].isr.len(), 1);
        // Then broker 3's: leaving broker 1 alone would drop below min.insync.replicas,
        // so 3 stays (fenced), still eligible.
        k.apply(r);
        let p = k.partition("t", 0);
        assert_eq!((p.leader, p.isr), (1, vec![1, 3]));
        // Broker 1 (the leader) comes back as a new incarnation, which may have lost its
        // unsynced tail: it leaves the ISR, and broker 3, which has every committed
        // record, leads once it is back.
        let r =
            k.c.register_broker(&k.image, 1, Uuid::new_v4(), vec![], None, false);
        k.apply(r);
        let p = k.partition("t", 0);
        assert_eq!((p.leader, p.isr), (-1, vec![3]));
        let r = k.c.unfence_broker(&k.image, 3);
        k.apply(r);
        assert_eq!(k.partition("t", 0).leader, 3);
    }

    #[test]
    fn unregistering_a_broker_takes_it_out_of_isrs_and_the_registry() {
        let mut k = Cluster::new(&[1, 2, 3]);
        k.create(&[spec("t", 3, 3), spec("single", 3, 1)]);
        let err = k.c.unregister_broker(&k.image, 9).unwrap_err();
        assert_eq!(err.code, ErrorCode::BrokerIdNotRegistered);
        let r = k.c.unregister_broker(&k.image, 2).unwrap();
        assert!(matches!(
            r.last(),
            Some(MetadataRecord::UnregisterBroker { node_id: 2, .. })
        ));
        k.apply(r);
        assert!(!k.image.brokers.contains_key(&2) && !k.image.is_live(2));
        for p in 0..3 {
            let reg = k.partition("t", p);
            assert!(reg.leader >= 0 && reg.leader != 2 && !reg.isr.contains(&2));
            assert!(reg.replicas.contains(&2), "the assignment stays");
        }
        // An ISR never empties: the partition it alone held keeps it, leaderless.
        let single = (0..3)
            .map(|p| k.partition("single", p))
            .find(|r| r.replicas == [2])
            .unwrap();
        assert_eq!((single.leader, single.isr.clone()), (-1, vec![2]));
        let err = k.c.unregister_broker(&k.image, 2).unwrap_err();
        assert_eq!(err.code, ErrorCode::BrokerIdNotRegistered);
    }

    #[test]
    fn reregistering_a_live_broker_fences_it_first() {
        let mut k = Cluster::new(&[1]);
        k.create(&[spec("t", 1, 1)]);
        let r =
            k.c.register_broker(&k.image, 1, Uuid::new_v4(), vec![], None, false);
        assert!(matches!(r[0], MetadataRecord::FenceBroker { epoch: 0, .. }));
        k.apply(r);
        let b = &k.image.brokers[&1];
        assert!(b.fenced && b.epoch == 1);
        assert_eq!(k.partition("t", 0).leader, -1);
    }

    #[test]
    fn isr_changes_must_match_the_current_epochs() {
        let mut k = Cluster::new(&[1, 2, 3]);
        k.create(&[CreateTopicSpec {
            name: "t".into(),
            num_partitions: -1,
            replication_factor: -1,
            assignments: vec![(0, vec![1, 2, 3])],
            configs: vec![],
        }]);
        let id = k.image.topic("t").unwrap().id;
        let reg = k.partition("t", 0);
        let change = |isr: Vec<i32>, le, pe| IsrChange {
            leader: 1,
            topic_id: id,
            partition: 0,
            leader_epoch: le,
            partition_epoch: pe,
            isr,
        };
        let shrink =
            k.c.alter_partition(
                &k.image,
                &change(vec![1, 2], reg.leader_epoch, reg.partition_epoch),
            )
            .unwrap();
        k.apply(shrink);
        let after = k.partition("t", 0);
        assert_eq!(after.isr, vec![1, 2]);
        assert_eq!(after.partition_epoch, reg.partition_epoch + 1);
        assert_eq!(after.leader_epoch, reg.leader_epoch);
        // The same request again is stale now.
        let code = |k: &Cluster, c: &IsrChange| k.c.alter_partition(&k.image, c).unwrap_err().code;
        assert_eq!(
            code(&k, &change(vec![1], reg.leader_epoch, reg.partition_epoch)),
            ErrorCode::InvalidUpdateVersion
        );
        assert_eq!(
            code(
                &k,
                &change(vec![1], reg.leader_epoch + 1, after.partition_epoch)
            ),
            ErrorCode::FencedLeaderEpoch
        );
        let mut not_leader = change(vec![2], after.leader_epoch, after.partition_epoch);
        not_leader.leader = 2;
        assert_eq!(code(&k, &not_leader), ErrorCode::NotLeaderOrFollower);
        // A fenced replica may not rejoin; a live one may.
        let r = k.c.fence_broker(&k.image, 3);
        k.apply(r);
        let now = k.partition("t", 0);
        assert_eq!(
            code(
                &k,
                &change(vec![1, 2, 3], now.leader_epoch, now.partition_epoch)
            ),
            ErrorCode::IneligibleReplica
        );
        let r = k.c.unfence_broker(&k.image, 3);
        k.apply(r);
        let now = k.partition("t", 0);
        let grow =
            k.c.alter_partition(
                &k.image,
                &change(vec![1, 2, 3], now.leader_epoch, now.partition_epoch),
            )
            .unwrap();
        k.apply(grow);
        assert_eq!(k.partition("t", 0).isr, vec![1, 2, 3]);
    }

    #[test]
    fn reassignment_starts_completes_through_the_isr_and_cancels() {
        let mut k = Cluster::new(&[1, 2, 3, 4]);
        k.create(&[CreateTopicSpec {
            name: "t".into(),
            num_partitions: -1,
            replication_factor: -1,
            assignments: vec![(0, vec![1, 2]), (1, vec![1, 2])],
            configs: vec![],
        }]);
        let id = k.image.topic("t").unwrap().id;
        let target = |p: i32, r: Option<Vec<i32>>| ("t".to_string(), p, r);
        let codes = |out: &[PartitionOutcome]| -> Vec<Option<ErrorCode>> {
            out.iter()
                .map(|(_, _, r)| r.as_ref().err().map(|e| e.code))
                .collect()
        };
        // Refusals, per partition.
        let (out, records) = k.c.alter_reassignments(
            &k.image,
            &[
                target(0, Some(vec![])),
                target(0, Some(vec![2, 2])),
                target(0, Some(vec![2, 9])),
                target(7, Some(vec![2])),
                ("u".into(), 0, Some(vec![2])),
                target(0, None),
            ],
            true,
        );
        assert!(records.is_empty());
        assert_eq!(
            codes(&out),
            vec![
                Some(ErrorCode::InvalidReplicaAssignment),
                Some(ErrorCode::InvalidReplicaAssignment),
                Some(ErrorCode::InvalidReplicaAssignment),
                Some(ErrorCode::UnknownTopicOrPartition),
                Some(ErrorCode::UnknownTopicOrPartition),
                Some(ErrorCode::NoReassignmentInProgress),
            ]
        );
        let (out, _) =
            k.c.alter_reassignments(&k.image, &[target(0, Some(vec![3]))], false);
        assert_eq!(codes(&out), vec![Some(ErrorCode::InvalidReplicationFactor)]);
        // Start moving partition 0 from 1,2 to 3,4 and partition 1 to 2,3.
        let before = k.partition("t", 0);
        let (out, records) = k.c.alter_reassignments(
            &k.image,
            &[target(0, Some(vec![3, 4])), target(1, Some(vec![2, 3]))],
            true,
        );
        assert_eq!(codes(&out), vec![None, None]);
        k.apply(records);
        let p = k.partition("t", 0);
        assert_eq!(p.replicas, vec![3, 4, 1, 2]);
        assert_eq!(
            (p.adding.clone(), p.removing.clone()),
            (vec![3, 4], vec![1, 2])
        );
        assert_eq!((p.leader, p.leader_epoch), (1, before.leader_epoch));
        // 3 joins: not complete yet. 4 joins: complete, 1 leaves and 3 leads.
        let isr_change = |k: &Cluster, isr: Vec<i32>| {
            let p = k.partition("t", 0);
            IsrChange {
                leader: p.leader,
                topic_id: id,
                partition: 0,
                leader_epoch: p.leader_epoch,
                partition_epoch: p.partition_epoch,
                isr,
            }
        };
        let r =
            k.c.alter_partition(&k.image, &isr_change(&k, vec![1, 2, 3]))
                .unwrap();
        k.apply(r);
        assert!(k.partition("t", 0).is_reassigning());
        let r =
            k.c.alter_partition(&k.image, &isr_change(&k, vec![1, 2, 3, 4]))
                .unwrap();
        k.apply(r);
        let p = k.partition("t", 0);
        assert!(!p.is_reassigning());
        assert_eq!((p.replicas, p.isr, p.leader), (vec![3, 4], vec![3, 4], 3));
        assert!(p.leader_epoch > before.leader_epoch);
        // Partition 1 is cancelled: back to its replicas without 3.
        let (out, records) = k.c.alter_reassignments(&k.image, &[target(1, None)], true);
        assert_eq!(codes(&out), vec![None]);
        k.apply(records);
        let p = k.partition("t", 1);
        assert!(!p.is_reassigning());
        assert_eq!((p.replicas, p.leader), (vec![2, 1], 1));
        // A reordering of in-sync replicas completes at once.
        let (_, records) =
            k.c.alter_reassignments(&k.image, &[target(1, Some(vec![1, 2]))], true);
        k.apply(records);
        assert_eq!(k.partition("t", 1).replicas, vec![1, 2]);
    }

    #[test]
    fn preferred_leaders_come_back_when_live_and_in_sync() {
        let mut k = Cluster::new(&[1, 2, 3]);
        k.create(&[spec("t", 3, 3)]);
        let preferred = |k: &Cluster, p| k.partition("t", p).replicas[0];
        assert!(k.c.imbalanced(&k.image, 10).is_empty());
        let (out, r) = k.c.elect_leaders(&k.image, true, None);
        assert!(r.is_empty());
        assert!(out
            .iter()
            .all(|o| o.2.as_ref().unwrap_err().code == ErrorCode::ElectionNotNeeded));
        // Broker 1 goes away and comes back (out of the ISRs, so not yet eligible).
        let r = k.c.fence_broker(&k.image, 1);
        k.apply(r);
        let r = k.c.unfence_broker(&k.image, 1);
        k.apply(r);
        let p1 = (0..3).find(|p| preferred(&k, *p) == 1).unwrap();
        assert_ne!(k.partition("t", p1).leader, 1);
        let target = [("t".to_string(), p1)];
        let (out, _) = k.c.elect_leaders(&k.image, true, Some(&target));
        assert_eq!(
            out[0].2.as_ref().unwrap_err().code,
            ErrorCode::PreferredLeaderNotAvailable
        );
        assert!(k.c.imbalanced(&k.image, 10).is_empty());
        // Back in sync: eligible, and 1 of 1 preferred partitions is misplaced (100% > 10%).
        let reg = k.partition("t", p1);
        let id = k.image.topic("t").unwrap().id;
        let mut isr = reg.isr.clone();
        isr.push(1);
        k.apply(vec![MetadataRecord::PartitionChange {
            topic_id: id,
            partition: p1,
            leader: reg.leader,
            isr,
            assignment: None,
            elr: None,
        }]);
        assert_eq!(k.c.imbalanced(&k.image, 10), target.to_vec());
        assert!(k.c.imbalanced(&k.image, 100).is_empty());
        let (out, r) = k.c.elect_leaders(&k.image, true, Some(&target));
        assert!(out[0].2.is_ok());
        k.apply(r);
        assert_eq!(k.partition("t", p1).leader, 1);
        let missing = [("nope".to_string(), 0)];
        let (out, _) = k.c.elect_leaders(&k.image, true, Some(&missing));
        assert_eq!(
            out[0].2.as_ref().unwrap_err().code,
            ErrorCode::UnknownTopicOrPartition
        );
    }

    #[test]
    fn partitions_grow_only_and_topics_delete() {
        let mut k = Cluster::new(&[0]);
        k.create(&[spec("t", 2, 1)]);
        let grow = |k: &Cluster, n, a: Option<&[Vec<i32>]>| {
            k.c.create_partitions(&k.image, "t", n, a, false)
        };
        assert_eq!(
            grow(&k, 1, None).unwrap_err().code,
            ErrorCode::InvalidPartitions
        );
        assert_eq!(
            grow(&k, 2, None).unwrap_err().code,
            ErrorCode::InvalidPartitions
        );
        assert_eq!(
            k.c.create_partitions(&k.image, "nope", 3, None, false)
                .unwrap_err()
                .code,
            ErrorCode::UnknownTopicOrPartition
        );
        let r = grow(&k, 4, None).unwrap();
        k.apply(r);
        assert_eq!(k.image.topic("t").unwrap().partitions.len(), 4);
        assert_eq!(
            grow(&k, 5, Some(&[vec![7]])).unwrap_err().code,
            ErrorCode::InvalidReplicaAssignment
        );
        let (out, r) = k.c.delete_topics(
            &k.image,
            &[TopicRef::Name("t".into()), TopicRef::Name("t2".into())],
        );
        k.apply(r);
        assert!(out[0].is_ok());
        assert_eq!(
            out[1].as_ref().unwrap_err().code,
            ErrorCode::UnknownTopicOrPartition
        );
        assert!(k.image.topics.is_empty());
    }

    #[test]
    fn removing_an_unknown_topic_config_is_a_no_op_and_setting_one_is_refused() {
        let mut k = Cluster::new(&[0]);
        k.create(&[spec("t", 1, 1)]);
        let change = |items: &[(&str, Option<&str>)]| -> Vec<(String, Option<String>)> {
            items
                .iter()
                .map(|(a, b)| (a.to_string(), b.map(str::to_owned)))
                .collect()
        };
        // As MirrorMaker 2 syncs a topic of a newer Kafka: configs Sluice does not know, at
        // their default, removed.
        let r =
            k.c.alter_topic_configs(
                &k.image,
                "t",
                &change(&[
                    ("some.future.topic.config", None),
                    ("retention.ms", Some("1000")),
                ]),
                false,
            )
            .unwrap();
        assert_eq!(r.len(), 1, "only the known config is written: {r:?}");
        k.apply(r);
        assert_eq!(
            k.image
                .topic_configs("t")
                .get("retention.ms")
                .map(String::as_str),
            Some("1000")
        );
        let refused =
            k.c.alter_topic_configs(
                &k.image,
                "t",
                &change(&[("no.such.config", Some("1"))]),
                false,
            )
            .unwrap_err();
        assert_eq!(refused.code, ErrorCode::InvalidConfig);
        assert_eq!(refused.message, "Unknown topic config name: no.such.config");
    }

    #[test]
    fn scram_credentials_are_stored_and_deleted_per_user() {
        let mut k = Cluster::new(&[1]);
        let entry = |iterations| sluice_metadata::image::ScramEntry {
            salt: vec![1],
            stored_key: vec![2],
            server_key: vec![3],
            iterations,
        };
        let (out, records) = k.c.alter_scram_credentials(
            &k.image,
            &[
                ("alice".into(), 2, Some(entry(4096))),
                ("alice".into(), 1, Some(entry(8192))),
                ("bob".into(), 1, None),
            ],
        );
        assert_eq!(out[0], ("alice".to_string(), Ok(())));
        assert_eq!(out[1].0, "bob");
        assert_eq!(
            out[1].1.as_ref().unwrap_err().code,
            ErrorCode::ResourceNotFound
        );
        assert_eq!(records.len(), 2, "bob's failed change writes nothing");
        k.apply(records);
        assert_eq!(k.image.scram.len(), 2);
        let (out, records) =
            k.c.alter_scram_credentials(&k.image, &[("alice".into(), 2, None)]);
        assert_eq!(out, vec![("alice".to_string(), Ok(()))]);
        k.apply(records);
        assert_eq!(
            k.image.scram.keys().collect::<Vec<_>>(),
            vec![&("alice".to_string(), 1)]
        );
    }

    #[test]
    fn acls_are_created_once_and_deleted_by_filter() {
        use sluice_metadata::acl::{op, pattern, permission, resource};
        let mut k = Cluster::new(&[1]);
        let b = |name: &str, pt: i8| AclBinding {
            resource_type: resource::TOPIC,
            resource_name: name.into(),
            pattern_type: pt,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: op::READ,
            permission: permission::ALLOW,
        };
        let (out, records) = k.c.create_acls(
            &k.image,
            &[
                b("orders", pattern::LITERAL),
                b("orders", pattern::LITERAL),
                b("x", pattern::MATCH),
            ],
            None,
        );
        assert!(out[0].is_ok() && out[1].is_ok());
        assert_eq!(out[2].as_ref().unwrap_err().code, ErrorCode::InvalidRequest);
        assert_eq!(records.len(), 1, "the duplicate is one ACL");
        k.apply(records);
        let (_, records) = k.c.create_acls(
            &k.image,
            &[b("orders", pattern::LITERAL), b("pay-", pattern::PREFIXED)],
            None,
        );
        assert_eq!(records.len(), 1, "an existing ACL is not added again");
        k.apply(records);
        assert_eq!(k.image.acls.len(), 2);
        // Copied by a link: the id says so; one made here keeps its own.
        let (_, records) = k.c.create_acls(
            &k.image,
            &[b("orders", pattern::LITERAL), b("copied", pattern::LITERAL)],
            Some("dr"),
        );
        assert_eq!(records.len(), 1);
        k.apply(records);
        let id_of = |name: &str| {
            *k.image
                .acls
                .iter()
                .find(|(_, a)| a.resource_name == name)
                .unwrap()
                .0
        };
        assert_eq!(
            id_of("copied"),
            copied_acl_id("dr", &b("copied", pattern::LITERAL))
        );
        assert_ne!(
            id_of("orders"),
            copied_acl_id("dr", &b("orders", pattern::LITERAL))
        );
        assert_ne!(
            copied_acl_id("dr", &b("copied", pattern::LITERAL)),
            copied_acl_id("dr2", &b("copied", pattern::LITERAL))
        );
        assert_eq!(k.image.acls.len(), 3);
        let filter = AclFilter {
            resource_type: resource::TOPIC,
            resource_name: Some("pay-in".into()),
            pattern_type: pattern::MATCH,
            principal: None,
            host: None,
            operation: op::ANY,
            permission: permission::ANY,
        };
        let (out, records) = k.c.delete_acls(&k.image, &[filter.clone(), filter]);
        assert_eq!(
            out[0].as_ref().unwrap(),
            &vec![b("pay-", pattern::PREFIXED)]
        );
        assert_eq!(out[1].as_ref().unwrap().len(), 1);
        assert_eq!(records.len(), 1);
        k.apply(records);
        let mut left: Vec<&AclBinding> = k.image.acls.values().collect();
        left.sort();
        assert_eq!(
            left,
            vec![
                &b("copied", pattern::LITERAL),
                &b("orders", pattern::LITERAL)
            ]
        );
    }
}
