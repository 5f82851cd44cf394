//! ElectLeaders (key 43): preferred (type 0) or unclean (type 1) leader election, forwarded
//! to the active controller. A null partition list means every partition.

use bytes::Bytes;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ApiKey, ElectLeadersRequest, ElectLeadersResponse, TopicName};
use sluice_metadata::acl::op;
use sluice_protocol::ErrorCode;

use crate::request::by_topic;
use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::ElectLeaders,
    0,
    2,
    ElectLeaders {
        controller: crate::services::controller::ControllerClient,
        access: crate::authorizer::Access
    }
);

async fn handle(
    h: &ElectLeaders,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: ElectLeadersRequest = ctx.decode(body)?;
    let preferred = ctx.api_version == 0 || req.election_type == 0;
    let targets: Option<Vec<(String, i32)>> = req.topic_partitions.map(|ts| {
        ts.into_iter()
            .flat_map(|t| {
                let name = t.topic.to_string();
                t.partitions.into_iter().map(move |p| (name.clone(), p))
            })
            .collect()
    });
    let mut resp = ElectLeadersResponse::default();
    if !h.access.check(ctx).cluster(op::ALTER) {
        resp.error_code = ErrorCode::ClusterAuthorizationFailed.code();
        return ctx.respond(&resp);
    }
    match h
        .controller
        .api()
        .elect_leaders(preferred, targets.as_deref())
        .await
    {
        Ok(outcomes) => {
            for (topic, partitions) in by_topic(outcomes) {
                let mut t = ReplicaElectionResult::default();
                t.topic = TopicName(str_bytes(topic));
                for (partition, outcome) in partitions {
                    let mut r = PartitionResult::default();
                    r.partition_id = partition;
                    if let Err(e) = outcome {
                        r.error_code = e.code.code();
                        r.error_message = Some(str_bytes(e.message));
                    }
                    t.partition_result.push(r);
                }
                resp.replica_election_results.push(t);
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "ElectLeaders failed");
            resp.error_code = ErrorCode::UnknownServerError.code();
        }
    }
    ctx.respond(&resp)
}
