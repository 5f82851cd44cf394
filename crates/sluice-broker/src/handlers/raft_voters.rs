//! AddRaftVoter (key 80) and RemoveRaftVoter (key 81): change the voters of a dynamic
//! controller quorum (KIP-853, `kafka-metadata-quorum add-controller / remove-controller`),
//! forwarded to the active controller as Kafka's brokers do. Both take ALTER on the
//! cluster; a request for another cluster is INCONSISTENT_CLUSTER_ID; a static quorum
//! (`kraft.version` 0) answers UNSUPPORTED_VERSION, an id already voting DUPLICATE_VOTER, and
//! a voter unknown under that id and directory id VOTER_NOT_FOUND.

use bytes::Bytes;
use kafka_protocol::messages::{
    AddRaftVoterRequest, AddRaftVoterResponse, ApiKey, RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
};
use sluice_metadata::acl::op;
use sluice_metadata::controller_types::{ApiError, ControllerSpec};
use sluice_metadata::record::Endpoint;
use sluice_protocol::ErrorCode;

use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::AddRaftVoter,
    0,
    0,
    AddRaftVoter {
        controller: crate::services::controller::ControllerClient,
        access: crate::authorizer::Access,
        identity: crate::services::Identity
    }
);

pub(crate) mod remove {
    use super::*;

    handler!(
        ApiKey::RemoveRaftVoter,
        0,
        0,
        RemoveRaftVoter {
            controller: crate::services::controller::ControllerClient,
            access: crate::authorizer::Access,
            identity: crate::services::Identity
        }
    );

    async fn handle(
        h: &RemoveRaftVoter,
        ctx: &RequestContext,
        body: Bytes,
    ) -> Result<Response, HandlerError> {
        let req: RemoveRaftVoterRequest = ctx.decode(body)?;
        let outcome = match check(ctx, &h.access, &h.identity, req.cluster_id.as_deref()) {
            Err(e) => Err(e),
            Ok(()) => settle(
                h.controller
                    .api()
                    .remove_voter(req.voter_id, req.voter_directory_id)
                    .await,
            ),
        };
        let mut resp = RemoveRaftVoterResponse::default();
        if let Err(e) = outcome {
            resp.error_code = e.code.code();
            resp.error_message = Some(str_bytes(e.message));
        }
        ctx.respond(&resp)
    }
}

/// Authorization and the cluster id, checked before the controller is asked.
fn check(
    ctx: &RequestContext,
    access: &crate::authorizer::Access,
    identity: &crate::services::Identity,
    cluster_id: Option<&str>,
) -> Result<(), ApiError> {
    if !access.check(ctx).cluster(op::ALTER) {
        return Err(ApiError::new(
            ErrorCode::ClusterAuthorizationFailed,
            "Cluster authorization failed.",
        ));
    }
    match cluster_id {
        Some(id) if !id.is_empty() && id != identity.cluster_id => Err(ApiError::new(
            ErrorCode::InconsistentClusterId,
            format!(
                "The cluster id {id} in the request does not match this cluster's {}",
                identity.cluster_id
            ),
        )),
        _ => Ok(()),
    }
}

/// The controller's answer, or NOT_CONTROLLER when none could be reached.
fn settle(answer: Result<Result<(), ApiError>, String>) -> Result<(), ApiError> {
    answer.unwrap_or_else(|e| Err(ApiError::new(ErrorCode::NotController, e)))
}

async fn handle(
    h: &AddRaftVoter,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: AddRaftVoterRequest = ctx.decode(body)?;
    let outcome = match check(ctx, &h.access, &h.identity, req.cluster_id.as_deref()) {
        Err(e) => Err(e),
        Ok(()) => {
            let spec = ControllerSpec {
                node_id: req.voter_id,
                directory_id: req.voter_directory_id,
                endpoints: req
                    .listeners
                    .iter()
                    .map(|l| Endpoint {
                        name: l.name.to_string(),
                        host: l.host.to_string(),
                        port: l.port,
                    })
                    .collect(),
            };
            settle(h.controller.api().add_voter(&spec).await)
        }
    };
    let mut resp = AddRaftVoterResponse::default();
    if let Err(e) = outcome {
        resp.error_code = e.code.code();
        resp.error_message = Some(str_bytes(e.message));
    }
    ctx.respond(&resp)
}
