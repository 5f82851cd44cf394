//! AlterConfigs (key 33, the legacy form): replaces the whole set of a topic's overrides, of a
//! broker's dynamic configs or of a client-metrics subscription's settings — keys not named
//! are reset to their defaults.

use bytes::Bytes;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse, ApiKey};
use sluice_metadata::acl::op;
use sluice_metadata::config::RESOURCE_CLIENT_METRICS;
use sluice_metadata::image::{RESOURCE_BROKER, RESOURCE_TOPIC};

use crate::request::{str_bytes, HandlerError, RequestContext, Response};
use crate::services::config_admin::not_alterable;

handler!(
    ApiKey::AlterConfigs,
    0,
    2,
    AlterConfigs {
        metadata: crate::metadata_cache::MetadataCache,
        access: crate::authorizer::Access,
        configs: crate::services::config_admin::ConfigAdmin
    }
);

async fn handle(
    h: &AlterConfigs,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: AlterConfigsRequest = ctx.decode(body)?;
    let image = h.metadata.current();
    let acl = h.access.check(ctx);
    let mut resp = AlterConfigsResponse::default();
    for res in req.resources {
        let mut out = AlterConfigsResourceResponse::default();
        out.resource_type = res.resource_type;
        out.resource_name = res.resource_name.clone();
        let name = res.resource_name.to_string();
        let allowed = acl.config_resource(op::ALTER_CONFIGS, res.resource_type, &name);
        let result = if allowed.is_err() {
            allowed
        } else if res.resource_type == RESOURCE_TOPIC {
            let mut changes: Vec<(String, Option<String>)> = res
                .configs
                .iter()
                .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
                .collect();
            // The whole set is replaced, except a mirror topic's own keys (the mirror tool's).
            for existing in image.topic_configs(&name).keys() {
                if !changes.iter().any(|(k, _)| k == existing)
                    && !sluice_metadata::config::is_mirror_key(existing)
                {
                    changes.push((existing.clone(), None));
                }
            }
            h.configs
                .alter_topic(name, changes, req.validate_only)
                .await
        } else if res.resource_type == RESOURCE_BROKER {
            // The legacy form replaces the whole dynamic set of that broker (or default).
            let changes = replace_all(&image, res.resource_type, &name, &res.configs);
            h.configs
                .alter_broker(name, changes, req.validate_only)
                .await
        } else if res.resource_type == RESOURCE_CLIENT_METRICS {
            let changes = replace_all(&image, res.resource_type, &name, &res.configs);
            h.configs
                .alter_resource(res.resource_type, name, changes, req.validate_only)
                .await
        } else {
            not_alterable(res.resource_type)
        };
        if let Err((code, message)) = result {
            out.error_code = code.code();
            out.error_message = Some(str_bytes(message));
        }
        resp.responses.push(out);
    }
    ctx.respond(&resp)
}

/// The legacy form's changes: `configs` set, every other config the resource has removed.
fn replace_all(
    image: &sluice_metadata::image::MetadataImage,
    resource_type: i8,
    name: &str,
    configs: &[kafka_protocol::messages::alter_configs_request::AlterableConfig],
) -> Vec<(String, Option<String>)> {
    let mut changes: Vec<(String, Option<String>)> = configs
        .iter()
        .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
        .collect();
    if let Some(existing) = image.configs.get(&(resource_type, name.to_string())) {
        for k in existing.keys() {
            if !changes.iter().any(|(c, _)| c == k) {
                changes.push((k.clone(), None));
            }
        }
    }
    changes
}
