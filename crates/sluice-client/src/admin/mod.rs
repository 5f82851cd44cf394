//! [`Admin`]: topic, cluster and consumer-group administration.

mod acls;
mod features;

mod groups;
mod log_dirs;
mod mirrors;
mod quorum;
mod quotas;
mod share_groups;
mod transactions;
mod users;

pub use features::{FeatureDescription, FeatureMetadata, FeatureUpgrade};
pub use groups::{GroupDescription, GroupListing, GroupMemberDescription};
pub use log_dirs::LogDirDescription;
pub use mirrors::{LinkDescription, MirrorPartitionLag, MirrorTopicInfo};
pub use quorum::{QuorumDescription, QuorumReplica};
pub use quotas::{QuotaEntity, QuotaMatch};
pub use transactions::{TransactionDescription, TransactionListing};
pub use users::{ScramAlteration, UserScramCredentials};

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use sluice_protocol::types::TopicPartition;

use crate::cluster::{ClusterCore, TopicInfo};
use crate::config::ClientConfig;
use crate::error::{check, Error, Result};

/// A topic to create.
#[derive(Clone, Debug)]
pub struct NewTopic {
    pub name: String,
    /// -1 for the broker's `num.partitions`.
    pub partitions: i32,
    /// -1 for the broker's `default.replication.factor`.
    pub replication_factor: i16,
    pub configs: Vec<(String, String)>,
}

impl NewTopic {
    pub fn new(name: &str, partitions: i32, replication_factor: i16) -> Self {
        Self {
            name: name.to_string(),
            partitions,
            replication_factor,
            configs: Vec::new(),
        }
    }

    pub fn config(mut self, key: &str, value: &str) -> Self {
        self.configs.push((key.to_string(), value.to_string()));
        self
    }
}

/// What a config resource is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigResource {
    Topic(String),
    Broker(i32),
    /// The cluster-wide default of dynamic broker configs (the broker resource named "").
    BrokerDefault,
    /// A broker's log levels (KIP-412).
    BrokerLogger(i32),
    /// A Sluice cluster link (resource type 64; "" lists every link).
    ClusterLink(String),
    /// A cluster link as one broker describes it: with the mirror partitions it copies.
    ClusterLinkOn(String, i32),
    /// A client-metrics subscription (KIP-714).
    ClientMetrics(String),
    /// A group's configs.
    Group(String),
}

impl ConfigResource {
    fn type_and_name(&self) -> (i8, String) {
        match self {
            ConfigResource::Topic(t) => (2, t.clone()),
            ConfigResource::Broker(b) => (4, b.to_string()),
            ConfigResource::BrokerDefault => (4, String::new()),
            ConfigResource::BrokerLogger(b) => (8, b.to_string()),
            ConfigResource::ClusterLink(l) | ConfigResource::ClusterLinkOn(l, _) => (64, l.clone()),
            ConfigResource::ClientMetrics(n) => (16, n.clone()),
            ConfigResource::Group(g) => (32, g.clone()),
        }
    }

    /// The broker that must answer for this resource, if one must.
    fn broker(&self) -> Option<i32> {
        match self {
            ConfigResource::Broker(b)
            | ConfigResource::BrokerLogger(b)
            | ConfigResource::ClusterLinkOn(_, b) => Some(*b),
            ConfigResource::Topic(_)
            | ConfigResource::BrokerDefault
            | ConfigResource::ClusterLink(_)
            | ConfigResource::ClientMetrics(_)
            | ConfigResource::Group(_) => None,
        }
    }
}

/// One entry of a described config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigEntry {
    pub name: String,
    pub value: Option<String>,
    pub read_only: bool,
    pub sensitive: bool,
    /// Kafka's source code: 1 topic, 4 static broker, 5 default, …
    pub source: i8,
    pub is_default: bool,
}

/// A change to one config key (IncrementalAlterConfigs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AlterOp {
    Set(String, String),
    Delete(String),
}

/// Which offset to look up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetSpec {
    Earliest,
    Latest,
    MaxTimestamp,
    /// The first offset on the leader's local disk (tiered storage; KIP-405).
    EarliestLocal,
    /// The last offset copied to the remote tier; -1 when none (KIP-1005).
    LatestTiered,
    /// The first record with a timestamp at or after this one.
    Timestamp(i64),
}

impl OffsetSpec {
    fn code(self) -> i64 {
        match self {
            OffsetSpec::Earliest => -2,
            OffsetSpec::Latest => -1,
            OffsetSpec::MaxTimestamp => -3,
            OffsetSpec::EarliestLocal => -4,
            OffsetSpec::LatestTiered => -5,
            OffsetSpec::Timestamp(t) => t,
        }
    }
}

/// A ListOffsets answer: the offset (-1 when none) and its record's timestamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffsetAndTimestamp {
    pub offset: i64,
    pub timestamp: i64,
}

#[derive(Clone, Debug)]
pub struct ClusterDescription {
    pub cluster_id: String,
    pub controller_id: i32,
    /// (node id, host, port, rack)
    pub brokers: Vec<(i32, String, i32, Option<String>)>,
}

/// An idempotent producer as a partition's leader knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerInfo {
    pub producer_id: i64,
    pub epoch: i32,
    pub last_sequence: i32,
    pub last_timestamp: i64,
    /// Epoch of the transaction coordinator that wrote its last marker (-1: none).
    pub coordinator_epoch: i32,
    /// First offset of its open transaction here (-1: none).
    pub current_txn_start_offset: i64,
}

/// A partition reassignment in progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionReassignment {
    pub partition: TopicPartition,
    /// Every replica: the targets first, then those being removed.
    pub replicas: Vec<i32>,
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
}

#[derive(Clone)]
pub struct Admin {
    core: Arc<ClusterCore>,
}

/// A partition's eligible leader replicas and last-known ELR (KIP-966); None: not kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Elr {
    pub eligible: Option<Vec<i32>>,
    pub last_known: Option<Vec<i32>>,
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

impl Admin {
    pub fn new(config: ClientConfig) -> Result<Admin> {
        Ok(Admin {
            core: ClusterCore::new(config)?,
        })
    }

    /// The cluster connections and metadata this admin client works with (for requests it
    /// has no method for, e.g. a broker's mirror fetches).
    pub fn core(&self) -> &Arc<ClusterCore> {
        &self.core
    }

    /// Create topics; one result per topic, in order.
    pub async fn create_topics(
        &self,
        topics: &[NewTopic],
        validate_only: bool,
    ) -> Result<Vec<(String, Result<()>)>> {
        let conn = self.core.any_connection().await?;
        let req = CreateTopicsRequest::default()
            .with_validate_only(validate_only)
            .with_timeout_ms(self.core.config.request_timeout.as_millis() as i32)
            .with_topics(
                topics
                    .iter()
                    .map(|t| {
                        CreatableTopic::default()
                            .with_name(name(&t.name))
                            .with_num_partitions(t.partitions)
                            .with_replication_factor(t.replication_factor)
                            .with_configs(
                                t.configs
                                    .iter()
                                    .map(|(k, v)| {
                                        CreatableTopicConfig::default()
                                            .with_name(s(k))
                                            .with_value(Some(s(v)))
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let resp: CreateTopicsResponse = conn.call(&req).await?;
        Ok(resp
            .topics
            .into_iter()
            .map(|t| {
                (
                    t.name.to_string(),
                    check(t.error_code, t.error_message.map(|m| m.to_string())),
                )
            })
            .collect())
    }

    /// Delete topics by name; one result per topic.
    pub async fn delete_topics(&self, topics: &[&str]) -> Result<Vec<(String, Result<()>)>> {
        let conn = self.core.any_connection().await?;
        let req = DeleteTopicsRequest::default()
            .with_timeout_ms(self.core.config.request_timeout.as_millis() as i32)
            .with_topic_names(topics.iter().map(|t| name(t)).collect());
        let resp: DeleteTopicsResponse = conn.call(&req).await?;
        Ok(resp
            .responses
            .into_iter()
            .map(|r| {
                (
                    r.name.map(|n| n.to_string()).unwrap_or_default(),
                    check(r.error_code, r.error_message.map(|m| m.to_string())),
                )
            })
            .collect())
    }

    /// Names of all topics (internal ones included when asked).
    pub async fn list_topics(&self, include_internal: bool) -> Result<Vec<String>> {
        let cluster = self.core.refresh(&[]).await?;
        let mut names: Vec<String> = cluster
            .topics
            .values()
            .filter(|t| include_internal || !t.internal)
            .map(|t| t.name.clone())
            .collect();
        names.sort();
        Ok(names)
    }

    /// Partitions, leaders, replicas and ISR of each topic (all when `topics` is empty).
    pub async fn describe_topics(&self, topics: &[&str]) -> Result<Vec<TopicInfo>> {
        let wanted: Vec<String> = topics.iter().map(|t| t.to_string()).collect();
        let cluster = self.core.refresh(&wanted).await?;
        let mut out: Vec<TopicInfo> = if wanted.is_empty() {
            cluster.topics.values().cloned().collect()
        } else {
            let mut v = Vec::new();
            for t in &wanted {
                let info = cluster.topics.get(t).cloned().ok_or_else(|| Error::Kafka {
                    code: sluice_protocol::ErrorCode::UnknownTopicOrPartition,
                    message: Some(format!("topic {t}")),
                })?;
                if let Some(code) = info.error {
                    return Err(Error::Kafka {
                        code,
                        message: Some(format!("topic {t}")),
                    });
                }
                v.push(info);
            }
            v
        };
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// The eligible leader replicas and last-known ELR (KIP-966) of each partition of
    /// `topics` (all when empty), by (topic, partition), from DescribeTopicPartitions; None
    /// where the broker does not keep them.
    pub async fn describe_elr(&self, topics: &[&str]) -> Result<HashMap<(String, i32), Elr>> {
        use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
        let conn = self.core.any_connection().await?;
        let ids = |v: Option<Vec<BrokerId>>| v.map(|v| v.into_iter().map(|b| b.0).collect());
        let mut out = HashMap::new();
        let mut cursor: Option<Cursor> = None;
        loop {
            let req = DescribeTopicPartitionsRequest::default()
                .with_topics(
                    topics
                        .iter()
                        .map(|t| TopicRequest::default().with_name(name(t)))
                        .collect(),
                )
                .with_response_partition_limit(2000)
                .with_cursor(cursor.take());
            let resp: DescribeTopicPartitionsResponse = conn.call(&req).await?;
            for t in resp.topics {
                let Some(topic) = t.name else { continue };
                for p in t.partitions {
                    out.insert(
                        (topic.to_string(), p.partition_index),
                        Elr {
                            eligible: ids(p.eligible_leader_replicas),
                            last_known: ids(p.last_known_elr),
                        },
                    );
                }
            }
            // Long answers come in pages (response_partition_limit): the next one from
            // where this one stopped.
            match resp.next_cursor {
                Some(c) => {
                    cursor = Some(
                        Cursor::default()
                            .with_topic_name(c.topic_name)
                            .with_partition_index(c.partition_index),
                    )
                }
                None => break,
            }
        }
        Ok(out)
    }

    /// Grow a topic to `count` partitions.
    pub async fn create_partitions(
        &self,
        topic: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<()> {
        let conn = self.core.any_connection().await?;
        let req = CreatePartitionsRequest::default()
            .with_validate_only(validate_only)
            .with_timeout_ms(self.core.config.request_timeout.as_millis() as i32)
            .with_topics(vec![CreatePartitionsTopic::default()
                .with_name(name(topic))
                .with_count(count)
                .with_assignments(None)]);
        let resp: CreatePartitionsResponse = conn.call(&req).await?;
        let r = resp
            .results
            .into_iter()
            .next()
            .ok_or_else(|| Error::Protocol("empty CreatePartitions response".into()))?;
        check(r.error_code, r.error_message.map(|m| m.to_string()))
    }

    /// Where a request about `resource` goes: the broker it names, else any.
    async fn config_connection(
        &self,
        resource: Option<&ConfigResource>,
    ) -> Result<std::sync::Arc<crate::connection::Connection>> {
        match resource.and_then(ConfigResource::broker) {
            Some(b) => self.core.connection_to_node(b).await,
            None => self.core.any_connection().await,
        }
    }

    /// Describe config resources; one result per resource. A broker's own resources are
    /// asked of that broker, one request each.
    pub async fn describe_configs(
        &self,
        resources: &[ConfigResource],
    ) -> Result<Vec<Result<Vec<ConfigEntry>>>> {
        if resources.len() > 1 && resources.iter().any(|r| r.broker().is_some()) {
            let mut out = Vec::new();
            for r in resources {
                let one = Box::pin(self.describe_configs(std::slice::from_ref(r))).await?;
                out.extend(one);
            }
            return Ok(out);
        }
        let conn = self.config_connection(resources.first()).await?;
        let req = DescribeConfigsRequest::default()
            .with_include_synonyms(true)
            .with_resources(
                resources
                    .iter()
                    .map(|r| {
                        let (t, n) = r.type_and_name();
                        DescribeConfigsResource::default()
                            .with_resource_type(t)
                            .with_resource_name(s(&n))
                    })
                    .collect(),
            );
        let resp: DescribeConfigsResponse = conn.call(&req).await?;
        Ok(resp
            .results
            .into_iter()
            .map(|r| {
                check(r.error_code, r.error_message.map(|m| m.to_string()))?;
                let mut entries: Vec<ConfigEntry> = r
                    .configs
                    .into_iter()
                    .map(|c| ConfigEntry {
                        name: c.name.to_string(),
                        value: c.value.map(|v| v.to_string()),
                        read_only: c.read_only,
                        sensitive: c.is_sensitive,
                        source: c.config_source,
                        is_default: c.config_source == 5,
                    })
                    .collect();
                entries.sort_by(|a, b| a.name.cmp(&b.name));
                Ok(entries)
            })
            .collect())
    }

    /// Change configs of one resource (IncrementalAlterConfigs).
    pub async fn alter_configs(
        &self,
        resource: &ConfigResource,
        ops: &[AlterOp],
        validate_only: bool,
    ) -> Result<()> {
        let conn = self.config_connection(Some(resource)).await?;
        let (t, n) = resource.type_and_name();
        let configs = ops
            .iter()
            .map(|op| match op {
                AlterOp::Set(k, v) => AlterableConfig::default()
                    .with_name(s(k))
                    .with_config_operation(0)
                    .with_value(Some(s(v))),
                AlterOp::Delete(k) => AlterableConfig::default()
                    .with_name(s(k))
                    .with_config_operation(1),
            })
            .collect();
        let req = IncrementalAlterConfigsRequest::default()
            .with_validate_only(validate_only)
            .with_resources(vec![AlterConfigsResource::default()
                .with_resource_type(t)
                .with_resource_name(s(&n))
                .with_configs(configs)]);
        let resp: IncrementalAlterConfigsResponse = conn.call(&req).await?;
        let r = resp
            .responses
            .into_iter()
            .next()
            .ok_or_else(|| Error::Protocol("empty IncrementalAlterConfigs response".into()))?;
        check(r.error_code, r.error_message.map(|m| m.to_string()))
    }

    /// Look up offsets; requests go to each partition's leader.
    pub async fn list_offsets(
        &self,
        wanted: &[(TopicPartition, OffsetSpec)],
    ) -> Result<Vec<(TopicPartition, Result<OffsetAndTimestamp>)>> {
        list_offsets(&self.core, wanted, false).await
    }

    /// Delete records below `offset` in each partition; returns each new low watermark.
    pub async fn delete_records(
        &self,
        wanted: &[(TopicPartition, i64)],
    ) -> Result<Vec<(TopicPartition, Result<i64>)>> {
        let by_leader = by_leader(&self.core, wanted).await?;
        let mut out = Vec::new();
        for (leader, parts) in by_leader {
            let conn = self.core.connection_to_node(leader).await?;
            let mut topics: BTreeMap<String, Vec<DeleteRecordsPartition>> = BTreeMap::new();
            for (tp, offset) in &parts {
                topics.entry(tp.topic.clone()).or_default().push(
                    DeleteRecordsPartition::default()
                        .with_partition_index(tp.partition.0)
                        .with_offset(*offset),
                );
            }
            let req = DeleteRecordsRequest::default()
                .with_timeout_ms(self.core.config.request_timeout.as_millis() as i32)
                .with_topics(
                    topics
                        .into_iter()
                        .map(|(t, p)| {
                            DeleteRecordsTopic::default()
                                .with_name(name(&t))
                                .with_partitions(p)
                        })
                        .collect(),
                );
            let resp: DeleteRecordsResponse = conn.call(&req).await?;
            for t in resp.topics {
                for p in t.partitions {
                    let tp = TopicPartition::new(t.name.to_string(), p.partition_index);
                    out.push((tp, check(p.error_code, None).map(|()| p.low_watermark)));
                }
            }
        }
        Ok(out)
    }

    /// Move partitions to new replicas (Some) or cancel their reassignment (None); one
    /// result per partition. The call returns once the reassignment has started.
    pub async fn alter_partition_reassignments(
        &self,
        targets: &[(TopicPartition, Option<Vec<i32>>)],
    ) -> Result<Vec<(TopicPartition, Result<()>)>> {
        use kafka_protocol::messages::alter_partition_reassignments_request::{
            ReassignablePartition, ReassignableTopic,
        };
        let conn = self.core.any_connection().await?;
        let mut topics: Vec<ReassignableTopic> = Vec::new();
        for (tp, replicas) in targets {
            let p = ReassignablePartition::default()
                .with_partition_index(tp.partition.0)
                .with_replicas(
                    replicas
                        .as_ref()
                        .map(|r| r.iter().copied().map(BrokerId).collect()),
                );
            match topics.iter_mut().find(|t| *t.name.0 == *tp.topic) {
                Some(t) => t.partitions.push(p),
                None => topics.push(
                    ReassignableTopic::default()
                        .with_name(name(&tp.topic))
                        .with_partitions(vec![p]),
                ),
            }
        }
        let req = AlterPartitionReassignmentsRequest::default()
            .with_timeout_ms(self.core.config.request_timeout.as_millis() as i32)
            .with_allow_replication_factor_change(true)
            .with_topics(topics);
        let resp: AlterPartitionReassignmentsResponse = conn.call(&req).await?;
        check(resp.error_code, resp.error_message.map(|m| m.to_string()))?;
        Ok(resp
            .responses
            .into_iter()
            .flat_map(|t| {
                let topic = t.name.to_string();
                t.partitions.into_iter().map(move |p| {
                    (
                        TopicPartition::new(topic.clone(), p.partition_index),
                        check(p.error_code, p.error_message.map(|m| m.to_string())),
                    )
                })
            })
            .collect())
    }

    /// Reassignments in progress, for `topic` or (None) every topic.
    pub async fn list_partition_reassignments(
        &self,
        topic: Option<&str>,
    ) -> Result<Vec<PartitionReassignment>> {
        let conn = self.core.any_connection().await?;
        // All of them, filtered here: naming a topic would need its partition list first.
        let req = ListPartitionReassignmentsRequest::default()
            .with_timeout_ms(self.core.config.request_timeout.as_millis() as i32)
            .with_topics(None);
        let resp: ListPartitionReassignmentsResponse = conn.call(&req).await?;
        check(resp.error_code, resp.error_message.map(|m| m.to_string()))?;
        let ids = |v: Vec<BrokerId>| v.into_iter().map(|b| b.0).collect();
        Ok(resp
            .topics
            .into_iter()
            .filter(|t| topic.is_none_or(|want| *t.name.0 == *want))
            .flat_map(|t| {
                let topic = t.name.to_string();
                t.partitions
                    .into_iter()
                    .map(move |p| PartitionReassignment {
                        partition: TopicPartition::new(topic.clone(), p.partition_index),
                        replicas: ids(p.replicas),
                        adding: ids(p.adding_replicas),
                        removing: ids(p.removing_replicas),
                    })
            })
            .collect())
    }

    /// The idempotent producers each partition's leader knows.
    pub async fn describe_producers(
        &self,
        partitions: &[TopicPartition],
    ) -> Result<Vec<(TopicPartition, Result<Vec<ProducerInfo>>)>> {
        use kafka_protocol::messages::describe_producers_request::TopicRequest;
        let wanted: Vec<(TopicPartition, ())> =
            partitions.iter().map(|tp| (tp.clone(), ())).collect();
        let mut out = Vec::new();
        for (leader, parts) in by_leader(&self.core, &wanted).await? {
            let conn = self.core.connection_to_node(leader).await?;
            let mut topics: Vec<TopicRequest> = Vec::new();
            for (tp, ()) in &parts {
                match topics.iter_mut().find(|t| *t.name.0 == *tp.topic) {
                    Some(t) => t.partition_indexes.push(tp.partition.0),
                    None => topics.push(
                        TopicRequest::default()
                            .with_name(name(&tp.topic))
                            .with_partition_indexes(vec![tp.partition.0]),
                    ),
                }
            }
            let req = DescribeProducersRequest::default().with_topics(topics);
            let resp: DescribeProducersResponse = conn.call(&req).await?;
            for t in resp.topics {
                for p in t.partitions {
                    let tp = TopicPartition::new(t.name.to_string(), p.partition_index);
                    let r = check(p.error_code, p.error_message.map(|m| m.to_string())).map(|()| {
                        p.active_producers
                            .into_iter()
                            .map(|s| ProducerInfo {
                                producer_id: s.producer_id.0,
                                epoch: s.producer_epoch,
                                last_sequence: s.last_sequence,
                                last_timestamp: s.last_timestamp,
                                coordinator_epoch: s.coordinator_epoch,
                                current_txn_start_offset: s.current_txn_start_offset,
                            })
                            .collect()
                    });
                    out.push((tp, r));
                }
            }
        }
        Ok(out)
    }

    /// UnregisterBroker: remove a broker's registration (for a broker gone for good; one still
    /// running registers again). BROKER_ID_NOT_REGISTERED for an id that is not registered.
    pub async fn unregister_broker(&self, node_id: i32) -> Result<()> {
        let conn = self.core.any_connection().await?;
        let req = UnregisterBrokerRequest::default().with_broker_id(BrokerId(node_id));
        let resp: UnregisterBrokerResponse = conn.call(&req).await?;
        check(resp.error_code, resp.error_message.map(|m| m.to_string()))
    }

    /// The brokers' endpoints (DescribeCluster v2), with `include_fenced` the fenced ones too:
    /// (id, host, port, rack, fenced) each, as `kafka-cluster.sh list-endpoints` lists them.
    pub async fn list_endpoints(
        &self,
        include_fenced: bool,
    ) -> Result<Vec<(i32, String, i32, Option<String>, bool)>> {
        let conn = self.core.any_connection().await?;
        let req = DescribeClusterRequest::default().with_include_fenced_brokers(include_fenced);
        let resp: DescribeClusterResponse = conn.call_at(&req, 2).await?;
        check(resp.error_code, resp.error_message.map(|m| m.to_string()))?;
        Ok(resp
            .brokers
            .into_iter()
            .map(|b| {
                (
                    b.broker_id.0,
                    b.host.to_string(),
                    b.port,
                    b.rack.map(|r| r.to_string()),
                    b.is_fenced,
                )
            })
            .collect())
    }

    pub async fn describe_cluster(&self) -> Result<ClusterDescription> {
        let conn = self.core.any_connection().await?;
        let resp: DescribeClusterResponse = conn.call(&DescribeClusterRequest::default()).await?;
        check(resp.error_code, resp.error_message.map(|m| m.to_string()))?;
        Ok(ClusterDescription {
            cluster_id: resp.cluster_id.to_string(),
            controller_id: resp.controller_id.0,
            brokers: resp
                .brokers
                .into_iter()
                .map(|b| {
                    (
                        b.broker_id.0,
                        b.host.to_string(),
                        b.port,
                        b.rack.map(|r| r.to_string()),
                    )
                })
                .collect(),
        })
    }
}

/// Group per-partition requests by the partition's current leader.
async fn by_leader<T: Clone>(
    core: &ClusterCore,
    wanted: &[(TopicPartition, T)],
) -> Result<BTreeMap<i32, Vec<(TopicPartition, T)>>> {
    let mut out: BTreeMap<i32, Vec<(TopicPartition, T)>> = BTreeMap::new();
    for (tp, item) in wanted {
        core.topic(&tp.topic, false, Duration::from_secs(5)).await?;
        let leader = core.leader(tp).ok_or_else(|| Error::Kafka {
            code: sluice_protocol::ErrorCode::LeaderNotAvailable,
            message: Some(tp.to_string()),
        })?;
        out.entry(leader)
            .or_default()
            .push((tp.clone(), item.clone()));
    }
    Ok(out)
}

/// ListOffsets to each partition's leader (shared with the consumer).
pub(crate) async fn list_offsets(
    core: &ClusterCore,
    wanted: &[(TopicPartition, OffsetSpec)],
    read_committed: bool,
) -> Result<Vec<(TopicPartition, Result<OffsetAndTimestamp>)>> {
    let by_leader = by_leader(core, wanted).await?;
    let mut out = Vec::new();
    for (leader, parts) in by_leader {
        let conn = core.connection_to_node(leader).await?;
        let mut topics: HashMap<String, Vec<ListOffsetsPartition>> = HashMap::new();
        for (tp, spec) in &parts {
            topics.entry(tp.topic.clone()).or_default().push(
                ListOffsetsPartition::default()
                    .with_partition_index(tp.partition.0)
                    .with_timestamp(spec.code()),
            );
        }
        let req = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_isolation_level(i8::from(read_committed))
            .with_topics(
                topics
                    .into_iter()
                    .map(|(t, p)| {
                        ListOffsetsTopic::default()
                            .with_name(name(&t))
                            .with_partitions(p)
                    })
                    .collect(),
            );
        let resp: ListOffsetsResponse = conn.call(&req).await?;
        for t in resp.topics {
            for p in t.partitions {
                let tp = TopicPartition::new(t.name.to_string(), p.partition_index);
                let r = check(p.error_code, None).map(|()| OffsetAndTimestamp {
                    offset: p.offset,
                    timestamp: p.timestamp,
                });
                out.push((tp, r));
            }
        }
    }
    Ok(out)
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admin")
            .field("bootstrap", &self.core.config.bootstrap_servers)
            .finish()
    }
}
