//! AlterPartitionReassignments (key 45): start, replace or cancel (null replicas) partition
//! reassignments, forwarded to the active controller. The answer comes once the change is
//! committed; the reassignment itself then proceeds as the new replicas catch up (see
//! ListPartitionReassignments).

use bytes::Bytes;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ApiKey, TopicName,
};
use sluice_metadata::acl::op;
use sluice_metadata::controller_types::ReassignTarget;
use sluice_protocol::ErrorCode;

use crate::request::by_topic;
use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::AlterPartitionReassignments,
    0,
    1,
    AlterPartitionReassignments {
        controller: crate::services::controller::ControllerClient,
        access: crate::authorizer::Access
    }
);

async fn handle(
    h: &AlterPartitionReassignments,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: AlterPartitionReassignmentsRequest = ctx.decode(body)?;
    // Version 0 has no such field: the replication factor may always change.
    let allow_rf_change = ctx.api_version == 0 || req.allow_replication_factor_change;
    let targets: Vec<ReassignTarget> = req
        .topics
        .into_iter()
        .flat_map(|t| {
            let name = t.name.to_string();
            t.partitions.into_iter().map(move |p| {
                let replicas = p.replicas.map(|r| r.into_iter().map(|b| b.0).collect());
                (name.clone(), p.partition_index, replicas)
            })
        })
        .collect();
    let mut resp = AlterPartitionReassignmentsResponse::default();
    resp.allow_replication_factor_change = allow_rf_change;
    if !h.access.check(ctx).cluster(op::ALTER) {
        resp.error_code = ErrorCode::ClusterAuthorizationFailed.code();
        resp.error_message = Some(str_bytes("Cluster authorization failed."));
        return ctx.respond(&resp);
    }
    match h
        .controller
        .api()
        .alter_reassignments(&targets, allow_rf_change)
        .await
    {
        Ok(outcomes) => {
            for (topic, partitions) in by_topic(outcomes) {
                let mut t = ReassignableTopicResponse::default();
                t.name = TopicName(str_bytes(topic));
                for (partition, outcome) in partitions {
                    let mut r = ReassignablePartitionResponse::default();
                    r.partition_index = partition;
                    if let Err(e) = outcome {
                        r.error_code = e.code.code();
                        r.error_message = Some(str_bytes(e.message));
                    }
                    t.partitions.push(r);
                }
                resp.responses.push(t);
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "AlterPartitionReassignments failed");
            resp.error_code = ErrorCode::UnknownServerError.code();
            resp.error_message = Some(str_bytes(e));
        }
    }
    ctx.respond(&resp)
}
