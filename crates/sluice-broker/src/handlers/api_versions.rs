//! ApiVersions (key 18): the versions of every API this broker routes, generated from the
//! handler table. A request at a version we do not know is answered by the network layer
//! with a v0 response carrying UNSUPPORTED_VERSION and, as Kafka answers it (KIP-511), only
//! ApiVersions' own range (see [`unsupported_version_response`]), so clients retry at the
//! highest version we speak. From v3
//! on it also lists the features this build supports and the levels the cluster finalized
//! (`sluice_metadata::features`), which is what DescribeFeatures reads.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use sluice_protocol::{frame, ErrorCode};

use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::ApiVersions,
    0,
    4,
    ApiVersions {
        metadata: crate::metadata_cache::MetadataCache
    },
    sync
);

/// Every routed API with its versions: the handler registry's own declarations.
fn api_keys() -> Vec<ApiVersion> {
    super::specs()
        .iter()
        .map(|h| {
            ApiVersion::default()
                .with_api_key(h.api_key as i16)
                .with_min_version(h.min_version)
                .with_max_version(h.max_version)
        })
        .collect()
}

/// Kafka's rule for client software names and versions (KIP-511).
fn valid_software_field(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'.')
}

fn handle(h: &ApiVersions, ctx: &RequestContext, body: Bytes) -> Result<Response, HandlerError> {
    let req: ApiVersionsRequest = ctx.decode(body)?;
    let mut resp = ApiVersionsResponse::default();
    resp.api_keys = api_keys();
    if ctx.api_version >= 3
        && (!valid_software_field(&req.client_software_name)
            || !valid_software_field(&req.client_software_version))
    {
        resp.error_code = ErrorCode::InvalidRequest.code();
        resp.api_keys.clear();
        return ctx.respond(&resp);
    }
    if ctx.api_version >= 3 {
        ctx.connection
            .set_software(&req.client_software_name, &req.client_software_version);
        let image = h.metadata.current();
        resp.supported_features = sluice_metadata::features::SUPPORTED
            .iter()
            // As Kafka (KAFKA-17492): a range starting at 0 is only shown from v4 on, since
            // older clients refuse it.
            .filter(|(_, min, _)| *min > 0 || ctx.api_version >= 4)
            .map(|(name, min, max)| {
                let mut f = SupportedFeatureKey::default();
                f.name = str_bytes(name.to_string());
                f.min_version = *min;
                f.max_version = *max;
                f
            })
            .collect();
        resp.finalized_features = sluice_metadata::features::finalized(&image)
            .into_iter()
            .map(|(name, level)| {
                let mut f = FinalizedFeatureKey::default();
                f.name = str_bytes(name);
                f.min_version_level = level;
                f.max_version_level = level;
                f
            })
            .collect();
        // The offset of the last change; a cluster still at its starting levels reports 0.
        resp.finalized_features_epoch = image.features_epoch.max(0);
    }
    ctx.respond(&resp)
}

/// The answer to an ApiVersions request at a version above ours: always encoded as v0, and
/// listing ApiVersions alone (what Kafka 4.4 sends, checked on the wire).
pub fn unsupported_version_response(correlation_id: i32) -> Result<BytesMut, HandlerError> {
    let mut resp = ApiVersionsResponse::default();
    resp.error_code = ErrorCode::UnsupportedVersion.code();
    resp.api_keys = api_keys()
        .into_iter()
        .filter(|k| k.api_key == ApiKey::ApiVersions as i16)
        .collect();
    let mut out = BytesMut::new();
    frame::encode_response(&mut out, ApiKey::ApiVersions, 0, correlation_id, &resp)
        .map_err(|e| HandlerError::Encode(e.to_string()))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn software_names_follow_kip_511() {
        assert!(valid_software_field("librdkafka"));
        assert!(valid_software_field("2.3.0"));
        assert!(valid_software_field("apache-kafka-java"));
        assert!(!valid_software_field(""));
        assert!(!valid_software_field("-x"));
        assert!(!valid_software_field("a b"));
    }
}
