//! UpdateFeatures (key 57): finalize feature levels (`metadata.version`), forwarded to the
//! active controller, which checks them against what this build supports and Kafka's
//! upgrade/downgrade rules and applies all of them or none (see
//! `sluice_metadata::features`). v0–1 answer per feature, v2 with the top-level error only.

use bytes::Bytes;
use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{ApiKey, UpdateFeaturesRequest, UpdateFeaturesResponse};
use sluice_metadata::acl::op;
use sluice_protocol::ErrorCode;

use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::UpdateFeatures,
    0,
    2,
    UpdateFeatures {
        controller: crate::services::controller::ControllerClient,
        access: crate::authorizer::Access
    }
);

/// Kafka's upgrade type codes (v0 has only `allow_downgrade`).
const UPGRADE: i8 = 1;
const SAFE_DOWNGRADE: i8 = 2;

async fn handle(
    h: &UpdateFeatures,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: UpdateFeaturesRequest = ctx.decode(body)?;
    let updates: Vec<(String, i16, i8)> = req
        .feature_updates
        .iter()
        .map(|u| {
            let how = match ctx.api_version {
                0 if u.allow_downgrade => SAFE_DOWNGRADE,
                0 => UPGRADE,
                _ => u.upgrade_type,
            };
            (u.feature.to_string(), u.max_version_level, how)
        })
        .collect();
    let outcome: Result<(), (ErrorCode, String)> = if !h.access.check(ctx).cluster(op::ALTER) {
        Err((
            ErrorCode::ClusterAuthorizationFailed,
            "The client is not authorized to update features.".into(),
        ))
    } else {
        match h
            .controller
            .api()
            .update_features(&updates, ctx.api_version >= 1 && req.validate_only)
            .await
        {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err((e.code, e.message)),
            Err(e) => Err((ErrorCode::FeatureUpdateFailed, e)),
        }
    };
    let mut resp = UpdateFeaturesResponse::default();
    if let Err((code, message)) = &outcome {
        resp.error_code = code.code();
        resp.error_message = Some(str_bytes(message.clone()));
    }
    if ctx.api_version < 2 {
        resp.results = updates
            .iter()
            .map(|(name, ..)| {
                let mut r = UpdatableFeatureResult::default();
                r.feature = str_bytes(name.clone());
                if let Err((code, message)) = &outcome {
                    r.error_code = code.code();
                    r.error_message = Some(str_bytes(message.clone()));
                }
                r
            })
            .collect();
    }
    ctx.respond(&resp)
}
