//! [`ClusterCore`]: what producer, consumer and admin share — connections by broker and the
//! cached cluster metadata (brokers, partition leaders), refreshed on demand.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::time::Instant;

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;
use tokio::sync::Mutex;

use crate::config::ClientConfig;
use crate::connection::Connection;
use crate::error::{Error, Result};
use crate::security::Connector;

/// A partition as metadata describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionInfo {
    pub partition: i32,
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub error: Option<ErrorCode>,
}

#[derive(Clone, Debug)]
pub struct TopicInfo {
    pub name: String,
    pub id: [u8; 16],
    pub internal: bool,
    pub partitions: Vec<PartitionInfo>,
    pub error: Option<ErrorCode>,
}

#[derive(Clone, Debug, Default)]
pub struct Cluster {
    pub cluster_id: Option<String>,
    pub controller_id: i32,
    pub brokers: HashMap<i32, String>,
    pub topics: HashMap<String, TopicInfo>,
    pub refreshed: Option<Instant>,
}

pub struct ClusterCore {
    pub config: ClientConfig,
    /// TLS and SASL as configured, set up once.
    pub connector: Connector,
    cluster: RwLock<Cluster>,
    connections: Mutex<HashMap<String, Arc<Connection>>>,
    /// Coordinator addresses by group id, for calls that are not a member's.
    coordinators: RwLock<HashMap<String, String>>,
}

impl ClusterCore {
    pub fn new(config: ClientConfig) -> Result<Arc<Self>> {
        if config.bootstrap_servers.is_empty() {
            return Err(Error::Config {
                key: "bootstrap.servers".into(),
                message: "at least one host:port is required".into(),
            });
        }
        let connector =
            Connector::new(&config.security).map_err(|(key, message)| Error::Config {
                key: key.to_string(),
                message,
            })?;
        Ok(Arc::new(Self {
            config,
            connector,
            cluster: RwLock::new(Cluster::default()),
            connections: Mutex::new(HashMap::new()),
            coordinators: RwLock::new(HashMap::new()),
        }))
    }

    pub fn cluster(&self) -> Cluster {
        self.cluster
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The connection to `addr`, opening one if there is none (or it broke).
    pub async fn connection_to(&self, addr: &str) -> Result<Arc<Connection>> {
        let mut conns = self.connections.lock().await;
        if let Some(c) = conns.get(addr) {
            if !c.is_closed() {
                return Ok(Arc::clone(c));
            }
        }
        let c = Arc::new(
            Connection::connect(
                addr,
                &self.config.client_id,
                &self.connector,
                self.config.connect_timeout,
                self.config.request_timeout,
            )
            .await?,
        );
        conns.insert(addr.to_string(), Arc::clone(&c));
        Ok(c)
    }

    /// The connection to broker `node_id` (refreshing metadata if it is unknown).
    pub async fn connection_to_node(&self, node_id: i32) -> Result<Arc<Connection>> {
        let addr = self
            .cluster
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .brokers
            .get(&node_id)
            .cloned();
        let addr = match addr {
            Some(a) => a,
            None => {
                self.refresh(&[]).await?;
                self.cluster
                    .read()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .brokers
                    .get(&node_id)
                    .cloned()
                    .ok_or_else(|| {
                        Error::Protocol(format!("broker {node_id} is not in the cluster metadata"))
                    })?
            }
        };
        self.connection_to(&addr).await
    }

    /// Any reachable broker: known ones first, then the bootstrap list.
    pub async fn any_connection(&self) -> Result<Arc<Connection>> {
        let mut candidates: Vec<String> = self
            .cluster
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .brokers
            .values()
            .cloned()
            .collect();
        candidates.sort();
        for b in &self.config.bootstrap_servers {
            if !candidates.contains(b) {
                candidates.push(b.clone());
            }
        }
        let mut last = None;
        for addr in candidates {
            match self.connection_to(&addr).await {
                Ok(c) => return Ok(c),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::Connection {
            addr: self.config.bootstrap_servers.join(","),
            reason: "no brokers to try".into(),
        }))
    }

    /// Fetch metadata for `topics` (all topics when empty) and merge it into the cache.
    /// Topics are not auto-created.
    pub async fn refresh(&self, topics: &[String]) -> Result<Cluster> {
        self.refresh_with(topics, false).await
    }

    pub async fn refresh_with(
        &self,
        topics: &[String],
        allow_auto_create: bool,
    ) -> Result<Cluster> {
        let conn = self.any_connection().await?;
        let req = MetadataRequest::default()
            .with_topics(if topics.is_empty() {
                None
            } else {
                Some(
                    topics
                        .iter()
                        .map(|t| {
                            MetadataRequestTopic::default()
                                .with_name(Some(TopicName(StrBytes::from_string(t.clone()))))
                        })
                        .collect(),
                )
            })
            .with_allow_auto_topic_creation(allow_auto_create);
        let resp: MetadataResponse = conn.call(&req).await?;
        let mut cluster = self
            .cluster
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        apply_metadata(&mut cluster, resp, topics.is_empty());
        Ok(cluster.clone())
    }

    /// Topic names by id, from the cached metadata, refreshed for `subscription` when one of
    /// `names` or `ids` is missing (group members turning assignments by id into names).
    pub async fn topic_ids(
        &self,
        names: &[String],
        ids: &[[u8; 16]],
        subscription: &[String],
    ) -> Result<HashMap<[u8; 16], String>> {
        let known = |c: &Cluster| -> HashMap<[u8; 16], String> {
            c.topics
                .values()
                .filter(|t| t.error.is_none() && t.id != [0; 16])
                .map(|t| (t.id, t.name.clone()))
                .collect()
        };
        let map = known(&self.cluster());
        let complete = ids.iter().all(|id| map.contains_key(id))
            && names.iter().all(|n| map.values().any(|v| v == n));
        if complete || subscription.is_empty() {
            return Ok(map);
        }
        Ok(known(&self.refresh(subscription).await?))
    }

    /// Partitions of `topic`, refreshing metadata if it is not known; waits up to
    /// `timeout` for a topic that is being created.
    pub async fn topic(
        &self,
        topic: &str,
        allow_auto_create: bool,
        timeout: Duration,
    ) -> Result<TopicInfo> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(t) = self.cached_topic(topic).filter(|t| {
                t.error.is_none()
                    && !t.partitions.is_empty()
                    && t.partitions.iter().all(|p| p.leader >= 0)
            }) {
                return Ok(t);
            }
            let cluster = self
                .refresh_with(&[topic.to_string()], allow_auto_create)
                .await?;
            match cluster.topics.get(topic) {
                Some(t) if t.error.is_none() && !t.partitions.is_empty() => return Ok(t.clone()),
                Some(t) => {
                    let code = t.error.unwrap_or(ErrorCode::LeaderNotAvailable);
                    if !code.is_retriable() || Instant::now() >= deadline {
                        return Err(Error::Kafka {
                            code,
                            message: Some(format!("topic {topic}")),
                        });
                    }
                }
                None if Instant::now() >= deadline => {
                    return Err(Error::Kafka {
                        code: ErrorCode::UnknownTopicOrPartition,
                        message: Some(format!("topic {topic}")),
                    })
                }
                None => {}
            }
            tokio::time::sleep(self.config.retry_backoff).await;
        }
    }

    /// Partition count of a topic known to the cache (no copy of its metadata).
    pub fn partition_count(&self, topic: &str) -> Option<i32> {
        let c = self
            .cluster
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        c.topics
            .get(topic)
            .filter(|t| !t.partitions.is_empty())
            .map(|t| t.partitions.len() as i32)
    }

    pub fn cached_topic(&self, topic: &str) -> Option<TopicInfo> {
        self.cluster
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .topics
            .get(topic)
            .cloned()
    }

    /// The leader of `tp` from the cache (None if unknown or leaderless).
    pub fn leader(&self, tp: &TopicPartition) -> Option<i32> {
        let c = self
            .cluster
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        c.topics
            .get(&tp.topic)?
            .partitions
            .iter()
            .find(|p| p.partition == tp.partition.0)
            .map(|p| p.leader)
            .filter(|l| *l >= 0)
    }

    /// The cached coordinator address of a group.
    pub fn cached_coordinator(&self, group: &str) -> Option<String> {
        self.coordinators
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(group)
            .cloned()
    }

    /// Remember (`Some`) or forget (`None`) a group's coordinator address.
    pub fn set_coordinator(&self, group: &str, addr: Option<String>) {
        let mut map = self
            .coordinators
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match addr {
            Some(a) => {
                map.insert(group.to_string(), a);
            }
            None => {
                map.remove(group);
            }
        }
    }

    /// Forget a topic's cached leaders (after NOT_LEADER, a lost connection and the like);
    /// its partition count stays known, so a producer's `send` need not wait for metadata
    /// (as Java's producer keeps its cluster view and only requests an update).
    pub fn invalidate(&self, topic: &str) {
        if let Some(t) = self
            .cluster
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .topics
            .get_mut(topic)
        {
            for p in &mut t.partitions {
                p.leader = -1;
            }
        }
    }
}

fn apply_metadata(cluster: &mut Cluster, resp: MetadataResponse, all_topics: bool) {
    cluster.cluster_id = resp.cluster_id.map(|c| c.to_string());
    cluster.controller_id = resp.controller_id.0;
    cluster.brokers = resp
        .brokers
        .iter()
        .map(|b| (b.node_id.0, format!("{}:{}", b.host, b.port)))
        .collect();
    if all_topics {
        cluster.topics.clear();
    }
    for t in resp.topics {
        let Some(name) = t.name.map(|n| n.to_string()) else {
            continue;
        };
        let mut partitions: Vec<PartitionInfo> = t
            .partitions
            .iter()
            .map(|p| PartitionInfo {
                partition: p.partition_index,
                leader: p.leader_id.0,
                leader_epoch: p.leader_epoch,
                replicas: p.replica_nodes.iter().map(|r| r.0).collect(),
                isr: p.isr_nodes.iter().map(|r| r.0).collect(),
                error: ErrorCode::try_from_code(p.error_code),
            })
            .collect();
        partitions.sort_by_key(|p| p.partition);
        cluster.topics.insert(
            name.clone(),
            TopicInfo {
                name,
                id: *t.topic_id.as_bytes(),
                internal: t.is_internal,
                partitions,
                error: ErrorCode::try_from_code(t.error_code),
            },
        );
    }
    cluster.refreshed = Some(Instant::now());
}
