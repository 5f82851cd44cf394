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

use crate::group::coordinator::OFFSETS_TOPIC;
use crate::replica::AppendError;
use crate::replica::{Appended, ReplicationOutcome};
use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::WriteTxnMarkers,
    1,
    1,
    WriteTxnMarkers {
        config: sluice_metadata::config::BrokerConfig,
        replicas: crate::replica::ReplicaManager,
        access: crate::authorizer::Access,
        groups: crate::group::coordinator::GroupCoordinator
    }
);

async fn handle(
    h: &WriteTxnMarkers,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: WriteTxnMarkersRequest = ctx.decode(body)?;
    let timeout = Duration::from_millis(h.config.settings().request_timeout_ms);
    // Brokers only: CLUSTER_ACTION on the cluster.
    let denied = !h.access.check(ctx).cluster(op::CLUSTER_ACTION);
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
        let targets: Vec<TopicPartition> = m
            .topics
            .iter()
            .flat_map(|t| {
                t.partition_indexes
                    .iter()
                    .map(|i| TopicPartition::new(t.name.to_string(), *i))
            })
            .collect();
        // Diskless partitions' markers go to the object store and the sequencer.
        let (diskless_targets, targets): (Vec<TopicPartition>, Vec<TopicPartition>) = targets
            .into_iter()
            .partition(|tp| !denied && h.replicas.is_diskless(&tp.topic));
        let diskless_outcomes: Vec<(String, i32, Option<ErrorCode>)> =
            if diskless_targets.is_empty() {
                Vec::new()
            } else {
                let written = h
                    .replicas
                    .append_diskless_markers(
                        diskless_targets
                            .iter()
                            .map(|tp| (tp.clone(), marker))
                            .collect(),
                    )
                    .await;
                diskless_targets
                    .into_iter()
                    .zip(written)
                    .map(|(tp, r)| (tp.topic, tp.partition.0, r.err().map(|e| e.code())))
                    .collect()
            };
        // Append every marker first, then wait: the replication waits overlap.
        let appended = if denied {
            targets
                .iter()
                .map(|_| {
                    Err(AppendError::Code(
                        ErrorCode::ClusterAuthorizationFailed,
                        String::new(),
                    ))
                })
                .collect()
        } else {
            h.replicas
                .append_markers(targets.iter().map(|tp| (tp.clone(), marker)).collect())
                .await
        };
        let ok: Vec<&Appended> = appended.iter().filter_map(|a| a.as_ref().ok()).collect();
        let mut settled = h.replicas.await_replication(&ok, timeout).await.into_iter();
        let mut outcomes = diskless_outcomes;
        for (tp, a) in targets.into_iter().zip(&appended) {
            let (code, marker_offset) = match a {
                Err(e) => (Some(e.code()), -1),
                // Committed, even with the ISR short since: the marker stands.
                Ok(a) => match settled.next() {
                    Some(ReplicationOutcome::Committed | ReplicationOutcome::CommittedShort) => {
                        (None, a.info.last_offset)
                    }
                    other => (
                        Some(
                            other
                                .and_then(|o| o.error())
                                .unwrap_or(ErrorCode::RequestTimedOut),
                        ),
                        -1,
                    ),
                },
            };
            if code.is_none() && tp.topic == OFFSETS_TOPIC {
                h.groups
                    .complete_txn(
                        marker.producer_id,
                        tp.partition.0,
                        marker.commit,
                        marker_offset,
                    )
                    .await;
            }
            outcomes.push((tp.topic, tp.partition.0, code));
        }
        for (topic, partitions) in crate::request::by_topic(outcomes) {
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
