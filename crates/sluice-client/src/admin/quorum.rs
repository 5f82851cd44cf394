//! The metadata quorum (DescribeQuorum): what `kafka-metadata-quorum describe` shows.

use kafka_protocol::messages::add_raft_voter_request::Listener;
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::describe_quorum_response::ReplicaState;
use kafka_protocol::messages::{
    AddRaftVoterRequest, AddRaftVoterResponse, DescribeQuorumRequest, DescribeQuorumResponse,
    RemoveRaftVoterRequest, RemoveRaftVoterResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::Admin;
use crate::error::{check, Error, Result};

/// The metadata log's name in Kafka's protocol.
const METADATA_TOPIC: &str = "__cluster_metadata";

/// One replica of the metadata log: its log end offset (exclusive) and when it last
/// fetched and last had everything the leader had (wall clock, ms; -1 when unknown).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumReplica {
    pub id: i32,
    /// The directory id of its metadata log, in Kafka's text form (all zero: none).
    pub directory_id: String,
    pub log_end_offset: i64,
    pub last_fetch_ms: i64,
    pub last_caught_up_ms: i64,
}

/// The metadata quorum as its leader (the active controller) sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumDescription {
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub high_watermark: i64,
    pub voters: Vec<QuorumReplica>,
    /// Brokers that follow the metadata log without voting.
    pub observers: Vec<QuorumReplica>,
    /// The voters' endpoints: (id, listener, host, port).
    pub voter_endpoints: Vec<(i32, String, String, u16)>,
}

fn replicas(states: Vec<ReplicaState>) -> Vec<QuorumReplica> {
    states
        .into_iter()
        .map(|s| QuorumReplica {
            id: s.replica_id.0,
            directory_id: sluice_protocol::base64::encode(s.replica_directory_id.as_bytes()),
            log_end_offset: s.log_end_offset,
            last_fetch_ms: s.last_fetch_timestamp,
            last_caught_up_ms: s.last_caught_up_timestamp,
        })
        .collect()
}

impl Admin {
    /// DescribeQuorum: the metadata quorum's leader, epoch, high watermark, voters and
    /// observers.
    pub async fn describe_metadata_quorum(&self) -> Result<QuorumDescription> {
        let mut partition = PartitionData::default();
        partition.partition_index = 0;
        let mut topic = TopicData::default();
        topic.topic_name = TopicName(StrBytes::from_static_str(METADATA_TOPIC));
        topic.partitions.push(partition);
        let mut req = DescribeQuorumRequest::default();
        req.topics.push(topic);
        let conn = self.core.any_connection().await?;
        let resp: DescribeQuorumResponse = conn.call(&req).await?;
        check(resp.error_code, resp.error_message.map(|m| m.to_string()))?;
        let p = resp
            .topics
            .into_iter()
            .flat_map(|t| t.partitions)
            .next()
            .ok_or_else(|| Error::Protocol("DescribeQuorum answered no partition".into()))?;
        check(p.error_code, p.error_message.map(|m| m.to_string()))?;
        Ok(QuorumDescription {
            leader_id: p.leader_id.0,
            leader_epoch: p.leader_epoch,
            high_watermark: p.high_watermark,
            voters: replicas(p.current_voters),
            observers: replicas(p.observers),
            voter_endpoints: resp
                .nodes
                .into_iter()
                .flat_map(|n| {
                    n.listeners
                        .into_iter()
                        .map(move |l| (n.node_id.0, l.name.to_string(), l.host.to_string(), l.port))
                })
                .collect(),
        })
    }

    /// AddRaftVoter (KIP-853): make controller `id`, whose metadata log directory is
    /// `directory_id` and which listens on `endpoints` ((listener, host, port) each), a voter.
    pub async fn add_raft_voter(
        &self,
        id: i32,
        directory_id: uuid::Uuid,
        endpoints: &[(String, String, u16)],
    ) -> Result<()> {
        let mut req = AddRaftVoterRequest::default();
        req.voter_id = id;
        req.voter_directory_id = directory_id;
        req.timeout_ms = 30_000;
        req.listeners = endpoints
            .iter()
            .map(|(name, host, port)| {
                let mut l = Listener::default();
                l.name = StrBytes::from_string(name.clone());
                l.host = StrBytes::from_string(host.clone());
                l.port = *port;
                l
            })
            .collect();
        let conn = self.core.any_connection().await?;
        let resp: AddRaftVoterResponse = conn.call(&req).await?;
        check(resp.error_code, resp.error_message.map(|m| m.to_string()))
    }

    /// RemoveRaftVoter (KIP-853): controller `id` with metadata log directory
    /// `directory_id` stops voting.
    pub async fn remove_raft_voter(&self, id: i32, directory_id: uuid::Uuid) -> Result<()> {
        let mut req = RemoveRaftVoterRequest::default();
        req.voter_id = id;
        req.voter_directory_id = directory_id;
        let conn = self.core.any_connection().await?;
        let resp: RemoveRaftVoterResponse = conn.call(&req).await?;
        check(resp.error_code, resp.error_message.map(|m| m.to_string()))
    }
}
