//! WriteTxnMarkers (key 27), from a transaction coordinator to partition leaders: append a
//! commit or abort marker (a control batch) for a producer to each named partition, and
//! answer once the markers are replicated to the in-sync replicas (as acks=all). A marker in
//! a `__consumer_offsets` partition also makes the group coordinator apply (commit) or drop
//! (abort) the offsets the producer committed in that transaction.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{
    ApiKey, TopicName, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use sluice_metadata::acl::op;
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;
use sluice_storage::Marker;

use crate::broker::Broker;
use crate::group::coordinator::OFFSETS_TOPIC;
use crate::partition::AckState;
use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(ApiKey::WriteTxnMarkers, 1, 1, handle);

async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: WriteTxnMarkersRequest = ctx.decode(body)?;
    let timeout = Duration::from_millis(broker.config.number("request.timeout.ms").max(1) as u64);
    let image = broker.metadata.current();
    // Brokers only: CLUSTER_ACTION on the cluster.
    let denied = !broker.acl(ctx).cluster(op::CLUSTER_ACTION);
    let mut resp = WriteTxnMarkersResponse::default();
    for m in req.markers {
        let marker = Marker {
            producer_id: m.producer_id.0,
            epoch: m.producer_epoch,
            commit: m.transaction_result,
            coordinator_epoch: m.coordinator_epoch,
        };
        let mut result = WritableTxnMarkerResult::default();
        result.producer_id = m.producer_id;
        // Append every marker first, then wait: the replication waits overlap.
        let mut appended = Vec::new();
        for t in &m.topics {
            for index in &t.partition_indexes {
                let tp = TopicPartition::new(t.name.to_string(), *index);
                let outcome = match broker.replicas.get(&tp) {
                    _ if denied => Err(ErrorCode::ClusterAuthorizationFailed),
                    None if image
                        .topic(&t.name)
                        .is_some_and(|topic| topic.partitions.contains_key(index)) =>
                    {
                        Err(ErrorCode::NotLeaderOrFollower)
                    }
                    None => Err(ErrorCode::UnknownTopicOrPartition),
                    Some(p) => match p.append_marker(&marker, crate::now_ms()) {
                        Err(e) => Err(e.code()),
                        Ok((info, epoch)) => Ok((p, info.last_offset + 1, epoch)),
                    },
                };
                appended.push((t.name.to_string(), *index, outcome));
            }
        }
        let mut outcomes = Vec::new();
        for (topic, index, outcome) in appended {
            let (code, marker_offset) = match outcome {
                Err(code) => (Some(code), -1),
                Ok((p, end, epoch)) => match p.wait_committed(end, epoch, timeout).await {
                    AckState::Committed => (None, end - 1),
                    AckState::Deposed => (Some(ErrorCode::NotLeaderOrFollower), -1),
                    AckState::Waiting => (Some(ErrorCode::RequestTimedOut), -1),
                },
            };
            if code.is_none() && topic == OFFSETS_TOPIC {
                broker
                    .groups
                    .complete_txn(marker.producer_id, index, marker.commit, marker_offset)
                    .await;
            }
            outcomes.push((topic, index, code));
        }
        for (topic, partitions) in crate::handlers::by_topic(outcomes) {
            let mut tr = WritableTxnMarkerTopicResult::default();
            tr.name = TopicName(str_bytes(topic));
            for (index, code) in partitions {
                let mut pr = WritableTxnMarkerPartitionResult::default();
                pr.partition_index = index;
                pr.error_code = code.map_or(0, |c| c.code());
                tr.partitions.push(pr);
            }
            result.topics.push(tr);
        }
        resp.markers.push(result);
    }
    ctx.respond(&resp)
}
