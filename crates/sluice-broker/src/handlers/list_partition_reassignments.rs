//! ListPartitionReassignments (key 46): the reassignments in progress, from this broker's
//! metadata image (a broker that forwarded an AlterPartitionReassignments has already
//! applied its change). Null topics = every topic; partitions not reassigning are left out.

use bytes::Bytes;
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
    TopicName,
};
use sluice_metadata::acl::op;
use sluice_metadata::image::TopicImage;
use sluice_protocol::ErrorCode;

use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::ListPartitionReassignments,
    0,
    0,
    ListPartitionReassignments {
        metadata: crate::metadata_cache::MetadataCache,
        access: crate::authorizer::Access
    },
    sync
);

fn ids(v: &[i32]) -> Vec<BrokerId> {
    v.iter().copied().map(BrokerId).collect()
}

fn ongoing(topic: &TopicImage, only: Option<&[i32]>) -> Option<OngoingTopicReassignment> {
    let mut t = OngoingTopicReassignment::default();
    t.name = TopicName(str_bytes(topic.name.clone()));
    for (p, reg) in &topic.partitions {
        if !reg.is_reassigning() || only.is_some_and(|o| !o.contains(p)) {
            continue;
        }
        let mut r = OngoingPartitionReassignment::default();
        r.partition_index = *p;
        r.replicas = ids(&reg.replicas);
        r.adding_replicas = ids(&reg.adding);
        r.removing_replicas = ids(&reg.removing);
        t.partitions.push(r);
    }
    (!t.partitions.is_empty()).then_some(t)
}

fn handle(
    h: &ListPartitionReassignments,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: ListPartitionReassignmentsRequest = ctx.decode(body)?;
    let image = h.metadata.current();
    let mut resp = ListPartitionReassignmentsResponse::default();
    if !h.access.check(ctx).cluster(op::DESCRIBE) {
        resp.error_code = ErrorCode::ClusterAuthorizationFailed.code();
        resp.error_message = Some(str_bytes("Cluster authorization failed."));
        return ctx.respond(&resp);
    }
    match req.topics {
        None => resp
            .topics
            .extend(image.topics.values().filter_map(|t| ongoing(t, None))),
        Some(topics) => {
            for t in topics {
                if let Some(found) = image.topic(&t.name) {
                    resp.topics
                        .extend(ongoing(found, Some(&t.partition_indexes)));
                }
            }
        }
    }
    ctx.respond(&resp)
}
