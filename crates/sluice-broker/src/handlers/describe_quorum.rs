//! DescribeQuorum (key 55): the metadata quorum as the active controller sees it (leader,
//! epoch, high watermark, each voter's and observer's log end and when it last fetched and
//! caught up), forwarded to the controller as Kafka's brokers do. The metadata log is
//! `__cluster_metadata` partition 0; anything else is answered UNKNOWN_TOPIC_OR_PARTITION.

use bytes::Bytes;
use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{ApiKey, BrokerId, DescribeQuorumRequest, DescribeQuorumResponse};
use sluice_metadata::acl::op;
use sluice_metadata::controller_types::{QuorumInfo, QuorumReplica};
use sluice_protocol::ErrorCode;

use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::DescribeQuorum,
    0,
    2,
    DescribeQuorum {
        controller: crate::services::controller::ControllerClient,
        access: crate::authorizer::Access
    }
);

/// The metadata log's name in Kafka's protocol.
pub const METADATA_TOPIC: &str = "__cluster_metadata";
/// The listener name Kafka's tools show for the voters' endpoints.
const CONTROLLER_LISTENER: &str = "CONTROLLER";

fn replica(r: &QuorumReplica) -> ReplicaState {
    let mut s = ReplicaState::default();
    s.replica_id = BrokerId(r.id);
    s.replica_directory_id = r.directory_id;
    s.log_end_offset = r.log_end_offset;
    s.last_fetch_timestamp = r.last_fetch_ms;
    s.last_caught_up_timestamp = r.last_caught_up_ms;
    s
}

fn partition(q: &QuorumInfo) -> PartitionData {
    let mut p = PartitionData::default();
    p.leader_id = BrokerId(q.leader_id);
    p.leader_epoch = q.leader_epoch;
    p.high_watermark = q.high_watermark;
    p.current_voters = q.voters.iter().map(replica).collect();
    p.observers = q.observers.iter().map(replica).collect();
    p
}

/// A whole-request error (the message from v2 on, which has the field).
fn top_level_error(version: i16, code: ErrorCode, message: String) -> DescribeQuorumResponse {
    let mut resp = DescribeQuorumResponse::default();
    resp.error_code = code.code();
    if version >= 2 {
        resp.error_message = Some(str_bytes(message));
    }
    resp
}

async fn handle(
    h: &DescribeQuorum,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: DescribeQuorumRequest = ctx.decode(body)?;
    if !h.access.check(ctx).cluster(op::DESCRIBE) {
        return ctx.respond(&top_level_error(
            ctx.api_version,
            ErrorCode::ClusterAuthorizationFailed,
            "Cluster authorization failed.".into(),
        ));
    }
    let metadata_partition = req.topics.len() == 1
        && req.topics[0].topic_name.as_str() == METADATA_TOPIC
        && req.topics[0].partitions.len() == 1
        && req.topics[0].partitions[0].partition_index == 0;
    if !metadata_partition {
        return ctx.respond(&top_level_error(
            ctx.api_version,
            ErrorCode::UnknownTopicOrPartition,
            format!("The quorum is {METADATA_TOPIC}-0; nothing else is described."),
        ));
    }
    let q = match h.controller.api().describe_quorum().await {
        Ok(q) => q,
        Err(e) => {
            tracing::debug!(error = %e, "DescribeQuorum failed");
            return ctx.respond(&top_level_error(
                ctx.api_version,
                ErrorCode::NotController,
                e,
            ));
        }
    };
    let mut topic = TopicData::default();
    topic.topic_name = req.topics[0].topic_name.clone();
    topic.partitions.push(partition(&q));
    let mut resp = DescribeQuorumResponse::default();
    resp.topics.push(topic);
    if ctx.api_version < 2 {
        return ctx.respond(&resp);
    }
    resp.nodes = q
        .voter_endpoints
        .iter()
        .map(|(id, host, port)| {
            let mut l = Listener::default();
            l.name = str_bytes(CONTROLLER_LISTENER.to_string());
            l.host = str_bytes(host.clone());
            l.port = *port;
            let mut n = Node::default();
            n.node_id = BrokerId(*id);
            n.listeners.push(l);
            n
        })
        .collect();
    ctx.respond(&resp)
}
