//! UnregisterBroker (key 64): remove a broker's registration, forwarded to the active
//! controller (`kafka-cluster.sh unregister --id N`, `sluice cluster unregister --id N`). As
//! Kafka does, the broker leaves the ISRs and its leaderships move; an id that is not
//! registered is BROKER_ID_NOT_REGISTERED; it takes ALTER on the cluster. Meant for a broker
//! that is gone for good: one still running registers again with its next heartbeat.

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, UnregisterBrokerRequest, UnregisterBrokerResponse};
use sluice_metadata::acl::op;
use sluice_protocol::ErrorCode;

use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::UnregisterBroker,
    0,
    0,
    UnregisterBroker {
        controller: crate::services::controller::ControllerClient,
        access: crate::authorizer::Access
    }
);

async fn handle(
    h: &UnregisterBroker,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: UnregisterBrokerRequest = ctx.decode(body)?;
    let outcome = if !h.access.check(ctx).cluster(op::ALTER) {
        Err((ErrorCode::ClusterAuthorizationFailed, None))
    } else {
        match h.controller.api().unregister_broker(req.broker_id.0).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err((e.code, Some(e.message))),
            Err(e) => Err((ErrorCode::UnknownServerError, Some(e))),
        }
    };
    let mut resp = UnregisterBrokerResponse::default();
    if let Err((code, message)) = outcome {
        resp.error_code = code.code();
        resp.error_message = message.map(str_bytes);
    }
    ctx.respond(&resp)
}
