//! GetTelemetrySubscriptions (key 71) and PushTelemetry (key 72), KIP-714: a client asks which
//! metrics to push and how often, then pushes them; see [`crate::telemetry`]. Neither needs an
//! ACL (as in Kafka), and a refused request is answered with its error code alone.

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;

use crate::request::{str_bytes, RequestContext};
use crate::telemetry::ClientAttributes;

/// Who the requesting client is, as subscriptions match it.
fn attributes(ctx: &RequestContext) -> ClientAttributes {
    let software = ctx.connection.software();
    ClientAttributes {
        client_id: ctx.client_id.clone().unwrap_or_default(),
        software_name: software.as_ref().map(|s| s.0.clone()),
        software_version: software.map(|s| s.1),
        source_address: ctx.peer.ip().to_string(),
        source_port: ctx.peer.port().to_string(),
    }
}

pub mod get {
    use kafka_protocol::messages::{
        GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse,
    };

    use super::*;
    use crate::request::{HandlerError, Response};

    handler!(
        ApiKey::GetTelemetrySubscriptions,
        0,
        0,
        GetTelemetrySubscriptions {
            telemetry: crate::telemetry::ClientTelemetry
        },
        sync
    );

    fn handle(
        h: &GetTelemetrySubscriptions,
        ctx: &RequestContext,
        body: Bytes,
    ) -> Result<Response, HandlerError> {
        let req: GetTelemetrySubscriptionsRequest = ctx.decode(body)?;
        let mut resp = GetTelemetrySubscriptionsResponse::default();
        match h
            .telemetry
            .subscriptions(req.client_instance_id, &attributes(ctx), &ctx.connection)
        {
            Ok(s) => {
                resp.client_instance_id = s.client_instance_id;
                resp.subscription_id = s.subscription_id;
                resp.push_interval_ms = s.push_interval_ms;
                resp.requested_metrics = s.metrics.into_iter().map(str_bytes).collect();
                resp.accepted_compression_types = crate::telemetry::ACCEPTED_COMPRESSION.to_vec();
                resp.telemetry_max_bytes = h.telemetry.max_bytes();
                resp.delta_temporality = false;
            }
            Err((code, message)) => {
                tracing::debug!(%message, "GetTelemetrySubscriptions refused");
                resp.error_code = code.code();
            }
        }
        ctx.respond(&resp)
    }
}

pub mod push {
    use kafka_protocol::messages::{PushTelemetryRequest, PushTelemetryResponse};

    use super::*;
    use crate::request::{HandlerError, Response};
    use crate::telemetry::Push;

    handler!(
        ApiKey::PushTelemetry,
        0,
        0,
        PushTelemetry {
            telemetry: crate::telemetry::ClientTelemetry
        },
        sync
    );

    fn handle(
        h: &PushTelemetry,
        ctx: &RequestContext,
        body: Bytes,
    ) -> Result<Response, HandlerError> {
        let req: PushTelemetryRequest = ctx.decode(body)?;
        let mut resp = PushTelemetryResponse::default();
        let push = Push {
            client_instance_id: req.client_instance_id,
            subscription_id: req.subscription_id,
            terminating: req.terminating,
            compression: req.compression_type,
            metrics: &req.metrics,
        };
        if let Err((code, message)) = h.telemetry.push(&push, &attributes(ctx), &ctx.connection) {
            tracing::debug!(%message, "PushTelemetry refused");
            resp.error_code = code.code();
        }
        ctx.respond(&resp)
    }
}
