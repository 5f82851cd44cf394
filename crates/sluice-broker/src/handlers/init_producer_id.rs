//! InitProducerId (key 22) for idempotent producers: a fresh producer id with epoch 0 on
//! every call, as Kafka does when there is no transactional id. Transactional ids need the
//! transaction coordinator and are answered COORDINATOR_NOT_AVAILABLE until it exists.

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use sluice_protocol::ErrorCode;
use tracing::warn;

use crate::broker::Broker;
use crate::request::{HandlerError, RequestContext, Response};

handler!(ApiKey::InitProducerId, 0, 5, handle);

async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: InitProducerIdRequest = ctx.decode(body)?;
    let mut resp = InitProducerIdResponse::default();
    resp.producer_id = ProducerId(-1);
    resp.producer_epoch = -1;
    if req.transactional_id.is_some() {
        resp.error_code = ErrorCode::CoordinatorNotAvailable.code();
        return ctx.respond(&resp);
    }
    match broker.next_producer_id().await {
        Ok(id) => {
            resp.producer_id = ProducerId(id);
            resp.producer_epoch = 0;
        }
        Err(e) => {
            warn!(error = %e, "producer id allocation failed");
            resp.error_code = ErrorCode::CoordinatorNotAvailable.code();
        }
    }
    ctx.respond(&resp)
}
