//! ListConfigResources (key 74, KIP-1142; v0 was ListClientMetricsResources): the names of the
//! resources that configs can be described for, by config resource type. As Kafka 4.4 answers
//! (checked on the wire): an empty type list means every type, listed broker loggers first,
//! then brokers, then topics; a type that has no configs is UNSUPPORTED_VERSION. Client-metrics
//! subscriptions and groups are listed while they have configs. It takes DESCRIBE_CONFIGS on the cluster, and only topics the
//! principal may describe are named.

use bytes::Bytes;
use kafka_protocol::messages::list_config_resources_response::ConfigResource;
use kafka_protocol::messages::{ApiKey, ListConfigResourcesRequest, ListConfigResourcesResponse};
use sluice_metadata::acl::op;
use sluice_protocol::ErrorCode;

use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::ListConfigResources,
    0,
    1,
    ListConfigResources {
        metadata: crate::metadata_cache::MetadataCache,
        access: crate::authorizer::Access
    },
    sync
);

/// Config resource types (not the ACL resource types).
const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const BROKER_LOGGER: i8 = 8;
const CLIENT_METRICS: i8 = sluice_metadata::config::RESOURCE_CLIENT_METRICS;
const GROUP: i8 = 32;

/// Kafka's order of the types in an answer to "every type".
const ALL: [i8; 5] = [BROKER_LOGGER, BROKER, TOPIC, GROUP, CLIENT_METRICS];

fn handle(
    h: &ListConfigResources,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: ListConfigResourcesRequest = ctx.decode(body)?;
    let mut resp = ListConfigResourcesResponse::default();
    let acl = h.access.check(ctx);
    if !acl.cluster(op::DESCRIBE_CONFIGS) {
        resp.error_code = ErrorCode::ClusterAuthorizationFailed.code();
        return ctx.respond(&resp);
    }
    // v0 (ListClientMetricsResources) asks for client-metrics resources alone.
    let types: Vec<i8> = if ctx.api_version == 0 {
        vec![CLIENT_METRICS]
    } else if req.resource_types.is_empty() {
        ALL.to_vec()
    } else if req.resource_types.iter().all(|t| ALL.contains(t)) {
        ALL.iter()
            .copied()
            .filter(|t| req.resource_types.contains(t))
            .collect()
    } else {
        resp.error_code = ErrorCode::UnsupportedVersion.code();
        return ctx.respond(&resp);
    };
    let image = h.metadata.current();
    let entry = |name: String, kind: i8| {
        let mut r = ConfigResource::default();
        r.resource_name = str_bytes(name);
        if ctx.api_version >= 1 {
            r.resource_type = kind;
        }
        r
    };
    for kind in types {
        match kind {
            BROKER | BROKER_LOGGER => resp
                .config_resources
                .extend(image.brokers.keys().map(|id| entry(id.to_string(), kind))),
            TOPIC => resp.config_resources.extend(
                image
                    .topics
                    .keys()
                    .filter(|n| acl.topic(op::DESCRIBE, n))
                    .map(|n| entry(n.clone(), kind)),
            ),
            CLIENT_METRICS | GROUP => resp.config_resources.extend(
                image
                    .configs
                    .range((kind, String::new())..)
                    .take_while(|((t, _), _)| *t == kind)
                    .map(|((_, name), _)| entry(name.clone(), kind)),
            ),
            _ => {}
        }
    }
    ctx.respond(&resp)
}
