//! [`Controller`]: validates metadata changes, appends them to the metadata log, applies
//! them to the image. Owned by the node behind a mutex; every method runs to completion
//! (validation, durable append, apply) before returning, so callers see their change.
//!
//! This is a single-voter quorum: an append that is fsynced is committed. The multi-node
//! Raft quorum replaces `commit` with replication and keeps everything else.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use sluice_metadata::config::validate_topic_configs;
use sluice_metadata::image::RESOURCE_TOPIC;
use sluice_metadata::record::Endpoint;
use sluice_metadata::{topic, MetadataImage, MetadataRecord, Uuid};
use sluice_protocol::batch::{decode_records, BatchBuilder, BatchIter, RecordLimits};
use sluice_protocol::compression::Compression;
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;
use sluice_storage::log::OpenOptions;
use sluice_storage::{Log, LogConfig};
use tracing::info;

use crate::error::ControllerError;
use crate::placement;
pub use sluice_metadata::controller_types::{
    ApiError, CreateTopicSpec, CreatedTopic, DeleteOutcome, TopicRef,
};

/// Cluster-wide defaults for new topics.
#[derive(Clone, Debug)]
pub struct ControllerDefaults {
    pub num_partitions: i32,
    pub replication_factor: i16,
    pub delete_topic_enable: bool,
}

pub struct Controller {
    node_id: i32,
    log: Log,
    image: MetadataImage,
    defaults: ControllerDefaults,
    placement_start: usize,
}

fn metadata_log_config() -> LogConfig {
    LogConfig {
        // Every controller write is durable before it is applied.
        flush_messages: 1,
        retention_ms: -1,
        retention_bytes: -1,
        segment_bytes: 64 * 1024 * 1024,
        max_message_bytes: 8 * 1024 * 1024,
        message_timestamp_after_max_ms: i64::MAX,
        ..LogConfig::default()
    }
}

/// A random topic id whose printed form does not start with '-' (as Kafka's
/// `Uuid.randomUuid` guarantees, so ids never look like command-line flags).
pub fn random_topic_id() -> Uuid {
    loop {
        let id = Uuid::new_v4();
        if !sluice_protocol::base64::encode(id.as_bytes()).starts_with('-') {
            return id;
        }
    }
}

impl Controller {
    /// Open the metadata log under `dir` (creating it on first start) and replay it.
    pub fn open(
        dir: &Path,
        node_id: i32,
        defaults: ControllerDefaults,
        now_ms: i64,
    ) -> Result<Self, ControllerError> {
        let tp = TopicPartition::new(topic::CLUSTER_METADATA, 0);
        let log_dir = dir.join(tp.dir_name());
        let log = if log_dir.exists() {
            // Always re-validate: the metadata log is small and must never be wrong.
            Log::open(
                &log_dir,
                tp,
                metadata_log_config(),
                OpenOptions {
                    clean_shutdown: false,
                    recovery_point: 0,
                    log_start_offset: 0,
                    now_ms,
                },
            )?
        } else {
            Log::create(dir, tp, [0; 16], metadata_log_config(), now_ms)?
        };
        let mut controller = Self {
            node_id,
            log,
            image: MetadataImage::empty(),
            defaults,
            placement_start: 0,
        };
        controller.replay()?;
        info!(
            topics = controller.image.topics.len(),
            metadata_offset = controller.image.offset,
            "metadata loaded"
        );
        Ok(controller)
    }

    fn replay(&mut self) -> Result<(), ControllerError> {
        let end = self.log.log_end_offset();
        let mut next = self.log.log_start_offset();
        while next < end {
            let info = self.log.read(next, 1 << 20, end, true)?;
            let Some(slice) = info.slice else { break };
            let mut buf = Vec::new();
            slice
                .read_into(&mut buf)
                .map_err(|e| sluice_storage::LogError::io(self.log.dir(), e))?;
            for item in BatchIter::new(&buf) {
                let Ok((header, bytes)) = item else { break };
                let corrupt = |reason: String| ControllerError::Corrupt {
                    offset: header.base_offset,
                    reason,
                };
                let records = decode_records(bytes, RecordLimits::default())
                    .map_err(|e| corrupt(e.to_string()))?;
                for r in records {
                    let value = r.value.unwrap_or_default();
                    let rec = MetadataRecord::decode(&value).map_err(|e| corrupt(e.to_string()))?;
                    self.image.apply(r.offset, &rec);
                }
                next = header.next_offset();
            }
        }
        Ok(())
    }

    pub fn image(&self) -> &MetadataImage {
        &self.image
    }

    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    /// Append `records` as one batch (atomically) and apply them.
    fn commit(&mut self, records: &[MetadataRecord], now_ms: i64) -> Result<(), ControllerError> {
        if records.is_empty() {
            return Ok(());
        }
        let mut builder = BatchBuilder::new(Compression::None);
        let encoded: Vec<Vec<u8>> = records.iter().map(MetadataRecord::encode).collect();
        for value in &encoded {
            builder.append(now_ms, None, Some(value), &[]);
        }
        let batch = builder
            .build(0)
            .map_err(|e| sluice_storage::LogError::io(self.log.dir(), e))?;
        let info = self.log.append_as_leader(batch, 0, now_ms)?;
        for (i, rec) in records.iter().enumerate() {
            self.image.apply(info.first_offset + i as i64, rec);
        }
        Ok(())
    }

    /// Record this node's registration (once per start, with a fresh incarnation id).
    pub fn register_broker(
        &mut self,
        endpoints: Vec<Endpoint>,
        rack: Option<String>,
        now_ms: i64,
    ) -> Result<(), ControllerError> {
        let epoch = self
            .image
            .brokers
            .get(&self.node_id)
            .map_or(0, |b| b.epoch + 1);
        let rec = MetadataRecord::RegisterBroker {
            node_id: self.node_id,
            epoch,
            incarnation_id: Uuid::new_v4(),
            endpoints,
            rack,
        };
        self.commit(&[rec], now_ms)
    }

    /// CreateTopics: each spec gets its own outcome; valid ones are committed together.
    pub fn create_topics(
        &mut self,
        specs: &[CreateTopicSpec],
        validate_only: bool,
        now_ms: i64,
    ) -> Result<Vec<Result<CreatedTopic, ApiError>>, ControllerError> {
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
            let outcome = self.plan_topic(spec, &new_names).map(|(created, recs)| {
                if !validate_only {
                    records.extend(recs);
                }
                new_names.insert(spec.name.clone());
                created
            });
            outcomes.push(outcome);
        }
        self.commit(&records, now_ms)?;
        Ok(outcomes)
    }

    fn plan_topic(
        &mut self,
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
        if self.image.topics.contains_key(name) || pending.contains(name) {
            return Err(ApiError::new(
                ErrorCode::TopicAlreadyExists,
                format!("Topic '{name}' already exists."),
            ));
        }
        let unified = topic::unify_collision_chars(name);
        if let Some(other) = self
            .image
            .topics
            .keys()
            .find(|t| topic::unify_collision_chars(t) == unified)
        {
            return Err(ApiError::new(
                ErrorCode::InvalidTopicException,
                format!("Topic '{name}' collides with existing topic: {other}"),
            ));
        }
        validate_topic_configs(spec.configs.iter().map(|(k, v)| (k.as_str(), v.as_deref())))
            .map_err(|m| ApiError::new(ErrorCode::InvalidConfig, m))?;
        let brokers: Vec<i32> = self.image.brokers.keys().copied().collect();
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
                        "Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only {} broker(s) are registered.",
                        brokers.len()
                    ),
                ));
            }
            self.placement_start = self.placement_start.wrapping_add(1);
            placement::place(&brokers, 0, partitions, rf as usize, self.placement_start)
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
        records.extend(partition_records(id, 0, &assignments));
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
        &mut self,
        targets: &[TopicRef],
        now_ms: i64,
    ) -> Result<Vec<DeleteOutcome>, ControllerError> {
        let mut records = Vec::new();
        let mut outcomes = Vec::with_capacity(targets.len());
        let mut doomed = HashSet::new();
        for t in targets {
            let found = match t {
                TopicRef::Name(n) => self.image.topic(n).ok_or_else(|| {
                    ApiError::new(
                        ErrorCode::UnknownTopicOrPartition,
                        "This server does not host this topic-partition.",
                    )
                }),
                TopicRef::Id(id) => self.image.topic_by_id(id).ok_or_else(|| {
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
        self.commit(&records, now_ms)?;
        Ok(outcomes)
    }

    /// CreatePartitions: grow `topic` to `count` partitions (never shrink).
    pub fn create_partitions(
        &mut self,
        name: &str,
        count: i32,
        assignments: Option<&[Vec<i32>]>,
        validate_only: bool,
        now_ms: i64,
    ) -> Result<Result<(), ApiError>, ControllerError> {
        let Some(topic) = self.image.topic(name) else {
            return Ok(Err(ApiError::new(
                ErrorCode::UnknownTopicOrPartition,
                format!("The topic '{name}' does not exist."),
            )));
        };
        let current = topic.partitions.len() as i32;
        if count == current {
            return Ok(Err(ApiError::new(
                ErrorCode::InvalidPartitions,
                format!("Topic already has {current} partitions."),
            )));
        }
        if count < current {
            return Ok(Err(ApiError::new(
                ErrorCode::InvalidPartitions,
                format!("The topic {name} currently has {current} partition(s); {count} would not be an increase."),
            )));
        }
        let id = topic.id;
        let rf = topic
            .partitions
            .values()
            .next()
            .map_or(1, |p| p.replicas.len());
        let brokers: Vec<i32> = self.image.brokers.keys().copied().collect();
        let placed = match assignments {
            Some(a) => {
                if a.len() as i32 != count - current {
                    return Ok(Err(ApiError::new(
                        ErrorCode::InvalidReplicaAssignment,
                        format!(
                            "Increasing the number of partitions by {} but {} assignments provided.",
                            count - current,
                            a.len()
                        ),
                    )));
                }
                let indexed: Vec<(i32, Vec<i32>)> = a
                    .iter()
                    .enumerate()
                    .map(|(i, r)| (current + i as i32, r.clone()))
                    .collect();
                match validate_assignment(&indexed, current, &brokers) {
                    Ok(p) => p,
                    Err(e) => return Ok(Err(e)),
                }
            }
            None => {
                if rf > brokers.len() {
                    return Ok(Err(ApiError::new(
                        ErrorCode::InvalidReplicationFactor,
                        format!("Unable to replicate the partition {rf} time(s): only {} broker(s) are registered.", brokers.len()),
                    )));
                }
                placement::place(&brokers, current, count - current, rf, self.placement_start)
            }
        };
        if !validate_only {
            let records = partition_records(id, current, &placed);
            self.commit(&records, now_ms)?;
        }
        Ok(Ok(()))
    }

    /// Set or remove topic config overrides (already validated by the caller's rules here).
    pub fn alter_topic_configs(
        &mut self,
        name: &str,
        changes: &[(String, Option<String>)],
        validate_only: bool,
        now_ms: i64,
    ) -> Result<Result<(), ApiError>, ControllerError> {
        if self.image.topic(name).is_none() {
            return Ok(Err(ApiError::new(
                ErrorCode::UnknownTopicOrPartition,
                format!("Topic {name} does not exist."),
            )));
        }
        let sets = changes
            .iter()
            .filter_map(|(k, v)| v.as_deref().map(|v| (k.as_str(), Some(v))));
        if let Err(m) = validate_topic_configs(sets) {
            return Ok(Err(ApiError::new(ErrorCode::InvalidConfig, m)));
        }
        for (k, _) in changes {
            if sluice_metadata::config::topic_def(k).is_none() {
                return Ok(Err(ApiError::new(
                    ErrorCode::InvalidConfig,
                    format!("Unknown topic config name: {k}"),
                )));
            }
        }
        if !validate_only {
            let records: Vec<MetadataRecord> = changes
                .iter()
                .map(|(k, v)| MetadataRecord::Config {
                    resource_type: RESOURCE_TOPIC,
                    resource_name: name.to_string(),
                    name: k.clone(),
                    value: v.clone(),
                })
                .collect();
            self.commit(&records, now_ms)?;
        }
        Ok(Ok(()))
    }

    /// Hand out `count` producer ids to `node_id`: returns the first of the block.
    pub fn allocate_producer_ids(
        &mut self,
        node_id: i32,
        count: i64,
        now_ms: i64,
    ) -> Result<i64, ControllerError> {
        let first = self.image.next_producer_id;
        self.commit(
            &[MetadataRecord::ProducerIds {
                node_id,
                next_producer_id: first + count,
            }],
            now_ms,
        )?;
        Ok(first)
    }

    /// Flush and close the metadata log.
    pub fn shutdown(&mut self, now_ms: i64) -> Result<(), ControllerError> {
        self.log.close(now_ms)?;
        Ok(())
    }
}

fn partition_records(topic_id: Uuid, first: i32, assignments: &[Vec<i32>]) -> Vec<MetadataRecord> {
    assignments
        .iter()
        .enumerate()
        .map(|(i, replicas)| MetadataRecord::Partition {
            topic_id,
            partition: first + i as i32,
            replicas: replicas.clone(),
            isr: replicas.clone(),
            leader: replicas[0],
            leader_epoch: 0,
            partition_epoch: 0,
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

    fn open(dir: &Path) -> Controller {
        let mut c = Controller::open(
            dir,
            0,
            ControllerDefaults {
                num_partitions: 2,
                replication_factor: 1,
                delete_topic_enable: true,
            },
            0,
        )
        .unwrap();
        if c.image().brokers.is_empty() {
            c.register_broker(vec![], None, 0).unwrap();
        }
        c
    }

    fn spec(name: &str, partitions: i32, rf: i16) -> CreateTopicSpec {
        CreateTopicSpec {
            name: name.into(),
            num_partitions: partitions,
            replication_factor: rf,
            ..CreateTopicSpec::default()
        }
    }

    #[test]
    fn create_validate_and_replay() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = open(dir.path());
        let mut with_cfg = spec("c", 1, 1);
        with_cfg.configs = vec![("retention.ms".into(), Some("1000".into()))];
        let out = c
            .create_topics(
                &[
                    spec("a", -1, -1),
                    spec("b.x", 3, 1),
                    spec("bad name", 1, 1),
                    spec("d", 0, 1),
                    spec("e", 1, 2),
                    with_cfg,
                ],
                false,
                0,
            )
            .unwrap();
        assert_eq!(out[0].as_ref().unwrap().num_partitions, 2);
        assert_eq!(out[1].as_ref().unwrap().num_partitions, 3);
        assert_eq!(
            out[2].as_ref().unwrap_err().code,
            ErrorCode::InvalidTopicException
        );
        assert_eq!(
            out[3].as_ref().unwrap_err().code,
            ErrorCode::InvalidPartitions
        );
        assert_eq!(
            out[4].as_ref().unwrap_err().code,
            ErrorCode::InvalidReplicationFactor
        );
        assert!(out[5].is_ok());
        let again = c
            .create_topics(
                &[
                    spec("a", 1, 1),
                    spec("b_x", 1, 1),
                    spec("z", 1, 1),
                    spec("z", 1, 1),
                ],
                true,
                0,
            )
            .unwrap();
        assert_eq!(
            again[0].as_ref().unwrap_err().code,
            ErrorCode::TopicAlreadyExists
        );
        assert_eq!(
            again[1].as_ref().unwrap_err().code,
            ErrorCode::InvalidTopicException
        );
        assert_eq!(
            again[2].as_ref().unwrap_err().code,
            ErrorCode::InvalidRequest
        );
        let bad_cfg = CreateTopicSpec {
            configs: vec![("nope".into(), Some("1".into()))],
            ..spec("q", 1, 1)
        };
        assert_eq!(
            c.create_topics(&[bad_cfg], false, 0).unwrap()[0]
                .as_ref()
                .unwrap_err()
                .code,
            ErrorCode::InvalidConfig
        );
        // validate_only wrote nothing.
        assert!(c.image().topic("z").is_none());
        let image = c.image().clone();
        c.shutdown(0).unwrap();
        drop(c);
        let c = open(dir.path());
        assert_eq!(c.image().topics, image.topics);
        assert_eq!(
            c.image()
                .topic_configs("c")
                .get("retention.ms")
                .map(String::as_str),
            Some("1000")
        );
    }

    #[test]
    fn partitions_grow_only_and_topics_delete() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = open(dir.path());
        c.create_topics(&[spec("t", 2, 1)], false, 0).unwrap();
        assert_eq!(
            c.create_partitions("t", 1, None, false, 0)
                .unwrap()
                .unwrap_err()
                .code,
            ErrorCode::InvalidPartitions
        );
        assert_eq!(
            c.create_partitions("t", 2, None, false, 0)
                .unwrap()
                .unwrap_err()
                .code,
            ErrorCode::InvalidPartitions
        );
        assert_eq!(
            c.create_partitions("nope", 3, None, false, 0)
                .unwrap()
                .unwrap_err()
                .code,
            ErrorCode::UnknownTopicOrPartition
        );
        c.create_partitions("t", 4, None, false, 0)
            .unwrap()
            .unwrap();
        assert_eq!(c.image().topic("t").unwrap().partitions.len(), 4);
        let bad = [vec![7]];
        assert_eq!(
            c.create_partitions("t", 5, Some(&bad), false, 0)
                .unwrap()
                .unwrap_err()
                .code,
            ErrorCode::InvalidReplicaAssignment
        );
        let out = c
            .delete_topics(
                &[TopicRef::Name("t".into()), TopicRef::Name("t2".into())],
                0,
            )
            .unwrap();
        assert!(out[0].is_ok());
        assert_eq!(
            out[1].as_ref().unwrap_err().code,
            ErrorCode::UnknownTopicOrPartition
        );
        assert!(c.image().topics.is_empty());
    }

    #[test]
    fn producer_id_blocks_never_overlap_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = open(dir.path());
        assert_eq!(c.allocate_producer_ids(0, 1000, 0).unwrap(), 0);
        assert_eq!(c.allocate_producer_ids(0, 1000, 0).unwrap(), 1000);
        c.shutdown(0).unwrap();
        drop(c);
        let mut c = open(dir.path());
        assert_eq!(c.allocate_producer_ids(0, 1000, 0).unwrap(), 2000);
    }
}
